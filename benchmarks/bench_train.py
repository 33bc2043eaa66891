"""A real trained pair, offline: DAPO-tune SmolLM2 on add-two-digit, then audit both checkpoints
under matched conditions and compare them.

1. ``train`` for ``--steps`` steps on the task's training split (blocks ``--layers`` only),
   timing it (resumes a finished or interrupted run in ``--out``);
2. audit the base model and the trained checkpoint on ``--n`` held-out (test-split) questions
   with the default deployment and ``sampling:k=K,t=0.7``, into one run store;
3. ``compare``: delta realized and delta reachable with paired 95% score intervals, and the
   per-question transitions (newly realized that were already reachable, newly reached, ...).

    python benchmarks/bench_train.py --out runs/dapo --steps 30 --layers 15-29 --lr 3e-5
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import rnr_lens as R
from rnr_lens.questions import tasks
from rnr_lens.trained_pair.training import TrainConfig, train


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="training run folder (an existing run resumes)")
    parser.add_argument("--task", default="add-two-digit")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--layers", default="15-29")
    parser.add_argument("--lr", type=float, default=3e-5)
    parser.add_argument("--n", type=int, default=200, help="held-out questions audited")
    parser.add_argument("--k", type=int, default=8, help="sampling budget of the reachability probe")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()

    base = R.load_model("smollm2-135m-instruct")
    train_task = tasks.get(args.task, split="train", n="all")
    started = time.perf_counter()
    result = train(R.load_model("smollm2-135m-instruct"), train_task, TrainConfig(steps=args.steps, layers=args.layers, lr=args.lr), out=args.out)
    wall = time.perf_counter() - started
    step_seconds = sum(r["seconds"] for r in result.history)
    print(
        f"trained {args.steps} steps: {step_seconds / 60:.1f} min of step time (this call: {wall / 60:.1f} min; resumed from step {result.resumed_from})"
    )

    trained = R.load_model(result.checkpoint)
    heldout = tasks.get(args.task, n=args.n)
    probes = [f"sampling:k={args.k},t=0.7"]
    store = Path(args.out) / "pair.db"
    audits = [R.audit(m, heldout, probes, store=store) for m in (base, trained)]
    comparison = R.compare(*audits)
    row = comparison.deltas.iloc[0]
    print(f"held-out {args.task} ({args.n} questions), base -> trained:")
    print(f"  realized  {row['realized_a']:.3f} -> {row['realized_b']:.3f}   delta {row['delta_realized']}")
    print(f"  reachable {row['reachable_a']:.3f} -> {row['reachable_b']:.3f}   delta {row['delta_reachable']}  ({probes[0]})")
    print("transitions (rows: base, columns: trained):")
    print(comparison.transition_counts(probes[0]).to_string())
    R.viz.save(R.viz.comparison(comparison), Path(args.out) / "comparison.html")
    if args.json:
        Path(args.json).write_text(
            json.dumps({"train_step_seconds": step_seconds, "history": result.history, "comparison": comparison.to_json()}, indent=2, default=str)
        )


if __name__ == "__main__":
    main()
