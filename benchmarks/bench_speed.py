"""Speed-ups against the code before them, in the same run: wall time and identical tries.

Runs the same audit twice, each in a fresh subprocess on this machine: once with the package
as it was at ``--baseline`` (a git revision, checked out into a temporary worktree) and once
with the working tree. Reports each wall time, their ratio, and the share of tries whose text,
extracted answer and route are identical (a speed-up that keeps every try the same must show
1.000). ``--order`` alternates which runs first, to average out a machine that warms up.

The default audit is ``bench_audit.py``'s ``audit100``: 100 ``add-two-digit`` questions with
sampling, random routes and the search at k=8 on SmolLM2-135M-Instruct (about 5 minutes an arm
on two cores).

    python benchmarks/bench_speed.py [--baseline REV] [--task add-two-digit] [--n 100] [--k 8]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

RUN = """
import json, sys, time
import torch
import rnr_lens as R
model = R.load_model(sys.argv[1])
task = R.tasks.get(sys.argv[2], n=int(sys.argv[3]))
probes = json.loads(sys.argv[5])
start = time.perf_counter()
result = R.audit(model, task, probes, store=sys.argv[4], progress=False)
print(json.dumps({"seconds": time.perf_counter() - start, "tries": len(result.tries), "threads": torch.get_num_threads(),
                  "package": R.__file__}))
"""


def run(package: Path, store: Path, args: argparse.Namespace, probes: list[str]) -> dict:
    """One audit in a fresh interpreter that imports rnr_lens from ``package``."""
    env = {"PYTHONPATH": str(package), "PATH": "/usr/bin:/bin", **_keep_env()}
    out = subprocess.run(
        [sys.executable, "-c", RUN, args.model, args.task, str(args.n), str(store), json.dumps(probes)],
        env=env,
        capture_output=True,
        text=True,
        cwd=package,
    )
    if out.returncode != 0:
        raise SystemExit(f"the audit under {package} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _keep_env() -> dict[str, str]:
    import os

    keep = ("HOME", "HF_HOME", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "RNR_LENS_CACHE", "XDG_CACHE_HOME")
    return {k: os.environ[k] for k in keep if k in os.environ}


def tries(store: Path) -> dict[tuple[str, str, int], tuple]:
    """Per try: (text, extracted, route, correct) and (mean log-prob, mean entropy, reward)."""
    with sqlite3.connect(store) as c:
        rows = c.execute(
            "SELECT question_id, probe, try_index, text, extracted, route, correct, mean_logprob, mean_entropy, reward FROM tries"
        ).fetchall()
    return {(q, p, i): ((t, e, r, ok), (lp, ent, rw)) for q, p, i, t, e, r, ok, lp, ent, rw in rows}


def largest_difference(a: dict, b: dict) -> float:
    """The largest difference of a stored score (log-prob, entropy, reward) between the arms."""
    gaps = [abs(x - y) for k in a.keys() & b.keys() for x, y in zip(a[k][1], b[k][1]) if x is not None and y is not None]
    return max(gaps, default=0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", default="HEAD", help="git revision of the code before the speed-ups")
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--task", default="add-two-digit")
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--order", choices=["baseline-first", "new-first"], default="baseline-first")
    parser.add_argument("--json", type=Path, help="write the result here")
    args = parser.parse_args()
    probes = [f"sampling:k={args.k},t=0.7", f"routes:k={args.k}", f"search:k={args.k}"]
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "baseline"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(base), args.baseline], check=True)
        try:
            arms = [("baseline", base), ("new", ROOT)]
            if args.order == "new-first":
                arms.reverse()
            got = {}
            for name, package in arms:
                started = time.strftime("%H:%M:%S")
                got[name] = run(package, Path(tmp) / f"{name}.db", args, probes)
                print(f"{name}: {got[name]['seconds']:.1f} s for {got[name]['tries']} tries (started {started}; {got[name]['package']})", flush=True)
            a, b = tries(Path(tmp) / "baseline.db"), tries(Path(tmp) / "new.db")
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], check=False)
    same = sum(k in b and a[k][0] == b[k][0] for k in a)
    gap = largest_difference(a, b)
    ratio = got["baseline"]["seconds"] / got["new"]["seconds"]
    print(f"speed-up {ratio:.2f}x (baseline / new wall time, {args.n} questions of {args.task}, probes {', '.join(probes)})")
    print(f"identical tries (text, answer, route): {same} of {len(a)} ({same / len(a):.3f}); tries only in one arm: {len(set(a) ^ set(b))}")
    print(f"largest difference of a stored log-prob, entropy or reward: {gap:.2e}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "arms": got,
                    "speedup": ratio,
                    "identical": same,
                    "tries": len(a),
                    "largest_score_difference": gap,
                    "args": vars(args) | {"json": str(args.json)},
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
