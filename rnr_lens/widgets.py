"""JupyterLab widgets (ipywidgets 8) over sweep and audit results; they never load a model.

- :func:`layer_explorer`: a layer slider beside the repair/break figure; the chosen layer's
  rates and the questions it repairs and breaks, with answers before and after.
- :func:`audit_explorer`: choose a probe, a selector and k; the pass@k figure and the
  question table follow.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

import ipywidgets as W
import plotly.graph_objects as go

from rnr_lens import viz
from rnr_lens.errors import RnrLensError

if TYPE_CHECKING:
    from rnr_lens.audit import AuditResult
    from rnr_lens.miner import SweepResult


def _table(rows: list[dict], columns: list[str]) -> str:
    head = "".join(f"<th style='text-align:left;padding:2px 8px'>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td style='padding:2px 8px'>{html.escape(str(r.get(c, '')))}</td>" for c in columns) + "</tr>"
                   for r in rows)
    return f"<table class='rnr-table'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def layer_summary_html(sweep: "SweepResult", layer: int, component: str = "mlp", kind: str = "zero") -> str:
    """The HTML the layer explorer shows for one layer."""
    row = sweep.table[(sweep.table.layer == layer) & (sweep.table.component == component) & (sweep.table.kind == kind)]
    if row.empty or "repair" not in row or row["repair"].isna().all():
        screen = float(row["screen_logprob"].iloc[0]) if not row.empty else float("nan")
        return (f"<div class='rnr-layer' data-layer='{layer}'><b>layer {layer}</b> ({component}, {kind}): not confirmed by "
                f"generation; screen Δ log p(gold) = {screen:.3f}</div>")
    r = row.iloc[0]
    d = sweep.details[(sweep.details.layer == layer) & (sweep.details.component == component) & (sweep.details.kind == kind)]
    repaired = d[(d.set != "control") & d.after_correct & ~d.before_correct]
    broken = d[(d.set == "control") & ~d.after_correct & d.before_correct]
    cols = ["question_id", "prompt", "before_answer", "after_answer"]
    return (
        f"<div class='rnr-layer' data-layer='{layer}'><b>layer {layer}</b> ({component}, {kind}): "
        f"<span class='rnr-repair'>repair {r['repair']:.2f} [{r['repair_low']:.2f}, {r['repair_high']:.2f}]</span>, "
        f"<span class='rnr-break'>break {r['break']:.2f} [{r['break_low']:.2f}, {r['break_high']:.2f}]</span></div>"
        f"<p>repaired ({len(repaired)})</p>{_table(repaired[cols].to_dict('records'), cols)}"
        f"<p>broken ({len(broken)})</p>{_table(broken[cols].to_dict('records'), cols)}"
    )


def layer_explorer(sweep: "SweepResult", component: str = "mlp", kind: str = "zero") -> W.VBox:
    """A slider over layers (or a click on a bar) showing that layer's repairs and breaks."""
    layers = sorted(sweep.table.layer.unique())
    if not layers:
        raise RnrLensError("the sweep has no layers to explore")
    start = sweep.bottleneck["layer"] if sweep.bottleneck else layers[0]
    slider = W.IntSlider(value=start, min=layers[0], max=layers[-1], step=1, description="layer", continuous_update=False)
    figure = go.FigureWidget(viz.repair_break(sweep)) if "repair" in sweep.table and sweep.table["repair"].notna().any() else None
    info = W.HTML(layer_summary_html(sweep, start, component, kind))

    def show(change: dict) -> None:
        info.value = layer_summary_html(sweep, int(change["new"]), component, kind)

    slider.observe(show, names="value")
    if figure is not None:
        def clicked(trace: object, points: object, state: object) -> None:
            if points.xs:  # type: ignore[attr-defined]
                slider.value = int(points.xs[0])  # type: ignore[attr-defined]

        for trace in figure.data:
            trace.on_click(clicked)
    children = [slider] + ([figure] if figure is not None else []) + [info]
    return W.VBox(children)


def audit_explorer(result: "AuditResult") -> W.VBox:
    """Probe, selector and k controls over an audit; figure and question table update."""
    if not result.probes:
        raise RnrLensError("the audit has no probes to explore")
    probe = W.Dropdown(options=result.probes, description="probe")
    selector = W.Dropdown(options=["oracle", "majority", "logprob", "entropy"], description="selector")
    k = W.IntSlider(value=1, min=1, max=1, description="k", continuous_update=False)
    figure = go.FigureWidget(viz.pass_at_k(result))
    table = W.HTML()

    def refresh(*_: object) -> None:
        tries = result.probe_tries(probe.value)
        budget = int(tries.groupby("question_id").size().min())
        k.max = budget
        k.value = min(k.value, budget)
        head = tries[tries.try_index < k.value]
        picks = result.selections(probe.value)
        picks = picks[picks.selector == selector.value].set_index("question_id")
        rows = []
        for q in result.questions.itertuples():
            hit = bool(head[head.question_id == q.question_id]["correct"].any())
            rows.append({"question_id": q.question_id, "gold": q.gold, "realized": q.realized, f"reached within k={k.value}": hit,
                         f"{selector.value} pick": picks.loc[q.question_id, "extracted"] if q.question_id in picks.index else ""})
        share = sum(r[f"reached within k={k.value}"] for r in rows) / max(1, len(rows))
        table.value = f"<p class='rnr-share'>reached within k={k.value}: {share:.2f}</p>" + _table(rows, list(rows[0].keys()))

    for control in (probe, selector, k):
        control.observe(refresh, names="value")
    refresh()
    return W.VBox([W.HBox([probe, selector, k]), figure, table])
