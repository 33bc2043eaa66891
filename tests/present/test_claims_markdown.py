"""One report's claims as Markdown: the cells' vocabulary and the sentences read from records."""

import dataclasses
import json
from pathlib import Path

from rnr_lens.core.stats import wilson
from rnr_lens.judge.claims import Claims
from rnr_lens.present import claims_markdown as md

RESULTS = Path(__file__).resolve().parents[2] / "assets" / "results"


def committed(grid: str) -> Claims:
    return Claims.from_dict(json.loads((RESULTS / grid / "claims.json").read_text()))


def test_a_pipe_in_a_cell_never_splits_it():
    shown = md.table(["reason", "n"], [["rows differ | at batch 3", "2"]])
    head, _, row = shown.splitlines()
    assert row == "| rows differ \\| at batch 3 | 2 |" and head.count("|") == 3


def test_an_estimate_reads_as_the_report_gives_it_with_true_minus_signs():
    e = wilson(3, 10)
    assert md.estimate(e) == e.text().replace(",", ", ")
    below = dataclasses.replace(e, value=-0.05, low=-0.12, high=0.02)
    assert md.estimate(below) == "−0.05 [−0.12, 0.02]" and md.estimate(None) == "–"


def test_every_table_states_an_undecided_verdicts_n_one_way():
    """A verdict's cell is written by one function (``status``), in the claim tables and the
    side-by-side table alike: the n that would decide it with its thousands separated."""
    claims = committed("grid-deep")
    c = next(c for c in claims.routes_vs_search if c.verdict.n_needed and c.verdict.n_needed >= 1000)
    assert f"(n≈{c.verdict.n_needed:,})" in md.routes_table(claims, c.setting.model)
    assert md.status(c.verdict) == f"**{c.verdict.status}** (n≈{c.verdict.n_needed:,})"


def test_a_training_history_sentence_counts_its_steps():
    steps = [{"groups_kept": 2, "groups_sampled": 8, "accuracy": 0.5}, {"groups_kept": 1, "groups_sampled": 8, "accuracy": 0.25}]
    said = md.training_history("dapo-history.jsonl", steps)
    assert said == (
        "`dapo-history.jsonl`: 2 steps; dynamic sampling kept 3 of the 16 groups it sampled (18.8%), "
        "and the rollouts were correct 37.5% of the time (averaged over the steps)."
    )


def test_findings_name_each_claims_settings_from_the_verdicts():
    """The findings sentence counts each claim's decided settings from the records: flipping one
    claim 1 verdict to support moves the count by one and names its task."""
    claims = committed("grid-default")
    before = md.findings(claims)
    c = next(c for c in claims.routes_vs_search if c.verdict.status not in ("support", "against"))
    decided = sum(x.verdict.status in ("support", "against") for x in claims.routes_vs_search)
    flipped = dataclasses.replace(c, verdict=dataclasses.replace(c.verdict, status="support"))
    after = md.findings(dataclasses.replace(claims, routes_vs_search=tuple(flipped if x is c else x for x in claims.routes_vs_search)))
    total = len(claims.routes_vs_search)
    assert f"claim 1 is decided in {decided} of {total} settings" in before
    assert f"claim 1 is decided in {decided + 1} of {total} settings" in after
    assert f"`{Path(c.setting.task).name}`" in after.split("; claim 2")[0].split("**support** on")[1]
