"""``rnr-lens show``: every audit in a run store with its summary (read-only: polling it while an audit writes is safe)."""

from __future__ import annotations

import argparse
import json

from rnr_lens.cli.shell import existing_store, print_audit, print_table

NAME = "show"
HELP = "list every audit in a run store with its summary"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("store")
    p.add_argument("--misses", action="store_true", help="also list the default deployment's format misses (the gold stated, another number read)")
    p.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    from rnr_lens.measure.results import AuditResult

    store = existing_store(args.store, f"; create one with 'rnr-lens audit --out {args.store}'")
    results = [AuditResult.load(store, info.id) for info in store.audits()]
    if args.json:
        print(json.dumps([r.to_json() for r in results], indent=2))
        return 0
    if not results:
        print(f"{args.store} holds no audits")
    for r in results:
        i = r.info
        print()
        print_audit(
            r,
            f"audit {r.id}  [{i.status}]\nmodel {i.model}  task {i.task} ({i.n_questions} questions)  config {i.config_hash}  seed {i.seed}",
            args.store,
        )
        if r.config.chat and r.config.system_prompt is None:
            print("system prompt: null in the config, so the chat template's own default (show --json: rendered_prompt)")
        if args.misses:
            from rnr_lens.core.display import short_text

            misses = r.format_misses()
            print(f"\nformat misses of the default deployment (extractor {r.config.extractor!r}): {len(misses)}")
            if len(misses):
                print_table(
                    [
                        {"question": m.question_id, "gold": m.gold, "read": m.extracted, "text": short_text(str(m.text), 60)}
                        for m in misses.itertuples()
                    ]
                )
    return 0
