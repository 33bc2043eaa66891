"""Figures for papers and notebooks: each function returns a plotly ``go.Figure``.

Signed effects use RdBu centred at zero; categorical colours come from the Okabe-Ito palette
(safe for colour-blind readers). :func:`~rnr_lens.present.viz_export.save` (``viz.save``) writes PDF, SVG
or PNG (kaleido with the system Chromium) or standalone HTML at print sizes. Figures read result
objects only; they never load a model.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from plotly.colors import sample_colorscale
from plotly.subplots import make_subplots

from rnr_lens.core.ablation_methods import ablation_method
from rnr_lens.core.display import selector_column
from rnr_lens.core.stats import Estimate
from rnr_lens.errors import RnrLensError
from rnr_lens.judge.sweeps import BlockRates, Bottleneck
from rnr_lens.measure.probe_specs import budget_label
from rnr_lens.measure.selectors import ANSWER_BLIND
from rnr_lens.model.routes import Route
from rnr_lens.present.viz_export import MIN_FONT_PT as MIN_FONT_PT  # re-exported: viz.save is the call users know
from rnr_lens.present.viz_export import SIZES as SIZES
from rnr_lens.present.viz_export import print_layout as print_layout
from rnr_lens.present.viz_export import save as save
from rnr_lens.trained_pair.comparison import STATES

if TYPE_CHECKING:
    from torch import Tensor

    from rnr_lens.bottleneck.sweep_results import SweepResult
    from rnr_lens.judge.ceiling import Ceiling
    from rnr_lens.measure.results import AuditResult
    from rnr_lens.model.route_trace import RouteTrace
    from rnr_lens.trained_pair.comparison import Comparison

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


def _errors(estimates: Sequence[Estimate]) -> dict:
    """Asymmetric error bars from each bar's interval."""
    return dict(
        type="data",
        symmetric=False,
        array=[e.high - e.value for e in estimates],
        arrayminus=[e.value - e.low for e in estimates],
        thickness=1.2,
        width=3,
    )


COMPONENT_NAMES = {"mlp": "MLP", "attn": "attention", "block": "whole block"}
SCREEN_NAMES = {"screen_logprob": "screen: Δ log p(gold)", "screen_atp": "screen: attribution patching"}
SCREEN_AXES = {"screen_logprob": "Δ log p(gold), nats", "screen_atp": "est. Δ log p(gold), nats"}
"""Each screen's quantity and unit, as its axis reads: the change in the gold answer's mean
log-probability (natural log) when the block is silenced, measured or estimated to first order."""


def _past(method: str) -> str:
    """The word a figure uses for an ablation method ("zeroed"); the name itself for a method
    this process has not registered (a stored sweep read without its plug-in)."""
    try:
        return ablation_method(method).past
    except RnrLensError:
        return method


def _layer_ticks(n_layers: int) -> dict:
    """Integer ticks over every block: each one up to 16 blocks, else every fifth."""
    return dict(tickmode="linear", tick0=0, dtick=1 if n_layers <= 16 else 5, range=[-0.6, n_layers - 0.4])


def _add_block_panels(fig: go.Figure, g: int, comp: str, method: str, df: pd.DataFrame, screen: str, b: Bottleneck | None, n_layers: int) -> None:
    """Group ``g``'s two panels of :func:`repair_break` (one component and method): the screen
    score of every block above; below, the generated blocks' repair and break rates with their
    intervals, the blocks only screened as hollow marks, and the bottleneck shaded."""
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
    got = [r for r in map(BlockRates.from_row, done.to_dict("records")) if r is not None]
    for key, name, colour in (("repair", "repair", OKABE_ITO[0]), ("break", "break", OKABE_ITO[3])):
        if done.empty:
            continue
        estimates = [r.estimate(key) for r in got]
        counts = [f"{r.n_repaired if key == 'repair' else r.n_broken}/{e.n}" for r, e in zip(got, estimates)]
        fig.add_bar(
            x=done["layer"],
            y=done[key],
            error_y=_errors(estimates),
            name=name,
            marker_color=colour,
            legendgroup=key,
            showlegend=g == 0,
            row=bottom,
            col=1,
            customdata=[(c, e.low, e.high) for c, e in zip(counts, estimates)],
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
    fig.update_yaxes(title_text=SCREEN_AXES.get(screen, screen), row=top, col=1)
    fig.update_yaxes(range=[0, 1.05], title_text="share of its set", row=bottom, col=1)
    fig.update_xaxes(**_layer_ticks(n_layers), row=top, col=1)
    fig.update_xaxes(**_layer_ticks(n_layers), row=bottom, col=1)


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
    subtitles = [x for (comp, method), _ in groups for x in (f"{COMPONENT_NAMES.get(comp, comp)}, {_past(method)}", "")] if many else None
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
        _add_block_panels(fig, g, str(comp), str(method), df, screen, b, n_layers)
    fig.update_xaxes(title_text="block (layer)", row=2 * len(groups), col=1)
    (comp, method), _ = groups[0]
    default = (
        "Silencing one block's component: repair and break" if many else f"Silencing one {COMPONENT_NAMES.get(comp, comp)} block ({_past(method)})"
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
        f"Silencing one block at a time ({', '.join(f'{COMPONENT_NAMES.get(c, c)}, {_past(k)}' for (c, k), _ in groups)}). "
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
    # rotated labels take about 7 px per character at 11 px; the legend sits in the margin below
    # them (container coordinates), so it never covers a label
    labels_px = 7 * max(len(str(q)) for q in order.question_id) if show_labels else 0
    fig.update_layout(
        template=PAPER,
        title=dict(text=f"Repairs and breaks per question ({COMPONENT_NAMES.get(component, component)}, {_past(method)})", y=0.97),
        xaxis=dict(
            title="question",
            tickmode="array",
            tickvals=list(range(len(order))),
            ticktext=list(order.question_id) if show_labels else None,
            showticklabels=show_labels,
            tickangle=-90,
            tickfont=dict(size=11),
        ),
        yaxis=dict(title="block (evaluated)", type="category"),
        margin=dict(t=90, b=labels_px + 90),
        height=max(300, 28 * len(layers) + labels_px + 190),
        legend=dict(orientation="h", x=0, xanchor="left", yref="container", y=0.01, yanchor="bottom"),
    )
    return captioned(
        fig,
        f"Per question (columns) and generated block (rows), what silencing that block's {COMPONENT_NAMES.get(component, component)} "
        f"({_past(method)}) does: repaired (a failure answered right), broken (a realized control question answered "
        "wrong) or unchanged. Failure-set questions first, then the control set.",
    )


def _signed_colour(value: int, bound: int = 1) -> str:
    """The colour the signed scale from ``-bound`` to ``bound`` gives ``value`` (so a legend
    matches the cells)."""
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
            name=f"{COMPONENT_NAMES.get(comp, comp)} ({_past(method)})",
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


def _panel_titles(results: Sequence[AuditResult]) -> tuple[list[str], str]:
    """Short panel titles for one panel per audit, naming only what differs between them (the
    task, the model, or both on two lines), and what they share, for the figure's title: full
    "model / task" titles over six panels ran into each other at a paper's width."""
    models = [Path(str(r.info.model)).name for r in results]
    tasks = [Path(str(r.info.task)).name for r in results]
    if len(set(models)) == 1 and len(set(tasks)) == 1:
        return tasks, f"{models[0]} / {tasks[0]}"
    if len(set(models)) == 1:
        return tasks, models[0]
    if len(set(tasks)) == 1:
        return models, tasks[0]
    return [f"{m}<br>{t}" for m, t in zip(models, tasks, strict=True)], ""


def realized_vs_reachable(results: AuditResult | Sequence[AuditResult]) -> go.Figure:
    """Per probe: realized accuracy, the reachable ceiling (oracle) and every answer-blind
    selector, with 95% Wilson intervals; one panel per audit (model / task)."""
    results = list(results) if isinstance(results, (list, tuple)) else [results]  # type: ignore[list-item]  # one AuditResult
    one = len(results) == 1
    titles, common = _panel_titles(results)
    fig = make_subplots(rows=1, cols=len(results), shared_yaxes=True, subplot_titles=None if one else titles)
    measured = {
        "realized": ("realized (greedy)", OKABE_ITO[0]),
        "reachable": ("reachable (oracle)", OKABE_ITO[1]),
        "chance": ("chance (permuted golds)", "#bbbbbb"),
    }
    # yellow (OKABE_ITO[6]) reads poorly as a bar on white: the fifth selector takes black
    blind = {s: (selector_column(s), OKABE_ITO[i]) for s, i in zip((*ANSWER_BLIND, "reward"), (2, 3, 4, 5, 7), strict=True)}
    for col, result in enumerate(results, start=1):
        summaries = result.probe_summaries()
        short = result.labels
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
    head = "Realized versus reachable" + (f"<br>{common}" if common else "")
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
        _band(fig, list(curve.k), list(curve.low), list(curve.high), color, opacity=0.18)
        fig.add_scatter(x=curve.k, y=curve.pass_at_k, mode="lines+markers", name=budget_label(result.probe_name(probe)), line=dict(color=color))
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


def _band(fig: go.Figure, ks: list[int], low: list[float], high: list[float], colour: str, row: int | None = None, opacity: float = 0.2) -> None:
    """A filled 95% band under a curve (no legend entry, no hover), in panel ``row`` of a
    one-column grid of panels (None: a figure of one panel)."""
    where = {} if row is None else {"row": row, "col": 1}
    fig.add_scatter(
        x=ks + ks[::-1],
        y=high + low[::-1],
        mode="lines",
        fill="toself",
        line=dict(width=0),
        fillcolor=colour,
        opacity=opacity,
        showlegend=False,
        hoverinfo="skip",
        **where,
    )


def ceiling_curves(c: Ceiling, trained: str | None = None) -> go.Figure:
    """Claim 3 at large k (:func:`rnr_lens.trained_pair.comparison.compare_ceiling`): above, the base and
    trained pass@k curves with 95% Wilson bands over log-scaled k; below, their paired
    difference (trained - base) with its 95% score band and the zero line; the point crossing
    marked with its bootstrap interval shaded, and the k's with a verdict ticked. ``trained``
    names the trained curve in the legend (default: the model's own name; checkpoints of one
    recipe share it, so a grid passes its run label).

    Example:
        >>> fig = ceiling_curves(compare_ceiling(base, trained, "sampling:k=128,t=0.7,draw=inverse-cdf"))  # doctest: +SKIP
    """
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.62, 0.38], vertical_spacing=0.07)
    ks = [p.k for p in c.curve]
    for side, name, colour in (("base", c.base, OKABE_ITO[0]), ("trained", trained or c.trained, OKABE_ITO[3])):
        est = [getattr(p, side) for p in c.curve]
        _band(fig, ks, [e.low for e in est], [e.high for e in est], colour, 1)
        fig.add_scatter(
            x=ks,
            y=[e.value for e in est],
            mode="lines",
            name=f"{side}: {name}",
            line=dict(color=colour, width=2),
            hovertemplate=f"{side} pass@%{{x}} = %{{y:.3f}}<extra></extra>",
            row=1,
            col=1,
        )
        chance = [getattr(p, f"{side}_chance") for p in c.curve]
        if not all(e.is_empty for e in chance):  # rules 3: each curve beside what guessing alone gives
            fig.add_scatter(
                x=ks,
                y=[e.value for e in chance],
                mode="lines",
                name=f"{side}: chance",
                line=dict(color=colour, width=1.5, dash="dot"),
                hovertemplate=f"{side} chance pass@%{{x}} = %{{y:.3f}}<extra></extra>",
                row=1,
                col=1,
            )
    diff = [p.difference for p in c.curve]
    _band(fig, ks, [e.low for e in diff], [e.high for e in diff], OKABE_ITO[2], 2)
    fig.add_scatter(
        x=ks,
        y=[e.value for e in diff],
        mode="lines",
        name="trained - base",
        line=dict(color=OKABE_ITO[2], width=2),
        hovertemplate="trained - base at k = %{x}: %{y:.3f}<extra></extra>",
        row=2,
        col=1,
    )
    fig.add_hline(y=0, line_color="#444", line_width=1, row=2, col=1)
    x = c.crossing
    # the crossing's bootstrap interval (None: too few prompts), also where the data never lead
    if x.point_interval is not None and (x.point is not None or x.lead is None):
        low, high = x.point_interval
        fig.add_vrect(x0=low or c.budget, x1=high or c.budget, fillcolor=OKABE_ITO[6], opacity=0.25, line_width=0, layer="below")
    if x.point is not None:
        fig.add_vline(x=x.point, line_dash="dash", line_color="#444")
        # named in the legend, never as text over the curves
        fig.add_scatter(x=[None], y=[None], mode="lines", line=dict(color="#444", dash="dash"), name=f"curves cross, k = {x.point}")
    tick = [k for k in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512) if k <= c.budget]
    fig.update_xaxes(type="log", tickvals=tick, ticktext=[str(k) for k in tick], range=[-0.03, math.log10(c.budget) + 0.03])
    fig.update_xaxes(title_text="k (samples per question, log scale)", row=2, col=1)
    fig.update_yaxes(title_text="pass@k", range=[0, 1.02], row=1, col=1)
    fig.update_yaxes(title_text="trained - base", row=2, col=1)
    fig.update_layout(template=PAPER, title=f"The ceiling at large k: {c.task}", height=520)
    verdicts = "; ".join(f"k = {k}: {v.verdict.status}" for k, v in c.verdicts)
    return captioned(
        fig,
        f"pass@k (the unbiased estimator from {c.budget} draws per question) of the base and trained models on the same "
        f"{c.questions} questions, with 95% Wilson bands; dotted: each model's chance pass@k, its draws scored against the "
        f"other questions' golds; below, the paired difference trained - base with its 95% score "
        f"band (pointwise at each k; resolved only where the sign-flip test, McNemar's exact test at k = K, agrees too); dashed: where the point estimates "
        f"cross, shaded: its bootstrap 95% interval over prompts. {x.text()[0].upper() + x.text()[1:]}. "
        + (f"{c.chance_text()[0].upper() + c.chance_text()[1:]}. " if c.chance_text() else "")
        + f"Claim 3 ({c.probe}): {verdicts}.",
    )


def attribution(dla: pd.DataFrame, question_id: str | None = None, bottleneck: int | None = None) -> go.Figure:
    """Per-layer attention and MLP contributions to logit[gold] - logit[default], for one
    question or averaged over all questions in ``dla`` (from
    :func:`rnr_lens.bottleneck.attribution.direct_logit_attribution`); the bottleneck layer is marked."""
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


def route_passes(traces: dict[str, RouteTrace], gold_logits: dict[str, Sequence[float] | Tensor], row: int = 0, position: int = -1) -> go.Figure:
    """Per route step, the residual stream's norm leaving the step (top) and the gold answer's
    logit read from it through the logit lens (bottom), one line per named route: the default
    route beside a chosen one. ``gold_logits[name]`` is that route's row of
    :func:`rnr_lens.model.route_trace.logit_lens`; hovering a point names the block the step ran.

    Example:
        >>> lens = {n: R.route_trace.logit_lens(model, t, gold)[0] for n, t in traces.items()}  # doctest: +SKIP
        >>> route_passes(traces, lens)  # doctest: +SKIP
    """
    if not traces or set(traces) != set(gold_logits):
        raise RnrLensError("give one trace and one row of gold logits per route, under the same names")
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08)
    longest = 1
    for i, (name, t) in enumerate(traces.items()):
        logits = [float(v) for v in gold_logits[name]]
        if len(logits) != len(t.route):
            raise RnrLensError(f"route {name!r} has {len(t.route)} steps but {len(logits)} gold logits; pass its row of logit_lens")
        steps, blocks = list(range(len(t.route))), [f"block {b}" for b in t.route.layers]
        longest = max(longest, len(steps))
        style = dict(color=OKABE_ITO[i % 8], dash="solid" if i == 0 else "dash")
        norms = t.norms(position)[row].tolist()
        fig.add_scatter(x=steps, y=norms, text=blocks, mode="lines+markers", name=name, line=style, legendgroup=name, row=1, col=1)
        fig.add_scatter(x=steps, y=logits, text=blocks, mode="lines+markers", name=name, line=style, legendgroup=name, showlegend=False, row=2, col=1)
    fig.update_traces(hovertemplate="step %{x}: %{text}<br>%{y:.3g}<extra>%{fullData.name}</extra>")
    fig.update_layout(template=PAPER, title="The residual stream along each route", legend=dict(orientation="h", x=0, y=-0.18))
    fig.update_yaxes(title_text="stream norm (L2)", row=1, col=1)
    fig.update_yaxes(title_text="gold logit (logit lens)", row=2, col=1)
    fig.update_xaxes(title_text="route step", tickmode="linear", tick0=0, dtick=1 if longest <= 16 else 5, row=2, col=1)
    return captioned(
        fig,
        "For each route (line), after each step (x: its position in the route; hover names the block it ran): the L2 norm of the "
        "residual stream at the answer position (top), and the gold answer's logit read from it through the model's final norm "
        "and unembedding, the logit lens (bottom; after the last step, the model's own logit). A skipped block has no step; a repeated one has one per pass.",
    )


def comparison(result: Comparison, probe: str | None = None) -> go.Figure:
    """Left: delta realized and delta reachable per probe (b - a, paired 95% intervals).
    Right: the transition counts between realized / reachable only / unreachable for one probe."""
    probe = probe or result.a.probes[0]
    # stacked, not side by side: the transition grid's row labels need the width a column has
    fig = make_subplots(
        rows=2, cols=1, row_heights=[0.5, 0.5], vertical_spacing=0.3, subplot_titles=["change, b − a", f"transitions ({budget_label(probe)})"]
    )
    labels = [budget_label(p) for p in result.deltas.probe]
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
    """Training rollouts per step (:func:`rnr_lens.trained_pair.training.train`'s history): mean reward and
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
