"""Which columns a claim's table shows, in every medium: one chooser for the report page's HTML
and the Markdown of the README and the results page.

A :class:`Column` is a header and the cell it gives a claim; the cell asks its :class:`Medium`
how an estimate and a verdict read there (the page's ``0.58 [0.33,0.83]`` and whole verdict
sentence; Markdown's true minus signs and bold status, its reasons listed apart). So both media
show the same columns holding the same numbers, and a column is added, renamed or dropped here
once. The invariant: a column no setting fills is shown by neither medium, and the compact
(Markdown) table is the full one with the report-only columns left out, never a table of its
own.

Example:
    >>> [c.header for c in bottleneck_columns((), compact=True)]
    ['task', 'failures (discovery/held-out; controls)', 'bottleneck', 'held-out repair', 'held-out control break', 'verdict']
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from rnr_lens.core.stats import Estimate
from rnr_lens.judge.claims import BottleneckClaim, judged_break
from rnr_lens.judge.verdicts import Verdict


class Medium(Protocol):
    """How one medium writes the two things every claim's cells hold."""

    def estimate(self, e: Estimate | None) -> str:
        """An estimate with its interval (``None``, or one over no questions, as the medium marks a gap)."""
        ...

    def verdict(self, v: Verdict, note: str | None) -> str:
        """A verdict's cell, with the setting's format-miss ``note`` where the medium shows it."""
        ...


@dataclass(frozen=True)
class Column:
    """One column of a claim's table.

    Attributes:
        header: Its header, as both media print it.
        cell: The cell it gives one claim, in a medium.
        filled: Whether a claim has anything in this column, for a column some claims leave
            empty (one no claim fills is left out); None: every claim fills it.
        compact: Whether the compact (Markdown) table shows it too, not only the report page.
    """

    header: str
    cell: Callable[[BottleneckClaim, Medium], str]
    filled: Callable[[BottleneckClaim], bool] | None = None
    compact: bool = True


def _task(c: BottleneckClaim, m: Medium) -> str:
    return Path(c.setting.task).name


def _failures(c: BottleneckClaim, m: Medium) -> str:
    s = c.mined
    return f"{c.failures} ({s.discovery}/{s.heldout}; {s.control})" if s else str(c.failures)


def _chance(c: BottleneckClaim, m: Medium) -> str:
    if c.chance is None:
        return "–"
    return f"{c.chance.expected:.1f} of {c.chance.questions}; above it {m.estimate(c.chance.estimate)}, {c.chance.estimate.p_text()}"


def _block(c: BottleneckClaim, m: Medium) -> str:
    return "–" if c.bottleneck is None else f"MLP {c.bottleneck.layer}"


def _measured(e: Estimate) -> Estimate | None:
    return None if e.is_empty else e


def _repair(c: BottleneckClaim, m: Medium) -> str:
    return "–" if c.bottleneck is None else m.estimate(_measured(c.bottleneck.repair_heldout))


def _break(c: BottleneckClaim, m: Medium) -> str:
    """The break rate the verdict reads (held-out controls; every control in a rules-1 file)."""
    return "–" if c.bottleneck is None else m.estimate(_measured(judged_break(c.bottleneck)))


def _null_block(c: BottleneckClaim, m: Medium) -> str:
    return "–" if c.null is None else f"{m.estimate(c.null.random_block)} (MLP {', '.join(map(str, c.null.blocks))})"


def _null_rerun(c: BottleneckClaim, m: Medium) -> str:
    return "–" if c.null is None else m.estimate(c.null.rerun)


def _versus_null(c: BottleneckClaim, m: Medium) -> str:
    return "; ".join(f"{arm} {m.estimate(e)}" for arm, e in c.versus_null.items()) or "–"


def _second(c: BottleneckClaim, m: Medium) -> str:
    s = c.second
    return "–" if s is None else f"MLP {s.layer}: {m.estimate(_measured(s.repair_heldout))}"


def _agreement(c: BottleneckClaim, m: Medium) -> str:
    """The screen's pick beside the exhaustive sweep's by the same rule, the discovery repair it
    gives up (its regret) and the screen's rank correlation with the generated repairs."""
    a = c.screen_vs_exhaustive
    if a is None:
        return "–"
    rho = "" if a.spearman is None else f"; ρ {a.spearman:.2f}".replace("-", "−")
    if a.same_block:
        return f"same, MLP {a.screen_block}{rho}"
    return f"MLP {a.screen_block} vs {a.exhaustive_block}; regret {a.regret:.2f}{rho}"


def _verdict(c: BottleneckClaim, m: Medium) -> str:
    return m.verdict(c.verdict, c.format_note)


BOTTLENECK: tuple[Column, ...] = (
    Column("model", lambda c, m: c.setting.model, compact=False),
    Column("task", _task),
    Column("failures (discovery/held-out; controls)", _failures),
    Column("expected by chance (of not realized; test of the set's size)", _chance, lambda c: c.chance is not None),
    Column("bottleneck", _block),
    Column("held-out repair", _repair),
    Column("held-out control break", _break),
    Column("null: random blocks", _null_block, lambda c: c.null is not None),
    Column("null: re-run", _null_rerun, lambda c: c.null is not None),
    Column("repair minus null (paired)", _versus_null, lambda c: bool(c.versus_null), compact=False),
    Column("second best", _second, lambda c: c.second is not None, compact=False),
    Column("screen vs exhaustive", _agreement, lambda c: c.screen_vs_exhaustive is not None),
    Column("verdict", _verdict),
)
"""Claim 2's columns, in order: the failure set and its chance size, the bottleneck's held-out
repair and break, the null arms beside it, the screen against the exhaustive sweep, the verdict."""


def bottleneck_columns(claims: Sequence[BottleneckClaim], compact: bool) -> list[Column]:
    """Claim 2's columns for ``claims``' table: every column some claim fills (the always-filled
    ones even for no claim), the report-only ones left out where ``compact``."""
    return [c for c in BOTTLENECK if (c.compact or not compact) and (c.filled is None or any(map(c.filled, claims)))]


def rows(claims: Sequence[BottleneckClaim], columns: Sequence[Column], medium: Medium) -> list[list[str]]:
    """Each claim's cells under ``columns``, in ``medium``."""
    return [[col.cell(c, medium) for col in columns] for c in claims]
