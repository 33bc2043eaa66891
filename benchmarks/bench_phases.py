"""Where a grid setting's time goes: one setting of the default grid, profiled phase by phase.

Runs ``rnr-lens report`` on one model and one task (SmolLM2-135M-Instruct on ``--task``, the
default grid's probes: sampling, random routes and the search at k=8; the bottleneck mined by
screen and confirm, ``--exhaustive`` for the full sweep too) under :func:`rnr_lens.core.phases.profiling`
into a fresh folder, and prints the wall time per stage (each probe of the audit, the miner's
screen, confirmation, exhaustive sweep and null, the claims) with the share of each spent in
prefill, decoding forwards, teacher-forced scoring, store writes and the rest (Python between
forwards, sampling, tokenizing). ``--json`` writes the profile.

    python benchmarks/bench_phases.py [--task add-small] [--n 40] [--exhaustive] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import torch

from rnr_lens.core.phases import profiling
from rnr_lens.grids.grid import Grid
from rnr_lens.grids.reports import report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--task", default="add-small")
    parser.add_argument("--n", type=int, default=40)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--exhaustive", action="store_true")
    parser.add_argument("--json", type=Path, help="write the profile here")
    args = parser.parse_args()
    grid = Grid(models=(args.model,), tasks=(args.task,), n=args.n, k=args.k, exhaustive=args.exhaustive)
    print(f"{torch.get_num_threads()} threads; {args.model} on {args.task}, n={args.n}, k={args.k}, probes {', '.join(grid.probes)}")
    with tempfile.TemporaryDirectory() as folder, profiling() as profile:
        report(grid, Path(folder) / "report", progress=False)
    print(profile.text())
    if args.json:
        args.json.write_text(json.dumps(profile.to_dict(), indent=2))


if __name__ == "__main__":
    main()
