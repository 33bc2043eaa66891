"""Which answer extractor reads numeric answers as a person does: the measurement behind the
default extractor (docs/extractors.md).

Two stages:

``collect``
    Real outputs of the offline models under the default deployment's prompt (greedy, and one
    sample at T=0.7): SmolLM2-135M-Instruct with its chat template, Gemma-3-270M (a base model)
    as raw text, on every built-in numeric task and on GSM8K and SVAMP where ``../shared/data``
    holds them. Writes one JSON line per output (model, task, question id, draw, text read by
    the extractors: the assistant prefix plus the generated text) to ``OUT``. About 10 min on
    two cores.
``table``
    Reads the labelled file (``assets/extractor-labels.jsonl``: each output with ``reading``,
    the number a person reads as the stated answer, or null where the text states none) and
    prints each extractor's agreement with the person as a Markdown table, with Wilson 95%
    intervals.

Usage::

    python scripts/extractor_agreement.py collect /tmp/outputs.jsonl
    python scripts/extractor_agreement.py table assets/extractor-labels.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rnr_lens.answers import EXTRACTORS  # noqa: E402

NUMERIC = ("concluding-number", "number", "answer-is", "first-number", "last-number")
"""The extractors compared: the candidates for numeric answers (``gsm8k-flexible`` is
``last-number``; ``gsm8k-strict`` and ``boxed`` read formats these prompts never ask for)."""

MODELS = ("smollm2-135m-instruct", "gemma3-270m")
N_PER_TASK = 25


def tasks() -> list:
    from rnr_lens.tasks import build, list_builtins, load_file

    out = [build(name, n=N_PER_TASK) for name in list_builtins()]
    data = ROOT.parent / "shared" / "data"
    for name in ("gsm8k_test.jsonl", "svamp.json"):
        if (data / name).is_file():
            out.append(load_file(data / name).first(N_PER_TASK))
    return out


def collect(out: Path) -> None:
    from rnr_lens.deploy import deployment_for
    from rnr_lens.generation import generate
    from rnr_lens.models import load_model

    rows = []
    for spec in MODELS:
        model = load_model(spec)
        for task in tasks():
            config = deployment_for(model, task.answer_type)
            prompts = [config.prompt(q) for q in task]
            for draw, temperature in (("greedy", 0.0), ("sample", 0.7)):
                gens = generate(model, prompts, max_new_tokens=config.max_new_tokens, temperature=temperature, seed=0, stop=list(config.stop))
                for q, g in zip(task, gens):
                    rows.append({"model": spec, "task": task.name, "question_id": q.id, "draw": draw, "text": config.assistant_prefix + g.text})
            print(f"{spec} {task.name}: {len(rows)} outputs", file=sys.stderr)
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))


def agreement(rows: list[dict]) -> list[dict]:
    """Per extractor: outputs read, agreement with the person (overall and where the
    extractors disagree), as Wilson 95% intervals."""
    from rnr_lens.stats import wilson

    contested = [r for r in rows if len({EXTRACTORS[e](r["text"]) for e in NUMERIC}) > 1]
    table = []
    for name in NUMERIC:
        read = EXTRACTORS[name]
        agree = sum(read(r["text"]) == r["reading"] for r in rows)
        agree_contested = sum(read(r["text"]) == r["reading"] for r in contested)
        table.append(
            {
                "extractor": name,
                "agrees": wilson(agree, len(rows)),
                "agrees_contested": wilson(agree_contested, len(contested)),
                "false_reads": sum(read(r["text"]) is not None and read(r["text"]) != r["reading"] for r in rows),
                "missed": sum(read(r["text"]) is None and r["reading"] is not None for r in rows),
            }
        )
    return sorted(table, key=lambda t: -t["agrees"].value)


def markdown(rows: list[dict]) -> str:
    n = len(rows)
    contested = sum(len({EXTRACTORS[e](r["text"]) for e in NUMERIC}) > 1 for r in rows)
    lines = [
        f"| extractor | agrees with the person (all {n}) | where extractors disagree ({contested}) | reads a wrong number | reads none where one is stated |",
        "| --- | --- | --- | --- | --- |",
    ]
    for t in agreement(rows):
        lines.append(f"| `{t['extractor']}` | {t['agrees'].text()} | {t['agrees_contested'].text()} | {t['false_reads']} | {t['missed']} |")
    return "\n".join(lines)


def load_labels(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="stage", required=True)
    sub.add_parser("collect").add_argument("out", type=Path)
    sub.add_parser("table").add_argument("labels", type=Path)
    args = parser.parse_args()
    if args.stage == "collect":
        collect(args.out)
    else:
        print(markdown(load_labels(args.labels)))


if __name__ == "__main__":
    main()
