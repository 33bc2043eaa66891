"""Figures on real sweep and audit results (tiny model), and export through kaleido."""

import plotly.graph_objects as go
import pytest

import rnr_lens as R
from rnr_lens.bottleneck import failures
from rnr_lens.bottleneck.attribution import direct_logit_attribution
from rnr_lens.bottleneck.miner import mine
from rnr_lens.measure.audits import audit
from rnr_lens.present import viz
from rnr_lens.questions import tasks
from tests.conftest import require_chromium
from tests.planted import CONFIG, PLANTED, build_planted


@pytest.fixture(scope="module")
def sweep_and_result(tiny, tmp_path_factory):
    result, store = build_planted(tiny, tmp_path_factory.mktemp("viz") / "v.db")
    fs = failures.freeze(result, store, probe="ablation")
    return mine(tiny, fs, strategy="exhaustive", break_bound=1.0, progress=False), result, fs


def test_repair_break_bars_match_the_table(sweep_and_result):
    sweep, _, _ = sweep_and_result
    fig = viz.repair_break(sweep)
    assert isinstance(fig, go.Figure)
    repair = next(t for t in fig.data if t.name == "repair")
    assert list(repair.y) == sweep.table.sort_values("layer")["repair"].tolist()
    assert any(t.name == f"bottleneck ({PLANTED.layer})" for t in fig.data), "the bottleneck named in the legend"
    assert f"the bottleneck, block {PLANTED.layer}" in viz.caption(fig) and "95% Wilson" in viz.caption(fig)
    assert "main" not in fig.layout.title.text and "Silencing one MLP block" in fig.layout.title.text


def test_repair_break_shows_every_block_after_screen_and_confirm(tiny, sweep_and_result):
    """Only the confirmed layers were drawn, on a numeric axis whose gaps read as zero effect."""
    _, _, fs = sweep_and_result
    sweep = mine(tiny, fs, strategy="screen+confirm", top_m=2, break_bound=1.0, progress=False)
    fig = viz.repair_break(sweep)
    confirmed = sorted(sweep.table.dropna(subset=["repair"]).layer)
    screen = next(t for t in fig.data if t.name == "screen")
    assert sorted(screen.x) == list(range(tiny.n_layers)), "the screen score of every block"
    repair = next(t for t in fig.data if t.name == "repair")
    assert sorted(repair.x) == confirmed
    only = next(t for t in fig.data if t.name == "screened only")
    assert sorted(only.x) == sorted(set(range(tiny.n_layers)) - set(confirmed)) and only.marker.symbol == "circle-open"
    row = sweep.table.set_index("layer").loc[PLANTED.layer]
    hover = dict(zip(repair.x, repair.customdata))[PLANTED.layer]
    assert hover[0] == f"{int(row.n_repaired)}/{int(row.n_failures)}" and hover[1] == row.repair_low
    assert [(s.x0, s.x1) for s in fig.layout.shapes if s.type == "rect"] == [(PLANTED.layer - 0.5, PLANTED.layer + 0.5)] * 2
    assert fig.layout.xaxis2.dtick == 1 and fig.layout.xaxis2.tick0 == 0


def test_repair_heatmap_is_signed_categorical_and_split(sweep_and_result):
    sweep, _, _ = sweep_and_result
    fig = viz.repair_heatmap(sweep)
    heat = fig.data[0]
    assert heat.colorscale and heat.zmid == 0
    assert fig.layout.yaxis.type == "category" and list(heat.y) == [str(layer) for layer in sorted(sweep.details.layer.unique())]
    row = list(heat.y).index(str(PLANTED.layer))
    labels = list(fig.layout.xaxis.ticktext)
    failing = set(sweep.details[sweep.details.set != "control"].question_id)
    n_fail = len(failing)
    assert set(labels[:n_fail]) == failing, "failure-set questions first, then the control set"
    assert all(heat.z[row][i] == 1 for i in range(n_fail))
    assert [s.x0 for s in fig.layout.shapes] == [n_fail - 0.5], "the boundary between the sets is drawn"
    assert {a.text for a in fig.layout.annotations} == {f"failure set ({n_fail})", f"control set ({len(labels) - n_fail})"}
    assert "What is" in heat.text[0][0]


def test_pass_at_k_has_integer_ticks_and_a_k_marker(tiny):
    small = audit(tiny, tasks.get("add-small", n=3), ["sampling:k=4,t=1.0"], progress=False)
    fig = viz.pass_at_k(small, k=2)
    assert fig.layout.xaxis.tickmode == "linear" and fig.layout.xaxis.tick0 == 1 and fig.layout.xaxis.dtick == 1
    assert [s.x0 for s in fig.layout.shapes if s.x0 == s.x1] == [2]


def test_figure_explains_why_reachable_can_be_below_realized(tiny):
    small = audit(tiny, tasks.get("add-small", n=3), ["routes:k=2"], progress=False)
    fig = viz.realized_vs_reachable(small)
    assert "can fall below realized" in viz.caption(fig), "definitions go in the caption"
    assert fig.layout.xaxis.title.text == "probe", "not a three-line axis title"
    assert [t.x[0] for t in fig.data][:1] == ["routes"], "short probe labels on the axis"


def test_panels_of_one_model_are_titled_by_task_alone(tiny):
    """Six "model / task" panel titles ran into each other at a paper's width (the default
    grid's figure): each panel names what differs, the figure's title what they share."""
    a = audit(tiny, tasks.get("add-small", n=2), ["routes:k=2"], progress=False)
    b = audit(tiny, tasks.get("sub", n=2), ["routes:k=2"], progress=False)
    fig = viz.realized_vs_reachable([a, b])
    assert [t.text for t in fig.layout.annotations][:2] == ["add-small", "sub"]
    assert fig.layout.title.text.endswith(f"<br>{a.info.model}") and fig.layout.title.text.count(str(a.info.model)) == 1


def test_screen_audit_attribution_and_route_figures(tiny, sweep_and_result):
    sweep, result, fs = sweep_and_result
    assert len(viz.screen_vs_repair(sweep).data) == 1
    small = audit(tiny, tasks.get("add-small", n=4), ["sampling:k=3,t=1.0", "routes:k=2"], progress=False)
    fig = viz.realized_vs_reachable([small, small])
    assert {t.name for t in fig.data} >= {"realized (greedy)", "reachable (oracle)", "select:majority", "select:logprob-or-default"}
    curve = viz.pass_at_k(small)
    assert [list(t.x) for t in curve.data if t.mode == "lines+markers"][0] == [1, 2, 3]
    dla = direct_logit_attribution(tiny, list(fs.discovery)[:2], CONFIG)
    fig = viz.attribution(dla, bottleneck=PLANTED.layer)
    assert {t.name for t in fig.data if t.type == "bar"} == {"attention", "MLP"}
    repair_break_colours = {t.marker.color for t in viz.repair_break(sweep).data if t.type == "bar"}
    assert not {t.marker.color for t in fig.data} & repair_break_colours, "attention/MLP do not reuse repair/break colours"
    assert "error bars ±1 standard error of the mean" in fig.layout.title.text
    one = viz.attribution(dla, question_id=dla.question_id.iloc[0])
    assert len(one.data[0].x) == tiny.n_layers
    routes = viz.route_diagram([R.Route.skip(4, 1), "4:0-2,2-3"])
    assert list(routes.data[0].z[0]) == [0, -1, 0, 0]
    assert list(routes.data[0].z[1]) == [0, 0, 1, 0] and routes.data[0].zmid == 0


def _ceiling():
    """A ceiling with the textbook crossing (a base reaching 60 of 100 questions with 2 draws of
    128, a trained model 30 with 100), built from its draws as compare_ceiling builds it."""
    import numpy as np

    from rnr_lens.judge.ceiling import Ceiling, curve_points, find_crossing, pass_at_k_curves

    def draws(n: int, c: int) -> list:
        return [np.r_[np.ones(c), np.zeros(128 - c)]] * n

    base = pass_at_k_curves(np.array(draws(60, 2) + draws(40, 0)))
    trained = pass_at_k_curves(np.array(draws(30, 100) + draws(70, 0)))
    prompts = [f"q{i}" for i in range(100)]
    points = curve_points(base, trained, prompts)
    probe = "sampling:k=128,t=0.7,draw=inverse-cdf"
    return Ceiling("base", "base+dapo30", "add-two-digit", probe, 100, 0, points, find_crossing(base, trained, points, prompts), ())


def test_ceiling_curves_mark_the_crossing_on_log_k():
    c = _ceiling()
    fig = viz.ceiling_curves(c)
    assert fig.layout.xaxis.type == "log" and fig.layout.xaxis2.type == "log"
    lines = {t.name: t for t in fig.data if t.name}
    assert list(lines["base: base"].y) == [p.base.value for p in c.curve]
    assert list(lines["trained - base"].y) == [p.difference.value for p in c.curve]
    assert f"curves cross, k = {c.crossing.point}" in lines
    assert [s.x0 for s in fig.layout.shapes if s.type == "line" and s.line.dash == "dash"] == [c.crossing.point] * 2  # both panels
    assert "pointwise" in viz.caption(fig) and f"cross at k = {c.crossing.point}" in viz.caption(fig)
    # checkpoints of one recipe share a name: a grid's figure names the run instead
    assert "trained: tuned (run 2)" in {t.name for t in viz.ceiling_curves(c, trained="tuned (run 2)").data}
    # no lead in the data: nothing crosses, yet the crossing's bootstrap interval is shaded
    import dataclasses

    no_lead = dataclasses.replace(c, crossing=dataclasses.replace(c.crossing, lead=None, point=None, point_interval=(1, 4)))
    fig = viz.ceiling_curves(no_lead)
    assert [(s.x0, s.x1) for s in fig.layout.shapes if s.type == "rect"] == [(1, 4)] * 2  # both panels
    assert not [s for s in fig.layout.shapes if s.type == "line" and s.line.dash == "dash"]


def test_reward_curve_shows_the_training_history():
    history = [{"step": i + 1, "reward": -1 + 0.1 * i, "accuracy": 0.05 * i, "groups_kept": 8, "groups_sampled": 16 + 8 * (i % 2)} for i in range(12)]
    fig = viz.reward_curve(history, window=4)
    smooth = [t for t in fig.data if t.name == "reward (4-step mean)"][0]
    assert list(smooth.y)[-1] == pytest.approx(sum(h["reward"] for h in history[-4:]) / 4)
    assert [t.name for t in fig.data if t.type == "bar"] == ["groups kept"]
    with pytest.raises(R.RnrLensError, match="history is empty"):
        viz.reward_curve([])


def test_pdf_for_a_single_column_is_readable_in_print(sweep_and_result, tmp_path):
    """The exported PDF was 1200x510 pt (13 px fonts ~4 pt in a column), cut off its x-axis
    title, carried the title "Kaleido-fier" and mode 0600."""
    require_chromium()
    import os

    import pdfplumber
    from pypdf import PdfReader

    sweep, _, _ = sweep_and_result
    old = os.umask(0o022)
    try:
        path = viz.save(viz.repair_break(sweep), tmp_path / "bottleneck.pdf", size="column")
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o644
    assert PdfReader(path).metadata.title == "Silencing one MLP block (zeroed)"
    with pdfplumber.open(path) as pdf:
        (page,) = pdf.pages
        assert page.width == pytest.approx(252, abs=1), "3.5 inches wide"
        upright = [c for c in page.chars if c["upright"] and c["text"].strip()]
        assert min(c["size"] for c in upright) >= 8, "every font at least 8 pt at print size"
        words = page.extract_words()
        assert not any(w["text"] == "Silencing" for w in words), "the title is left to the paper's caption"
        rotated_text = "".join(c["text"] for c in page.chars if not c["upright"])
        for quantity in ("share of its set", "nats"):  # each panel's y-axis names its quantity (issue 59)
            assert quantity in rotated_text or quantity[::-1] in rotated_text, f"the y-axis title {quantity!r} is on the page"
        for title in ("block", "(layer)"):
            found = [w for w in words if w["text"] == title]
            assert found, f"{title!r} is on the page"
            assert all(0 <= w["x0"] and w["x1"] <= page.width and 0 <= w["top"] and w["bottom"] <= page.height for w in found)
        rendered = page.to_image(resolution=150)  # through PDFium, as a reader would see the page
        rendered.save(tmp_path / "bottleneck-page.png")
        rotated = [c for c in page.chars if not c["upright"]]
        assert rotated and all(0 <= c["x0"] and c["x1"] <= page.width and 0 <= c["top"] and c["bottom"] <= page.height for c in rotated), (
            "the y-axis titles are inside the page"
        )
    assert (tmp_path / "bottleneck-page.png").stat().st_size > 2_000, "the page renders (not blank)"
    png = viz.save(viz.repair_break(sweep), tmp_path / "bottleneck.png", size="full")
    assert png.read_bytes()[:4] == b"\x89PNG"


def _declared_words(fig: go.Figure) -> set[str]:
    """Every word a laid-out figure asks to show: axis titles, legend entries, annotations."""
    import re

    texts = [fig.layout[a].title.text for a in fig.layout if a.startswith(("xaxis", "yaxis")) and fig.layout[a].title.text]
    legend = [t.name for t in fig.data if t.name and t.showlegend is not False and t.type != "heatmap"]
    if len(legend) > 1 or fig.layout.showlegend:  # plotly shows no legend for a single trace
        texts += legend
    texts += [a.text for a in fig.layout.annotations if a.text]
    words = set()
    for text in texts:
        words.update(w for w in re.split(r"\s+|<br>", re.sub(r"</?sup>", "", str(text))) if w)
    return words


def _rotated(char: dict) -> bool:
    a, b, c, d, *_ = char["matrix"]
    return abs(b) > 1e-6 or abs(c) > 1e-6


def _text_collisions(page) -> list[str]:
    """Pairs of glyphs from different words whose boxes overlap by more than a third of the
    smaller one, and glyphs outside the page."""
    import itertools

    chars = [c for c in page.chars if c["text"].strip()]
    out = [
        f"{c['text']!r} off the page"
        for c in chars
        if c["x0"] < -0.5 or c["x1"] > page.width + 0.5 or c["top"] < -0.5 or c["bottom"] > page.height + 0.5
    ]
    for (i, a), (j, b) in itertools.combinations(enumerate(chars), 2):
        if (_rotated(a) or _rotated(b)) and abs(i - j) <= 2:
            continue  # neighbours in one rotated label: their axis-aligned boxes overlap by construction
        w = min(a["x1"], b["x1"]) - max(a["x0"], b["x0"])
        h = min(a["bottom"], b["bottom"]) - max(a["top"], b["top"])
        smaller = min((c["x1"] - c["x0"]) * (c["bottom"] - c["top"]) for c in (a, b))
        if w > 0 and h > 0 and smaller > 0 and w * h / smaller > 1 / 3:
            out.append(f"{a['text']!r} at ({a['x0']:.0f}, {a['top']:.0f}) overlaps {b['text']!r}")
    return out


def _route_passes(model):
    """The default route beside one that skips block 1 and runs block 2 twice, on one prompt."""
    from rnr_lens.model.route_trace import answer_token, logit_lens

    ids, mask = model.pad([model.tokenizer("What is 2 + 3? The answer is ")["input_ids"]])
    gold = answer_token(model, "5")
    traces = {"default": model.route_trace(ids, mask)}
    with model.intervene(route=R.Route.skip(model.n_layers, 1).then_repeat(2)):
        traces["skip 1, repeat 2"] = model.route_trace(ids, mask)
    return viz.route_passes(traces, {name: logit_lens(model, t, gold)[0] for name, t in traces.items()})


def test_route_passes_draws_every_pass_of_each_route(tiny):
    fig = _route_passes(tiny)
    lines = {(t.name, t.yaxis): t for t in fig.data}
    assert set(lines) == {("default", "y"), ("default", "y2"), ("skip 1, repeat 2", "y"), ("skip 1, repeat 2", "y2")}
    chosen = lines[("skip 1, repeat 2", "y2")]
    assert list(chosen.x) == [0, 1, 2, 3] and list(chosen.text) == ["block 0", "block 2", "block 2", "block 3"]
    assert len(lines[("default", "y")].x) == tiny.n_layers and "logit lens" in viz.caption(fig)
    trace = tiny.route_trace(*tiny.pad([[1, 2, 3]]))
    with pytest.raises(R.RnrLensError, match="under the same names"):
        viz.route_passes({"a": trace}, {"b": [0.0] * 4})
    with pytest.raises(R.RnrLensError, match="has 4 steps but 3 gold logits"):
        viz.route_passes({"a": trace}, {"a": [0.0] * 3})


@pytest.mark.slow  # over 5 s on two cores (CONTRIBUTING's table)
def test_every_figure_at_column_size_keeps_its_text_apart_and_on_the_page(tiny, sweep_and_result, tmp_path):
    """At a paper column's width, "bottleneck: block 4" once sat on the y tick "1", the x-axis
    title of realized_vs_reachable ran off the page, and the comparison's row labels ran into
    its left panel. Each figure is rendered to PDF and its glyph boxes read back."""
    require_chromium()
    import pdfplumber

    from rnr_lens.trained_pair.comparison import compare

    sweep, _, fs = sweep_and_result
    db = tmp_path / "s.db"
    a = audit(tiny, tasks.get("add-small", n=4), ["sampling:k=3,t=1.0", "routes:k=2"], progress=False, store=db)
    b = audit(tiny, tasks.get("add-small", n=4), ["sampling:k=3,t=1.0", "routes:k=2"], progress=False, store=db, seed=1)
    history = [{"step": i + 1, "reward": -1 + 0.1 * i, "accuracy": 0.05 * i, "groups_kept": 8, "groups_sampled": 16} for i in range(12)]
    figures = {
        "repair_break": viz.repair_break(sweep),
        "repair_heatmap": viz.repair_heatmap(sweep),
        "screen_vs_repair": viz.screen_vs_repair(sweep),
        "realized_vs_reachable": viz.realized_vs_reachable([a, b]),
        "pass_at_k": viz.pass_at_k(a, k=2),
        "attribution": viz.attribution(direct_logit_attribution(tiny, list(fs.discovery)[:2], CONFIG), bottleneck=PLANTED.layer),
        "route_diagram": viz.route_diagram([R.Route.skip(4, 1), "4:0-2,2-3"]),
        "reward_curve": viz.reward_curve(history, window=4),
        "comparison": viz.comparison(compare(a, b)),
        "ceiling_curves": viz.ceiling_curves(_ceiling()),
        "route_passes": _route_passes(tiny),
    }
    for name, fig in figures.items():
        assert len(viz.caption(fig)) > 40, f"{name} carries a caption"
        laid_out, _, _ = viz.print_layout(fig, "column")
        assert not laid_out.layout.title.text, f"{name}: the print preset drops the in-figure title"
        path = viz.save(fig, tmp_path / f"{name}.pdf", size="column")
        with pdfplumber.open(path) as pdf:
            (page,) = pdf.pages
            assert not _text_collisions(page), f"{name}: {_text_collisions(page)[:5]}"
            shown = {w["text"] for w in page.extract_words()} | {w["text"] for w in page.extract_words(extra_attrs=["upright"]) if not w["upright"]}
            rotated = "".join(c["text"] for c in page.chars if not c["upright"])
            missing = {w for w in _declared_words(laid_out) if w not in shown and w not in rotated}
            assert not missing, f"{name}: {sorted(missing)} not shown whole on the page"
