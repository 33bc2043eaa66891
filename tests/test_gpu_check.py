"""scripts/gpu-check, the CUDA check of issue 27: its CPU dry run (``--device cpu --tiny``) runs
every check it can and passes them, so the script cannot rot before a GPU runs it; without a
CUDA device it stops with one ``error:`` line and exit 2, writing nothing.

Guards against the GPU check breaking unseen: it runs only when a device is lent, for minutes,
so a script that fails on an API change would waste the one run it gets.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.background import Finished, child

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gpu-check"
STATUSES = ("pass", "fail", "skip")
PER_MODEL = ("build", "exactness", "row routes", "bf16 agreement", "generation throughput", "audit throughput")


def _run(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != "OUT"}
    return subprocess.run(
        ["bash", str(SCRIPT), *args],
        cwd=cwd,
        env={**environ, "PYTHON": sys.executable, **env},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


DRY_RUN = child(
    "gpu-check",
    [
        "tests/test_gpu_check.py::test_dry_run_prints_one_line_per_check_and_a_summary",
        "tests/test_gpu_check.py::test_dry_run_passes_every_check_with_finite_figures",
    ],
    lambda folder: ["bash", str(SCRIPT), "--device", "cpu", "--tiny", "--out", str(folder / "figures.json")],
    env={"PYTHON": sys.executable, "OUT": None},
    in_folder=True,
)
"""The dry run, in a folder of its own, with ``OUT`` left out as :func:`_run` leaves it."""


@pytest.fixture(scope="module")
def dry_run() -> tuple[Finished, dict]:
    proc = DRY_RUN.result()  # started when the session started (tests/background.py)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    return proc, json.loads((proc.folder / "figures.json").read_text())


def test_the_script_is_executable_bash():
    assert SCRIPT.read_text().startswith("#!/usr/bin/env bash\n") and SCRIPT.stat().st_mode & 0o111


@pytest.mark.slow
def test_dry_run_prints_one_line_per_check_and_a_summary(dry_run):
    proc, figures = dry_run
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("gpu-check: cpu ") and "tiny models (dry run)" in lines[0]
    checks = [line for line in lines if line.split(":", 1)[0] in STATUSES]
    assert len(checks) == len(figures["checks"]) == len(lines) - 2, proc.stdout
    for line, check in zip(checks, figures["checks"]):
        assert line.startswith(f"{check['status']}: {check['name']}: {check['detail']}")
    counts = figures["summary"]
    assert lines[-1].startswith(f"gpu-check: {counts['pass']} passed, 0 failed, {counts['skip']} skipped in ")


@pytest.mark.slow
def test_dry_run_passes_every_check_with_finite_figures(dry_run):
    _, figures = dry_run
    assert figures["status"] == "pass" and not figures["over_budget"] and figures["tiny"] and figures["device"] == "cpu"
    checks = {c["name"]: c for c in figures["checks"]}
    for model in figures["models"]:
        for kind in PER_MODEL:
            assert checks[f"{kind} {model}"]["status"] == "pass", checks[f"{kind} {model}"]
        exact = checks[f"exactness {model}"]["figures"]
        assert exact["tokens_compared"] > 0 and exact["mismatched_rows"] == 0
        assert checks[f"row routes {model}"]["figures"]["differing_rows"] == 0
        bf16 = checks[f"bf16 agreement {model}"]["figures"]
        assert 0 <= bf16["prefix_share"] <= 1 and 0 < bf16["teacher_forced_share"] <= 1
        speed = checks[f"generation throughput {model}"]["figures"]
        assert all(speed[f"ratio_{case}"] > 0 for case in ("plain", "routed", "ablated"))
        audit = checks[f"audit throughput {model}"]["figures"]
        assert audit["batch"] >= 64 and all(audit[f"tries_per_s_{p}"] > 0 for p in ("sampling", "routes", "search"))
    assert figures["models"] == ["tiny-qwen2", "tiny-llama"]
    assert checks["checks on smollm2-135m-instruct"]["status"] == "skip"
    assert checks["ray two-shard"]["status"] == "pass", checks["ray two-shard"]  # CPU workers: ray is a dev dependency
    n_devices = checks["multi-device --n-devices 2"]
    assert (n_devices["status"], n_devices["detail"]) == ("skip", "needs >=2 CUDA GPUs (found 0)")
    assert checks["multi-device --device-map auto (dry run: one CPU)"]["status"] == "pass"
    for check in figures["checks"]:
        assert check["status"] in STATUSES and check["seconds"] >= 0
        assert all(isinstance(v, float) and math.isfinite(v) for v in check["figures"].values()), check


@pytest.mark.parametrize(
    "args, message",
    [
        ((), "no CUDA GPU is visible"),
        pytest.param(("--tiny",), "no CUDA GPU is visible", marks=pytest.mark.slow),  # a process each: the fast tier keeps one
        pytest.param(("--device", "tpu"), "unknown device 'tpu'", marks=pytest.mark.slow),
    ],
    ids=["default", "tiny", "unknown-device"],
)
def test_without_cuda_one_error_line_and_exit_2(tmp_path, args, message):
    proc = _run(*args, cwd=tmp_path, CUDA_VISIBLE_DEVICES="")
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    err = proc.stderr.strip()
    assert err.startswith("error: ") and "\n" not in err and message in err, err
    assert list(tmp_path.iterdir()) == [], "nothing is written"
