"""Figures on real sweep and audit results (tiny model), and export through kaleido."""

import plotly.graph_objects as go
import pytest

import rnr_lens as R
from rnr_lens import failures, tasks, viz
from rnr_lens.attribution import direct_logit_attribution
from rnr_lens.audit import audit
from rnr_lens.miner import mine
from tests.conftest import require_chromium
from tests.test_miner import CONFIG, PLANTED, build_planted


@pytest.fixture(scope="module")
def sweep_and_result(tiny, tmp_path_factory):
    result, store = build_planted(tiny, tmp_path_factory.mktemp("viz") / "v.db")
    fs = failures.freeze(result, store, probe="ablation")
    return mine(tiny, fs, strategy="exhaustive", break_bound=1.0, progress=False), result, fs


def test_repair_break_bars_match_the_table(sweep_and_result):
    sweep, _, _ = sweep_and_result
    fig = viz.repair_break(sweep)
    assert isinstance(fig, go.Figure)
    repair = next(t for t in fig.data if t.name == "repair rate")
    assert list(repair.y) == sweep.table.sort_values("layer")["repair"].tolist()
    assert any(f"bottleneck mlp{PLANTED.layer}" in a.text for a in fig.layout.annotations)


def test_repair_heatmap_is_signed_and_centred(sweep_and_result):
    sweep, _, _ = sweep_and_result
    heat = viz.repair_heatmap(sweep).data[0]
    assert heat.colorscale and heat.zmid == 0
    row = list(heat.y).index(PLANTED.layer)
    failures_cols = [i for i, q in enumerate(heat.x) if q in set(sweep.details[sweep.details.set != "control"].question_id)]
    assert all(heat.z[row][i] == 1 for i in failures_cols)
    assert "What is" in heat.text[0][0]


def test_screen_audit_attribution_and_route_figures(tiny, sweep_and_result):
    sweep, result, fs = sweep_and_result
    assert len(viz.screen_vs_repair(sweep).data) == 1
    small = audit(tiny, tasks.get("add-small", n=4), ["sampling:k=3,t=1.0", "routes:k=2"], progress=False)
    fig = viz.realized_vs_reachable([small, small])
    assert {t.name for t in fig.data} >= {"realized (greedy)", "reachable (oracle)", "blind: majority"}
    curve = viz.pass_at_k(small)
    assert [list(t.x) for t in curve.data if t.mode == "lines+markers"][0] == [1, 2, 3]
    dla = direct_logit_attribution(tiny, list(fs.discovery)[:2], CONFIG)
    assert {t.name for t in viz.attribution(dla, bottleneck=PLANTED.layer).data} == {"attn", "mlp"}
    one = viz.attribution(dla, question_id=dla.question_id.iloc[0])
    assert len(one.data[0].x) == tiny.n_layers
    routes = viz.route_diagram([R.Route.skip(4, 1), "4:0-2,2-3"])
    assert list(routes.data[0].z[0]) == [0, -1, 0, 0]
    assert list(routes.data[0].z[1]) == [0, 0, 1, 0] and routes.data[0].zmid == 0


@pytest.mark.parametrize("suffix, magic", [(".html", b"<html"), (".png", b"\x89PNG"), (".pdf", b"%PDF"), (".svg", b"<svg")])
def test_save_writes_each_format(tmp_path, suffix, magic):
    if suffix != ".html":
        require_chromium()  # kaleido renders static formats in Chromium
    fig = viz.route_diagram([R.Route.skip(4, 2)])
    path = viz.save(fig, tmp_path / f"fig{suffix}")
    assert magic in path.read_bytes()[:2000]
    assert [p.name for p in tmp_path.iterdir()] == [f"fig{suffix}"], "no temporary files left behind"


def test_save_rejects_bad_paths(tmp_path):
    fig = viz.route_diagram([R.Route.skip(4, 2)])
    with pytest.raises(R.RnrLensError, match="cannot save a figure as .bmp"):
        viz.save(fig, tmp_path / "x.bmp")
    with pytest.raises(R.RnrLensError, match="does not exist"):
        viz.save(fig, tmp_path / "missing" / "x.pdf")


def test_reward_curve_shows_the_training_history():
    history = [{"step": i + 1, "reward": -1 + 0.1 * i, "accuracy": 0.05 * i, "groups_kept": 8, "groups_sampled": 16 + 8 * (i % 2)}
               for i in range(12)]
    fig = viz.reward_curve(history, window=4)
    smooth = [t for t in fig.data if t.name == "reward (4-step mean)"][0]
    assert list(smooth.y)[-1] == pytest.approx(sum(h["reward"] for h in history[-4:]) / 4)
    assert [t.name for t in fig.data if t.type == "bar"] == ["groups kept"]
    with pytest.raises(R.RnrLensError, match="history is empty"):
        viz.reward_curve([])
