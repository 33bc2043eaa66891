"""Did a probe's tries ever change under an unchanged name? The history check behind
``docs/concepts.md#probe-names`` (issue 40).

Runs one small audit on SmolLM2-135M-Instruct (``add-small``, the first 8 questions, seed 0;
every probe of ``PROBES`` that commit's code parses, into its canonical name there) with the
code of every commit that touched what decides a try, each in a throwaway ``git worktree``, and
compares each commit's tries with the previous commit's **under the same canonical name**:
question, try index, route and generated text. A difference under one name is a silent change
of algorithm. Results go to ``OUT`` as JSON lines (one per commit and probe name: how many of
its tries equal the previous commit's), and a Markdown table is printed.

    python scripts/probe_history.py OUT.jsonl [--since a14015b] [--commits c1,c2,...] [--probe SPEC ...] [--questions N]

A small budget can miss a change that shows only deep in a search (fad12eb's expansion rule
first moves a try at index 5 of ``search:k=8``): the README's results come from two passes,
every probe at k=4 on 8 questions and ``search:k=8`` on 12.

About a minute per commit on two cores (the model is dequantized once into the shared cache).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBES = ("sampling:k=4,t=0.7", "routes:k=4", "routes:k=4,edits=2", "search:k=4")
QUESTIONS = 8
DECIDES = (
    "rnr_lens/measure/probes.py",
    "rnr_lens/model/routes.py",
    "rnr_lens/model/generation.py",
    "rnr_lens/model/engine.py",
    "rnr_lens/model/adapters.py",
    "rnr_lens/model/lens.py",
)


def commits(since: str) -> list[str]:
    out = subprocess.run(
        ["git", "log", "--reverse", "--format=%h", f"{since}^..HEAD", "--", *DECIDES], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return out.stdout.split()


def run_at(commit: str, work: Path, probes: tuple[str, ...] = PROBES, questions: int = QUESTIONS) -> dict[str, list[tuple]]:
    """The tries of one audit of every probe that commit's code parses, by canonical name."""
    tree = work / commit
    subprocess.run(["git", "worktree", "add", "--detach", str(tree), commit], cwd=ROOT, capture_output=True, check=True)
    try:
        env = {**os.environ, "PYTHONPATH": str(tree)}
        known = [
            spec
            for spec in probes
            if subprocess.run(
                [sys.executable, "-c", f"from rnr_lens.measure.probes import parse_probe; parse_probe({spec!r})"],
                cwd=tree,
                env=env,
                capture_output=True,
            ).returncode
            == 0
        ]
        db = work / f"{commit}.db"
        cmd = [sys.executable, "-m", "rnr_lens", "audit", "--task", "add-small", "--limit", str(questions), "--seed", "0", "--out", str(db)]
        cmd += [x for spec in known for x in ("--probe", spec)]
        done = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            print(f"  {commit}: audit failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}", file=sys.stderr)
            return {}
        tries: dict[str, list[tuple]] = {}
        with sqlite3.connect(db) as con:
            rows = con.execute("SELECT probe, question_id, try_index, route, text FROM tries ORDER BY probe, question_id, try_index").fetchall()
        for probe, *row in rows:
            tries.setdefault(probe, []).append(tuple(row))
        return tries
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, capture_output=True, check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--since", default="a14015b", help="the first commit with a run store")
    parser.add_argument("--commits", default="", help="comma-separated commits instead of every one since --since")
    parser.add_argument("--probe", action="append", help=f"a probe spec (repeatable; default {', '.join(PROBES)})")
    parser.add_argument("--questions", type=int, default=QUESTIONS, help="add-small questions per audit")
    args = parser.parse_args()
    todo = args.commits.split(",") if args.commits else commits(args.since)
    done = {json.loads(line)["commit"] for line in args.out.read_text().splitlines()} if args.out.exists() else set()
    last: dict[str, list[tuple]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i, commit in enumerate(todo):
            print(f"[{i + 1}/{len(todo)}] {commit}", file=sys.stderr, flush=True)
            got = run_at(commit, Path(tmp), tuple(args.probe or PROBES), args.questions)
            for name, rows in got.items():
                before = last.get(name)
                same = None if before is None else sum(a == b for a, b in zip(before, rows))
                record = {"commit": commit, "probe": name, "tries": len(rows), "same_as_previous": same, "previous": len(before or [])}
                if commit not in done:
                    with args.out.open("a") as f:
                        f.write(json.dumps(record) + "\n")
                if same is not None and (same != len(rows) or len(before or []) != len(rows)):
                    print(f"  CHANGED under one name: {name}: {same} of {len(rows)} tries equal", file=sys.stderr)
                last[name] = rows
    print("| commit | probe (canonical name at that commit) | tries | equal to the previous commit's |")
    print("| --- | --- | --- | --- |")
    for line in args.out.read_text().splitlines():
        r = json.loads(line)
        if r["same_as_previous"] is not None and r["same_as_previous"] != r["tries"]:
            print(f"| {r['commit']} | `{r['probe']}` | {r['tries']} | {r['same_as_previous']} |")


if __name__ == "__main__":
    main()
