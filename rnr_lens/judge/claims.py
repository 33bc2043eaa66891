"""The three claims as small frozen records: one per setting, from the report to ``claims.json``.

A claim record holds what one setting (a model on a task, or a trained pair on a task) says
about one claim: its estimates as :class:`~rnr_lens.core.stats.Estimate`, its verdict as a
:class:`~rnr_lens.judge.verdicts.Verdict`. :mod:`rnr_lens.grids.setting_claims` builds them from the store, a
report gathers them into :class:`Claims` (with :func:`summary_lines`' tally) and the report page
reads them; each writes itself with ``to_dict`` (the JSON edge: ``claims.json`` keeps the keys it
always had) and reads back with ``from_dict``, so a written report can be read and re-rendered.

Invariant: ``Record.from_dict(r.to_dict()).to_dict() == r.to_dict()`` for every record.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from rnr_lens.core.provenance import Provenance
from rnr_lens.core.stats import Estimate, wilson
from rnr_lens.judge.ceiling import Ceiling
from rnr_lens.judge.sweeps import BlockRates, NullRepair
from rnr_lens.judge.verdicts import RULES, STATUSES, FailureSetChance, Verdict, counts


def _est(d: Mapping[str, Any] | None) -> Estimate | None:
    return None if d is None else Estimate.from_dict(dict(d))


def _out(e: Estimate | None) -> dict[str, Any] | None:
    return None if e is None else e.to_dict()


@dataclass(frozen=True)
class Setting:
    """Which audit a claim record speaks for."""

    model: str
    task: str
    audit: str
    config_hash: str

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "task": self.task, "audit": self.audit, "config_hash": self.config_hash}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Setting:
        return cls(str(d["model"]), str(d["task"]), str(d["audit"]), str(d["config_hash"]))


@dataclass(frozen=True)
class FormatMisses:
    """A setting's format misses (answers that state the gold but read as another number) and
    claim 1's verdict read leniently; ``note`` where they could matter."""

    greedy: int
    answered: int
    probes: Mapping[str, int]
    extractor: str
    lenient_verdict: str
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "greedy": self.greedy,
            "answered": self.answered,
            "probes": dict(self.probes),
            "extractor": self.extractor,
            "lenient_verdict": self.lenient_verdict,
            "note": self.note,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> FormatMisses:
        return cls(int(d["greedy"]), int(d["answered"]), dict(d["probes"]), str(d["extractor"]), str(d["lenient_verdict"]), d.get("note"))


@dataclass(frozen=True)
class RoutesClaim:
    """Claim 1 on one setting: random routes against the search at a matched budget, and how
    much of the random routes' gain each answer-blind selector keeps.

    Attributes:
        random_minus_search_margin: Random - search tested against ``-margin``.
        search_gain, random_gain: Each probe's reach minus realized, paired.
        kept_half: ``(R - D) - (S - D) / 2`` per question: random routes keep half of the
            search's gain where it is resolved above zero.
        retention: Per probe, each answer-blind selector's net retention (None where the
            probe's reach is not resolved above chance).
        retention_gross: The share of the gained questions each selector's pick keeps.
        edits_search_mean, edits_search_max: The depth of the routes the search tried.
    """

    setting: Setting
    random: str
    search: str
    questions: int
    realized: Estimate
    reachable_random: Estimate
    reachable_search: Estimate
    chance_random: Estimate
    chance_search: Estimate
    above_chance_random: Estimate
    above_chance_search: Estimate
    random_minus_search: Estimate
    random_minus_search_margin: Estimate
    search_gain: Estimate
    random_gain: Estimate
    kept_half: Estimate
    margin: float
    edits_random: int
    edits_search_mean: float | None
    edits_search_max: int | None
    oracle_gain: Mapping[str, Estimate]
    retention: Mapping[str, Mapping[str, Estimate | None]]
    retention_gross: Mapping[str, Mapping[str, Estimate | None]]
    retention_verdict: Verdict
    verdict: Verdict
    format_misses: FormatMisses

    _ESTIMATES: ClassVar[tuple[str, ...]] = (
        "realized",
        "reachable_random",
        "reachable_search",
        "chance_random",
        "chance_search",
        "above_chance_random",
        "above_chance_search",
        "random_minus_search",
        "random_minus_search_margin",
        "search_gain",
        "random_gain",
        "kept_half",
    )

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.setting.to_dict(),
            "random": self.random,
            "search": self.search,
            "questions": self.questions,
            **{k: getattr(self, k).to_dict() for k in self._ESTIMATES},
            "margin": self.margin,
            "edits_random": self.edits_random,
            "edits_search": {"mean": self.edits_search_mean, "max": self.edits_search_max},
            "oracle_gain": {p: e.to_dict() for p, e in self.oracle_gain.items()},
            "retention": {p: {s: _out(e) for s, e in r.items()} for p, r in self.retention.items()},
            "retention_gross": {p: {s: _out(e) for s, e in r.items()} for p, r in self.retention_gross.items()},
            "retention_verdict": self.retention_verdict.to_dict(),
            "verdict": self.verdict.to_dict(),
            "format_misses": self.format_misses.to_dict(),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RoutesClaim:
        depth = d.get("edits_search") or {}
        return cls(
            setting=Setting.from_dict(d),
            random=str(d["random"]),
            search=str(d["search"]),
            questions=int(d["questions"]),
            margin=float(d["margin"]),
            edits_random=int(d["edits_random"]),
            edits_search_mean=depth.get("mean"),
            edits_search_max=depth.get("max"),
            oracle_gain={p: Estimate.from_dict(e) for p, e in d["oracle_gain"].items()},
            retention={p: {s: _est(e) for s, e in r.items()} for p, r in d["retention"].items()},
            retention_gross={p: {s: _est(e) for s, e in r.items()} for p, r in d.get("retention_gross", {}).items()},
            retention_verdict=Verdict.from_dict(d["retention_verdict"]),
            verdict=Verdict.from_dict(d["verdict"]),
            format_misses=FormatMisses.from_dict(d["format_misses"]),
            **{k: _est_or_empty(d.get(k)) for k in cls._ESTIMATES},
        )


def _est_or_empty(d: Mapping[str, Any] | None) -> Estimate:
    """An estimate a file of an earlier rules version may lack (read as empty)."""
    return Estimate.empty() if d is None else Estimate.from_dict(dict(d))


def judged_break(b: BlockRates) -> Estimate:
    """The break rate a claim's verdict reads of block ``b``: the held-out controls' (rules 2),
    every control's in a rules-1 file (whose files say no ``rules``); empty where unmeasured."""
    return b.break_heldout if not b.break_heldout.is_empty else b.break_all


def _block_to_dict(b: BlockRates) -> dict[str, Any]:
    """A claim's block at the JSON edge: its discovery repair (a value), held-out repair and
    :func:`judged_break`. An unmeasured rate is written ``None``."""
    brk = judged_break(b)
    return {
        "block": b.layer,  # claims.json's key since rules 1
        "repair_discovery": b.repair_discovery.value,
        "repair_heldout": None if b.repair_heldout.is_empty else b.repair_heldout.to_dict(),
        "break": None if brk.is_empty else brk.to_dict(),
    }


def _block_from_dict(d: Mapping[str, Any], n_discovery: int, rules: str) -> BlockRates:
    """:func:`_block_to_dict` read back: the discovery repair is the Wilson rate of its count
    over the failure set's ``n_discovery`` questions (as it was computed), and ``break`` is the
    held-out controls' (rules 2) or every control's (rules 1)."""
    held, brk = _est(d.get("repair_heldout")), _est(d.get("break"))
    empty = Estimate.empty("wilson")
    value = math.nan if d.get("repair_discovery") is None else float(d["repair_discovery"])
    return BlockRates(
        int(d["block"]),
        # a block generated on no discovery failure: unmeasured
        repair_discovery=wilson(round(value * n_discovery), n_discovery) if math.isfinite(value) else empty,
        repair_heldout=held or empty,
        break_all=(brk or empty) if rules == "1" else empty,
        break_heldout=(brk or empty) if rules != "1" else empty,
    )


@dataclass(frozen=True)
class ScreenAgreement:
    """Whether the screen's pick agrees with the block an exhaustive sweep picks by the same
    rule (best discovery repair within the break bound; the best generated where none is).

    Attributes:
        regret: The discovery repair the screen's pick gives up against the exhaustive pick
            (0: it found it, or a tied one; a pick outside the bound gives up all of it).
        spearman: Rank correlation of the log-prob screen with the generated repair rates.
    """

    screen_block: int
    exhaustive_block: int
    exhaustive_repair_discovery: float
    same_block: bool
    regret: float
    spearman: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "screen_block": self.screen_block,
            "exhaustive_block": self.exhaustive_block,
            "exhaustive_repair_discovery": self.exhaustive_repair_discovery,
            "same_block": self.same_block,
            "regret": self.regret,
            "spearman": self.spearman,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ScreenAgreement:
        return cls(
            int(d["screen_block"]),
            int(d["exhaustive_block"]),
            float(d["exhaustive_repair_discovery"]),
            bool(d["same_block"]),
            float(d["regret"]),
            d.get("spearman"),
        )


@dataclass(frozen=True)
class FailureSetSize:
    """A mined failure set's halves and control set, and how many of its failures fail only by
    format (a repair there may be a repair of the format)."""

    discovery: int
    heldout: int
    control: int
    format_failures: int
    extractor: str
    format_note: str | None = None


@dataclass(frozen=True)
class BottleneckClaim:
    """Claim 2 on one setting: the bottleneck MLP of its failure set, its held-out repair beside
    the null, and the verdict. ``mined`` is None where the setting had no failure set to mine
    (fewer than two questions reachable but not realized): only the count and the verdict.

    Attributes:
        versus_null: The bottleneck's held-out repair minus each null arm's, paired per question.
        tie: The blocks tied with it on discovery repair, each confirmed on the held-out half.
    """

    setting: Setting
    failures: int
    verdict: Verdict
    mined: FailureSetSize | None = None
    break_bound: float | None = None
    null: NullRepair | None = None
    screen_vs_exhaustive: ScreenAgreement | None = None
    bottleneck: BlockRates | None = None
    second: BlockRates | None = None
    versus_null: Mapping[str, Estimate] = field(default_factory=dict)
    tie: tuple[int, ...] = ()
    chance: FailureSetChance | None = None
    """The failure set against its chance expectation (rules 3's precondition; None in files of
    earlier rules)."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {**self.setting.to_dict(), "failures": self.failures}
        if self.chance is not None:
            out["chance"] = self.chance.to_dict()
        m = self.mined
        if m is not None:
            out |= {
                "discovery": m.discovery,
                "heldout": m.heldout,
                "control": m.control,
                "break_bound": self.break_bound,
                "null": self.null.to_dict() if self.null else None,
                "screen_vs_exhaustive": self.screen_vs_exhaustive.to_dict() if self.screen_vs_exhaustive else None,
                "format_misses": {"failures": m.format_failures, "extractor": m.extractor, "note": m.format_note},
                "bottleneck": _block_to_dict(self.bottleneck) if self.bottleneck else None,
                "second": _block_to_dict(self.second) if self.second else None,
                "versus_null": {k: e.to_dict() for k, e in self.versus_null.items()},
                "tie": list(self.tie),
            }
        return out | {"verdict": self.verdict.to_dict()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], rules: str = RULES) -> BottleneckClaim:
        """A claim read back from :meth:`to_dict`, under the ``rules`` of its file."""
        setting, verdict = Setting.from_dict(d), Verdict.from_dict(d["verdict"])
        chance = FailureSetChance.from_dict(d["chance"]) if d.get("chance") else None
        if "discovery" not in d:
            return cls(setting, int(d["failures"]), verdict, chance=chance)
        misses = d["format_misses"]
        return cls(
            setting,
            int(d["failures"]),
            verdict,
            FailureSetSize(
                int(d["discovery"]), int(d["heldout"]), int(d["control"]), int(misses["failures"]), str(misses["extractor"]), misses.get("note")
            ),
            float(d["break_bound"]),
            NullRepair.from_dict(d["null"]) if d.get("null") else None,
            ScreenAgreement.from_dict(d["screen_vs_exhaustive"]) if d.get("screen_vs_exhaustive") else None,
            _block_from_dict(d["bottleneck"], int(d["discovery"]), rules) if d.get("bottleneck") else None,
            _block_from_dict(d["second"], int(d["discovery"]), rules) if d.get("second") else None,
            {k: Estimate.from_dict(e) for k, e in (d.get("versus_null") or {}).items()},
            tuple(int(b) for b in d.get("tie", ())),
            chance,
        )

    @property
    def format_note(self) -> str | None:
        return self.mined.format_note if self.mined else None


@dataclass(frozen=True)
class TrainingProbe:
    """Claim 3 for one probe of a trained pair on one task, over the questions complete in both
    audits (``excluded``: left out as unfinished).

    Attributes:
        ceiling_vs_margin: Delta reachable tested against ``+margin``.
        contrast: Delta realized / 2 - delta reachable, per question (rules 1: delta realized -
            delta reachable, by MOVER).
        transitions: Questions moving from each state (inner keys, the base) to each state
            (outer keys, the trained checkpoint): ``transitions[after][before]``, as
            ``transitions_keys`` in ``claims.json`` says (:data:`TRANSITIONS_KEYS`).
    """

    probe: str
    questions: int
    excluded: int
    delta_realized: Estimate
    delta_reachable: Estimate
    ceiling_vs_margin: Estimate
    contrast: Estimate
    margin: float
    verdict: Verdict
    transitions: Mapping[str, Mapping[str, int]]

    above_chance_base: Estimate = Estimate.empty("wilson vs fixed chance")
    above_chance_trained: Estimate = Estimate.empty("wilson vs fixed chance")
    """Each model's reach minus its chance level: the precondition (rules 3; empty before)."""

    _ESTIMATES: ClassVar[tuple[str, ...]] = ("delta_realized", "delta_reachable", "ceiling_vs_margin", "contrast")
    _CHANCE: ClassVar[tuple[str, ...]] = ("above_chance_base", "above_chance_trained")

    def to_dict(self) -> dict[str, Any]:
        return {
            "probe": self.probe,
            "questions": self.questions,
            "excluded": self.excluded,
            **{k: getattr(self, k).to_dict() for k in self._ESTIMATES},
            **{k: getattr(self, k).to_dict() for k in self._CHANCE if not getattr(self, k).is_empty},
            "margin": self.margin,
            "verdict": self.verdict.to_dict(),
            "transitions": {k: dict(v) for k, v in self.transitions.items()},
            "transitions_keys": TRANSITIONS_KEYS,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TrainingProbe:
        return cls(
            probe=str(d["probe"]),
            questions=int(d["questions"]),
            excluded=int(d["excluded"]),
            margin=float(d["margin"]),
            verdict=Verdict.from_dict(d["verdict"]),
            transitions={k: {s: int(n) for s, n in v.items()} for k, v in d["transitions"].items()},
            **{k: _est_or_empty(d.get(k)) for k in cls._ESTIMATES + cls._CHANCE},
        )


TRANSITIONS_KEYS = "transitions[trained state][base state] = questions"
"""How a training claim's ``transitions`` reads, written beside it in ``claims.json``: the
outer key is the state under the trained checkpoint, the inner key the state under the base
(read the other way round it tells the reverse story)."""


@dataclass(frozen=True)
class TrainingClaim:
    """Claim 3 for one trained pair on one task: one :class:`TrainingProbe` per probe."""

    task: str
    audits: tuple[str, str]
    base: str
    trained: str
    probes: tuple[TrainingProbe, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "audits": list(self.audits),
            "base": self.base,
            "trained": self.trained,
            "probes": [p.to_dict() for p in self.probes],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TrainingClaim:
        a, b = d["audits"]
        return cls(str(d["task"]), (str(a), str(b)), str(d["base"]), str(d["trained"]), tuple(TrainingProbe.from_dict(p) for p in d["probes"]))


@dataclass(frozen=True)
class AcrossCheckpoints:
    """Claim 3 for one base, task and probe over every checkpoint trained from that base (a
    grid may pair one base with several training runs, e.g. seeds): each checkpoint's verdict,
    and how many share the most common one. A tally of per-run verdicts, not a test: it says
    whether the verdict is a property of the training recipe or of one run."""

    base: str
    task: str
    probe: str
    verdicts: tuple[tuple[str, str], ...]
    """``(trained checkpoint, verdict status)`` in the grid's pair order."""

    @property
    def agreement(self) -> tuple[str, int, int]:
        """The most common status (the first seen among ties), how many runs have it, of how many."""
        statuses = [status for _, status in self.verdicts]
        top = max(dict.fromkeys(statuses), key=statuses.count)
        return top, statuses.count(top), len(statuses)

    def cells(self, runs: int) -> list[str]:
        """This group's row in a table of ``runs`` run columns: each run's status (blank past
        this group's own runs) and the agreement as ``"n of N status"``.

        Example:
            ``AcrossCheckpoints("b", "sub", "sampling", (("t1", "against"), ("t2", "unresolved"))).cells(3)``
            is ``["against", "unresolved", "", "1 of 2 against"]``.
        """
        status, n, total = self.agreement
        return [*(v for _, v in self.verdicts), *[""] * (runs - len(self.verdicts)), f"{n} of {total} {status}"]


@dataclass(frozen=True)
class Progress:
    """How much of a grid a report covers (a partial report says so)."""

    audits_done: int
    audits_total: int
    complete: bool

    def to_dict(self) -> dict[str, Any]:
        return {"audits_done": self.audits_done, "audits_total": self.audits_total, "complete": self.complete}


@dataclass(frozen=True)
class Claims:
    """Everything ``claims.json`` holds: the grid, each claim's records, the deployment configs,
    the report's progress and the summary lines.

    Attributes:
        grid: The grid's settings as written (a JSON record: the grid file's own fields).
        configs: Each deployment config used, by its hash (as JSON records).
        summary: Per claim, one line: how many settings are decided which way.
        rules: The version of the verdict rules that decided it (:data:`rnr_lens.judge.verdicts.RULES`;
            a file without the field is version 1's): a stale file is recognisable.
        provenance: The code, machine and weights that computed it, and each run's start and
            end (:class:`~rnr_lens.core.provenance.Provenance`; absent from files written before it).
    """

    grid: Mapping[str, Any]
    probes: tuple[str, ...]
    """The grid's probes as its fields write them (:attr:`rnr_lens.grids.grid.Grid.probe_specs`)."""
    routes_vs_search: tuple[RoutesClaim, ...] = ()
    bottleneck: tuple[BottleneckClaim, ...] = ()
    training: tuple[TrainingClaim, ...] = ()
    ceiling: tuple[Ceiling, ...] = ()
    """Claim 3 at large k per trained pair and task (grids with ``ceiling_k``; absent from the file otherwise)."""
    configs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    progress: Progress | None = None
    summary: Mapping[str, str] = field(default_factory=dict)
    rules: str = RULES
    provenance: Provenance | None = None

    @property
    def training_probes(self) -> list[TrainingProbe]:
        """Every trained pair's per-probe records, in order."""
        return [p for c in self.training for p in c.probes]

    def run_labels(self, records: Sequence[TrainingClaim | Ceiling]) -> list[str]:
        """Each record's trained model as a page names it (``records``: :attr:`training` or
        :attr:`ceiling`): its name, with ``(run i)`` in the grid's pair order added where several
        runs of the grid share one name (seeds trained before a seed was part of a run's name).
        Records are pair-major, one per task, as a report writes them; where that cannot be read
        (an unfinished report), the names alone."""
        names = [r.trained for r in records]
        tasks = len(self.grid.get("tasks") or ())
        pairs = len(self.grid.get("pairs") or ())
        if len({(r.trained, r.task) for r in records}) == len(records) or not tasks or len(records) != pairs * tasks:
            return names
        return [f"{name} (run {j // tasks + 1})" for j, name in enumerate(names)]

    def across_checkpoints(self) -> list[AcrossCheckpoints]:
        """Claim 3 side by side for every base with two or more trained checkpoints, per task
        and probe (in the order they first appear)."""
        # one training claim per pair and task: a group of several is several checkpoints, even
        # where their display names coincide (runs that differ only in their seed)
        groups: dict[tuple[str, str, str], list[tuple[str, str]]] = {}
        for c, label in zip(self.training, self.run_labels(self.training)):
            for p in c.probes:
                groups.setdefault((c.base, c.task, p.probe), []).append((label, p.verdict.status))
        return [AcrossCheckpoints(b, t, p, tuple(v)) for (b, t, p), v in groups.items() if len(v) > 1]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "rules": self.rules,
            "grid": dict(self.grid),
            "probes": list(self.probes),
            "routes_vs_search": [c.to_dict() for c in self.routes_vs_search],
            "bottleneck": [c.to_dict() for c in self.bottleneck],
            "training": [c.to_dict() for c in self.training],
            "configs": {h: dict(c) for h, c in self.configs.items()},
        }
        if self.ceiling:
            out["ceiling"] = [c.to_dict() for c in self.ceiling]
        if self.progress is not None:
            out["progress"] = self.progress.to_dict()
        if self.summary:
            out["summary"] = dict(self.summary)
        if self.provenance is not None:
            out["provenance"] = self.provenance.to_dict()
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Claims:
        """Read a ``claims.json`` back (``Claims.from_dict(json.load(f))``)."""
        progress, rules = d.get("progress"), str(d.get("rules", "1"))
        return cls(
            grid=dict(d["grid"]),
            probes=tuple(d.get("probes", ())),
            routes_vs_search=tuple(RoutesClaim.from_dict(c) for c in d.get("routes_vs_search", ())),
            bottleneck=tuple(BottleneckClaim.from_dict(c, rules) for c in d.get("bottleneck", ())),
            training=tuple(TrainingClaim.from_dict(c) for c in d.get("training", ())),
            ceiling=tuple(Ceiling.from_dict(c) for c in d.get("ceiling", ())),
            configs={h: dict(c) for h, c in d.get("configs", {}).items()},
            progress=Progress(**progress) if progress else None,
            summary=dict(d.get("summary", {})),
            rules=rules,
            provenance=Provenance.from_dict(d["provenance"]) if d.get("provenance") else None,
        )


def _counts_text(vs: list[Verdict]) -> str:
    c = counts(vs)
    return ", ".join(f"{status} {c[status]}" for status in STATUSES) + f" (of {len(vs)})"


def summary_lines(claims: Claims) -> dict[str, str]:
    """Per claim, how many settings are decided which way (never "not below in N of M" alone).
    A tally, not a test: each verdict is at its own level, with no correction across settings."""
    grid = claims.grid
    routes, bottleneck, trained = claims.routes_vs_search, claims.bottleneck, claims.training_probes
    both = [c.screen_vs_exhaustive for c in bottleneck if c.screen_vs_exhaustive is not None]
    some = [a for a in both if a.exhaustive_repair_discovery > 0]  # a tie at 0 (no block repairs anything) is no match
    agree = (
        ""
        if not both
        else f"; in none of the {len(both)} settings where both ran does a block repair a discovery failure, so no pick is compared"
        if not some
        else f"; the screen's pick repaired as much as the exhaustive sweep's best in {sum(a.regret <= 0 for a in some)} of {len(some)} settings "
        "where both ran and some block repairs a discovery failure"
        + (f" ({len(both) - len(some)} more where no block repairs any)" if len(some) < len(both) else "")
    )
    with_set = sum(1 for c in bottleneck if c.failures >= 2)

    def line(decided: list[Verdict], what: str) -> str:
        return f"{what}: " + (_counts_text(decided) if decided else "not evaluated in this grid")

    at_budget = [v.verdict for c in claims.ceiling for k, v in c.verdicts if k == c.budget]
    ceiling = {"ceiling": line(at_budget, f"the same at the ceiling's budget, k = {grid['ceiling_k']}, comparisons")} if claims.ceiling else {}
    return {
        "routes_vs_search": line(
            [c.verdict for c in routes],
            f"random routes reach as much as the search (margin {grid['margin']:.2f}) and keep half of its gain, settings",
        ),
        "retention": line(
            [c.retention_verdict for c in routes],
            f"answer-blind selectors keep under {grid['retention_margin']:.2f} of the random routes' gain, settings",
        ),
        "bottleneck": line(
            [c.verdict for c in bottleneck], f"one MLP repairs most held-out failures ({with_set} settings with a failure set), settings"
        )
        + agree,
        "training": line(
            [p.verdict for p in trained],
            f"realized rose while the ceiling rose by less than {grid['margin']:.2f} and less than half of it, or fell, comparisons",
        ),
    } | ceiling
