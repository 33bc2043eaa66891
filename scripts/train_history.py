"""Which weights does one ``rnr-lens train`` command give at each commit? The history check
behind the README's DAPO reproducibility findings (issue 35).

For each commit named, trains SmolLM2-135M-Instruct with the README's DAPO command
(``--task add-two-digit --layers 15-29 --lr 3e-5``, ``--steps`` as given, seed 0) with that
commit's code, in a throwaway ``git worktree``, and records the checkpoint's weights
fingerprint (computed by this checkout's code, so every commit is measured alike), the torch
thread count and the wall time. Results go to ``OUT`` as JSON lines, one per run.

    python scripts/train_history.py OUT.jsonl --commits c1,c2,... [--steps N] [--threads N] [--config FILE] [--batch-size N]

``--config`` trains under a deployment config file instead of the commit's default (to tell
a change of the default deployment from a change of the training code). A short run (two
steps) tells whether two commits train alike; only a full run (30 steps) can be matched with a
committed report's audits (``--audit-ids`` prints the ids the default grid gives a fingerprint).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMAND = ["train", "--task", "add-two-digit", "--layers", "15-29", "--lr", "3e-5"]


def train_at(commit: str, work: Path, steps: int, threads: int | None, config: str | None, batch_size: int | None = None) -> dict:
    tree = work / commit
    if not tree.exists():
        subprocess.run(["git", "worktree", "add", "--detach", str(tree), commit], cwd=ROOT, capture_output=True, check=True)
    env = {**os.environ, "PYTHONPATH": str(tree)}
    if threads:
        env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    out = work / f"{commit}-{steps}-{threads or 'all'}-{Path(config).stem if config else 'default'}-{batch_size or 'auto'}"
    cmd = [sys.executable, "-m", "rnr_lens", *COMMAND, "--steps", str(steps), "--out", str(out), "--json"]
    if config:
        cmd += ["--config", config]
    if batch_size:
        cmd += ["--batch-size", str(batch_size)]
    started = time.perf_counter()
    run = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    row = {"commit": commit, "steps": steps, "threads": threads, "config": config, "batch_size": batch_size}
    if run.returncode != 0:
        return {**row, "error": run.stderr.strip().splitlines()[-1:]}
    from rnr_lens.model.models import load_model

    model = load_model(str(out / "final"))
    history = (out / "history.jsonl").read_text().splitlines()
    rewards = [round(json.loads(line)["reward"], 4) for line in history if line.strip()]
    return {**row, "fingerprint": model.fingerprint(), "seconds": round(seconds, 1), "rewards": rewards}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--commits", required=True)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--threads", type=int)
    parser.add_argument("--config")
    parser.add_argument("--batch-size", type=int, help="rollout rows per forward (default: the auto batch size)")
    parser.add_argument("--work", help="folder for worktrees and runs (default: a temporary one)")
    args = parser.parse_args()
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="train-history-"))
    work.mkdir(parents=True, exist_ok=True)
    for commit in args.commits.split(","):
        row = train_at(commit, work, args.steps, args.threads, str(Path(args.config).resolve()) if args.config else None, args.batch_size)
        print(json.dumps(row), flush=True)
        with open(args.out, "a") as f:
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
