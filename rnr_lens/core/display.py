"""How results read as text: short probe labels, compact estimates, plain HTML tables.

One vocabulary for every view of a result (the CLI's tables, notebooks' ``_repr_html_``,
widgets, figure axes): a probe is shown by its family (``sampling``, numbered where a family
repeats) with its full spec listed once beside the table, and an estimate as
``0.58 [0.33,0.83]`` on one line.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from rnr_lens.core.stats import Estimate

SELECTOR_COLUMN = "select:"
"""Prefix of an answer-blind or oracle selector's column, in every table and legend."""


def selector_column(name: str) -> str:
    """The one label of selector ``name``'s column, legend entry and widget choice:
    ``select:majority``."""
    return SELECTOR_COLUMN + name


def progress_bar(show: bool, total: int, desc: str, unit: str, initial: int = 0) -> Any:
    """A tqdm bar of ``total`` ``unit``s (imported only when shown), or None when ``show`` is
    false: the bar of an audit, its shards, a training run and each mining stage (generation's
    own bar iterates its batches)."""
    if not show:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, desc=desc, unit=unit)


def short_text(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters with an ellipsis (progress bars stay on one line)."""
    return text if len(text) <= width else text[: width - 1] + "…"


def estimate_text(e: Estimate | None) -> str:
    """``0.58 [0.33,0.83]`` for an estimate; ``-`` for none, or one over no questions. Every
    view formats estimates through :meth:`Estimate.text` (a JSON record is read back with
    :meth:`Estimate.from_dict` at the edge, not here)."""
    return "-" if e is None else e.text()


def html_table(rows: Sequence[Sequence[Any]], columns: Sequence[str], wrap: Sequence[str] = ("prompt", "text"), below: Sequence[str] = ()) -> str:
    """A plain HTML table for notebook views and the report: numbers and intervals never wrap;
    the free-text columns named in ``wrap`` do, never narrower than a short sentence; a column
    named in ``below`` (a verdict: a sentence per row) is written under its row across the whole
    table width, and left out where the row has none; headers wrap at spaces; a table wider than its page scrolls inside it."""
    style = "padding:2px 8px;text-align:left;vertical-align:top"
    nowrap = style + ";white-space:nowrap"
    shown = [i for i, c in enumerate(columns) if c not in below]
    cell = {i: style + ";min-width:16em" if columns[i] in wrap else nowrap for i in shown}
    head = "".join(f"<th style='{style}'>{html.escape(str(columns[i]))}</th>" for i in shown)

    def text(v: Any) -> str:
        return html.escape("" if v is None else str(v))

    body = "".join(
        "<tr>"
        + "".join(f"<td style='{cell[i]}'>{text(row[i])}</td>" for i in shown)
        + "</tr>"
        + "".join(
            f"<tr class='rnr-below'><td colspan='{len(shown)}' style='{style};padding-bottom:8px'><b>{text(columns[i])}:</b> {text(row[i])}</td></tr>"
            for i, c in enumerate(columns)
            if c in below and row[i] not in (None, "")
        )
        for row in rows
    )
    return (
        "<div class='rnr-scroll' style='overflow-x:auto;max-width:100%'>"
        f"<table class='rnr-table'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"
    )
