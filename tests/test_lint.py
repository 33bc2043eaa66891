"""Lint, format and types: ruff and mypy, configured in pyproject.toml, report nothing.

Part of the suite (so the README's test command and CI run it): a finding fails CI the same
way a failing test does.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.background import child

ROOT = Path(__file__).resolve().parents[1]
PATHS = ["rnr_lens", "tests", "benchmarks", "scripts", "docs"]


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, check=False)


def test_ruff_finds_nothing():
    out = _run("ruff", "check", *PATHS)
    assert out.returncode == 0, out.stdout + out.stderr


def test_ruff_format_changes_nothing():
    out = _run("ruff", "format", "--check", *PATHS)
    assert out.returncode == 0, out.stdout + out.stderr


MYPY = child("mypy", ["tests/test_lint.py::test_mypy_finds_nothing"], lambda folder: [sys.executable, "-m", "mypy"])


@pytest.mark.slow
def test_mypy_finds_nothing():
    out = MYPY.result()  # started when the session started (tests/background.py)
    assert out.returncode == 0, out.stdout + out.stderr


def test_every_type_ignore_says_why():
    """A silenced type error names its code and gives its reason in a comment after it."""
    bare = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sorted((ROOT / "rnr_lens").rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "type: ignore" in line and not re.search(r"type: ignore\[[\w-]+(, [\w-]+)*\]\s+#\s*\S", line)
    ]
    assert not bare, "add the error code and a reason: " + ", ".join(bare)
