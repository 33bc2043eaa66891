"""``rnr-lens merge``: run stores (shards of one audit, say) merged into a new one."""

from __future__ import annotations

import argparse
import json

from rnr_lens.cli.shell import print_table

NAME = "merge"
HELP = "merge run stores (e.g. shards of one audit) into a new one"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("stores", nargs="+", help="run stores to merge")
    p.add_argument("--out", required=True, help="the new merged run store (must not exist)")
    p.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    from rnr_lens.measure.store import merge

    store = merge(args.stores, args.out)
    audits = store.audits()
    if args.json:
        print(json.dumps([{k: a.to_dict()[k] for k in ("id", "model", "task", "config_hash", "status", "n_questions")} for a in audits], indent=2))
        return 0
    print(f"merged {len(args.stores)} run stores into {args.out}")
    print_table(
        [
            {
                "audit": a.id,
                "model": a.model,
                "task": a.task,
                "config": a.config_hash,
                "status": str(a.status),
                "tries": sum(store.count_tries(a.id).values()),
            }
            for a in audits
        ]
    )
    return 0
