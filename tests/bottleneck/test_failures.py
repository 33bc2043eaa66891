"""Frozen failure sets (rnr_lens/bottleneck/failures.py) on the planted model: who fails, how the set and
its controls are split, and a set without realized questions."""

import pytest

import rnr_lens as R
from rnr_lens.bottleneck import failures
from rnr_lens.bottleneck.miner import mine
from tests.planted import PLANTED, build_planted


@pytest.fixture(scope="module")
def planted(tiny, tmp_path_factory):
    return build_planted(tiny, tmp_path_factory.mktemp("failures") / "f.db")


def test_planted_failures_are_reachable_by_the_ablation_probe(planted):
    result, _ = planted
    summary = result.summary().iloc[0]
    assert summary["probe"] == "ablation" and summary["reachable_not_realized"] >= 4
    assert result.questions["reachable[ablation]"].sum() >= 4, "the probe's label names its column, and the column holds its hits"
    assert 0 < summary["realized"].value < 1


def test_failure_set_is_frozen_and_split(planted):
    result, store = planted
    fs = failures.freeze(result, store, probe="ablation")
    assert set(fs.discovery.ids).isdisjoint(fs.heldout.ids)
    assert set(fs.failures.ids) == set(result.reachable_not_realized("ablation"))
    assert set(fs.control.ids) == set(result.realized_ids())
    again = failures.freeze(result, store, probe="ablation")
    assert again.discovery.ids == fs.discovery.ids
    with pytest.raises(R.RnrLensError, match="frozen with another definition"):
        failures.freeze(result, store, probe="ablation", seed=5)


def test_the_control_set_is_split_and_each_half_has_its_break_rate(tiny, planted):
    """The controls that admit a block bias its break rate low: they are split like the
    failure set, the discovery half admits, the held-out half judges (issue 34)."""
    result, store = planted
    fs = failures.freeze(result, store, probe="ablation")
    held = fs.heldout_controls
    assert held < set(fs.control.ids) and len(held) == len(fs.control) // 2
    assert failures.freeze(result, store, probe="ablation").heldout_controls == held, "the split is a function of the frozen set"
    sweep = mine(tiny, fs, strategy="exhaustive", break_bound=1.0, store=store, progress=False)
    for _, row in sweep.table.iterrows():
        assert row["n_control_discovery"] + row["n_control_heldout"] == row["n_control"] and row["n_control_heldout"] == len(held)
        assert row["break_discovery"] * row["n_control_discovery"] + row["break_heldout"] * row["n_control_heldout"] == pytest.approx(
            row["break"] * row["n_control"]
        )
    broken = sweep.broken(PLANTED.layer, half="heldout")
    assert len(broken) == len(held) and broken.mean() == pytest.approx(sweep.table.set_index("layer").loc[PLANTED.layer, "break_heldout"])
    decided = sweep.verdict(break_bound=1.0)
    assert decided.layer == PLANTED.layer and decided.break_heldout is not None and decided.break_heldout.n == len(held)
    assert decided.verdict.status == R.verdicts.UNRESOLVED, "no null arms, no support"


def test_a_failure_set_without_realized_questions_reports_break_unmeasured(tiny, tmp_path):
    """mine once refused such a set ("no realized questions to serve as a control set")."""
    result, store = build_planted(tiny, tmp_path / "none.db", with_realized=False)
    assert not result.realized_ids()
    fs = failures.freeze(result, store, probe="ablation")
    assert fs.control is None and "break rates are unmeasured" in fs.describe()
    sweep = mine(tiny, fs, strategy="exhaustive", progress=False)
    assert sweep.table["break"].isna().all() and (sweep.table["n_control"] == 0).all()
    assert sweep.bottleneck.layer == PLANTED.layer and sweep.bottleneck.admitted_break.is_empty
    assert "break unmeasured" in repr(sweep.bottleneck)
    assert sweep.to_json()["bottleneck"]["break"] is None
