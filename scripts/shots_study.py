"""How many worked examples a base model's default deployment gets (issue 55), measured on
train splits only.

Gemma-3-270M (no chat template) answers the first 50 questions of the train splits of
``add-small``, ``add-two-digit`` and ``sub`` (never a test question) under the raw-text default
deployment with N worked examples, N in 0, 1, 3, 5 and 8, drawn from the same train split with
each question left out of its own context (shots source ``self`` over the train split, seed 0),
greedy. Per N it records every question's greedy text, answer and correctness.

The rule: the default N is the smallest N whose realized accuracy, pooled over the three tasks
and paired per question, is not resolved below the best N's (exact McNemar at 5%, two-sided);
it was committed with the study's results (27353fd). The examples are one seeded draw, so the
decision is conditional on them. ``--table`` prints the page's table and the rule's decision from the JSON.

After the decision, and never feeding it, ``--on-test`` audits the model on the whole test
split of ``add-small`` under its default deployment (the decided shots) beside zero-shot, the
number issue 55 asks to report:

    python scripts/shots_study.py --out assets/results/shots-study/study.json   # resumes
    python scripts/shots_study.py --table assets/results/shots-study/study.json
    python scripts/shots_study.py --on-test assets/results/shots-study/add-small-test.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MODEL = "gemma3-270m"
TASKS = ("add-small", "add-two-digit", "sub")
N_QUESTIONS = 50
SHOTS = (0, 1, 3, 5, 8)


def measure(out: Path) -> None:
    import rnr_lens as R
    from rnr_lens.core.files import write_atomic
    from rnr_lens.questions import tasks
    from rnr_lens.questions.shots import Shots

    done: dict[str, Any] = json.loads(out.read_text()) if out.exists() else {"model": MODEL, "runs": {}}
    model = R.load_model(MODEL)
    assert not model.chat_template, "the study is of a model without a chat template"
    for name in TASKS:
        task = tasks.get(name, n="all", split="train").first(N_QUESTIONS)
        for n in SHOTS:
            key = f"{name} {n}"
            if key in done["runs"]:
                continue
            config = R.DeploymentConfig.default_for("number", chat=False)
            if n:
                config = config.with_(shots=Shots(n, "self")).for_task(task)
            result = R.audit(model, task, [], config, progress=False)
            rows = result.questions
            done["runs"][key] = {
                "task": task.name,
                "shots": n,
                "config_hash": config.hash(),
                "questions": [
                    {"id": r.question_id, "text": r.default_text, "answer": r.default_extracted, "correct": bool(r.realized)}
                    for r in rows.itertuples()
                ],
            }
            write_atomic(out, json.dumps(done, indent=1) + "\n")
            print(f"{key}: {int(rows.realized.sum())} of {len(rows)}", flush=True)


def on_test(out: Path) -> None:
    """Every ``add-small`` test question under the model's default deployment and zero-shot."""
    import rnr_lens as R
    from rnr_lens.core.files import write_atomic
    from rnr_lens.questions import tasks
    from rnr_lens.questions.deploy import deployment_for_task

    model = R.load_model(MODEL)
    task = tasks.get("add-small", n="all")
    runs = {}
    for label, config in (("default", deployment_for_task(model, task)), ("zero-shot", R.DeploymentConfig.default_for("number", chat=False))):
        rows = R.audit(model, task, [], config, progress=False).questions
        runs[label] = {
            "config": config.to_dict(),
            "questions": [
                {"id": r.question_id, "text": r.default_text, "answer": r.default_extracted, "correct": bool(r.realized)} for r in rows.itertuples()
            ],
        }
        print(f"{label}: {int(rows.realized.sum())} of {len(rows)}", flush=True)
    write_atomic(out, json.dumps({"model": MODEL, "task": task.name, "runs": runs}, indent=1) + "\n")


def on_test_sentence(check: dict[str, Any]) -> str:
    """What ``--on-test`` found, as the page's sentence: each deployment's realized accuracy and
    their paired difference."""
    from rnr_lens.core.stats import paired_difference, wilson

    def correct(label: str) -> list[int]:
        return [int(q["correct"]) for q in check["runs"][label]["questions"]]

    shots = check["runs"]["default"]["config"].get("shots", {}).get("n", 0)
    default, zero = correct("default"), correct("zero-shot")
    d = paired_difference(default, zero)
    return (
        f"On the {len(default)} test questions of `{check['task']}`, {check['model']} realizes {sum(default)} of {len(default)} "
        f"under its default deployment ({shots} worked example{'s' if shots != 1 else ''} from the train split), "
        f"{wilson(sum(default), len(default)).text().replace(',', ', ')}, and {sum(zero)} of {len(zero)} zero-shot, "
        f"{wilson(sum(zero), len(zero)).text().replace(',', ', ')}; the paired difference is "
        f"{d.text().replace(',', ', ').replace('-', '−')}, exact McNemar p {d.exact_p:.2g}."
    )


def repeats(name: str, n: int, questions: list[dict[str, Any]]) -> int:
    """How many of a run's answers repeat the answer of one of the worked examples placed before
    that question (the examples drawn again by their seeded rule, from the task alone)."""
    from rnr_lens.questions import tasks
    from rnr_lens.questions.answers import canonical_number
    from rnr_lens.questions.shots import Shots, resolve

    if not n:
        return 0
    task = tasks.get(name, n="all", split="train").first(N_QUESTIONS)
    shots = resolve(Shots(n, "self"), task)
    seen = 0
    for q in questions:
        given = {canonical_number(e.answer) for e in shots.examples_for(task.by_id(q["id"]).prompt)}
        seen += q["answer"] is not None and canonical_number(q["answer"]) in given
    return seen


def decide(study: dict[str, Any]) -> tuple[str, int]:
    """The page's table (realized per task and N, pooled, each N against the best, and how many
    answers repeat an example's) and the default N by the rule above."""
    from rnr_lens.core.stats import paired_difference, wilson

    def correct(n: int) -> list[bool]:
        return [q["correct"] for name in TASKS for q in study["runs"][f"{name} {n}"]["questions"]]

    pooled = {n: correct(n) for n in SHOTS}
    best = max(SHOTS, key=lambda n: (sum(pooled[n]), -n))
    rows = []
    not_below = []
    for n in SHOTS:
        per_task = [study["runs"][f"{name} {n}"]["questions"] for name in TASKS]
        cells = [f"{sum(q['correct'] for q in qs)} of {len(qs)}" for qs in per_task]
        total = wilson(sum(pooled[n]), len(pooled[n]))
        if n == best:
            versus = "best"
            not_below.append(n)
        else:
            d = paired_difference([int(x) for x in pooled[n]], [int(x) for x in pooled[best]])
            versus = f"{d.text().replace(',', ', ').replace('-', '−')}, exact p {d.exact_p:.2g}"
            if not (d.exact_p is not None and d.exact_p < 0.05 and d.value < 0):  # the rule: exact McNemar at 5%, two-sided
                not_below.append(n)
        copied = sum(repeats(name, n, qs) for name, qs in zip(TASKS, per_task))
        rows.append(f"| {n} | " + " | ".join(cells) + f" | {total.text().replace(',', ', ')} | {versus} | {copied} of {len(pooled[n])} |")
    head = (
        "| shots | "
        + " | ".join(f"`{t}` (train)" for t in TASKS)
        + " | pooled (Wilson 95%) | − best (paired, exact McNemar) | answers that repeat an example's |"
    )
    table = "\n".join([head, "|" + " --- |" * (len(TASKS) + 4), *rows])
    return table, min(not_below)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--out", type=Path, help="measure, writing (and resuming) this JSON")
    group.add_argument("--table", type=Path, help="print the table and the decision from this JSON")
    group.add_argument("--on-test", type=Path, help="audit add-small's test split under the default and zero-shot, writing this JSON")
    args = parser.parse_args()
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        measure(args.out)
        return
    if args.on_test:
        on_test(args.on_test)
        print(on_test_sentence(json.loads(args.on_test.read_text())))
        return
    table, n = decide(json.loads(args.table.read_text()))
    print(table, f"\ndefault: {n} shots", sep="\n")


if __name__ == "__main__":
    main()
