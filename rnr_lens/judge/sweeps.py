"""The records of a single-block ablation sweep that every layer reads, free of torch.

The miner (:mod:`rnr_lens.bottleneck.miner`) computes them with a model; the claims, the report page and
the widgets only read them, so they live here, below the model. Invariant: a record's
``to_dict`` is what ``claims.json`` and the run store hold, and ``from_dict`` reads it back
(one record per concept: the claim's null is this null, not a copy of its fields).
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from rnr_lens.core.ablation_methods import ablation_label
from rnr_lens.core.records import Outcome
from rnr_lens.core.stats import Estimate, wilson
from rnr_lens.judge.verdicts import BREAK_BOUND

NULL_BLOCKS = 3
"""Blocks drawn for the arbitrary-block null of a repair rate."""

STRATEGIES = ("screen+confirm", "exhaustive")
"""How a sweep chooses the blocks it generates (:func:`rnr_lens.bottleneck.miner.mine`): ``screen+confirm``
(a one-forward screen, the top blocks generated) or ``exhaustive`` (every block generated)."""

SWEEP_COMPONENTS: tuple[str, ...] = ("mlp",)
"""What a sweep silences by default: the MLP of each block (the paper's bottleneck)."""

SWEEP_METHODS: tuple[str, ...] = ("zero",)
"""How it silences it by default: zeroing its output."""

TOP_M = 3
"""Blocks the screen passes on to be generated (``screen+confirm``)."""


@dataclass(frozen=True)
class NullRepair:
    """What silencing an arbitrary block, and re-running unablated, repair of the held-out
    failures: the null beside a bottleneck's held-out repair.

    Attributes:
        blocks: The blocks drawn uniformly (seeded by the failure set's name).
        random_block: Held-out repair of a block drawn from ``blocks`` (per question, the share
            of them that repair it), Wilson interval.
        rerun: Held-out repair of the unablated model re-run in the same batches (batch
            numerics can flip a greedy answer): what no intervention repairs.

    Example:
        >>> from rnr_lens.core.stats import rate
        >>> null = NullRepair((3, 7, 11), rate([0.0, 1 / 3, 0.0]), rate([0.0, 0.0, 0.0]))
        >>> NullRepair.from_dict(null.to_dict()) == null
        True
    """

    blocks: tuple[int, ...]
    random_block: Estimate
    rerun: Estimate
    per_question: dict[str, dict[str, float]] = field(default_factory=dict, compare=False)
    """Per arm (``random block``, ``unablated re-run``), each held-out question's repair (the
    share of the drawn blocks that repair it; 0/1 for the re-run), for paired tests. Kept in the
    run store; ``claims.json`` holds the rates alone."""

    def to_dict(self) -> dict[str, Any]:
        """The rates (what ``claims.json`` holds); the store adds ``per_question``."""
        return {"blocks": list(self.blocks), "random_block": self.random_block.to_dict(), "rerun": self.rerun.to_dict()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> NullRepair:
        """A null read back from ``to_dict`` (a claim's) or from the store (with ``per_question``)."""
        per_question = {arm: {q: float(v) for q, v in shares.items()} for arm, shares in (d.get("per_question") or {}).items()}
        return cls(tuple(int(b) for b in d["blocks"]), Estimate.from_dict(d["random_block"]), Estimate.from_dict(d["rerun"]), per_question)


FEW_HELDOUT = 10
"""Below this many held-out failures a repair rate's Wilson interval spans about half of
[0, 1] or more (0.24-0.76 at 5 of 10), so a bottleneck's repair says little; it says so."""


@dataclass(frozen=True)
class Bottleneck:
    """The chosen block: its rates, the ablation, and why it was chosen; prints its rates to three
    digits.

    Attributes:
        rates: The block's rates (:class:`BlockRates`): repair on the whole failure set and each
            half, break on every control and each half.
        component, method: The ablation (``mlp``, ``zero`` for the paper's silencing).
        admitted_on: The table column of the break rate that admitted it (:func:`admitting_column`;
            read with :meth:`BlockRates.estimate`): the discovery
            half of the controls, or every control in a table written before the controls were
            split. The verdict reads the held-out half.
        passed_over: Generated blocks that rank above it (more discovery repair) but break
            more than the bound allows, e.g. ``"mlp6:zero (discovery 1.00, break 0.40)"``.
        break_bound: The bound it was chosen under.
    """

    rates: BlockRates
    component: str
    method: str
    admitted_on: str = "break_discovery"
    passed_over: tuple[str, ...] = ()
    break_bound: float = BREAK_BOUND

    @property
    def layer(self) -> int:
        return self.rates.layer

    @property
    def admitted_break(self) -> Estimate:
        """The break rate it was admitted on (empty: unmeasured, no control set)."""
        return self.rates.estimate(self.admitted_on)

    @property
    def few(self) -> bool:
        """Fewer than :data:`FEW_HELDOUT` held-out failures: too few to read a repair rate."""
        held = self.rates.repair_heldout
        return not held.is_empty and held.n < FEW_HELDOUT

    def why(self) -> list[str]:
        """How it was chosen and how far to trust it, one clause each (the CLI, the repr and
        the notebook's HTML print these)."""
        out = []
        held = self.rates.repair_heldout
        if not held.is_empty:
            out.append(f"held-out repair {held.text()} of {held.n} failures (chosen on {self.rates.repair_discovery.n} discovery failures)")
        if self.few:
            out.append(
                f"fewer than {FEW_HELDOUT} held-out failures: its held-out repair cannot be told from chance or from most (audit more questions)"
            )
        if self.passed_over:
            out.append(f"chosen over {', '.join(self.passed_over)}: they repair more but break more than {self.break_bound:.2f}")
        return out

    @property
    def ablation(self) -> str:
        """The ablation's string form, e.g. ``mlp4:zero``."""
        return ablation_label(self.layer, self.component, self.method)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (``mine --json``), with the table's column names: ``break`` is the break
        rate it was admitted on, ``heldout`` the held-out repair with its interval."""
        r, admitting = self.rates, self.admitted_break
        return {
            "layer": self.layer,
            "component": self.component,
            "method": self.method,
            "repair_discovery": r.repair_discovery.value,
            "repair_heldout": r.repair_heldout.value,
            "repair": r.repair.value,
            "break": None if admitting.is_empty else admitting.value,
            "heldout": None if r.repair_heldout.is_empty else r.repair_heldout.to_dict(),
            "n_discovery": r.repair_discovery.n,
            "passed_over": list(self.passed_over),
            "break_bound": self.break_bound,
        }

    def __repr__(self) -> str:
        named = (("repair_discovery", self.rates.repair_discovery), ("repair_heldout", self.rates.repair_heldout), ("break", self.admitted_break))
        rates = ", ".join(f"{name} {e.value:.3f}" if not e.is_empty else f"{name} unmeasured" for name, e in named)
        return f"Bottleneck({self.ablation}; {rates})" + "".join(f"\n  {line}" for line in self.why())

    def _repr_html_(self) -> str:
        head, *notes = repr(self).split("\n")
        return f"<code>{html.escape(head)}</code>" + (f"<ul>{''.join(f'<li>{html.escape(n.strip())}</li>' for n in notes)}</ul>" if notes else "")


RATES = ("repair", "repair_discovery", "repair_heldout", "break", "break_discovery", "break_heldout")
"""A generated candidate's rates by their table column: repair on every failure and on each
half, break on every control and on each half (``break`` is every control's)."""

_COUNTS = {
    "repair": "n_failures",
    "repair_discovery": "n_discovery",
    "repair_heldout": "n_heldout",
    "break": "n_control",
    "break_discovery": "n_control_discovery",
    "break_heldout": "n_control_heldout",
}


def _unmeasured() -> Estimate:
    return Estimate.empty("wilson")


@dataclass(frozen=True)
class BlockRates:
    """One block's repair and break rates, each an :class:`~rnr_lens.core.stats.Estimate` (Wilson
    95%, its ``n`` the questions behind it; empty where unmeasured), with the repaired and broken
    counts they were computed from. The one record of a block's rates: a sweep's candidate, the
    bottleneck (:attr:`Bottleneck.rates`) and a claim's bottleneck and runner-up
    (:class:`rnr_lens.judge.claims.BottleneckClaim`, which keeps the rates its verdict reads).

    Invariant: the sweep table keeps them as flat columns for plotting and export (``repair``,
    ``repair_low``, ``repair_high``, ``n_failures``, ...); :meth:`columns` is the one writer of
    that layout and :meth:`from_row` its one reader, so every page, widget and verdict reads a
    block's rates as estimates. ``break_all`` is every control's (the column ``break``);
    ``break_discovery`` the half that admits a block, ``break_heldout`` the half that judges it.

    Example:
        >>> from rnr_lens.core.stats import wilson
        >>> r = BlockRates(4, wilson(3, 8), wilson(2, 4), wilson(1, 4), wilson(1, 20), wilson(0, 10), wilson(1, 10), 3, 1)
        >>> BlockRates.from_row({"layer": 4, **r.columns()}) == r
        True
        >>> r.estimate("break").text()
        '0.05 [0.01,0.24]'
    """

    layer: int
    repair: Estimate = field(default_factory=_unmeasured)
    repair_discovery: Estimate = field(default_factory=_unmeasured)
    repair_heldout: Estimate = field(default_factory=_unmeasured)
    break_all: Estimate = field(default_factory=_unmeasured)
    """The break rate on every control (the table's column ``break``)."""
    break_discovery: Estimate = field(default_factory=_unmeasured)
    break_heldout: Estimate = field(default_factory=_unmeasured)
    n_repaired: int = 0
    n_broken: int = 0

    def estimate(self, key: str) -> Estimate:
        """The rate of table column ``key`` (one of :data:`RATES`)."""
        if key not in RATES:
            raise KeyError(f"{key!r} is not a sweep rate; choose one of {', '.join(RATES)}")
        return getattr(self, "break_all" if key == "break" else key)

    def columns(self) -> dict[str, Any]:
        """The table's flat rate columns (the row's ``layer`` is the table's own): each rate
        with ``_low``/``_high``, then the counts."""
        out: dict[str, Any] = {}
        for key in RATES:
            est = self.estimate(key)
            out[key], out[f"{key}_low"], out[f"{key}_high"] = est.value, est.low, est.high
        out["n_repaired"] = self.n_repaired
        out["n_failures"] = self.repair.n
        out["n_discovery"] = self.repair_discovery.n
        out["n_heldout"] = self.repair_heldout.n
        out["n_broken"] = self.n_broken
        out["n_control"] = self.break_all.n
        out["n_control_discovery"] = self.break_discovery.n
        out["n_control_heldout"] = self.break_heldout.n
        return out

    @classmethod
    def from_row(cls, row: Mapping[str, Any] | pd.Series) -> BlockRates | None:
        """A table row's rates (None where the block was not generated). A rate missing
        from a table written before it existed (the control set's halves) reads as empty; a
        rate without its interval columns (a table built by hand) gets its count's Wilson
        interval, and without its count too, reads as unmeasured (a rate over unknown n is no
        estimate)."""
        if "repair" not in row or pd.isna(row["repair"]):
            return None

        def est(key: str) -> Estimate:
            if key not in row or pd.isna(row[key]):
                return _unmeasured()
            got = row.get(_COUNTS[key])
            n = int(got) if got is not None and pd.notna(got) else 0
            if f"{key}_low" not in row or pd.isna(row[f"{key}_low"]):  # a table built by hand: the Wilson interval of its count
                return wilson(round(float(row[key]) * n), n)
            return Estimate(float(row[key]), float(row[f"{key}_low"]), float(row[f"{key}_high"]), n, "wilson")

        def count(key: str, of: Estimate) -> int:
            n = row.get(key)
            return int(n) if n is not None and pd.notna(n) else (0 if of.is_empty else round(of.value * of.n))

        repair, brk = est("repair"), est("break")
        return cls(
            int(row["layer"]),
            repair,
            est("repair_discovery"),
            est("repair_heldout"),
            brk,
            est("break_discovery"),
            est("break_heldout"),
            count("n_repaired", repair),
            count("n_broken", brk),
        )


def rates(layer: int, after: list[Outcome], before: dict[str, Outcome], heldout_controls: frozenset[str] = frozenset()) -> BlockRates:
    """One generated block's rates on the outcomes ``after`` its ablation: repair on all
    failures and each half, break on all controls and each half; ``before`` holds the audit's
    default answers."""
    failures = [o for o in after if o.set != "control"]
    control = [o for o in after if o.set == "control"]

    def repaired(o: Outcome) -> bool:
        return o.correct and not before[o.question_id].correct

    def broken(o: Outcome) -> bool:
        return before[o.question_id].correct and not o.correct

    def repair(rows: list[Outcome]) -> Estimate:
        return wilson(sum(map(repaired, rows)), len(rows))

    def break_(rows: list[Outcome]) -> Estimate:
        return wilson(sum(map(broken, rows)), len(rows))

    return BlockRates(
        layer,
        repair(failures),
        repair([o for o in failures if o.set == "discovery"]),
        repair([o for o in failures if o.set == "heldout"]),
        break_(control),
        break_([o for o in control if o.question_id not in heldout_controls]),
        break_([o for o in control if o.question_id in heldout_controls]),
        sum(map(repaired, failures)),
        sum(map(broken, control)),
    )


def admitting_column(table: pd.DataFrame) -> str:
    """The break-rate column that admits a block: the discovery half of the controls (tables
    written before the control set was split have only ``break``, every control)."""
    return "break_discovery" if "break_discovery" in table else "break"


def ranked(table: pd.DataFrame) -> pd.DataFrame:
    """A sweep table's generated rows, best first: discovery repair, then lower break rate on
    the discovery controls (unmeasured last), then the earlier layer. The bottleneck is the
    first row within the break bound."""
    done = table.dropna(subset=["repair_discovery"])
    return done.sort_values(["repair_discovery", admitting_column(table), "layer"], ascending=[False, True, True], na_position="last")


def within_bound(table: pd.DataFrame, bound: float) -> pd.DataFrame:
    """The generated rows a bottleneck may be chosen from: some discovery repair, and a break
    rate on the discovery controls at most ``bound``. An unmeasured break rate (no control set)
    bounds nothing: the bottleneck says so instead."""
    ok = table.dropna(subset=["repair_discovery"])
    brk = ok[admitting_column(table)]
    return ok[((brk <= bound) | brk.isna()) & (ok["repair_discovery"] > 0)]


def tied_best(table: pd.DataFrame, bound: float) -> pd.DataFrame:
    """The rows within the bound that share the best discovery repair: each is confirmed on the
    held-out half, and the verdict keeps the better under Holm over the tie."""
    ok = within_bound(table, bound)
    return ranked(ok[ok["repair_discovery"] == ok["repair_discovery"].max()]) if len(ok) else ok


def bottleneck_of(table: pd.DataFrame, bound: float) -> Bottleneck | None:
    """The bottleneck rule: the first of :func:`ranked` within :func:`within_bound`, with the
    better-repairing blocks it passed over for breaking too much (None: no block qualifies)."""
    if "repair_discovery" not in table:
        return None
    ok = within_bound(table, bound)
    if ok.empty:
        return None
    best = ranked(ok).iloc[0]
    order = ranked(table)
    above = order.iloc[: list(order.index).index(best.name)]
    brk = admitting_column(table)
    best_rates = BlockRates.from_row(best)
    assert best_rates is not None, "ranked rows are generated ones"
    passed = tuple(
        f"{ablation_label(r.layer, r.component, r.method)} (discovery {r.repair_discovery:.2f}, break {r[brk]:.2f})"
        for _, r in above.iterrows()
        if r.repair_discovery > best.repair_discovery and pd.notna(r[brk]) and r[brk] > bound
    )
    return Bottleneck(best_rates, str(best.component), str(best.method), brk, passed, bound)
