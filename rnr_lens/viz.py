"""Figures for papers and notebooks: each function returns a plotly ``go.Figure``.

Signed effects use RdBu centred at zero; categorical colours come from the Okabe-Ito palette
(safe for colour-blind readers). :func:`save` writes PDF, SVG or PNG (kaleido with the system
Chromium) or standalone HTML. Figures read result objects only; they never load a model.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from plotly.subplots import make_subplots

from rnr_lens.errors import RnrLensError
from rnr_lens.routes import Route

if TYPE_CHECKING:
    from rnr_lens.audit import AuditResult
    from rnr_lens.compare import Comparison
    from rnr_lens.miner import SweepResult

OKABE_ITO = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]
SIGNED = "RdBu"

pio.templates["rnr_paper"] = go.layout.Template(
    layout=go.Layout(
        font=dict(family="Helvetica, Arial, sans-serif", size=13, color="#222"),
        title=dict(font=dict(size=15), x=0.02, xanchor="left"),
        colorway=OKABE_ITO,
        plot_bgcolor="white",
        paper_bgcolor="white",
        xaxis=dict(showline=True, linecolor="#444", ticks="outside", gridcolor="#eee", zeroline=False),
        yaxis=dict(showline=True, linecolor="#444", ticks="outside", gridcolor="#eee", zeroline=True, zerolinecolor="#bbb"),
        legend=dict(bgcolor="rgba(255,255,255,0.8)", borderwidth=0),
        margin=dict(l=60, r=20, t=50, b=50),
    )
)
PAPER = "rnr_paper"


def _errors(df: pd.DataFrame, col: str) -> dict:
    return dict(type="data", symmetric=False, array=(df[f"{col}_high"] - df[col]).tolist(),
                arrayminus=(df[col] - df[f"{col}_low"]).tolist(), thickness=1.2, width=3)


def repair_break(sweep: "SweepResult", title: str | None = None) -> go.Figure:
    """Repair rate (failure set) and break rate (control set) per layer, 95% Wilson intervals,
    one panel per component and ablation kind; the bottleneck is marked."""
    table = sweep.table.dropna(subset=["repair"]) if "repair" in sweep.table else sweep.table.iloc[0:0]
    if table.empty:
        raise RnrLensError("the sweep evaluated no candidate; run mine() first")
    groups = list(table.groupby(["component", "kind"], sort=False))
    fig = make_subplots(rows=len(groups), cols=1, shared_xaxes=True, subplot_titles=[f"{c} ({k})" for (c, k), _ in groups])
    for row, ((comp, kind), df) in enumerate(groups, start=1):
        df = df.sort_values("layer")
        fig.add_bar(x=df["layer"], y=df["repair"], error_y=_errors(df, "repair"), name="repair rate",
                    marker_color=OKABE_ITO[0], legendgroup="repair", showlegend=row == 1, row=row, col=1,
                    hovertemplate="layer %{x}<br>repair %{y:.2f}<extra></extra>")
        fig.add_bar(x=df["layer"], y=df["break"], error_y=_errors(df, "break"), name="break rate",
                    marker_color=OKABE_ITO[3], legendgroup="break", showlegend=row == 1, row=row, col=1,
                    hovertemplate="layer %{x}<br>break %{y:.2f}<extra></extra>")
        b = sweep.bottleneck
        if b and b["component"] == comp and b["kind"] == kind:
            fig.add_annotation(x=b["layer"], y=1.05, text=f"bottleneck {comp}{b['layer']}", showarrow=True, arrowhead=2,
                               ax=0, ay=-25, row=row, col=1)
        fig.update_yaxes(range=[0, 1.15], title_text="rate", row=row, col=1)
    fig.update_xaxes(title_text="layer", dtick=max(1, int(sweep.table["layer"].max() // 15)), row=len(groups), col=1)
    fig.update_layout(template=PAPER, barmode="group", title=title or f"Single-block ablation: {sweep.failure_set} ({sweep.strategy})",
                      height=260 * len(groups) + 80)
    return fig


def repair_heatmap(sweep: "SweepResult", component: str = "mlp", kind: str = "zero") -> go.Figure:
    """Layer x question: +1 repaired (a failure now correct), -1 broken (a control now wrong),
    0 unchanged; RdBu centred at zero, question text on hover."""
    d = sweep.details
    if d.empty:
        raise RnrLensError("the sweep has no evaluated candidates to show")
    d = d[(d.component == component) & (d.kind == kind)].copy()
    d["effect"] = d.after_correct.astype(int) - d.before_correct.astype(int)
    order = d.drop_duplicates("question_id").sort_values(["set", "question_id"])
    grid = d.pivot_table(index="layer", columns="question_id", values="effect").reindex(columns=order.question_id)
    prompts = order.set_index("question_id")["prompt"]
    hover = [[f"layer {layer}<br>{q} ({order.set_index('question_id').loc[q, 'set']})<br>{prompts[q][:120]}"
              for q in grid.columns] for layer in grid.index]
    fig = go.Figure(go.Heatmap(z=grid.values, x=list(grid.columns), y=list(grid.index), colorscale=SIGNED, zmid=0, zmin=-1, zmax=1,
                               text=hover, hovertemplate="%{text}<br>effect %{z}<extra></extra>",
                               colorbar=dict(title="effect", tickvals=[-1, 0, 1], ticktext=["broken", "same", "repaired"])))
    fig.update_layout(template=PAPER, title=f"Repairs and breaks per question ({component}, {kind})",
                      xaxis=dict(title="question", showticklabels=len(grid.columns) <= 40, tickangle=-60),
                      yaxis=dict(title="layer"))
    return fig


def screen_vs_repair(sweep: "SweepResult", screen: str = "screen_logprob") -> go.Figure:
    """Each evaluated candidate's screen score against its measured repair rate (discovery half)."""
    df = sweep.table.dropna(subset=["repair_discovery"]) if "repair_discovery" in sweep.table else sweep.table.iloc[0:0]
    if df.empty:
        raise RnrLensError("no candidate was evaluated; run mine() with strategy='exhaustive' to compare screens")
    fig = go.Figure()
    for i, ((comp, kind), g) in enumerate(df.groupby(["component", "kind"], sort=False)):
        fig.add_scatter(x=g[screen], y=g["repair_discovery"], mode="markers+text", text=g["layer"].astype(str),
                        textposition="top center", name=f"{comp} ({kind})", marker=dict(size=9, color=OKABE_ITO[i % 8]))
    agree = sweep.agreement.get(screen, {})
    note = f"Spearman {agree['spearman']:.2f}" if agree.get("spearman") is not None else ""
    fig.update_layout(template=PAPER, title=f"Screen against generation {note}".strip(),
                      xaxis_title=screen.replace("_", " "), yaxis_title="repair rate (discovery)")
    return fig


def realized_vs_reachable(results: "AuditResult | Sequence[AuditResult]") -> go.Figure:
    """Per probe: realized accuracy, the reachable ceiling (oracle) and every answer-blind
    selector, with 95% bootstrap intervals; one panel per audit (model / task)."""
    results = [results] if not isinstance(results, (list, tuple)) else list(results)
    fig = make_subplots(rows=1, cols=len(results), shared_yaxes=True,
                        subplot_titles=[f"{r.info['model']} / {r.info['task']}" for r in results])
    series = ["realized", "reachable", "select:majority", "select:logprob", "select:entropy", "select:reward"]
    names = {"realized": "realized (greedy)", "reachable": "reachable (oracle)"}
    for col, result in enumerate(results, start=1):
        summary = result.summary()
        labels = [p.split(",")[0] for p in summary["probe"]]
        for i, key in enumerate(series):
            if key not in summary:
                continue
            est = summary[key]
            keep = est.notna()
            values = [e.value for e in est[keep]]
            fig.add_bar(x=[l for l, k in zip(labels, keep) if k], y=values, name=names.get(key, key.replace("select:", "blind: ")),
                        marker_color=OKABE_ITO[i % 8], legendgroup=key, showlegend=col == 1, row=1, col=col,
                        error_y=dict(type="data", symmetric=False, array=[e.high - e.value for e in est[keep]],
                                     arrayminus=[e.value - e.low for e in est[keep]], thickness=1.2, width=3))
    fig.update_yaxes(range=[0, 1.05], title_text="accuracy", row=1, col=1)
    fig.update_layout(template=PAPER, barmode="group", title="Realized versus reachable, per probe at its budget")
    return fig


def pass_at_k(result: "AuditResult", probes: Sequence[str] | None = None) -> go.Figure:
    """pass@k for k = 1..budget per probe, with 95% bootstrap bands; realized accuracy dashed."""
    fig = go.Figure()
    for i, probe in enumerate(probes or result.probes):
        curve = result.pass_at_k(probe)
        color = OKABE_ITO[i % 8]
        fig.add_scatter(x=list(curve.k) + list(curve.k[::-1]), y=list(curve.high) + list(curve.low[::-1]), fill="toself",
                        line=dict(width=0), fillcolor=color, opacity=0.18, showlegend=False, hoverinfo="skip")
        fig.add_scatter(x=curve.k, y=curve.pass_at_k, mode="lines+markers", name=probe.split(",")[0], line=dict(color=color))
    realized = float(result.questions["realized"].mean())
    fig.add_hline(y=realized, line_dash="dash", line_color="#444", annotation_text=f"realized {realized:.2f}")
    fig.update_layout(template=PAPER, title="pass@k (unbiased estimator)", xaxis_title="k", yaxis_title="pass@k", yaxis_range=[0, 1.05])
    return fig


def attribution(dla: pd.DataFrame, question_id: str | None = None, bottleneck: int | None = None) -> go.Figure:
    """Per-layer attention and MLP contributions to logit[gold] - logit[default], for one
    question or averaged over all questions in ``dla`` (from
    :func:`rnr_lens.attribution.direct_logit_attribution`); the bottleneck layer is marked."""
    df = dla[dla.component.isin(["attn", "mlp"])]
    if question_id is not None:
        df = df[df.question_id == question_id]
    if df.empty:
        raise RnrLensError(f"no attribution rows{f' for question {question_id}' if question_id else ''}")
    mean = df.groupby(["layer", "component"])["contribution"].agg(["mean", "sem"]).reset_index()
    fig = go.Figure()
    for i, comp in enumerate(["attn", "mlp"]):
        part = mean[mean.component == comp]
        fig.add_bar(x=part.layer, y=part["mean"], name=comp, marker_color=OKABE_ITO[i],
                    error_y=dict(type="data", array=part["sem"].fillna(0).tolist(), thickness=1.2, width=3) if question_id is None else None)
    if bottleneck is not None:
        fig.add_vline(x=bottleneck, line_dash="dot", line_color=OKABE_ITO[3], annotation_text=f"bottleneck {bottleneck}")
    scope = f"question {question_id}" if question_id else f"mean over {df.question_id.nunique()} questions"
    fig.update_layout(template=PAPER, barmode="group", title=f"Direct logit attribution to gold - default ({scope})",
                      xaxis_title="layer", yaxis_title="contribution to logit difference")
    return fig


def route_diagram(routes: Sequence[Route | str], labels: Sequence[str] | None = None) -> go.Figure:
    """Which blocks each route skips (-1) or repeats (+1 per extra visit); RdBu centred at zero."""
    parsed = [r if isinstance(r, Route) else Route.parse(r) for r in routes]
    if not parsed:
        raise RnrLensError("no routes to draw")
    n = parsed[0].n_layers
    z = [[r.layers.count(i) - 1 for i in range(n)] for r in parsed]
    names = list(labels) if labels is not None else [str(r) for r in parsed]
    fig = go.Figure(go.Heatmap(z=z, x=list(range(n)), y=names, colorscale=SIGNED, zmid=0, zmin=-2, zmax=2, xgap=1, ygap=1,
                               colorbar=dict(title="visits - 1", tickvals=[-1, 0, 1], ticktext=["skipped", "kept", "repeated"])))
    fig.update_layout(template=PAPER, title="Routes: skipped and repeated blocks", xaxis_title="block",
                      height=max(250, 28 * len(parsed) + 120), yaxis=dict(autorange="reversed"))
    return fig


def comparison(result: "Comparison", probe: str | None = None) -> go.Figure:
    """Left: delta realized and delta reachable per probe (b - a, paired 95% intervals).
    Right: the transition counts between realized / reachable only / unreachable for one probe."""
    from rnr_lens.compare import STATES

    probe = probe or result.a.probes[0]
    fig = make_subplots(rows=1, cols=2, column_widths=[0.55, 0.45], subplot_titles=["change, b - a", f"transitions ({probe.split(',')[0]})"])
    labels = [p.split(",")[0] for p in result.deltas.probe]
    for i, (key, name) in enumerate((("delta_realized", "delta realized"), ("delta_reachable", "delta reachable"))):
        est = result.deltas[key]
        fig.add_bar(x=labels, y=[e.value for e in est], name=name, marker_color=OKABE_ITO[i], row=1, col=1,
                    error_y=dict(type="data", symmetric=False, array=[e.high - e.value for e in est],
                                 arrayminus=[e.value - e.low for e in est], thickness=1.2, width=3))
    counts = result.transition_counts(probe)
    fig.add_heatmap(z=counts.values, x=[f"b: {s}" for s in STATES], y=[f"a: {s}" for s in STATES], colorscale="Blues",
                    text=counts.values, texttemplate="%{text}", showscale=False, row=1, col=2)
    fig.update_yaxes(autorange="reversed", row=1, col=2)
    fig.update_layout(template=PAPER, barmode="group", title=f"{result.b.info['model']} against {result.a.info['model']}")
    return fig


def reward_curve(history: Sequence[dict], window: int = 5) -> go.Figure:
    """Training rollouts per step (:func:`rnr_lens.train.train`'s history): mean reward and
    share correct, raw (thin) and as a trailing ``window``-step mean (thick); kept groups of
    dynamic sampling on a second panel."""
    if not history:
        raise RnrLensError("the training history is empty; train for at least one step")
    df = pd.DataFrame(list(history))
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.7, 0.3], vertical_spacing=0.08)
    for col, name, colour in (("reward", "reward", OKABE_ITO[0]), ("accuracy", "share correct", OKABE_ITO[2])):
        smooth = df[col].rolling(window, min_periods=1).mean()
        fig.add_scatter(x=df["step"], y=df[col], mode="lines", line=dict(color=colour, width=1), opacity=0.35,
                        name=name, legendgroup=col, showlegend=False, row=1, col=1)
        fig.add_scatter(x=df["step"], y=smooth, mode="lines", line=dict(color=colour, width=2.5), name=f"{name} ({window}-step mean)",
                        legendgroup=col, row=1, col=1)
    fig.add_bar(x=df["step"], y=df["groups_kept"], name="groups kept", marker_color=OKABE_ITO[1], row=2, col=1)
    fig.add_scatter(x=df["step"], y=df["groups_sampled"], mode="markers", name="groups sampled", marker=dict(color="#444", size=5), row=2, col=1)
    fig.update_yaxes(title_text="training rollouts", row=1, col=1)
    fig.update_yaxes(title_text="groups", row=2, col=1)
    fig.update_xaxes(title_text="step", row=2, col=1)
    fig.update_layout(template=PAPER, title="RL fine-tune (DAPO): reward curve", height=480)
    return fig


def save(fig: go.Figure, path: str | Path, *, width: int = 800, height: int | None = None, scale: float = 2.0) -> Path:
    """Write ``fig`` as PDF, SVG, PNG (kaleido + system Chromium) or standalone HTML, atomically."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".pdf", ".svg", ".png", ".html"):
        raise RnrLensError(f"cannot save a figure as {suffix or 'a file without extension'}; use .pdf, .svg, .png or .html")
    if not path.parent.exists():
        raise RnrLensError(f"folder {path.parent} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=suffix, dir=path.parent)
    os.close(fd)
    try:
        if suffix == ".html":
            fig.write_html(tmp, include_plotlyjs=True, full_html=True)
        else:
            try:
                fig.write_image(tmp, width=width, height=height or fig.layout.height or 500, scale=scale)
            except Exception as exc:
                raise RnrLensError(f"could not export {suffix} ({type(exc).__name__}: {str(exc).splitlines()[0][:150]}); "
                                   "install kaleido>=1 and Chromium (Debian: apt-get install chromium)") from exc
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path
