"""The miner on a planted bottleneck: failures whose gold answer is exactly what the tiny
model says with one MLP silenced, so silencing that MLP must repair them."""

import pandas as pd
import pytest

import rnr_lens as R
from rnr_lens.bottleneck import failures
from rnr_lens.bottleneck.miner import mine, null_beside, null_repair
from tests.planted import CONFIG, PLANTED, build_planted


@pytest.fixture(scope="module")
def planted(tiny, tmp_path_factory):
    return build_planted(tiny, tmp_path_factory.mktemp("mine") / "m.db")


@pytest.mark.parametrize("strategy", ["exhaustive", "screen+confirm"])
def test_miner_finds_the_planted_bottleneck(tiny, planted, strategy):
    result, store = planted
    fs = failures.freeze(result, store, probe="ablation")
    sweep = mine(tiny, fs, strategy=strategy, top_m=2, break_bound=1.0, store=store, progress=False)
    assert sweep.bottleneck is not None
    assert (sweep.bottleneck.layer, sweep.bottleneck.component) == (PLANTED.layer, "mlp")
    row = sweep.table.set_index("layer").loc[PLANTED.layer]
    assert row["repair_discovery"] == 1.0 and row["repair"] == 1.0
    assert sweep.bottleneck.rates.repair_heldout.value == 1.0
    evaluated = sweep.table.dropna(subset=["repair"])
    assert len(evaluated) == (tiny.n_layers if strategy == "exhaustive" else 2)
    repaired = sweep.details[(sweep.details.layer == PLANTED.layer) & (sweep.details.set != "control")]
    assert repaired["after_correct"].all() and not repaired["before_correct"].any()
    if strategy == "exhaustive":
        assert sweep.agreement["screen_logprob"]["same_top"]


def test_screen_ranks_the_planted_block_first(tiny, planted):
    result, store = planted
    fs = failures.freeze(result, store, probe="ablation")
    sweep = mine(tiny, fs, strategy="screen+confirm", top_m=1, break_bound=1.0, progress=False)
    top = sweep.table.sort_values("screen_logprob", ascending=False).iloc[0]
    assert top.layer == PLANTED.layer


def test_screen_matches_a_full_recompute(tiny, planted):
    """Reusing the clean residual stream up to the ablated block changes nothing."""
    import torch

    from rnr_lens.bottleneck.attribution import gold_batch
    from rnr_lens.bottleneck.miner import screen_logprob

    result, store = planted
    fs = failures.freeze(result, store, probe="ablation")
    qs = list(fs.discovery)
    fast = screen_logprob(tiny, qs, fs, [R.Ablation(1), R.Ablation(3)])
    rows = gold_batch(tiny, qs, CONFIG)
    with torch.no_grad():
        clean = rows.logprobs(tiny.forward_tokens(rows.input_ids, rows.attention_mask)).sum(-1)
        for ablation in (R.Ablation(1), R.Ablation(3)):
            with tiny.intervene(ablations=[ablation]):
                full = rows.logprobs(tiny.forward_tokens(rows.input_ids, rows.attention_mask)).sum(-1)
            assert fast[ablation] == pytest.approx(float((full - clean).mean()), abs=1e-4)


def test_bad_miner_arguments(tiny, planted):
    result, store = planted
    fs = failures.freeze(result, store, probe="ablation")
    with pytest.raises(R.RnrLensError, match="unknown strategy"):
        mine(tiny, fs, strategy="guess")
    with pytest.raises(R.RnrLensError, match="unknown ablation component 'ffn'; use one of mlp, attn, block"):
        mine(tiny, fs, components=("ffn",))
    with pytest.raises(R.RnrLensError, match="unknown ablation method 'smear'; use one of zero, mean, resample"):
        mine(tiny, fs, methods=("smear",))


def test_mining_refuses_another_model_than_the_audited_one(planted):
    """Guards against a rule that lived only in `rnr-lens mine`: from Python, mine() and
    null_repair() with another checkpoint compared its answers with the audited model's
    (repairs and breaks of nothing that model did)."""
    result, store = planted
    fs = failures.freeze(result, store, probe="ablation")
    assert fs.model_fingerprint == result.info.model_fingerprint
    other = R.tiny_model(n_layers=4, seed=1)
    with pytest.raises(R.RnrLensError, match=r"not the checkpoint audit .* was made with.*\(model=R.load_model\(CHECKPOINT\)\)"):
        mine(other, fs, strategy="screen+confirm", progress=False)
    with pytest.raises(R.RnrLensError, match="not the checkpoint audit"):
        null_repair(other, fs)


def test_the_null_beside_a_sweep_excludes_its_bottleneck_and_skips_what_it_cannot_measure(tiny, planted):
    """One owner for "which null a bottleneck stands beside" (the CLI and the report both call
    null_beside): arbitrary blocks other than the bottleneck, none for a shard's sweep or 0 blocks."""
    result, store = planted
    fs = failures.freeze(result, store, probe="ablation")
    sweep = mine(tiny, fs, strategy="screen+confirm", top_m=2, break_bound=1.0, store=store, progress=False)
    null = null_beside(tiny, fs, sweep, blocks=2, store=store)
    assert null is not None and len(null.blocks) == 2 and PLANTED.layer not in null.blocks and sweep.bottleneck.layer == PLANTED.layer
    assert null == null_repair(tiny, fs, blocks=2, exclude=sweep.bottleneck.layer, store=store)
    assert null_beside(tiny, fs, sweep, blocks=0) is None
    part = mine(tiny, fs, strategy="screen+confirm", top_m=2, break_bound=1.0, store=store, progress=False, shard="0/2")
    assert part.shard is not None and null_beside(tiny, fs, part, store=store) is None


def test_sweep_evaluations_are_stored_and_reused(tiny, planted):
    result, store = planted
    fs = failures.freeze(result, store, probe="ablation")
    first = mine(tiny, fs, strategy="screen+confirm", top_m=2, break_bound=1.0, store=store, progress=False)
    stored = store.conn.execute("SELECT name, body FROM artifacts WHERE kind='sweep_eval'").fetchall()
    assert len(stored) >= 2
    again = mine(tiny, fs, strategy="screen+confirm", top_m=2, break_bound=1.0, store=store, progress=False)
    assert store.conn.execute("SELECT name, body FROM artifacts WHERE kind='sweep_eval'").fetchall() == stored
    pd.testing.assert_frame_equal(first.table, again.table)

    # the sweep itself reads back (a sweep made by 'rnr-lens mine' once could not be loaded)
    loaded = R.SweepResult.load(store.path, fs.name)
    pd.testing.assert_frame_equal(loaded.table, again.table, check_dtype=False)
    assert loaded.bottleneck == again.bottleneck and loaded.strategy == again.strategy and len(loaded.details) == len(again.details)
    assert list(loaded.repaired(PLANTED.layer)) == list(again.repaired(PLANTED.layer))
    with pytest.raises(R.RnrLensError, match="no sweep of failure set 'other'"):
        R.SweepResult.load(store.path, "other")


def test_the_bottleneck_says_its_n_and_what_it_passed_over(tiny, planted):
    """A bottleneck was once named from 3 failures with no warning, and a block that repaired
    more was passed over with nothing on screen saying why."""
    result, store = planted
    fs = failures.freeze(result, store, probe="ablation")
    strict = mine(tiny, fs, strategy="exhaustive", break_bound=0.2, progress=False)
    loose = mine(tiny, fs, strategy="exhaustive", break_bound=1.0, progress=False)
    b = loose.bottleneck
    assert b.rates.repair_heldout.n == len(fs.heldout) and b.rates.repair_discovery.n == len(fs.discovery)
    assert f"of {len(fs.heldout)} failures" in repr(b)
    assert b.few == (len(fs.heldout) < 10) and ("fewer than 10 held-out failures" in repr(b)) == b.few
    assert strict.bottleneck is None, "every block breaks the tiny model's controls (break 1.0 > 0.2)"

    # notebook 02's case: block 6 repairs every discovery failure but breaks 0.4 of the controls
    from rnr_lens.judge.sweeps import bottleneck_of as _bottleneck

    rows = [(6, 1.0, 0.4), (4, 0.5, 0.1), (2, 0.25, 0.0)]
    table = pd.DataFrame(
        [
            {
                "layer": layer,
                "component": "mlp",
                "method": "zero",
                "repair_discovery": d,
                "repair_heldout": d,
                "repair": d,
                "break": br,
                "n_heldout": 4,
                "n_discovery": 4,
            }
            for layer, d, br in rows
        ]
    )
    chosen = _bottleneck(table, 0.2)
    assert chosen.layer == 4 and chosen.passed_over == ("mlp6:zero (discovery 1.00, break 0.40)",)
    assert "chosen over mlp6:zero (discovery 1.00, break 0.40): they repair more but break more than 0.20" in repr(chosen)
    assert chosen.few and chosen.rates.repair_heldout.n == 4


def test_unmeasured_break_reads_as_such_in_figures_and_widgets(tiny, tmp_path):
    from rnr_lens.present import viz, widgets

    result, store = build_planted(tiny, tmp_path / "none.db", with_realized=False)
    sweep = mine(tiny, failures.freeze(result, store, probe="ablation"), strategy="exhaustive", progress=False)
    assert "break unmeasured (no realized question to break)" in widgets.layer_summary_html(sweep, PLANTED.layer)
    assert "Break rates are unmeasured" in viz.caption(viz.repair_break(sweep))
