"""JupyterLab widgets (ipywidgets 8) over sweep and audit results; they never load a model.

- :func:`layer_explorer`: a block slider over the repair/break figure (the same blocks); the
  chosen block is highlighted, with its rates and the questions it repairs and breaks, each
  with its text and extracted answer before and after.
- :func:`audit_explorer`: choose a probe, a selector and k; the pass@k figure marks k, and the
  question table (filterable, sortable) shows each selector's pick among the first k tries.
- :func:`question_explorer`: the per-question drill-down: the default answer and every try of
  every probe, with its route or ablation, raw text, extracted answer and correctness.

Tables are HTML built in Python, so sorting and filtering are controls, not page scripts.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import ipywidgets as W
import pandas as pd
import plotly.graph_objects as go

from rnr_lens.core.display import html_table, selector_column
from rnr_lens.core.records import DEFAULT_PROBE
from rnr_lens.errors import RnrLensError
from rnr_lens.judge.sweeps import BlockRates
from rnr_lens.measure.selectors import ANSWER_BLIND
from rnr_lens.present import viz

if TYPE_CHECKING:
    from rnr_lens.bottleneck.sweep_results import SweepResult
    from rnr_lens.measure.results import AuditResult


def _table(rows: list[dict], columns: list[str]) -> str:
    """Rows as an HTML table, a flag as yes or no (as the question explorer writes it)."""
    return html_table([[_flag(r.get(c, "")) for c in columns] for r in rows], columns)


def _flag(value: Any) -> Any:
    return ("yes" if value else "no") if isinstance(value, bool) else value


def _read(answer: Any) -> str:
    """What the extractor read, or "no answer" (a table's missing value is NaN, not None)."""
    return "no answer" if answer is None or (isinstance(answer, float) and pd.isna(answer)) else str(answer)


def _answer(text: Any, answer: Any) -> str:
    """``'2 + 8, which is 10.' -> 10``: a generated text and what the extractor read from it."""
    return f"{str(text).strip()!r} -> {_read(answer)}"


def layer_summary_html(sweep: SweepResult, layer: int, component: str = "mlp", method: str = "zero") -> str:
    """The HTML the layer explorer shows for one block."""
    row = sweep.table[(sweep.table.layer == layer) & (sweep.table.component == component) & (sweep.table.method == method)]
    if row.empty or "repair" not in row or row["repair"].isna().all():
        screen = float(row["screen_logprob"].iloc[0]) if not row.empty else float("nan")
        return (
            f"<div class='rnr-layer' data-layer='{layer}'><b>block {layer}</b> ({component}, {method}): screened only, not "
            f"confirmed by generation; screen Δ log p(gold) = {screen:.3f}</div>"
        )
    got = BlockRates.from_row(row.iloc[0])
    assert got is not None, "a generated row (checked above)"
    d = sweep.details[(sweep.details.layer == layer) & (sweep.details.component == component) & (sweep.details.method == method)]
    repaired = d[(d.set != "control") & d.after_correct & ~d.before_correct]
    broken = d[(d.set == "control") & ~d.after_correct & d.before_correct]

    def rows(frame: pd.DataFrame) -> list[dict]:
        return [
            {
                "question": q.question_id,
                "prompt": q.prompt,
                "before: text -> answer": _answer(q.before_text, q.before_answer),
                "after: text -> answer": _answer(q.after_text, q.after_answer),
            }
            for q in frame.itertuples()
        ]

    cols = ["question", "prompt", "before: text -> answer", "after: text -> answer"]
    broke = (
        "break unmeasured (no realized question to break)"
        if got.break_all.is_empty
        else f"break {got.break_all.text()} ({got.n_broken}/{got.break_all.n})"
    )
    return (
        f"<div class='rnr-layer' data-layer='{layer}'><b>block {layer}</b> ({component}, {method}): "
        f"<span class='rnr-repair'>repair {got.repair.text()} ({got.n_repaired}/{got.repair.n})</span>, "
        f"<span class='rnr-break'>{broke}</span></div>"
        + (
            "<ul class='rnr-why'>" + "".join(f"<li>the bottleneck: {html.escape(line)}</li>" for line in b.why()) + "</ul>"
            if (b := sweep.bottleneck) is not None and (b.layer, b.component, b.method) == (layer, component, method)
            else ""
        )
        + f"<p>repaired ({len(repaired)})</p>{_table(rows(repaired), cols)}"
        f"<p>broken ({len(broken)})</p>{_table(rows(broken), cols)}"
    )


def _highlight(figure: go.FigureWidget, layer: int) -> None:
    """Shade the selected block in every panel of the repair/break figure."""
    keep = [s for s in figure.layout.shapes if getattr(s, "name", None) != "rnr-selected"]
    axes = sorted({t.xaxis for t in figure.data if getattr(t, "xaxis", None)}) or ["x"]
    picked = [
        go.layout.Shape(
            type="rect",
            xref=a,
            yref=f"{a.replace('x', 'y')} domain",
            x0=layer - 0.5,
            x1=layer + 0.5,
            y0=0,
            y1=1,
            line=dict(color="#222", width=1.5),
            fillcolor="rgba(0,0,0,0)",
            name="rnr-selected",
        )
        for a in axes
    ]
    figure.layout.shapes = tuple(keep) + tuple(picked)


def layer_explorer(sweep: SweepResult, component: str = "mlp", method: str = "zero") -> W.VBox:
    """A block slider (or a click on a bar) showing that block's repairs and breaks.

    The slider and the figure cover the same blocks (every block of the sweep); the selected
    one is outlined in the figure.
    """
    layers = sorted(int(x) for x in sweep.table[(sweep.table.component == component) & (sweep.table.method == method)].layer.unique())
    if not layers:
        raise RnrLensError(f"the sweep has no {component} ({method}) blocks to explore")
    start = sweep.bottleneck.layer if sweep.bottleneck and sweep.bottleneck.layer in layers else layers[0]
    slider = W.SelectionSlider(options=layers, value=start, description="block", continuous_update=False)
    figure = go.FigureWidget(viz.repair_break(sweep))
    info = W.HTML(layer_summary_html(sweep, start, component, method))
    _highlight(figure, start)

    def show(change: dict) -> None:
        info.value = layer_summary_html(sweep, int(change["new"]), component, method)
        _highlight(figure, int(change["new"]))

    slider.observe(show, names="value")

    def clicked(trace: object, points: object, state: object) -> None:
        if points.xs and int(points.xs[0]) in layers:  # type: ignore[attr-defined]  # plotly's Points has xs at runtime, not in its stubs
            slider.value = int(points.xs[0])  # type: ignore[attr-defined]  # as above

    for trace in figure.data:
        trace.on_click(clicked)
    return W.VBox([slider, figure, info])


def audit_explorer(result: AuditResult) -> W.VBox:
    """Probe, selector and k controls over an audit; the pass@k figure marks k and the
    question table shows the selector's pick among the first k tries (filter by text, sort
    by any column)."""
    if not result.probes:
        raise RnrLensError("the audit has no probes to explore")
    labels = result.labels
    probe = W.Dropdown(options=[(labels[p], p) for p in result.probes], description="probe")
    selector = W.Dropdown(options=[(selector_column(s), s) for s in ("oracle", *ANSWER_BLIND)], description="selector")
    k = W.IntSlider(value=1, min=1, max=max(1, result.budget(result.probes[0])), description="k", continuous_update=False)
    search = W.Text(placeholder="filter: id, prompt or gold", description="filter")
    sort = W.Dropdown(options=["question", "gold", "realized", "reached", "pick"], description="sort by")
    figure = go.FigureWidget(viz.pass_at_k(result, k=1))
    table = W.HTML()

    def refresh(*_: object) -> None:
        budget = max(1, result.budget(probe.value))
        k.max = budget
        k.value = min(k.value, budget)
        picks = result.selections(probe.value, k=k.value)
        mine = picks[picks.selector == selector.value].set_index("question_id")
        reached = set(picks[(picks.selector == "oracle") & picks.correct].question_id)
        needle = search.value.strip().lower()
        rows = []
        for q in result.questions.itertuples():
            if needle and needle not in f"{q.question_id} {q.prompt} {q.gold}".lower():
                continue
            pick = mine.loc[q.question_id] if q.question_id in mine.index else None
            rows.append(
                {
                    "question": q.question_id,
                    "prompt": q.prompt,
                    "gold": q.gold,
                    "realized": bool(q.realized),
                    "reached": q.question_id in reached,
                    "pick": "" if pick is None else _read(pick["extracted"]),
                    "pick correct": "" if pick is None else bool(pick["correct"]),
                }
            )
        key = sort.value
        rows.sort(key=lambda r: str(r[key]))  # values of mixed types (an answer may be missing) sort by their text
        share = sum(r["reached"] for r in rows) / max(1, len(rows))
        head = f"<p class='rnr-share'>reached within k={k.value}: {share:.2f} ({len(rows)} questions shown)</p>"
        columns = ["question", "prompt", "gold", "realized", "reached", "pick", "pick correct"]
        table.value = head + _table(rows, columns)
        with figure.batch_update():
            new = viz.pass_at_k(result, k=k.value)
            figure.layout.shapes = new.layout.shapes
            figure.layout.annotations = new.layout.annotations

    for control in (probe, selector, k, search, sort):
        control.observe(refresh, names="value")
    refresh()
    return W.VBox([W.HBox([probe, selector, k]), W.HBox([search, sort]), figure, table])


def question_html(result: AuditResult, question_id: str, probes: Sequence[str] | None = None) -> str:
    """The drill-down for one question: prompt, gold, the default answer and every try."""
    q = result.questions[result.questions.question_id == question_id]
    if q.empty:
        raise RnrLensError(f"audit {result.id[:12]} has no question {question_id!r}")
    q = q.iloc[0]
    labels = {DEFAULT_PROBE: DEFAULT_PROBE, **result.labels}
    wanted = [DEFAULT_PROBE, *(result.probe_name(p) for p in (probes if probes is not None else result.probes))]
    tries = result.tries[(result.tries.question_id == question_id) & result.tries.probe.isin(wanted)]
    rows = []
    for t in tries.sort_values(["probe", "try_index"], key=lambda c: c.map(wanted.index) if c.name == "probe" else c).itertuples():
        how = (
            t.route
            if isinstance(t.route, str)
            else t.ablation
            if isinstance(t.ablation, str)
            else f"seed {int(t.seed)}"
            if pd.notna(t.seed)
            else "greedy"
        )
        rows.append(
            [
                labels.get(t.probe, t.probe),
                int(t.try_index),
                how,
                str(t.text).strip(),
                _read(t.extracted),
                _flag(bool(t.correct)),
            ]
        )
    default = tries[tries.probe == DEFAULT_PROBE]
    realized = _flag(bool(q.realized)) if len(default) else "not yet run"
    shots = result.config.shots
    context = (
        ""
        if shots is None
        else f"<p class='rnr-shots'>asked after {html.escape(shots.label)}: "
        + "; ".join(html.escape(f"{asked} {answered}") for asked, answered in result.config.worked(str(q.prompt)))
        + "</p>"
    )
    return (
        f"<div class='rnr-question' data-question='{html.escape(question_id)}'>"
        f"<p><b>{html.escape(question_id)}</b>: {html.escape(str(q.prompt))}</p>{context}"
        f"<p>gold <b class='rnr-gold'>{html.escape(str(q.gold))}</b>; default answer <span class='rnr-default'>"
        f"{html.escape(_answer(q.default_text, q.default_extracted) if isinstance(q.default_text, str) else '-')}</span>; realized {realized}</p>"
        + html_table(rows, ["probe", "try", "route / ablation / seed", "text", "extracted", "correct"])
        + "</div>"
    )


def question_explorer(result: AuditResult) -> W.VBox:
    """Pick a question (and optionally one probe): its default answer and every try, each with
    its route or ablation, the raw text, the extracted answer and whether it is correct."""
    if result.questions.empty:
        raise RnrLensError("the audit holds no questions yet")
    labels = result.labels
    options = [(f"{q.question_id}: {str(q.prompt)[:50]}", q.question_id) for q in result.questions.itertuples()]
    question = W.Dropdown(options=options, description="question", layout=W.Layout(width="60%"))
    probe = W.Dropdown(options=[("all probes", None)] + [(labels[p], p) for p in result.probes], description="probe")
    view = W.HTML()

    def refresh(*_: object) -> None:
        view.value = question_html(result, question.value, None if probe.value is None else [probe.value])

    question.observe(refresh, names="value")
    probe.observe(refresh, names="value")
    refresh()
    return W.VBox([W.HBox([question, probe]), view])
