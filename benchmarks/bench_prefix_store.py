"""How much the route search's prefix store holds and spares: one search, the store measured.

Runs ``search:k=8`` (after the default answers) on ``--n`` ``add-two-digit`` questions on
SmolLM2-135M-Instruct with the store's default budget (:data:`rnr_lens.model.prefix_states.DEFAULT_MAX_BYTES`)
and reports what the store held at the end (states, GiB) and how many block runs it spared
(hits), beside the prompt block runs the search made in all (``--n`` questions, ``k``
candidates, each its route's length), so a referee can see whether the budget cut anything.

    python benchmarks/bench_prefix_store.py [--n 100] [--k 8] [--json out.json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path

import rnr_lens as R
from rnr_lens.model.engine import Engine
from rnr_lens.model.prefix_states import DEFAULT_MAX_BYTES, PrefixStates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    model = R.load_model("smollm2-135m-instruct")
    task = R.tasks.get("add-two-digit", n=args.n)
    original = Engine.prefix_states
    stores: list[PrefixStates] = []

    @contextlib.contextmanager
    def recording(self: Engine, max_bytes: int = DEFAULT_MAX_BYTES) -> Iterator[PrefixStates]:
        with original(self, max_bytes) as store:
            stores.append(store)
            yield store

    Engine.prefix_states = recording  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory() as tmp:
        result = R.audit(model, task, [f"search:k={args.k}"], store=Path(tmp) / "run.db", progress=False)
    tries = result.tries[result.tries["probe"] != "default"]
    block_runs = int(sum(len(R.Route.parse(r, model.n_layers)) for r in tries["route"]))
    store = stores[0]
    out = {
        "states": len(store),
        "gib": store.nbytes / 2**30,
        "budget_gib": store.max_bytes / 2**30,
        "hits": store.hits,
        "prompt_block_runs": block_runs,
        "spared_share": store.hits / block_runs,
        "tries": len(tries),
    }
    print(
        f"search:k={args.k} on {args.n} questions: the store held {out['states']:,} states, {out['gib']:.2f} GiB of a "
        f"{out['budget_gib']:.0f} GiB budget; {out['hits']:,} of the {block_runs:,} prompt block runs of {len(tries)} candidates "
        f"were taken from it ({out['spared_share']:.0%})"
    )
    if args.json:
        args.json.write_text(json.dumps(out | {"args": vars(args) | {"json": str(args.json)}}, indent=2))


if __name__ == "__main__":
    main()
