"""``rnr-lens compare``: the matched comparison of two audits of one store."""

from __future__ import annotations

import argparse
import json

from rnr_lens.cli.shell import est, existing_store, print_table

NAME = "compare"
HELP = "matched comparison of two audits: delta realized, delta reachable, transitions"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("store")
    p.add_argument("--a", required=True, help="the earlier audit (id or prefix)")
    p.add_argument("--b", required=True, help="the later audit (id or prefix)")
    p.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    from rnr_lens.comparison import compare
    from rnr_lens.results import AuditResult

    store = existing_store(args.store)
    result = compare(AuditResult.load(store, args.a), AuditResult.load(store, args.b))
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
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
    return 0
