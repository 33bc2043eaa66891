"""The built wheel works outside the repository (issue 74, item 7): installed alone into a
folder of its own and run from a folder away from the checkout, it imports from itself, states the
version pyproject.toml declares, records no checkout, reads its built-in tasks and answers the
command line."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # builds and installs a wheel
def test_the_built_wheel_installs_and_runs_outside_the_repository(tmp_path):
    source = tmp_path / "source"  # built from a copy: a build leaves build/ and egg-info beside its source
    shutil.copytree(ROOT / "rnr_lens", source / "rnr_lens", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    dist = tmp_path / "dist"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation", "-q", "-w", str(dist)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = dist.glob("rnr_lens-*.whl")
    target = tmp_path / "installed"  # the dependencies from this interpreter, the package from the wheel alone
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target", str(target), str(wheel)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr[-2000:]
    away = tmp_path / "elsewhere"
    away.mkdir()
    code = (
        "import rnr_lens as R\n"
        "from rnr_lens.core.provenance import checkout\n"
        "print(R.__file__)\nprint(R.__version__)\nprint(checkout())\n"
        "print(len(R.tasks.get('add-small', n=3)))\n"
    )
    clean = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(target)}
    ran = subprocess.run([sys.executable, "-c", code], cwd=away, env=clean, capture_output=True, text=True, check=False)
    assert ran.returncode == 0, ran.stderr[-2000:]
    where, version, found, questions = ran.stdout.split()
    assert Path(where).is_relative_to(target) and not Path(where).is_relative_to(ROOT)
    assert version == tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert found == "None" and questions == "3"
    helped = subprocess.run([str(target / "bin" / "rnr-lens"), "--help"], cwd=away, env=clean, capture_output=True, text=True, check=False)
    assert helped.returncode == 0 and "audit" in helped.stdout, helped.stderr[-2000:]
