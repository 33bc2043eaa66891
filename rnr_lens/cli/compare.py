"""``rnr-lens compare``: the matched comparison of two audits of one store."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from rnr_lens.cli.shell import est, existing_store, print_table
from rnr_lens.errors import RnrLensError

if TYPE_CHECKING:
    from rnr_lens.judge.ceiling import Ceiling

NAME = "compare"
HELP = "matched comparison of two audits: delta realized, delta reachable, transitions"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("store")
    p.add_argument("--a", required=True, help="the earlier audit (id or prefix)")
    p.add_argument("--b", required=True, help="the later audit (id or prefix)")
    p.add_argument(
        "--ceiling",
        metavar="PROBE",
        help="also claim 3 at large k from a sampling probe both audits ran with a large budget, e.g. sampling:k=128,t=0.7,draw=inverse-cdf",
    )
    p.add_argument("--figure", metavar="PATH", help="with --ceiling: save the curves' figure (.html, .pdf, .svg or .png)")
    p.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    from rnr_lens.measure.results import AuditResult
    from rnr_lens.trained_pair.comparison import compare, compare_ceiling

    if args.figure and not args.ceiling:
        raise RnrLensError("--figure draws the ceiling's curves: add --ceiling PROBE (a sampling probe both audits ran)")
    store = existing_store(args.store)
    result = compare(AuditResult.load(store, args.a), AuditResult.load(store, args.b))
    ceiling = compare_ceiling(result.a, result.b, args.ceiling) if args.ceiling else None
    if ceiling is not None and args.figure:
        from rnr_lens.present import viz

        viz.save(viz.ceiling_curves(ceiling), args.figure)
    if args.json:
        print(json.dumps({**result.to_json(), **({"ceiling": ceiling.to_dict()} if ceiling else {})}, indent=2))
        return 0
    print(f"b = {result.b.id} ({result.b.info.model})  against  a = {result.a.id} ({result.a.info.model})")
    for probe, left_out in result.excluded.items():
        if left_out:
            print(f"{probe}: {left_out} question(s) not complete in both audits are left out (finish them with --resume)")
    rows = [
        {
            "probe": r["probe"],
            "n": r["n"],
            "realized a": f"{r['realized_a']:.2f}",
            "realized b": f"{r['realized_b']:.2f}",
            "delta realized": est(r["delta_realized"]),
            "reachable a": f"{r['reachable_a']:.2f}",
            "reachable b": f"{r['reachable_b']:.2f}",
            "delta reachable": est(r["delta_reachable"]),
        }
        for r in result.deltas.to_dict("records")
    ]
    print_table(rows)
    print("deltas: b - a, paired per question (Tango score interval; resolved where the exact McNemar test agrees at 5%)")
    for probe in result.a.probes:
        print(f"{probe}: {result.verdict(probe).verdict}")
    for probe in result.a.probes:
        print(f"\ntransitions under {probe} (rows: a, columns: b)")
        print(result.transition_counts(probe).to_string())
    if ceiling is not None:
        print_ceiling(ceiling)
    return 0


def print_ceiling(c: Ceiling) -> None:
    """Claim 3 at large k: the curves and the verdict at each named k, then the crossing."""
    print(f"\nthe ceiling at large k under {c.probe} ({c.questions} questions in both audits)")
    rows = [
        {
            "k": k,
            "pass@k a": est(c.at(k).base),
            "pass@k b": est(c.at(k).trained),
            "b - a": est(c.at(k).difference),
            "reached in k draws, b - a": est(v.delta_reachable),
            "claim 3": v.verdict.status,
        }
        for k, v in c.verdicts
    ]
    print_table(rows)
    print("pass@k: the unbiased estimator from every draw (Wilson; b - a: score interval, pointwise); reached: one of the first k draws")
    print(f"crossing: {c.crossing.text()}")
    if c.extrapolation_cost() is not None:
        print(f"  reaching it would take about {c.extrapolation_cost():,} draws on these questions (both models)")
