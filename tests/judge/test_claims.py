"""Claim records: each writes the keys claims.json always had and reads back to itself.

Guards the JSON edge of the report: a record that loses a field on the way out, or reads a
verdict or an interval back as something else, would make a re-rendered report disagree with
the one written."""

import json
from dataclasses import replace

import pytest

from rnr_lens.core.stats import rate
from rnr_lens.grids.grid import Grid
from rnr_lens.grids.setting_claims import claim_routes
from rnr_lens.judge.claims import BottleneckClaim, Claims, FailureSetSize, RoutesClaim, Setting, judged_break, summary_lines
from rnr_lens.judge.sweeps import BlockRates
from rnr_lens.judge.verdict_words import Reason
from rnr_lens.judge.verdicts import Verdict
from rnr_lens.measure.audits import audit
from rnr_lens.questions.tasks import get


@pytest.fixture(scope="module")
def routes_claim(tiny) -> RoutesClaim:
    grid = Grid(models=("tiny",), tasks=("add-small",), n=8, k=2, edits=1, temperature=1.0)
    result = audit(tiny, get("add-small", n=8), [grid.random, grid.search], progress=False)
    return claim_routes(result, grid)


def _through_json(d: dict) -> dict:
    return json.loads(json.dumps(d, default=str))


def test_a_routes_claim_reads_back_to_itself(routes_claim):
    written = _through_json(routes_claim.to_dict())
    again = RoutesClaim.from_dict(written)
    assert again.to_dict() == routes_claim.to_dict()
    assert again.verdict == routes_claim.verdict and again.setting == routes_claim.setting
    assert set(written) >= {"model", "task", "audit", "config_hash", "verdict", "retention", "format_misses", "edits_search"}


def test_a_setting_without_a_failure_set_writes_only_its_count_and_verdict(routes_claim):
    setting = routes_claim.setting
    bare = BottleneckClaim(setting, 1, Verdict("uninformative", Reason("bottleneck:no-set", {"failures": 1, "probe": "sampling:k=8"})))
    assert set(bare.to_dict()) == {"model", "task", "audit", "config_hash", "failures", "verdict"}
    assert BottleneckClaim.from_dict(_through_json(bare.to_dict())) == bare
    mined = BottleneckClaim(
        setting,
        6,
        Verdict("unresolved", Reason("bottleneck:no-heldout")),
        FailureSetSize(3, 3, 4, 1, "concluding-number", "1 of 6 failures state the gold"),
        break_bound=0.2,
        bottleneck=BlockRates(2, repair_discovery=rate([1.0, 1.0, 1.0]), repair_heldout=rate([1.0, 1.0, 0.0], null=0.5)),
        second=BlockRates(5, repair_discovery=rate([1.0, 0.0, 0.0]), repair_heldout=rate([0.0, 1.0, 0.0], null=0.5), break_heldout=rate([0.0, 1.0])),
    )
    again = BottleneckClaim.from_dict(_through_json(mined.to_dict()))
    assert again.to_dict() == mined.to_dict() and again.format_note == mined.format_note
    assert again.bottleneck is not None and judged_break(again.bottleneck).is_empty, "no held-out controls: unmeasured"
    assert mined.to_dict()["bottleneck"]["break"] is None and mined.to_dict()["bottleneck"]["repair_discovery"] == 1.0
    # the discovery repair is kept as a value and read back as the Wilson rate over the discovery half
    assert again.bottleneck.repair_discovery == mined.bottleneck.repair_discovery
    assert again.second is not None and again.second.break_heldout == mined.second.break_heldout and again.second.break_all.is_empty


def test_a_rules_1_claims_break_is_every_controls(routes_claim):
    """Rules 1 wrote every control's break under ``break``; rules 2 the held-out controls'. One
    name per meaning: a rules-1 file reads it as ``break_all``, and writes it back unchanged."""
    mined = BottleneckClaim(
        routes_claim.setting,
        6,
        Verdict("unresolved", Reason("bottleneck:no-heldout")),
        FailureSetSize(3, 3, 4, 0, "concluding-number"),
        break_bound=0.2,
        bottleneck=BlockRates(
            2, repair_discovery=rate([1.0, 1.0, 1.0]), repair_heldout=rate([1.0, 1.0, 0.0], null=0.5), break_heldout=rate([0.0, 1.0])
        ),
    )
    old = BottleneckClaim.from_dict(_through_json(mined.to_dict()), rules="1")
    assert old.bottleneck is not None and old.bottleneck.break_heldout.is_empty and old.bottleneck.break_all == rate([0.0, 1.0])
    assert judged_break(old.bottleneck) == rate([0.0, 1.0]) and old.to_dict() == mined.to_dict()


def test_the_summary_counts_the_records_verdicts(routes_claim):
    claims = Claims(
        grid={"margin": 0.05, "retention_margin": 0.25}, probes=(routes_claim.random, routes_claim.search), routes_vs_search=(routes_claim,)
    )
    lines = summary_lines(claims)
    assert lines["routes_vs_search"].endswith("(of 1)") and f"{routes_claim.verdict.status} 1" in lines["routes_vs_search"]
    assert Claims.from_dict(_through_json(claims.to_dict())).to_dict() == claims.to_dict()
    assert isinstance(Setting.from_dict(routes_claim.to_dict()), Setting)


def test_claim_3_across_training_runs_sits_side_by_side_per_base_task_and_probe():
    """A base trained several times (seeds) gets its runs' verdicts side by side, with how many
    agree; a base trained once gets no such row (nothing to compare)."""
    from rnr_lens.core.stats import Estimate
    from rnr_lens.judge.claims import TrainingClaim, TrainingProbe
    from rnr_lens.present.report_page import render_html

    def pair(base, trained, task, statuses):
        e = Estimate(0.1, 0.0, 0.2, 40)
        probes = tuple(
            TrainingProbe(p, 40, 0, e, e, e, e, 0.05, Verdict(s, Reason("training:no-overlap")), {})
            for p, s in zip(("sampling:k=8", "search:k=8"), statuses)
        )
        return TrainingClaim(task, ("a", "b"), base, trained, probes)

    training = (
        pair("base", "seed0", "sub", ("support", "against")),
        pair("base", "seed1", "sub", ("support", "unresolved")),
        pair("other", "once", "sub", ("support", "support")),
        pair("base", "seed2", "sub", ("unresolved", "unresolved")),
    )
    claims = Claims(grid=Grid(models=("base",), tasks=("sub",)).to_dict(), probes=(), training=training)
    rows = claims.across_checkpoints()
    assert [(r.base, r.probe) for r in rows] == [("base", "sampling:k=8"), ("base", "search:k=8")], "a base trained once has no row"
    assert rows[0].verdicts == (("seed0", "support"), ("seed1", "support"), ("seed2", "unresolved"))
    assert rows[0].agreement == ("support", 2, 3) and rows[1].agreement == ("unresolved", 2, 3)
    assert rows[1].cells(4) == ["against", "unresolved", "unresolved", "", "2 of 3 unresolved"], "one row for the page and the tables, padded"
    page = render_html(replace(claims, summary=summary_lines(claims)))
    assert "Across training runs" in page and "2 of 3 support" in page and "base: seed0, seed1, seed2" in page
    # checkpoints whose display names coincide (an older rnr_lens named seeds alike) are still several runs
    alike = tuple(pair("base", "base+dapo30", "sub", s) for s in (("support", "against"), ("against", "against")))
    rows = replace(claims, training=alike).across_checkpoints()
    assert [r.agreement for r in rows] == [("support", 1, 2), ("against", 2, 2)]
    two_runs = replace(claims, grid={**claims.grid, "pairs": [{"base": "base", "trained": "a"}, {"base": "base", "trained": "b"}]}, training=alike)
    assert [t for t, _ in two_runs.across_checkpoints()[0].verdicts] == ["base+dapo30 (run 1)", "base+dapo30 (run 2)"]
    assert two_runs.run_labels(two_runs.training) == ["base+dapo30 (run 1)", "base+dapo30 (run 2)"]
    assert claims.run_labels(claims.training) == ["seed0", "seed1", "once", "seed2"], "names that differ stay as they are"


def test_a_claim_with_no_setting_reads_not_evaluated():
    """A grid without trained pairs once summarized claim 3 as "0 of 0 settings"."""
    lines = summary_lines(Claims(grid={"margin": 0.05, "retention_margin": 0.25}, probes=()))
    assert all(line.endswith("not evaluated in this grid") for line in lines.values()), lines
    assert not any("0 of 0" in line or "(of 0)" in line for line in lines.values())
