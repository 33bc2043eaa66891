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
    Reads the labelled file (``assets/extractor-labels.jsonl``: every collected output, its
    ``stratum`` (``contested`` where the extractors read it differently, else ``agreed``), and
    where ``labelled``, ``reading``: the number a person reads as the stated answer, or null
    where the text states none; every contested output and a seeded sample of 60 agreed ones
    were read) and prints each extractor's agreement with the person as Markdown tables, with
    Wilson 95% intervals.

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

from rnr_lens.core.stats import Estimate  # noqa: E402
from rnr_lens.questions.answers import extractors_for, get_extractor  # noqa: E402

NUMERIC = extractors_for("number")
LABELS = ROOT / "assets" / "extractor-labels.jsonl"

MODELS = ("smollm2-135m-instruct", "gemma3-270m")
N_PER_TASK = 25


def tasks() -> list:
    from rnr_lens.questions.tasks import build, list_builtins, load_file

    out = [build(name, n=N_PER_TASK) for name in list_builtins()]
    data = ROOT.parent / "shared" / "data"
    for name in ("gsm8k_test.jsonl", "svamp.json"):
        if (data / name).is_file():
            out.append(load_file(data / name).first(N_PER_TASK))
    return out


def collect(out: Path) -> None:
    from rnr_lens.model.generation import generate
    from rnr_lens.model.models import load_model
    from rnr_lens.questions.deploy import deployment_for

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


def agreement(rows: list[dict], extractor: str) -> Estimate:
    """How often ``extractor`` reads what the person read, over ``rows`` (all labelled)."""
    from rnr_lens.core.stats import wilson

    read = get_extractor(extractor)
    return wilson(sum(read(r["text"]) == r["reading"] for r in rows), len(rows))


def ranking(rows: list[dict]) -> list[tuple[str, Estimate]]:
    """Every numeric extractor's agreement on the contested outputs (those the extractors read
    differently, every one labelled), best first: the measurement that chooses the default."""
    contested = [r for r in rows if r["stratum"] == "contested"]
    return sorted(((name, agreement(contested, name)) for name in NUMERIC), key=lambda t: -t[1].value)


def markdown(rows: list[dict]) -> str:
    """The agreement tables of ``docs/extractors.md``."""
    contested = [r for r in rows if r["stratum"] == "contested"]
    agreed = [r for r in rows if r["stratum"] == "agreed"]
    checked = [r for r in agreed if r["labelled"]]
    lines = [
        f"| extractor | agrees with the person where the extractors disagree ({len(contested)} outputs, all read) "
        f"| where they all agree ({len(checked)} of {len(agreed)} read) |",
        "| --- | --- | --- |",
    ]
    for name, est in ranking(rows):
        lines.append(f"| `{name}` | {est.text()} | {agreement(checked, name).text()} |")
    groups: dict[str, list[dict]] = {}
    for r in contested:
        source = "GSM8K, SVAMP" if r["task"].startswith(("gsm8k", "svamp")) else "built-in tasks"
        groups.setdefault(f"{r['model']}, {source}", []).append(r)
    lines += [
        "",
        "| contested outputs of | n | " + " | ".join(f"`{name}`" for name, _ in ranking(rows)) + " |",
        "| --- | --- |" + " --- |" * len(NUMERIC),
    ]
    for group, members in sorted(groups.items()):
        lines.append(f"| {group} | {len(members)} | " + " | ".join(agreement(members, name).text() for name, _ in ranking(rows)) + " |")
    return "\n".join(lines + ["", differences(rows, "concluding-exact", "concluding-token")])


def differences(rows: list[dict], new: str, old: str) -> str:
    """One sentence: where reader ``new`` reads the collected outputs differently from ``old``,
    and which of the two the person agreed with there."""
    differ = [r for r in rows if get_extractor(new)(r["text"]) != get_extractor(old)(r["text"])]
    read = [r for r in differ if r["labelled"]]
    with_new = sum(get_extractor(new)(r["text"]) == r["reading"] for r in read)
    with_old = sum(get_extractor(old)(r["text"]) == r["reading"] for r in read)
    shown = "; ".join(
        f'"{r["text"].strip()[:60]}" (`{old}` {get_extractor(old)(r["text"])}, `{new}` {get_extractor(new)(r["text"])}, the person {r["reading"]})'
        for r in differ
    )
    return (
        f"`{new}` reads {len(differ)} of the {len(rows)} collected outputs differently from `{old}`; "
        f"the person read {len(read)} of them, agreeing with `{new}` on {with_new} and with `{old}` on {with_old}" + (f": {shown}." if shown else ".")
    )


def load_labels(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="stage", required=True)
    sub.add_parser("collect").add_argument("out", type=Path)
    sub.add_parser("table").add_argument("labels", type=Path, nargs="?", default=LABELS)
    args = parser.parse_args()
    if args.stage == "collect":
        collect(args.out)
    else:
        print(markdown(load_labels(args.labels)))


if __name__ == "__main__":
    main()
