"""MKL's conditional numerical reproducibility (``MKL_CBWR``): what it costs, and whether it
makes a resumed audit equal an uninterrupted one on this CPU.

On an Intel Xeon with AVX-512 and AMX, a sequentially resumed tiny-model audit once differed
from the uninterrupted run in a sampled token in about 1 of 10 runs (sessions 30 and 31: MKL
picks its code path per call, and one last bit moved); only ``MKL_CBWR=COMPATIBLE`` held in
30 of 30. Before any default is set, two numbers are needed, and this script measures both,
every arm in its own process (MKL reads the variable when it loads):

- ``speed``: one audit of ``--model`` on ``--n`` questions of ``--task`` with the grid's probes
  at ``--k``, per arm, alternating arms over ``--rounds`` rounds (the default arm first in odd
  rounds); it prints each arm's seconds and the ratio arm / default (median of the rounds'
  ratios), and whether each arm's tries equal the default's (text, reading, correctness, token
  counts: if not, a default that sets the variable moves stored bits, and the probes' names
  must change with it);
- ``resumes``: ``--trials`` times per arm, a tiny random model's audit (8 questions,
  ``sampling:k=3,t=1.0`` and ``routes:k=3``) is put into a kill -9 state and resumed in a new
  process, and its tries are compared with an uninterrupted run's; it prints how many differed
  (the machine's load matters: run it beside other work too).

Time nothing else while ``speed`` runs (benchmarks/README: ratios within one run, a quiet
machine).

    python benchmarks/bench_mkl_cbwr.py speed [--model smollm2-135m-instruct] [--n 20] [--rounds 3] [--json out.json]
    python benchmarks/bench_mkl_cbwr.py resumes [--trials 30] [--json out.json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ARMS: dict[str, dict[str, str]] = {"default": {}, "cbwr-auto": {"MKL_CBWR": "AUTO"}, "cbwr-compatible": {"MKL_CBWR": "COMPATIBLE"}}
"""Each arm's environment on top of this one's (the default arm unsets MKL_CBWR)."""

ANSWERS = "SELECT question_id, probe, try_index, text, extracted, correct, n_tokens FROM tries ORDER BY question_id, probe, try_index"


def _env(arm: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "MKL_CBWR"}
    return env | ARMS[arm]


def _digest(db: Path) -> str:
    """The tries' answers in a store, hashed (what must not move between arms)."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute(ANSWERS).fetchall()
    conn.close()
    return hashlib.sha256(repr(rows).encode()).hexdigest()[:16]


def _child_speed(args: argparse.Namespace) -> None:
    """One timed audit in this process (its arm's environment set by the parent)."""
    import torch

    import rnr_lens as R
    from rnr_lens.core.phases import profiling
    from rnr_lens.questions import tasks

    model = R.load_model(args.model)
    task = tasks.get(args.task, n=args.n)
    probes = [f"sampling:k={args.k}", f"routes:k={args.k}", f"search:k={args.k}"]
    with profiling() as profile:
        R.audit(model, task, probes, store=args.out, progress=False)
    print(json.dumps({"seconds": profile.own_wall, "threads": torch.get_num_threads()}))


def speed(args: argparse.Namespace) -> dict[str, Any]:
    arms: dict[str, list[float]] = {name: [] for name in ARMS}
    digests: dict[str, set[str]] = {name: set() for name in ARMS}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for name in list(ARMS) if r % 2 == 0 else list(ARMS)[::-1]:
                db = Path(tmp) / f"{name}-{r}.db"
                argv = ["--model", args.model, "--task", args.task, "--n", str(args.n), "--k", str(args.k), "--out", str(db)]
                done = subprocess.run([sys.executable, __file__, "child-speed", *argv], env=_env(name), capture_output=True, text=True, check=True)
                arms[name].append(json.loads(done.stdout.strip().splitlines()[-1])["seconds"])
                digests[name].add(_digest(db))
                print(f"round {r + 1} {name}: {arms[name][-1]:.1f} s", flush=True)
    ratios = {name: statistics.median(a / d for a, d in zip(runs, arms["default"])) for name, runs in arms.items()}
    same = {name: digests[name] == digests["default"] and len(digests[name]) == 1 for name in ARMS}
    for name in ARMS:
        print(f"{name} / default: {ratios[name]:.2f}x; tries {'equal' if same[name] else 'differ'} (digests {sorted(digests[name])})")
    return {"seconds": arms, "ratio": ratios, "tries_equal_default": same, "digests": {k: sorted(v) for k, v in digests.items()}}


def resumes(args: argparse.Namespace) -> dict[str, Any]:
    import rnr_lens as R

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.test_cli import _crash_state  # the kill -9 state the resume tests use

    differed: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        tiny = R.tiny_model(n_layers=4, seed=0).save_pretrained(Path(tmp) / "tiny")
        argv = ["audit", "--model", str(tiny), "--limit", "8", "--probe", "sampling:k=3,t=1.0", "--probe", "routes:k=3"]
        for name in ARMS:
            clean = Path(tmp) / f"{name}-clean.db"
            subprocess.run([sys.executable, "-m", "rnr_lens", *argv, "--out", str(clean)], env=_env(name), capture_output=True, check=True)
            want, differed[name] = _digest(clean), 0
            for _ in range(args.trials):
                resumed = Path(tmp) / f"{name}-resumed.db"
                shutil.copy(clean, resumed)
                _crash_state(resumed, {"default": 2, "sampling": 0, "routes": 0})
                subprocess.run(
                    [sys.executable, "-m", "rnr_lens", *argv, "--out", str(resumed), "--resume"], env=_env(name), capture_output=True, check=True
                )
                differed[name] += _digest(resumed) != want
                resumed.unlink()
            print(f"{name}: {differed[name]} of {args.trials} resumed runs differed from the uninterrupted one", flush=True)
    return {"trials": args.trials, "differed": differed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["speed", "resumes", "child-speed"])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--task", default="add-small")
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--json", type=Path, help="write the measurements here")
    args = parser.parse_args()
    if args.mode == "child-speed":
        _child_speed(args)
        return
    out = {
        "args": vars(args) | {"json": str(args.json) if args.json else None},
        "cpu": _cpu(),
        **(speed(args) if args.mode == "speed" else resumes(args)),
    }
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2) + "\n")


def _cpu() -> str:
    try:
        return next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name"))
    except (OSError, StopIteration):
        return "unknown"


if __name__ == "__main__":
    main()
