"""``rnr-lens check-format``: the deployment's greedy answers read by every reader of the answer type."""

from __future__ import annotations

import argparse
import json
import textwrap

from rnr_lens.cli.shell import add_task_args, add_trust_arg, load_config, load_kwargs, load_task, note_repeats, print_table

NAME = "check-format"
HELP = "share of outputs from which an answer can be extracted"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from rnr_lens.model.model_cache import DEFAULT_MODEL

    p.add_argument("--model", default=DEFAULT_MODEL)
    add_task_args(p)
    add_trust_arg(p)
    p.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    from rnr_lens.core.display import short_text
    from rnr_lens.measure.formats import check_format
    from rnr_lens.model.models import load_model

    task = load_task(args)
    note_repeats(task)
    config = load_config(args, task)
    check = check_format(load_model(args.model, **load_kwargs(args)), task, config, batch_size=args.batch_size)
    if args.json:
        print(json.dumps(check.to_dict(), indent=2))
        return 0
    print(f"model {args.model}  task {task.name} ({check.n} questions)  config {check.config_hash}  extractor {check.extractor!r}")
    print(f"deployment: {check.shots}; the first question's prompt, as the model sees it:")
    print(textwrap.indent(check.prompt, "  | "))
    print(f"answer extracted: {check.extractable.text()}")
    print(f"correct:          {check.accuracy.text()}")
    for example in check.unextractable_examples:
        print(f"  no answer in: {example!r}")
    if len(check.readings) > 1:
        print(f"\nthe same {check.n} greedy answers read by each extractor ('extractor' in --config chooses one; docs/extractors.md)")
        print_table(
            [{"extractor": r.extractor, "reads": r.read, "correct": r.correct, f"differs from {check.extractor}": r.differs} for r in check.readings]
        )
        for d in check.disagreements:
            readings = ", ".join(f"{r.extractor} {d[r.extractor]}" for r in check.readings)
            print(f"  {short_text(repr(d['text']), 60)}  gold {d['gold']}: {readings}")
    return 0
