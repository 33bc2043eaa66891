"""Miner speed: screen+confirm against the exhaustive sweep, same failure set, same run.

Audits SmolLM2 on ``add-small`` with ``sampling:k=8`` (or reads ``--store``), freezes the
reachable-not-realized failure set, then times both strategies (no evaluation cache shared
between them) and checks that they name the same bottleneck. Target: >= 5x faster with the
same bottleneck. Also prints each screen's rank agreement with the exhaustive repair rates.

    python benchmarks/bench_miner.py [--store run.db] [--top-m 3]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import rnr_lens as R
from rnr_lens.bottleneck import failures
from rnr_lens.bottleneck.miner import mine
from rnr_lens.measure.audits import audit
from rnr_lens.measure.results import AuditResult
from rnr_lens.measure.store import RunStore
from rnr_lens.questions import tasks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", help="an existing run store with one SmolLM2 audit (default: audit now)")
    parser.add_argument("--top-m", type=int, default=3)
    args = parser.parse_args()

    model = R.load_model("smollm2-135m-instruct")
    with tempfile.TemporaryDirectory() as d:
        if args.store:
            store = RunStore(args.store)
            result = AuditResult.load(store)
        else:
            store = RunStore(Path(d) / "bench.db")
            result = audit(model, tasks.get("add-small"), ["sampling:k=8,t=0.7"], store=store, progress=False)
        fs = failures.freeze(result, store, name="bench")
        print(fs.describe())

        timings, sweeps = {}, {}
        for strategy in ("exhaustive", "screen+confirm"):
            start = time.perf_counter()
            sweeps[strategy] = mine(model, fs, strategy=strategy, top_m=args.top_m, progress=False)
            timings[strategy] = time.perf_counter() - start

    ex, fast = sweeps["exhaustive"], sweeps["screen+confirm"]
    name = lambda b: "none" if b is None else f"{b['component']}{b['layer']}:{b['method']}"  # noqa: E731
    speedup = timings["exhaustive"] / timings["screen+confirm"]
    same = name(ex.bottleneck) == name(fast.bottleneck)
    print(f"exhaustive     : {timings['exhaustive']:7.1f} s  bottleneck {name(ex.bottleneck)}  {ex.bottleneck}")
    print(f"screen+confirm : {timings['screen+confirm']:7.1f} s  bottleneck {name(fast.bottleneck)}  (top {args.top_m} confirmed)")
    print(f"speed-up       : {speedup:.1f}x (target >= 5x) {'met' if speedup >= 5 else 'NOT met'}; same bottleneck: {same}")
    print(f"screens took   : {fast.timings['screen_s']:.1f} s of the screen+confirm run")
    for screen, agree in ex.agreement.items():
        print(f"{screen:15s}: Spearman vs exhaustive discovery repair {agree['spearman']}, same top block: {agree['same_top']}")


if __name__ == "__main__":
    main()
