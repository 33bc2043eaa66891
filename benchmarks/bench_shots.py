"""What worked examples cost: a few-shot audit against the zero-shot audit of the same
questions, in the same run (issue 55, item 4).

Audits one model on ``--n`` questions of ``--task`` with the grid's probes (sampling, random
routes and the search at ``--k``) twice: zero-shot, and with ``--shots`` worked examples from the
task's train split (the deployment otherwise equal; raw text, as a base model is deployed). The
arms alternate over ``--rounds`` rounds (zero-shot first in odd rounds), each timed under
:func:`rnr_lens.core.phases.profiling`; it prints each arm's seconds, the ratio few-shot / zero-shot
(median of the rounds' ratios) and the share of each arm's time in prefill, and ``--json``
writes them. The target of issue 55 is a ratio of at most 1.3 once the shared context is
computed once; a run before that reuse is the baseline it is measured against.

    python benchmarks/bench_shots.py [--model gemma3-270m] [--task add-small] [--n 20] [--shots 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

import torch

import rnr_lens as R
from rnr_lens.core.phases import profiling
from rnr_lens.measure.store import RunStore
from rnr_lens.questions import tasks
from rnr_lens.questions.shots import Shots


def timed(model: R.LensModel, task: tasks.Task, probes: list[str], config: R.DeploymentConfig) -> dict[str, float]:
    """One audit in a fresh in-memory store: its wall seconds and its seconds in prefill."""
    with profiling() as profile:
        R.audit(model, task, probes, config, store=RunStore(":memory:"), progress=False)
    return {"seconds": profile.own_wall, "prefill": profile.seconds.get("prefill", 0.0), "decode": profile.seconds.get("decode", 0.0)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="gemma3-270m")
    parser.add_argument("--task", default="add-small")
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--shots", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", type=Path, help="write the arms' timings and the ratio here")
    args = parser.parse_args()
    model = R.load_model(args.model)
    task = tasks.get(args.task, n=args.n)
    probes = [f"sampling:k={args.k}", f"routes:k={args.k}", f"search:k={args.k}"]
    zero = R.DeploymentConfig.default_for(task.answer_type, chat=False)
    few = zero.with_(shots=Shots(args.shots)).for_task(task)
    context = len(model.encode(few.prompt(task[0]))) - len(model.encode(zero.prompt(task[0])))
    print(f"{torch.get_num_threads()} threads; {args.model} on {task.name}, probes {', '.join(probes)}; {args.shots} shots add {context} tokens")
    arms: dict[str, list[dict[str, float]]] = {"zero-shot": [], f"{args.shots}-shot": []}
    for r in range(args.rounds):
        order = [("zero-shot", zero), (f"{args.shots}-shot", few)]
        for name, config in order if r % 2 == 0 else order[::-1]:
            arms[name].append(timed(model, task, probes, config))
            print(f"round {r + 1} {name}: {arms[name][-1]['seconds']:.1f} s, prefill {arms[name][-1]['prefill']:.1f} s", flush=True)
    ratios = [f["seconds"] / z["seconds"] for z, f in zip(arms["zero-shot"], arms[f"{args.shots}-shot"])]
    out: dict[str, Any] = {
        "args": vars(args) | {"json": str(args.json) if args.json else None},
        "context_tokens": context,
        "arms": arms,
        "ratio": statistics.median(ratios),
        "ratios": ratios,
        "prefill_share": {name: sum(r["prefill"] for r in runs) / sum(r["seconds"] for r in runs) for name, runs in arms.items()},
    }
    print(f"few-shot / zero-shot: {out['ratio']:.2f}x (rounds: {', '.join(f'{x:.2f}' for x in ratios)})")
    print("prefill share: " + ", ".join(f"{name} {share:.0%}" for name, share in out["prefill_share"].items()))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
