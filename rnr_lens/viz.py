"""Figures for papers and notebooks: each function returns a plotly ``go.Figure``.

Signed effects use RdBu centred at zero; categorical colours come from the Okabe-Ito palette
(safe for colour-blind readers). :func:`save` writes PDF, SVG or PNG (kaleido with the system
Chromium) or standalone HTML. Figures read result objects only; they never load a model.
"""

from __future__ import annotations

import math
import os
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from plotly.subplots import make_subplots

from rnr_lens.display import probe_labels
from rnr_lens.errors import RnrLensError
from rnr_lens.routes import Route

if TYPE_CHECKING:
    from rnr_lens.comparison import Comparison
    from rnr_lens.miner import SweepResult
    from rnr_lens.results import AuditResult

OKABE_ITO = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]
SIGNED = "RdBu"

pio.templates["rnr_paper"] = go.layout.Template(
    layout=go.Layout(
        font=dict(family="Helvetica, Arial, sans-serif", size=13, color="#222"),
        title=dict(font=dict(size=15), x=0.02, xanchor="left"),
        colorway=OKABE_ITO,
        plot_bgcolor="white",
        paper_bgcolor="white",
        xaxis=dict(showline=True, linecolor="#444", ticks="outside", gridcolor="#eee", zeroline=False, automargin=True, title=dict(standoff=6)),
        yaxis=dict(
            showline=True,
            linecolor="#444",
            ticks="outside",
            gridcolor="#eee",
            zeroline=True,
            zerolinecolor="#bbb",
            automargin=True,
            title=dict(standoff=6),
        ),
        legend=dict(bgcolor="rgba(255,255,255,0.8)", borderwidth=0),
        margin=dict(l=50, r=20, t=60, b=50),
    )
)
PAPER = "rnr_paper"


def captioned(fig: go.Figure, text: str) -> go.Figure:
    """Attach a caption to ``fig`` (in ``fig.layout.meta["caption"]``): the definitions a paper
    puts under a figure, kept out of its axis titles. Returns ``fig``."""
    meta = dict(fig.layout.meta) if isinstance(fig.layout.meta, dict) else {}
    fig.update_layout(meta={**meta, "caption": text})
    return fig


def caption(fig: go.Figure) -> str:
    """The caption every rnr_lens figure carries, for the paper's ``\\caption{}``.

    Example:
        >>> caption(pass_at_k(result))  # doctest: +SKIP
        'pass@k (the unbiased estimator) for k = 1 to each probe's budget, ...'
    """
    meta = fig.layout.meta
    return str(meta.get("caption", "")) if isinstance(meta, dict) else ""


def _errors(df: pd.DataFrame, col: str) -> dict:
    return dict(
        type="data",
        symmetric=False,
        array=(df[f"{col}_high"] - df[col]).tolist(),
        arrayminus=(df[col] - df[f"{col}_low"]).tolist(),
        thickness=1.2,
        width=3,
    )


COMPONENT_NAMES = {"mlp": "MLP", "attn": "attention", "block": "whole block"}
METHOD_NAMES = {"zero": "zeroed", "mean": "mean-ablated", "resample": "resampled"}
SCREEN_NAMES = {"screen_logprob": "screen: Δ log p(gold)", "screen_atp": "screen: attribution patching"}


def _layer_ticks(n_layers: int) -> dict:
    """Integer ticks over every block: each one up to 16 blocks, else every fifth."""
    return dict(tickmode="linear", tick0=0, dtick=1 if n_layers <= 16 else 5, range=[-0.6, n_layers - 0.4])


def repair_break(sweep: SweepResult, title: str | None = None, screen: str = "screen_logprob") -> go.Figure:
    """Repair rates per block, the design card's figure.

    Per component and ablation method, two panels over every block: the screen score of every
    block (teacher-forced, no generation), and for the blocks confirmed by generation the
    repair rate on the failure set and the break rate on the control set with 95% Wilson
    intervals (hover: n/N). Blocks that were only screened are drawn as hollow grey marks, never
    as zero bars; the bottleneck is shaded.
    """
    table = sweep.table
    if table.empty:
        raise RnrLensError("the sweep holds no blocks; run mine() first")
    if screen not in table:
        raise RnrLensError(f"the sweep has no {screen} column; use one of {', '.join(c for c in SCREEN_NAMES if c in table)}")
    groups = list(table.groupby(["component", "method"], sort=False))
    n_layers = int(table["layer"].max()) + 1
    many = len(groups) > 1
    # one group: the y-axis titles name the panels; several: a short title per group
    subtitles = (
        [x for (comp, method), _ in groups for x in (f"{COMPONENT_NAMES.get(comp, comp)}, {METHOD_NAMES.get(method, method)}", "")] if many else None
    )
    fig = make_subplots(
        rows=2 * len(groups),
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.1 / len(groups),
        row_heights=[0.35, 0.65] * len(groups),
        subplot_titles=subtitles,
    )
    b = sweep.bottleneck
    for g, ((comp, method), df) in enumerate(groups):
        top, bottom = 2 * g + 1, 2 * g + 2
        df = df.sort_values("layer")
        fig.add_bar(
            x=df["layer"],
            y=df[screen],
            marker_color="#999",
            name="screen",
            legendgroup="screen",
            showlegend=g == 0,
            hovertemplate="block %{x}<br>screen %{y:.3f}<extra></extra>",
            row=top,
            col=1,
        )
        done = df.dropna(subset=["repair"]) if "repair" in df else df.iloc[0:0]
        only = df[~df["layer"].isin(done["layer"])]
        for key, name, colour, n, of in (
            ("repair", "repair", OKABE_ITO[0], "n_repaired", "n_failures"),
            ("break", "break", OKABE_ITO[3], "n_broken", "n_control"),
        ):
            if done.empty:
                continue
            counts = [f"{int(a)}/{int(c)}" if pd.notna(a) and pd.notna(c) else "" for a, c in zip(done.get(n, []), done.get(of, []))]
            fig.add_bar(
                x=done["layer"],
                y=done[key],
                error_y=_errors(done, key),
                name=name,
                marker_color=colour,
                legendgroup=key,
                showlegend=g == 0,
                row=bottom,
                col=1,
                customdata=list(zip(counts, done[f"{key}_low"], done[f"{key}_high"])),
                hovertemplate=f"block %{{x}}<br>{key} %{{customdata[0]}} = %{{y:.2f}} [%{{customdata[1]:.2f}}, %{{customdata[2]:.2f}}]<extra></extra>",
            )
        if not only.empty:
            fig.add_scatter(
                x=only["layer"],
                y=[0.02] * len(only),
                mode="markers",
                name="screened only",
                marker=dict(symbol="circle-open", color="#888", size=6),
                legendgroup="only",
                showlegend=g == 0,
                hovertemplate="block %{x}: screened only, not generated<extra></extra>",
                row=bottom,
                col=1,
            )
        if b and b.component == comp and b.method == method:
            for row in (top, bottom):
                fig.add_vrect(x0=b.layer - 0.5, x1=b.layer + 0.5, fillcolor=OKABE_ITO[6], opacity=0.35, line_width=0, layer="below", row=row, col=1)
            # named in the legend, never as text over the bars and ticks
            fig.add_scatter(
                x=[None],
                y=[None],
                mode="markers",
                name=f"bottleneck ({b.layer})",
                marker=dict(symbol="square", size=10, color=OKABE_ITO[6], opacity=0.6),
            )
        fig.update_yaxes(title_text="screen", row=top, col=1)
        fig.update_yaxes(range=[0, 1.05], title_text="rate", row=bottom, col=1)
        fig.update_xaxes(**_layer_ticks(n_layers), row=top, col=1)
        fig.update_xaxes(**_layer_ticks(n_layers), row=bottom, col=1)
    fig.update_xaxes(title_text="block (layer)", row=2 * len(groups), col=1)
    (comp, method), _ = groups[0]
    default = (
        "Silencing one block's component: repair and break"
        if many
        else f"Silencing one {COMPONENT_NAMES.get(comp, comp)} block ({METHOD_NAMES.get(method, method)})"
    )
    fig.update_layout(
        template=PAPER,
        barmode="group",
        title=title or default,
        height=300 * len(groups) + 140,
        margin=dict(t=90),
        legend=dict(orientation="h", yanchor="top", y=-0.18 / len(groups), x=0),
    )
    generated = table.dropna(subset=["repair"]) if "repair" in table else table.iloc[0:0]
    unmeasured = not generated.empty and bool(generated["break"].isna().all())
    return captioned(
        fig,
        f"Silencing one block at a time ({', '.join(f'{COMPONENT_NAMES.get(c, c)}, {METHOD_NAMES.get(k, k)}' for (c, k), _ in groups)}). "
        f"Top: the screen ({SCREEN_NAMES.get(screen, screen)}, teacher-forced, no generation) of every block. "
        "Bottom: for the blocks confirmed by generation, the repair rate (share of the failure set answered right) and the "
        "break rate (share of the realized control set answered wrong), with 95% Wilson intervals; hollow marks: blocks only "
        "screened, not generated."
        + (" Break rates are unmeasured: the audit realized no question." if unmeasured else "")
        + (f" Shaded: the bottleneck, block {b.layer}, the best discovery repair within the break bound." if b else ""),
    )


def repair_heatmap(sweep: SweepResult, component: str = "mlp", method: str = "zero") -> go.Figure:
    """Block x question: +1 repaired (a failure now correct), -1 broken (a control now wrong),
    0 unchanged; RdBu centred at zero. Only the blocks evaluated by generation are rows (a
    categorical axis: no row stands for blocks in between); the failure-set questions come
    first, then the control set, with the boundary marked."""
    d = sweep.details
    if d.empty:
        raise RnrLensError("the sweep has no evaluated candidates to show")
    d = d[(d.component == component) & (d.method == method)].copy()
    if d.empty:
        raise RnrLensError(f"the sweep evaluated no {component} ({method}) ablation by generation")
    d["effect"] = d.after_correct.astype(int) - d.before_correct.astype(int)
    rank = {"discovery": 0, "heldout": 1, "control": 2}
    order = d.drop_duplicates("question_id").assign(r=lambda f: f["set"].map(rank)).sort_values(["r", "question_id"])
    layers = sorted(d["layer"].unique())
    grid = d.pivot_table(index="layer", columns="question_id", values="effect").reindex(index=layers, columns=order.question_id)
    info = order.set_index("question_id")
    hover = [[f"block {layer}<br>{q} ({info.loc[q, 'set']})<br>{str(info.loc[q, 'prompt'])[:120]}" for q in grid.columns] for layer in layers]
    fig = go.Figure(
        go.Heatmap(
            z=grid.values,
            x=list(range(len(grid.columns))),
            y=[str(layer) for layer in layers],
            colorscale=SIGNED,
            zmid=0,
            zmin=-1,
            zmax=1,
            xgap=1,
            ygap=1,
            text=hover,
            hovertemplate="%{text}<br>effect %{z}<extra></extra>",
            showscale=False,
        )
    )
    # three categories: a discrete legend, not a continuous colour bar
    for value, name in ((1, "repaired"), (0, "unchanged"), (-1, "broken")):
        fig.add_scatter(
            x=[None],
            y=[None],
            mode="markers",
            name=name,
            marker=dict(symbol="square", size=10, color=_signed_colour(value), line=dict(color="#888", width=0.5)),
        )
    n_fail = int((order["set"] != "control").sum())
    if 0 < n_fail < len(order):
        fig.add_vline(x=n_fail - 0.5, line_color="#222", line_width=2)
    for x0, x1, label in ((0, n_fail, f"failure set ({n_fail})"), (n_fail, len(order), f"control set ({len(order) - n_fail})")):
        if x1 > x0:
            fig.add_annotation(x=(x0 + x1 - 1) / 2, y=1.0, yref="paper", yanchor="bottom", text=label, showarrow=False)
    show_labels = len(order) <= 40
    fig.update_layout(
        template=PAPER,
        title=dict(text=f"Repairs and breaks per question ({COMPONENT_NAMES.get(component, component)}, {METHOD_NAMES.get(method, method)})", y=0.97),
        xaxis=dict(
            title="question",
            tickmode="array",
            tickvals=list(range(len(order))),
            ticktext=list(order.question_id) if show_labels else None,
            showticklabels=show_labels,
            tickangle=-90,
            tickfont=dict(size=9),
        ),
        yaxis=dict(title="block (evaluated)", type="category"),
        margin=dict(t=90),
        height=max(300, 28 * len(layers) + (260 if show_labels else 160)),
        legend=dict(orientation="h", x=0, y=-0.25),
    )
    return captioned(
        fig,
        f"Per question (columns) and generated block (rows), what silencing that block's {COMPONENT_NAMES.get(component, component)} "
        f"({METHOD_NAMES.get(method, method)}) does: repaired (a failure answered right), broken (a realized control question answered "
        "wrong) or unchanged. Failure-set questions first, then the control set.",
    )


def _signed_colour(value: int, bound: int = 1) -> str:
    """The colour the signed scale from ``-bound`` to ``bound`` gives ``value`` (so a legend
    matches the cells)."""
    from plotly.colors import sample_colorscale

    return str(sample_colorscale(SIGNED, [(value + bound) / (2 * bound)])[0])


def screen_vs_repair(sweep: SweepResult, screen: str = "screen_logprob") -> go.Figure:
    """Each evaluated candidate's screen score against its measured repair rate (discovery half)."""
    df = sweep.table.dropna(subset=["repair_discovery"]) if "repair_discovery" in sweep.table else sweep.table.iloc[0:0]
    if df.empty:
        raise RnrLensError("no candidate was evaluated; run mine() with strategy='exhaustive' to compare screens")
    fig = go.Figure()
    for i, ((comp, method), g) in enumerate(df.groupby(["component", "method"], sort=False)):
        fig.add_scatter(
            x=g[screen],
            y=g["repair_discovery"],
            mode="markers+text",
            text=g["layer"].astype(str),
            textposition="top center",
            name=f"{COMPONENT_NAMES.get(comp, comp)} ({METHOD_NAMES.get(method, method)})",
            marker=dict(size=9, color=OKABE_ITO[i % 8]),
        )
    agree = sweep.agreement.get(screen, {})
    note = f"Spearman {agree['spearman']:.2f}" if agree.get("spearman") is not None else ""
    fig.update_layout(
        template=PAPER, title=f"Screen against generation {note}".strip(), xaxis_title=screen.replace("_", " "), yaxis_title="repair rate (discovery)"
    )
    return captioned(
        fig,
        f"Each generated block's screen score ({SCREEN_NAMES.get(screen, screen)}) against its repair rate on the discovery half; "
        "labels are block numbers" + (f"; {note} over every generated block." if note else "."),
    )


def realized_vs_reachable(results: AuditResult | Sequence[AuditResult]) -> go.Figure:
    """Per probe: realized accuracy, the reachable ceiling (oracle) and every answer-blind
    selector, with 95% Wilson intervals; one panel per audit (model / task)."""
    results = list(results) if isinstance(results, (list, tuple)) else [results]  # type: ignore[list-item]  # one AuditResult
    one = len(results) == 1
    fig = make_subplots(
        rows=1, cols=len(results), shared_yaxes=True, subplot_titles=None if one else [f"{r.info.model} / {r.info.task}" for r in results]
    )
    measured = {
        "realized": ("realized (greedy)", OKABE_ITO[0]),
        "reachable": ("reachable (oracle)", OKABE_ITO[1]),
        "chance": ("chance (permuted golds)", "#bbbbbb"),
    }
    blind = {s: (f"blind: {s}", OKABE_ITO[2 + i]) for i, s in enumerate(("majority", "logprob", "entropy", "reward"))}
    for col, result in enumerate(results, start=1):
        summaries = result.probe_summaries()
        short = probe_labels([s.probe for s in summaries])
        for key, (name, colour) in {**measured, **blind}.items():
            points = [(short.get(s.probe, s.probe), s.selectors.get(key) if key in blind else getattr(s, key)) for s in summaries]
            shown = [(label, e) for label, e in points if e is not None and not e.is_empty]
            if not shown:
                continue
            fig.add_bar(
                x=[label for label, _ in shown],
                y=[e.value for _, e in shown],
                name=name,
                marker_color=colour,
                legendgroup=key,
                showlegend=col == 1,
                row=1,
                col=col,
                error_y=dict(
                    type="data",
                    symmetric=False,
                    array=[e.high - e.value for _, e in shown],
                    arrayminus=[e.value - e.low for _, e in shown],
                    thickness=1.2,
                    width=3,
                ),
            )
    fig.update_yaxes(range=[0, 1.05], title_text="accuracy", row=1, col=1)
    fig.update_xaxes(title_text="probe", row=1, col=1)
    head = "Realized versus reachable" + (f"<br>{results[0].info.model} / {results[0].info.task}" if one else "")
    fig.update_layout(template=PAPER, barmode="group", title=head)
    return captioned(
        fig,
        "Per probe at its budget k: realized accuracy (the greedy default deployment), the reachable ceiling (one of the "
        "probe's own k tries is correct; the greedy default is not one of them, so reachable can fall below realized), its "
        "chance level (the same tries scored against other questions' gold answers) and each answer-blind selector's "
        "accuracy, with 95% Wilson intervals.",
    )


def pass_at_k(result: AuditResult, probes: Sequence[str] | None = None, k: int | None = None) -> go.Figure:
    """pass@k for k = 1..budget per probe, with 95% Wilson bands; realized accuracy dashed;
    integer ticks; ``k`` draws a marker at that budget."""
    fig = go.Figure()
    budget = 1
    for i, probe in enumerate(probes or result.probes):
        curve = result.pass_at_k(probe)
        if curve.empty:
            continue
        budget = max(budget, int(curve.k.max()))
        color = OKABE_ITO[i % 8]
        fig.add_scatter(
            x=list(curve.k) + list(curve.k[::-1]),
            y=list(curve.high) + list(curve.low[::-1]),
            mode="lines",
            fill="toself",
            line=dict(width=0),
            fillcolor=color,
            opacity=0.18,
            showlegend=False,
            hoverinfo="skip",
        )
        fig.add_scatter(x=curve.k, y=curve.pass_at_k, mode="lines+markers", name=probe.split(",")[0], line=dict(color=color))
    realized = float(result.questions.loc[result.questions["has_default"], "realized"].mean()) if result.questions["has_default"].any() else 0.0
    # a legend entry, not a label that can sit on a curve
    fig.add_scatter(
        x=[0.7, budget + 0.3], y=[realized, realized], mode="lines", name=f"realized {realized:.2f}", line=dict(color="#444", dash="dash")
    )
    if k is not None:
        fig.add_vline(x=k, line_dash="dot", line_color=OKABE_ITO[3])
    fig.update_layout(
        template=PAPER,
        title="pass@k (unbiased estimator)",
        yaxis_title="pass@k",
        yaxis_range=[0, 1.05],
        xaxis=dict(title="k", tickmode="linear", tick0=1, dtick=max(1, -(-budget // 10)), range=[0.7, budget + 0.3]),
    )
    return captioned(
        fig,
        "pass@k (the unbiased estimator) for k = 1 to each probe's budget, with 95% Wilson bands; dashed: realized accuracy "
        "of the greedy default" + (f"; dotted: k = {k}." if k is not None else "."),
    )


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
    # attention and MLP take colours of their own (blue and vermillion mean repair and break elsewhere)
    for comp, colour in (("attn", OKABE_ITO[2]), ("mlp", OKABE_ITO[4])):
        part = mean[mean.component == comp]
        fig.add_bar(
            x=part.layer,
            y=part["mean"],
            name=COMPONENT_NAMES[comp],
            marker_color=colour,
            error_y=dict(type="data", array=part["sem"].fillna(0).tolist(), thickness=1.2, width=3) if question_id is None else None,
        )
    if bottleneck is not None:  # named in the legend, not as text over the bars
        fig.add_vline(x=bottleneck, line_dash="dot", line_color="#444")
        fig.add_scatter(x=[None], y=[None], mode="lines", name=f"bottleneck ({bottleneck})", line=dict(color="#444", dash="dot"))
    n = df.question_id.nunique()
    scope = f"question {question_id}" if question_id else f"mean over {n} questions; error bars ±1 standard error of the mean"
    fig.update_layout(
        template=PAPER,
        barmode="group",
        title=dict(text=f"Direct logit attribution to logit[gold] − logit[default]<br><sup>{scope}</sup>"),
        xaxis=dict(title="block (layer)", **_layer_ticks(int(df.layer.max()) + 1)),
        yaxis_title="contribution",
    )
    return captioned(
        fig,
        f"Direct logit attribution: each block's attention and MLP output projected onto logit[gold] − logit[default answer], {scope}"
        + (f"; dotted: the bottleneck, block {bottleneck}." if bottleneck is not None else "."),
    )


def route_diagram(routes: Sequence[Route | str], labels: Sequence[str] | None = None) -> go.Figure:
    """Which blocks each route skips (-1) or repeats (+1 per extra visit); RdBu centred at zero."""
    parsed = [r if isinstance(r, Route) else Route.parse(r) for r in routes]
    if not parsed:
        raise RnrLensError("no routes to draw")
    n = parsed[0].n_layers
    z = [[r.layers.count(i) - 1 for i in range(n)] for r in parsed]
    names = list(labels) if labels is not None else [str(r) for r in parsed]
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=list(range(n)),
            y=names,
            colorscale=SIGNED,
            zmid=0,
            zmin=-2,
            zmax=2,
            xgap=1,
            ygap=1,
            showscale=False,
        )
    )
    for value, name in ((-1, "skipped"), (0, "kept"), (1, "repeated")):  # categories: a discrete legend
        fig.add_scatter(
            x=[None],
            y=[None],
            mode="markers",
            name=name,
            marker=dict(symbol="square", size=10, color=_signed_colour(value, 2), line=dict(color="#888", width=0.5)),
        )
    fig.update_layout(
        template=PAPER,
        title="Routes: skipped and repeated blocks",
        xaxis_title="block",
        height=max(250, 28 * len(parsed) + 120),
        yaxis=dict(autorange="reversed"),
        legend=dict(orientation="h", x=0, y=-0.3),
    )
    return captioned(fig, "Each route (row) over the blocks (columns): skipped (red), kept (white) or repeated (blue; darker: more visits).")


def comparison(result: Comparison, probe: str | None = None) -> go.Figure:
    """Left: delta realized and delta reachable per probe (b - a, paired 95% intervals).
    Right: the transition counts between realized / reachable only / unreachable for one probe."""
    from rnr_lens.comparison import STATES

    probe = probe or result.a.probes[0]
    # stacked, not side by side: the transition grid's row labels need the width a column has
    fig = make_subplots(
        rows=2, cols=1, row_heights=[0.5, 0.5], vertical_spacing=0.3, subplot_titles=["change, b − a", f"transitions ({probe.split(',')[0]})"]
    )
    labels = [p.split(",")[0] for p in result.deltas.probe]
    for i, (key, name) in enumerate((("delta_realized", "delta realized"), ("delta_reachable", "delta reachable"))):
        est = result.deltas[key]
        fig.add_bar(
            x=labels,
            y=[e.value for e in est],
            name=name,
            marker_color=OKABE_ITO[i],
            row=1,
            col=1,
            error_y=dict(
                type="data", symmetric=False, array=[e.high - e.value for e in est], arrayminus=[e.value - e.low for e in est], thickness=1.2, width=3
            ),
        )
    counts = result.transition_counts(probe)
    fig.add_heatmap(
        z=counts.values,
        x=[f"b: {s}" for s in STATES],
        y=[f"a: {s}" for s in STATES],
        colorscale="Blues",
        text=counts.values,
        texttemplate="%{text}",
        showscale=False,
        row=2,
        col=1,
    )
    fig.update_yaxes(autorange="reversed", row=2, col=1)
    fig.update_layout(template=PAPER, barmode="group", title=f"{result.b.info.model} against {result.a.info.model}", height=620)
    return captioned(
        fig,
        f"Top: the change from audit a ({result.a.info.model}) to b ({result.b.info.model}) in realized accuracy and in reachability "
        "per probe, over the questions complete in both, with paired 95% intervals. Bottom: how many questions move between "
        "realized, reachable only and unreachable.",
    )


def reward_curve(history: Sequence[dict], window: int = 5) -> go.Figure:
    """Training rollouts per step (:func:`rnr_lens.training.train`'s history): mean reward and
    share correct, raw (thin) and as a trailing ``window``-step mean (thick); kept groups of
    dynamic sampling on a second panel."""
    if not history:
        raise RnrLensError("the training history is empty; train for at least one step")
    df = pd.DataFrame(list(history))
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.7, 0.3], vertical_spacing=0.08)
    for col, name, colour in (("reward", "reward", OKABE_ITO[0]), ("accuracy", "share correct", OKABE_ITO[2])):
        smooth = df[col].rolling(window, min_periods=1).mean()
        fig.add_scatter(
            x=df["step"],
            y=df[col],
            mode="lines",
            line=dict(color=colour, width=1),
            opacity=0.35,
            name=name,
            legendgroup=col,
            showlegend=False,
            row=1,
            col=1,
        )
        fig.add_scatter(
            x=df["step"],
            y=smooth,
            mode="lines",
            line=dict(color=colour, width=2.5),
            name=f"{name} ({window}-step mean)",
            legendgroup=col,
            row=1,
            col=1,
        )
    fig.add_bar(x=df["step"], y=df["groups_kept"], name="groups kept", marker_color=OKABE_ITO[1], row=2, col=1)
    fig.add_scatter(x=df["step"], y=df["groups_sampled"], mode="markers", name="groups sampled", marker=dict(color="#444", size=5), row=2, col=1)
    fig.update_yaxes(title_text="training rollouts", row=1, col=1)
    fig.update_yaxes(title_text="groups", row=2, col=1)
    fig.update_xaxes(title_text="step", row=2, col=1)
    fig.update_layout(template=PAPER, title="RL fine-tune (DAPO): reward curve", height=480)
    return captioned(
        fig,
        f"Training rollouts per step of the DAPO fine-tune: mean reward (and its {window}-step mean) and accuracy above; "
        "below, the groups sampled and the groups kept (those whose rollouts disagree, so they carry a gradient).",
    )


SIZES: dict[str, tuple[float, float]] = {"column": (3.5, 2.8), "full": (7.0, 3.6)}
"""Print sizes in inches: a paper's single column and its full text width."""
MIN_FONT_PT = 8.0
_PX_PER_PT = 4 / 3  # Chromium lays pages out at 96 px per inch, 72 pt per inch


def print_layout(
    fig: go.Figure, size: str | tuple[float, float], *, min_font_pt: float = MIN_FONT_PT, title: bool = False
) -> tuple[go.Figure, int, int]:
    """A copy of ``fig`` laid out for print at ``size`` (a name in :data:`SIZES` or
    ``(width, height)`` in inches), every font at least ``min_font_pt`` points at that size.
    The in-figure title is dropped unless ``title``: a paper gives the figure a caption
    (:func:`caption`) instead.

    Returns the figure and its width and height in CSS pixels (at scale 1, one pixel is 0.75 pt).
    """
    if isinstance(size, str):
        if size not in SIZES:
            raise RnrLensError(f"unknown figure size {size!r}; use one of {', '.join(SIZES)} or (width, height) in inches")
        size = SIZES[size]
    width_in, height_in = size
    # taller figures (several panels) keep their aspect ratio within the preset's width
    natural = (fig.layout.height or 450) / (fig.layout.width or 700)
    height_in = max(height_in, min(width_in * natural, 9.0))
    width, height = round(width_in * 72 * _PX_PER_PT), round(height_in * 72 * _PX_PER_PT)
    # 12 px = 9 pt nominal: a capital-to-descender glyph box of 8.5 pt, so text measures >= 8 pt
    base = max(12, math.ceil(min_font_pt * _PX_PER_PT / 0.94))
    out = go.Figure(fig)
    if not title:
        out.update_layout(title_text="")
    # plotly never wraps text: break long titles at spaces to the width they have
    chars = int(width / (0.56 * base))
    if out.layout.title and out.layout.title.text:
        out.layout.title.text = _wrap(out.layout.title.text, int(chars / 1.2))
    for axis in [a for a in out.layout if a.startswith(("xaxis", "yaxis"))]:
        ax = out.layout[axis]
        if ax.title and ax.title.text:
            ax.title.text = _wrap(ax.title.text, chars if axis.startswith("x") else int(height / (0.56 * base)))
    # room, top down: the title's lines; at the bottom, tick labels, the x-axis title, then the legend
    # in rows under everything (a column has no room beside the plot, and plotly's automargin does
    # not stack the legend below the axis title, so we do)
    title_lines = str(out.layout.title.text or "").count("<br>") + 1 if out.layout.title and out.layout.title.text else 0
    bottom_axis = out.layout[
        min((a for a in out.layout if a.startswith("xaxis")), key=lambda a: out.layout[a].domain[0] if out.layout[a].domain else 0, default="xaxis")
    ]
    x_title_lines = str(bottom_axis.title.text).count("<br>") + 1 if bottom_axis.title and bottom_axis.title.text else 0
    legend_h = _legend_rows(out, width, base) * round(1.7 * base)
    top = round(1.35 * (base + 2) * title_lines) + 16
    if any(a.yref == "paper" and a.y is not None and a.y >= 0.99 and a.yanchor == "bottom" for a in out.layout.annotations):
        top += round(1.5 * base)  # a subplot title sits above the top panel
    bottom = round(1.6 * base + 1.3 * base * x_title_lines + legend_h + 8)
    height += legend_h + round(1.3 * base * max(0, x_title_lines - 1))  # the plot keeps its share of the preset
    # plotly anchors a multi-line title by its last line: shift by the lines above it
    title_y = 1 - (6 + 1.3 * (base + 2) * max(0, title_lines - 1)) / height
    out.update_layout(
        font=dict(size=base),
        title=dict(font=dict(size=base + 2), x=0.01, xanchor="left", y=title_y, yref="container", yanchor="top"),
        legend=dict(font=dict(size=base), orientation="h", x=0, xanchor="left", y=0, yref="container", yanchor="bottom"),
        margin=dict(l=10, r=10, t=top, b=bottom),
        width=width,
        height=height,
    )
    out.update_xaxes(automargin=True, tickfont=dict(size=base), title=dict(font=dict(size=base)))
    out.update_yaxes(automargin=True, tickfont=dict(size=base), title=dict(font=dict(size=base)))
    for note in out.layout.annotations:  # subplot titles and labels: the base size, no larger than the title
        note.update(font=dict(size=base))
    for trace in out.data:
        if getattr(trace, "textfont", None) is not None and trace.type in ("bar", "scatter", "heatmap"):
            trace.update(textfont=dict(size=base))
        if trace.type == "heatmap":
            trace.update(colorbar=dict(tickfont=dict(size=base), title=dict(font=dict(size=base))))
    return out, width, height


def _legend_rows(fig: go.Figure, width: int, base: int) -> int:
    """How many rows a horizontal legend of ``fig`` takes at ``width`` pixels (an estimate)."""
    names = [t.name for t in fig.data if t.name and t.showlegend is not False and fig.layout.showlegend is not False]
    if not names or (len(names) == 1 and fig.layout.showlegend is None):
        return 0
    rows, used = 1, 0.0
    for name in dict.fromkeys(names):
        item = 0.56 * base * len(name) + 45
        if used and used + item > width - 20:
            rows, used = rows + 1, 0.0
        used += item
    return rows


def _wrap(text: str, width: int) -> str:
    """Insert ``<br>`` at spaces so no line of ``text`` is much longer than ``width`` characters."""
    out = []
    for line in str(text).split("<br>"):
        words, current = line.split(" "), ""
        for word in words:
            if current and len(current) + 1 + len(word) > max(12, width):
                out.append(current)
                current = word
            else:
                current = f"{current} {word}" if current else word
        out.append(current)
    return "<br>".join(out)


_KALEIDO_STARTED = False


def _kaleido_server() -> None:
    """Start kaleido's Chromium once per process (5-7 s a figure without it, 0.5 s with)."""
    global _KALEIDO_STARTED
    if _KALEIDO_STARTED:
        return
    try:
        import atexit

        import kaleido

        kaleido.start_sync_server(silence_warnings=True)
        atexit.register(kaleido.stop_sync_server, silence_warnings=True)
    except Exception:  # an older kaleido: every write_image starts its own Chromium, as before
        pass
    _KALEIDO_STARTED = True


def _pdf_metadata(path: str, title: str) -> None:
    """Replace kaleido's PDF metadata (title "Kaleido-fier") with the figure's own."""
    from importlib.metadata import version

    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(path))
    writer.add_metadata({"/Title": title, "/Creator": f"rnr_lens {version('rnr-lens')} (plotly, kaleido)", "/Producer": "rnr_lens"})
    with open(path, "wb") as f:
        writer.write(f)


def _figure_title(fig: go.Figure, path: Path) -> str:
    text = fig.layout.title.text if fig.layout.title and fig.layout.title.text else path.stem.replace("_", " ")
    return text.split("<br>")[0].replace("<sup>", "").replace("</sup>", "")


def save(
    fig: go.Figure,
    path: str | Path,
    *,
    size: str | tuple[float, float] | None = None,
    width: int = 800,
    height: int | None = None,
    scale: float | None = None,
    title: bool | None = None,
) -> Path:
    """Write ``fig`` as PDF, SVG, PNG (kaleido + system Chromium) or standalone HTML, atomically,
    with the usual file permissions (0644 under a 022 umask) and, for PDF, the figure's title
    as the document title.

    Args:
        fig: The figure.
        path: Where to write; the suffix picks the format.
        size: A print preset, ``"column"`` (3.5 in wide) or ``"full"`` (7 in), or
            ``(width, height)`` in inches: the figure is laid out at that size with every font at
            least 8 pt when printed there (PDF and SVG at scale 1, PNG at 300 dpi).
        width, height, scale: Screen sizes in pixels, used without ``size``.
        title: Keep the in-figure title (default: on screen, yes; at a print ``size``, no, since
            a paper captions its figures: :func:`caption` gives the text).

    Example:
        >>> save(repair_break(sweep), "bottleneck.pdf", size="column")  # doctest: +SKIP
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".pdf", ".svg", ".png", ".html"):
        raise RnrLensError(f"cannot save a figure as {suffix or 'a file without extension'}; use .pdf, .svg, .png or .html")
    if not path.parent.exists():
        raise RnrLensError(f"folder {path.parent} does not exist")
    document_title = _figure_title(fig, path)
    if size is not None:
        fig, width, height = print_layout(fig, size, title=bool(title))
        scale = scale or (300 / 96 if suffix == ".png" else 1.0)
    scale = scale or 2.0
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=suffix, dir=path.parent)
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; a figure is for sharing
    try:
        if suffix == ".html":
            fig.write_html(tmp, include_plotlyjs=True, full_html=True)
        else:
            _kaleido_server()
            try:
                with warnings.catch_warnings():  # plotly warns that the server ignores per-call Chromium options
                    warnings.filterwarnings("ignore", message="The kopts argument is ignored")
                    fig.write_image(tmp, width=width, height=height or fig.layout.height or 500, scale=scale)
            except Exception as exc:
                raise RnrLensError(
                    f"could not export {suffix} ({type(exc).__name__}: {str(exc).splitlines()[0][:150]}); "
                    "install kaleido>=1 and Chromium (Debian: apt-get install chromium; or bash scripts/dev-setup)"
                ) from exc
            if suffix == ".pdf":
                _pdf_metadata(tmp, document_title)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path
