"""Verdicts: what one setting's numbers are allowed to say about one of the paper's claims.

A :class:`Verdict` has one of four statuses, always relative to the paper's claim:

- ``support``: the claim's inequality is resolved: a difference's interval and its test agree
  at the stated level; a margin (non-inferiority) is tested by the score test at the shifted
  null, which the score interval inverts (:func:`rnr_lens.core.stats.score_p`);
- ``against``: the opposite is resolved;
- ``unresolved``: neither is; the verdict then says the smallest effect this ``n`` could
  resolve (80% power) and roughly how many questions would resolve the effect observed;
- ``uninformative``: the setting cannot speak to the claim (no probe reaches above its chance
  level, no failure set, a realized change resolved at or below zero).

Every level is **per setting and per claim**, one-sided 2.5% in each direction (the two-sided
95% interval's bound), with no correction across the settings of a grid: about 2.5% of settings
per direction are expected to be decided wrongly by chance, and a summary's counts are a tally,
not a test. Within one verdict the rules say where a correction applies (Holm over the two ways
claim 1 can be against; over a tie of blocks; over the answer-blind selectors) and where none is
needed (an intersection-union test, which requires every part at the full level).

An unresolved difference is never counted as support. Margins are stated once, here, with
their reasons, and are never tuned toward the paper's answers; a grid may set its own.
Every function takes per-question outcomes (0/1 arrays, or chance probabilities) and the
questions' prompts, and returns the :class:`~rnr_lens.core.stats.Estimate` values it decided on
beside the verdict.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from rnr_lens.core.stats import (
    LEVEL,
    Estimate,
    above_chance,
    design_effect,
    detectable,
    n_needed,
    paired_difference,
    per_question_sd,
    rate,
    ratio,
    score_mean,
    score_p,
    wilson,
)
from rnr_lens.judge.verdict_words import WRITTEN, Number, Reason, chance_text, power_text, render

RULES = "3"
"""The version of the rules below, written beside every verdict (``rules`` in ``claims.json``):
a verdict of another version was decided by other rules and is re-derived, not compared.
Version 1 (no ``rules`` field): the rules before issue 34 (claim 1 support by the margin alone,
claim 2 against from the selected block, claim 3 by TOST). Version 2: the rules before issue 72
(claims 2 and 3 not gated on chance: a failure set, or a ceiling, that guessing alone gives could
decide them; the chance level averaged over 200 drawn derangements rather than exact; a plan's
n for every part of a verdict, resolved or not, and for effects pointing away from the claim; a
printed p that of the exact test, not of the test the interval inverts; a scan's first resolved
k by the exact test; percentile bounds at ``(1 - 0.95) / 2``)."""

SUPPORT, AGAINST, UNRESOLVED, UNINFORMATIVE = "support", "against", "unresolved", "uninformative"
STATUSES = (SUPPORT, AGAINST, UNRESOLVED, UNINFORMATIVE)

MARGIN = 0.05
"""Non-inferiority margin on a difference of rates (claim 1: random routes against the search;
claim 3: the ceiling's change): five points of accuracy, the smallest gain benchmark
comparisons commonly report as a gain, so a difference inside it is one a reader would call
"the same". Because a margin must be small beside the effect it protects, each use is paired
with a gain-relative condition (claim 1: random routes keep half of the search's gain; claim 3:
the ceiling's change below half of the realized rise)."""

RETENTION_MARGIN = 0.25
"""Claim 1's "answer-blind selectors retain almost none of the gain": retention below a
quarter of the oracle's gain counts as "almost none"; an interval wholly above it as "retains
some"."""

BREAK_BOUND = 0.2
"""The largest control break rate a bottleneck may have: a block whose silencing breaks more
than one in five of the questions the model gets right is no repair (the miner's bound since
its first version). The miner admits blocks by the point estimate on the discovery half of the
controls; the verdict needs the break rate on the held-out controls resolved below it (Wilson
95% upper bound below it, the exact binomial test agreeing)."""

MOST = 0.5
"""Claim 2's "repairs most of a failure set": a held-out repair rate resolved above one half."""


@dataclass(frozen=True)
class Verdict:
    """A status, the decision behind it, and for an unresolved verdict what ``n`` would decide.

    Stored as a decision: its words (:attr:`text`, :attr:`power_text`) are rendered from
    ``reason`` when shown (:mod:`rnr_lens.judge.verdict_words`), so ``claims.json`` holds no prose.

    Attributes:
        status: ``support``, ``against``, ``unresolved`` or ``uninformative``.
        reason: The rule that decided it, with the numbers and estimates it read.
        detectable: The smallest effect (distance from the null or margin) this ``n``
            resolves at the stated level with 80% power.
        n_needed: Questions (per arm's shared set) that would resolve the observed effect with
            80% power; None where no ``n`` would (an observed effect of zero, or one pointing
            away from the claim's direction).
        rules: The version of the rules that decided it (:data:`RULES`).
    """

    status: str
    reason: Reason
    detectable: float | None = None
    n_needed: int | None = None
    rules: str = RULES

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"verdict status {self.status!r} is not one of {', '.join(STATUSES)}")

    @property
    def text(self) -> str:
        """The reason in words, with the estimates it rests on."""
        return render(self.reason)

    @property
    def power_text(self) -> str:
        """For an unresolved or uninformative verdict: what this ``n`` can decide."""
        return "" if self.status in (SUPPORT, AGAINST) else power_text(self.detectable, self.n_needed)

    def __str__(self) -> str:
        return f"{self.status}: {self.text}" + (f" ({self.power_text})" if self.power_text else "")

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "reason": self.reason.to_dict(),
            "detectable": self.detectable,
            "n_needed": self.n_needed,
            "rules": self.rules,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Verdict:
        """Read a written verdict; one written without ``rules`` is version 1's, and one written
        with its sentence and no ``reason`` (before verdicts were stored as decisions) keeps
        that sentence (:data:`~rnr_lens.judge.verdict_words.WRITTEN`)."""
        reason = Reason.from_dict(d["reason"]) if "reason" in d else Reason(WRITTEN, {"text": str(d["text"])})
        return cls(d["status"], reason, d.get("detectable"), d.get("n_needed"), str(d.get("rules", "1")))


def counts(verdicts: Iterable[Verdict]) -> dict[str, int]:
    """How many verdicts have each status (every status present, zeros included)."""
    out = dict.fromkeys(STATUSES, 0)
    for v in verdicts:
        out[v.status] += 1
    return out


def _sd(diff: np.ndarray, prompts: Sequence[str] | None) -> float:
    """Per-question sd of a difference, inflated by the prompts' design effect."""
    deff, _ = design_effect(np.asarray(diff, float), prompts)
    return per_question_sd(diff) * float(np.sqrt(deff))


def holm(pvalues: Sequence[float], level: float = LEVEL) -> list[bool]:
    """Which of ``pvalues`` Holm's step-down procedure rejects at ``1 - level``: the same
    answer as ``statsmodels``' ``multipletests(method="holm")`` (a test keeps them equal), in a
    few lines because that function runs a garbage collection on every call (0.2 s, which the
    verdicts' error-rate simulation cannot afford).

    Example:
        >>> holm([0.03, 0.03, 0.03, 0.03]), holm([0.01, 0.04])   # four at 0.03: none survives
        ([False, False, False, False], [True, True])
    """
    alpha, m = 1 - level, len(pvalues)
    out = [False] * m
    for rank, i in enumerate(sorted(range(m), key=lambda j: pvalues[j])):
        if pvalues[i] > alpha / (m - rank):
            break
        out[i] = True
    return out


def _toward(e: Estimate, side: str) -> float:
    """``e``'s deciding p (its interval's test and the exact one beside it, the larger) where its
    estimate lies on ``side`` (``"above"``/``"below"``) of its null, else 1."""
    p = e.deciding_p
    if e.is_empty or p is None or e.null is None:
        return 1.0
    return p if (e.value > e.null if side == "above" else e.value < e.null) else 1.0


def at_margin(e: Estimate, per_question: np.ndarray, margin: float, prompts: Sequence[str] | None = None) -> Estimate:
    """A paired difference ``e`` tested against a margin instead of zero: the score test that
    its interval inverts, at the shifted null (``e.resolved`` then says whether it is resolved
    above or below the margin)."""
    if e.is_empty:
        return e
    p = score_p(per_question, margin, (-1.0, 1.0), prompts)
    return replace(e, p=p, null=margin, exact_p=None, method=f"{e.method.split(';')[0]}; score test at {margin:+.2f}")


def _missing(parts: dict[str, bool]) -> list[str]:
    """The parts of an intersection-union test that do not hold, by name, in order."""
    return [name for name, ok in parts.items() if not ok]


def _plan(parts: Sequence[tuple[float, np.ndarray]], prompts: Sequence[str] | None, level: float) -> tuple[float | None, int | None]:
    """What n decides an intersection of conditions, given **only the conditions that failed**
    (rules 3: a plan sizes the gate that failed, never one already resolved): the smallest
    effect this n resolves for the condition that needs the most questions, and that many
    questions (None where one failed condition's observed distance is not in the claim's
    direction: no n would resolve it; None, None where none failed)."""
    if not parts:
        return None, None
    plans = []
    for distance, values in parts:
        sd = _sd(values, prompts)
        plans.append((n_needed(distance, sd, level=level) if distance > 0 else None, detectable(sd, len(values), level=level)))
    if any(n is None for n, _ in plans):
        return max((d for _, d in plans if d is not None), default=None), None
    n, d = max(plans, key=lambda t: t[0] or 0)
    return d, n


# ---------------------------------------------------------------------------------------------
# Claim 1: random routes against structured search
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RoutesVerdict:
    """Claim 1's first half on one setting: the estimates and the verdict.

    Attributes:
        difference: reach(random) - reach(search), paired per question (tested against 0).
        versus_margin: The same difference tested against ``-margin``.
        search_gain: reach(search) - realized, paired (the gate: is there anything to match?).
        random_gain: reach(random) - realized, paired.
        kept_half: The mean per-question contrast ``(R - D) - (S - D) / 2``: random routes keep
            more than half of the search's gain where it is resolved above zero.
    """

    difference: Estimate
    versus_margin: Estimate
    search_gain: Estimate
    random_gain: Estimate
    kept_half: Estimate
    above_chance_random: Estimate
    above_chance_search: Estimate
    verdict: Verdict


def routes_vs_search(
    reach_random: np.ndarray,
    reach_search: np.ndarray,
    realized: np.ndarray,
    chance_random: np.ndarray,
    chance_search: np.ndarray,
    prompts: Sequence[str] | None = None,
    *,
    margin: float = MARGIN,
    level: float = LEVEL,
) -> RoutesVerdict:
    """Claim 1 on one setting ("random routes reach as much as the search at a matched
    budget"): a fixed sequence of tests, each at one-sided ``(1 - level) / 2``.

    1. *against* where random routes are resolved behind: random - search below ``-margin``
       (whatever the gate below says: routes that break the model are against), or, past the
       gate, the contrast ``(R - D) - (S - D) / 2`` below zero (random routes keep less than
       half of the search's gain); Holm over the two;
    2. *support* by superiority where random routes are resolved above both the search and
       realized, and above their chance level;
    3. *uninformative* unless the search's gain over realized is resolved above zero and its
       reach above its chance level: with nothing to match, matching says nothing;
    4. *support* where both hold (an intersection-union test, each part at the full level):
       random - search's lower bound above ``-margin`` (the score test at the margin), and the
       contrast resolved above zero (random routes keep at least half of the search's gain),
       with random routes' reach resolved above their chance level;
    5. else *unresolved*, with the ``n`` that would decide the part that needs the most.

    Example:
        >>> gain = np.r_[np.ones(300), np.zeros(100)]   # both probes reach 300 of 400
        >>> realized = np.r_[np.ones(100), np.zeros(300)]  # the default only 100
        >>> low = np.full(400, 0.02)
        >>> routes_vs_search(gain, gain, realized, low, low).verdict.status
        'support'
        >>> routes_vs_search(gain, gain, gain, low, low).verdict.status   # the search gains nothing
        'uninformative'
    """
    r, s, d = (np.asarray(x, float) for x in (reach_random, reach_search, realized))
    diff = paired_difference(r, s, prompts, level=level)
    ac_r = above_chance(r, chance_random, prompts, level=level)
    ac_s = above_chance(s, chance_search, prompts, level=level)
    if diff.is_empty:
        empty = Estimate.empty("tango")
        return RoutesVerdict(diff, diff, empty, empty, empty, ac_r, ac_s, Verdict(UNINFORMATIVE, Reason("routes:no-overlap")))
    vs_margin = at_margin(diff, r - s, -margin, prompts)
    search_gain = paired_difference(s, d, prompts, level=level)
    random_gain = paired_difference(r, d, prompts, level=level)
    contrast = (r - d) - 0.5 * (s - d)
    kept = score_mean(contrast, (-1.0, 1.0), prompts, level=level)

    def out(
        status: str, rule: str, plan: tuple[float | None, int | None] = (None, None), numbers: dict[str, Any] | None = None, **read: Estimate
    ) -> RoutesVerdict:
        reason = Reason(rule, numbers or {}, {"difference": diff, "kept": kept, **read})
        return RoutesVerdict(diff, vs_margin, search_gain, random_gain, kept, ac_r, ac_s, Verdict(status, reason, *plan))

    gate = search_gain.resolved == "above" and ac_s.resolved == "above"
    # Holm over the two ways to be against; the contrast is tested only past the gate (a gain
    # the search does not have cannot be kept or lost), the margin whatever the gate says
    behind = holm([_toward(vs_margin, "below"), _toward(kept, "below") if gate else 1.0], level)
    if any(behind):
        return out(AGAINST, "routes:behind", numbers={"margin": margin, "by_margin": bool(behind[0])})
    if diff.resolved == "above" and random_gain.resolved == "above" and ac_r.resolved == "above":
        return out(SUPPORT, "routes:ahead", random_gain=random_gain)
    if not gate:
        failed = [(search_gain.value, s - d)] if search_gain.resolved != "above" else []
        failed += [] if ac_s.resolved == "above" else [(ac_s.value, s - np.asarray(chance_search, float))]
        plan = _plan(failed, prompts, level)
        if search_gain.resolved != "above":
            return out(UNINFORMATIVE, "routes:no-gain", plan, search_gain=search_gain)
        return out(UNINFORMATIVE, "routes:no-gain", plan, search_above_chance=ac_s)
    if vs_margin.resolved == "above" and kept.resolved == "above" and ac_r.resolved == "above":
        return out(SUPPORT, "routes:matched", numbers={"margin": margin})
    parts = {  # support's three parts, by the names verdict_words.ROUTES_PARTS words them
        "margin": (vs_margin.resolved == "above", diff.value + margin, r - s),
        "contrast": (kept.resolved == "above", kept.value, contrast),
        "chance": (ac_r.resolved == "above", ac_r.value, r - np.asarray(chance_random, float)),
    }
    needs = _missing({name: ok for name, (ok, _, _) in parts.items()})
    plan = _plan([(distance, values) for ok, distance, values in parts.values() if not ok], prompts, level)
    return out(UNRESOLVED, "routes:unresolved", plan, numbers={"margin": margin, "needs": tuple(needs)})


@dataclass(frozen=True)
class Retention:
    """The share of the oracle's gain an answer-blind selector keeps.

    ``estimate`` is the **net** share, ``(blind - realized) / (oracle - realized)`` with
    Fieller's interval and the t-test it inverts against the retention margin: net of the
    realized answers the selector loses (a pick that is wrong where the default was right
    counts against it). ``gross`` is the share of the gained questions (reached, not realized)
    whose pick is correct, Wilson. Both are None where the probe's reach is not resolved above
    its chance level or its gain over realized is not resolved above zero (a share of a gain
    that may be chance, or absent, means nothing); ``gate`` then names which
    (:data:`~rnr_lens.judge.verdict_words.RETENTION_GATES`), beside the ``gain`` it read.

    ``detectable`` and ``n_needed`` plan the retention verdict: the smallest retention distance
    from the margin this ``n`` resolves (80% power), and the questions that would resolve the
    distance observed, from the linearized contrast ``(blind - realized) - margin * gain``;
    ``n_needed`` is None where the retention observed lies above the margin (away from the
    claim's "almost none": no n would support it)."""

    selector: str
    estimate: Estimate | None
    gate: str = ""
    detectable: float | None = None
    n_needed: int | None = None
    gross: Estimate | None = None
    gain: Estimate | None = None


def retention(
    selectors: dict[str, np.ndarray],
    realized: np.ndarray,
    reached: np.ndarray,
    above: Estimate,
    prompts: Sequence[str] | None = None,
    *,
    gain: Estimate | None = None,
    margin: float = RETENTION_MARGIN,
    level: float = LEVEL,
) -> list[Retention]:
    """Each answer-blind selector's retention of the gain, gated on reach above chance and a
    gain resolved above zero (``gain``: reach minus realized, paired per question, when the
    caller has it already)."""
    if above.resolved != "above":
        return [Retention(s, None, "chance") for s in selectors]
    real, reach = np.asarray(realized, float), np.asarray(reached, float)
    gain = gain if gain is not None else paired_difference(reach, real, prompts, level=level)
    if gain.resolved != "above":
        return [Retention(s, None, "gain", gain=gain) for s in selectors]
    gained = (reach == 1) & (real == 0)
    out = []
    for s, v in selectors.items():
        picks = np.asarray(v, float)
        kept = picks - real
        u = kept - margin * (reach - real)  # retention below the margin <=> mean(u) below zero
        sd = _sd(u, prompts)
        out.append(
            Retention(
                s,
                ratio(kept, reach - real, prompts, null=margin, level=level),
                detectable=_over(detectable(sd, len(u), level=level), gain.value),
                n_needed=n_needed(float(u.mean()), sd, level=level) if u.mean() < 0 else None,  # toward "almost none" only
                gross=rate(picks[gained], level=level),
            )
        )
    return out


def _over(x: float | None, scale: float) -> float | None:
    return None if x is None or not scale else x / scale


def retention_verdict(retentions: Sequence[Retention], *, margin: float = RETENTION_MARGIN, level: float = LEVEL) -> Verdict:
    """Claim 1's second half on one setting ("answer-blind procedures retain almost none of the
    gain"), on the net retention: *against* where one selector's retention is resolved above
    ``margin`` (Fieller's interval and its t-test, Holm over the selectors); *support* where
    every selector's is resolved below it (an intersection-union test: no correction needed);
    *uninformative* without a gain above chance; else *unresolved*."""
    measured = [r for r in retentions if r.estimate is not None and not r.estimate.is_empty]
    if not measured:
        gated = next((r for r in retentions if r.gate), None)
        return Verdict(
            UNINFORMATIVE,
            Reason("retention:none", {"gate": gated.gate if gated else "none"}, {"gain": gated.gain} if gated and gated.gain else {}),
        )

    def read(r: Retention) -> Reason:
        """What a selector's retention verdict names: the selector, its net and gross shares."""
        shares = {"kept": r.estimate} if r.estimate else {}
        if r.gross is not None and not r.gross.is_empty:
            shares["gross"] = r.gross
        return Reason("", {"selector": r.selector, "margin": margin}, shares)

    above = holm([_toward(r.estimate, "above") if r.estimate else 1.0 for r in measured], level)
    above = [x and r.estimate is not None and r.estimate.low > margin for x, r in zip(above, measured)]  # the interval agrees
    if any(above):
        kept = read(measured[above.index(True)])
        return Verdict(AGAINST, replace(kept, rule="retention:kept", numbers={**kept.numbers, "selectors": len(measured)}))
    if all(r.estimate is not None and r.estimate.resolved == "below" for r in measured):
        return Verdict(SUPPORT, Reason("retention:little", {"margin": margin}))
    worst = max(measured, key=lambda r: r.estimate.high if r.estimate else 0.0)
    return Verdict(UNRESOLVED, replace(read(worst), rule="retention:unresolved"), worst.detectable, worst.n_needed)


# ---------------------------------------------------------------------------------------------
# Claim 2: one MLP block
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BlockTrial:
    """One candidate block's outcomes on the held-out half, per question: did silencing it
    repair each held-out failure, and break each held-out control (the controls that did not
    admit it)? ``heldout_repaired`` is in the order of the null arms' values."""

    layer: int
    heldout_repaired: np.ndarray
    heldout_broken: np.ndarray


@dataclass(frozen=True)
class BlockCounts:
    """One block of an exhaustive sweep on one question set for every block: the whole failure
    set and every control."""

    layer: int
    repaired: int
    failures: int
    broken: int
    controls: int


@dataclass(frozen=True)
class FailureSetChance:
    """Claim 2's precondition (rules 3): is a failure set larger than guessing alone gives?

    The failure set is the not-realized questions that one of the probe's tries reaches; by
    chance alone, the same tries scored against other questions' golds (the derangement chance
    of :func:`rnr_lens.core.stats.derangement_chance`, as claim 1 reads it), ``expected`` of the
    ``questions`` not realized would count as reached. ``estimate`` is their reach minus that
    chance level (:func:`rnr_lens.core.stats.above_chance`: Wilson, the score test it inverts, the
    exact Poisson-binomial test of the set's size beside it); a set that is not resolved above
    it cannot speak to claim 2 (a bottleneck that "repairs" a set of lucky guesses says nothing
    about what the model knows).

    Attributes:
        questions: Not-realized questions (complete under the probe).
        failures: Of them, reached by one of the probe's tries: the failure set's size.
        expected: The failure set's size expected by chance (the sum of their chance levels).
        estimate: ``failures / questions`` minus the mean chance level, with its tests.

    A verdict it stops names no n: the set's size over its chance level is what the audit's
    questions give, not an effect of the claim's.
    """

    questions: int
    failures: int
    expected: float
    estimate: Estimate

    @property
    def above(self) -> bool:
        return self.estimate.resolved == "above"

    def text(self) -> str:
        """``29 of 724 not-realized questions reached, 24.2 expected by chance (...)``."""
        return chance_text(self.questions, self.failures, self.expected, self.estimate)

    def to_dict(self) -> dict[str, Any]:
        return {
            "questions": self.questions,
            "failures": self.failures,
            "expected": self.expected,
            "above_chance": self.estimate.to_dict(),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FailureSetChance:
        return cls(int(d["questions"]), int(d["failures"]), float(d["expected"]), Estimate.from_dict(d["above_chance"]))


def failure_set_vs_chance(
    reached: np.ndarray, realized: np.ndarray, chance: np.ndarray, prompts: Sequence[str] | None = None, *, level: float = LEVEL
) -> FailureSetChance:
    """The failure set (reached, not realized) against its chance expectation, over the
    not-realized questions (:class:`FailureSetChance`).

    Example:
        >>> realized = np.r_[np.ones(10), np.zeros(90)]
        >>> reached = np.r_[np.ones(10), np.ones(30), np.zeros(60)]    # 30 of 90 failures
        >>> failure_set_vs_chance(reached, realized, np.full(100, 0.3)).above   # 27 expected
        False
        >>> failure_set_vs_chance(reached, realized, np.full(100, 0.05)).above  # 4.5 expected
        True
    """
    x, d, c = (np.asarray(v, float) for v in (reached, realized, chance))
    keep = (d == 0) & ~np.isnan(c)
    groups = None if prompts is None else [g for g, k in zip(prompts, keep) if k]
    estimate = above_chance(x[keep], c[keep], groups, level=level)
    return FailureSetChance(int(keep.sum()), int(x[keep].sum()), float(c[keep].sum()), estimate)


@dataclass(frozen=True)
class BottleneckVerdict:
    """Claim 2 on one setting.

    Attributes:
        layer: The block the verdict speaks for (the kept one of a tie), or None.
        heldout: Its held-out repair against one half (Wilson at the tie's Holm level, exact
            binomial test).
        break_heldout: Its break rate on the held-out controls against the bound (Wilson 95%,
            exact binomial test).
        versus_null: Its held-out repair minus each null arm's, paired per question, at the
            tie's Holm level (Tango and McNemar against the re-run; the score interval and test
            against the arbitrary-block shares).
        tie: The blocks tied with it on discovery repair (itself included), each confirmed on
            the held-out half.
    """

    layer: int | None
    heldout: Estimate | None
    break_heldout: Estimate | None
    versus_null: dict[str, Estimate]
    tie: tuple[int, ...]
    verdict: Verdict


def _first_n(resolves: Any, start: int = 1, stop: int = 10_000) -> int | None:
    """The smallest ``n`` in ``[start, stop)`` for which ``resolves(n)`` holds."""
    return next((n for n in range(start, stop) if resolves(n)), None)


def heldout_needed(ties: int = 1, *, level: float = LEVEL) -> int | None:
    """The fewest held-out failures with which a repair rate can resolve above one half at all
    (every one repaired), at the level a tie of ``ties`` blocks leaves (Holm's first step).

    Example:
        >>> heldout_needed(), heldout_needed(2)   # 6 of 6 gives p = 0.031; a tie of two needs 7
        (6, 7)
    """
    tied = 1 - (1 - level) / ties
    return _first_n(lambda n: wilson(n, n, null=MOST, level=tied).resolved == "above")


def controls_needed(breaks: int, *, bound: float = BREAK_BOUND, level: float = LEVEL) -> int | None:
    """The fewest held-out controls with which ``breaks`` breaks still resolve the break rate
    below ``bound`` (its Wilson upper bound below it and the exact binomial test agreeing; the
    interval alone would allow 16 and 25, at an exact one-sided level of 2.8%).

    Example:
        >>> controls_needed(0), controls_needed(1)   # at the default bound of 0.2
        (17, 26)
    """
    return _first_n(lambda n: wilson(breaks, n, null=bound, level=level).resolved == "below", start=max(breaks, 1))


def _versus(repaired: np.ndarray, arm: np.ndarray, level: float) -> Estimate:
    """Held-out repair minus a null arm's, paired per question: against the unablated re-run
    (0/1), Tango's interval with the exact McNemar test; against the arbitrary-block arm (each
    question's share of the drawn blocks that repair it), the score interval on the
    per-question differences with the score test it inverts (a sign test would test the median)."""
    x, y = np.asarray(repaired, float), np.asarray(arm, float)
    if np.isin(y, (0.0, 1.0)).all():
        return paired_difference(x, y, level=level)
    return score_mean(x - y, (-1.0, 1.0), level=level)


def _exhaustive_against(sweep: Sequence[BlockCounts], bound: float, level: float) -> tuple[int, int] | None:
    """Is every block ruled out, each on the whole failure set and every control, at half the
    level (the "or" within a block spends two chances): repair resolved below one half, or
    break resolved above ``bound``? No correction across blocks: against needs every one.
    Returns how many were ruled out by repair and how many more by break (None: some block
    is not ruled out)."""
    half = 1 - (1 - level) / 2
    low_repair = high_break = 0
    for b in sweep:
        repair = wilson(b.repaired, b.failures, null=MOST, level=half)
        broken = wilson(b.broken, b.controls, null=bound, level=half) if b.controls else None
        if repair.resolved == "below":
            low_repair += 1
        elif broken is not None and broken.resolved == "above":
            high_break += 1
        else:
            return None
    return low_repair, high_break


@dataclass(frozen=True)
class _BottleneckDecision:
    """Claim 2's decision on one setting, before its reason (:func:`_bottleneck_reason`).

    ``trials``: the tied blocks confirmed on held-out failures, each with its held-out repair
    at the tie's Holm level; ``kept``: the one the verdict speaks for (None: no block confirmed);
    ``broken`` and ``versus``: its held-out break against the bound and its repair against each
    null arm; ``parts``: support's three conditions, by name; ``ruled_out``: the exhaustive
    sweep's counts where it rules out every block."""

    status: str
    trials: tuple[tuple[BlockTrial, Estimate], ...]
    kept: tuple[BlockTrial, Estimate] | None
    broken: Estimate | None
    versus: dict[str, Estimate]
    parts: dict[str, bool]
    ruled_out: tuple[int, int] | None


def _decide_bottleneck(
    tie: Sequence[BlockTrial], nulls: dict[str, np.ndarray], sweep: Sequence[BlockCounts], break_bound: float, level: float
) -> _BottleneckDecision:
    """The decision of :func:`bottleneck_verdict` (its rules are stated there)."""
    tied_level = 1 - (1 - level) / max(len(tie), 1)
    trials = tuple((t, rate(np.asarray(t.heldout_repaired, float), null=MOST, level=tied_level)) for t in tie if len(t.heldout_repaired))
    ruled_out = _exhaustive_against(sweep, break_bound, level) if sweep else None
    if not trials:
        status = AGAINST if ruled_out is not None else UNRESOLVED if not tie else UNINFORMATIVE
        return _BottleneckDecision(status, trials, None, None, {}, {}, ruled_out)
    kept = min(trials, key=lambda th: (_toward(th[1], "above"), -th[1].value, th[0].layer))
    t, held = kept
    broken = rate(np.asarray(t.heldout_broken, float), null=break_bound, level=level) if len(t.heldout_broken) else None
    versus = {name: _versus(t.heldout_repaired, arm, tied_level) for name, arm in nulls.items() if len(arm)}
    parts = {  # support's three parts, by the names verdict_words.BOTTLENECK_PARTS words them
        "repair": held.resolved == "above",
        "break": broken is not None and broken.resolved == "below",
        "null": bool(versus) and all(v.resolved == "above" for v in versus.values()),
    }
    status = SUPPORT if all(parts.values()) else AGAINST if ruled_out is not None else UNRESOLVED
    return _BottleneckDecision(status, trials, kept, broken, versus, parts, ruled_out)


def _bottleneck_reason(d: _BottleneckDecision, *, swept: int, generated: tuple[int, int] | None, break_bound: float, level: float) -> Reason:
    """What a :class:`_BottleneckDecision` read, as its reason (``swept``: the blocks of the
    exhaustive sweep, 0 without one): what was found, and for unresolved, which parts are
    missing and what n each would take (worded by :mod:`rnr_lens.judge.verdict_words`)."""
    if d.ruled_out is not None and d.status == AGAINST:
        ruled: dict[str, Number] = {"swept": swept, "by_repair": d.ruled_out[0], "by_break": d.ruled_out[1], "break_bound": break_bound}
        return Reason("bottleneck:ruled-out", {**ruled, "half_level": 1 - (1 - level) / 2})
    if d.kept is None:
        if d.status == UNINFORMATIVE:
            return Reason("bottleneck:no-heldout")
        return Reason("bottleneck:none-selected", {"generated": generated, "swept": swept, "break_bound": break_bound})
    t, held = d.kept
    broken = d.broken
    read = {"heldout": held, **({"break": broken} if broken is not None else {})}
    named: dict[str, Number] = {"layer": t.layer, "tied_with": tuple(x.layer for x, _ in d.trials if x.layer != t.layer) if len(d.trials) > 1 else ()}
    if d.status == SUPPORT:
        versus = {f"versus:{k}": v for k, v in d.versus.items()}
        return Reason("bottleneck:support", {**named, "nulls": tuple(d.versus)}, {**read, **versus})
    need = heldout_needed(len(d.trials), level=level)
    short = held.resolved != "above" and need is not None and held.n < need
    controls = (
        None
        if broken is not None and broken.resolved == "below"
        else (controls_needed(0, bound=break_bound, level=level), controls_needed(1, bound=break_bound, level=level))
    )
    numbers: dict[str, Number] = {
        "needs": tuple(_missing(d.parts)),
        "heldout_needed": need if short else None,
        "controls_needed": controls,
        "swept": swept,
    }
    return Reason("bottleneck:unresolved", {**named, **numbers, "break_bound": break_bound}, read)


def bottleneck_verdict(
    tie: Sequence[BlockTrial],
    nulls: dict[str, np.ndarray] | None = None,
    *,
    sweep: Sequence[BlockCounts] = (),
    generated: tuple[int, int] | None = None,
    chance: FailureSetChance | None = None,
    break_bound: float = BREAK_BOUND,
    level: float = LEVEL,
) -> BottleneckVerdict:
    """Silencing one MLP block repairs most of a failure set: an intersection-union test both
    ways, on a failure set that can speak to it.

    - *uninformative*, checked first (rules 3), where ``chance`` (the failure set against its
      chance expectation, :func:`failure_set_vs_chance`) is given and not resolved above it;

    - *support*, checked first: the selected block (``tie``: the blocks tied on discovery
      repair within the bound, each confirmed on the held-out half; the one with the smallest
      p is kept, Holm over the tie) has (1) its held-out repair resolved above one half, (2)
      its break rate on the held-out controls resolved below ``break_bound`` (Wilson 95% and
      the exact binomial test), and (3) its held-out repair resolved above each null arm's
      (``nulls``: an arbitrary block, an unablated re-run; per held-out question); all
      required, (1) and (3) at the tie's Holm level;
    - *against*: only with an exhaustive ``sweep`` (every block, one question set), where every
      block is ruled out (:func:`_exhaustive_against`); a screen alone never gives against;
    - *uninformative*: no held-out failure to confirm on, no block selected, and no
      exhaustive sweep that rules out every block;
    - else *unresolved*, saying which part is missing and what n would decide it (an n only
      where the held-out repair lies above one half: none decides one that points below).

    ``generated`` is (blocks generated, blocks in the model), for the text where no block was
    selected. The decision (:func:`_decide_bottleneck`) is made before its reason is read off
    (:func:`_bottleneck_reason`).
    """
    d = _decide_bottleneck(tie, nulls or {}, sweep, break_bound, level)
    found = _bottleneck_reason(d, swept=len(sweep), generated=generated, break_bound=break_bound, level=level)
    tied = tuple(t.layer for t in tie)
    if chance is not None and not chance.above:  # the precondition, checked first: a set at chance says nothing
        numbers = {"chance_questions": chance.questions, "chance_failures": chance.failures, "chance_expected": chance.expected}
        verdict = Verdict(
            UNINFORMATIVE,
            Reason("bottleneck:at-chance", {**found.numbers, **numbers, "found": found.rule}, {**found.estimates, "chance": chance.estimate}),
        )
    else:
        held = d.kept[1] if d.kept is not None else None
        unresolved = held is not None and d.status == UNRESOLVED and held.resolved != "above"
        plan = (
            # rules 3: an n only toward the claim (a held-out repair above one half); none where it points below
            (detectable(0.5, held.n, level=held.level), n_needed(held.value - MOST, 0.5, level=held.level) if held.value > MOST else None)
            if unresolved and held is not None
            else (None, None)
        )
        verdict = Verdict(d.status, found, *plan)
    if d.kept is None:
        return BottleneckVerdict(None, None, None, {}, tied, verdict)
    return BottleneckVerdict(d.kept[0].layer, d.kept[1], d.broken, d.versus, tied, verdict)


# ---------------------------------------------------------------------------------------------
# Claim 3: training
# ---------------------------------------------------------------------------------------------


def ceiling_contrast(
    delta_realized: np.ndarray, delta_reachable: np.ndarray, prompts: Sequence[str] | None = None, *, level: float = LEVEL
) -> Estimate:
    """Half the realized rise minus the ceiling's rise, per question (``Δr / 2 - Δk``, values in
    ``[-1.5, 1.5]``): resolved above zero where the ceiling kept up with less than half of the
    realized gain. Score interval and the score test it inverts (:func:`rnr_lens.core.stats.score_mean`)."""
    values = 0.5 * np.asarray(delta_realized, float) - np.asarray(delta_reachable, float)
    return score_mean(values, (-1.5, 1.5), prompts, level=level)


@dataclass(frozen=True)
class TrainingVerdict:
    """Claim 3 on one trained pair, task and probe.

    Attributes:
        delta_realized, delta_reachable: Trained minus base, paired per question.
        ceiling_vs_margin: Delta reachable tested against ``+margin`` (non-inferiority's mirror).
        ceiling_vs_gain: :func:`ceiling_contrast`, against zero.
        above_chance_base, above_chance_trained: Each model's reach minus its chance level (the
            precondition, rules 3; empty where no chance level was given).
    """

    delta_realized: Estimate
    delta_reachable: Estimate
    ceiling_vs_margin: Estimate
    ceiling_vs_gain: Estimate
    verdict: Verdict
    above_chance_base: Estimate = Estimate.empty("wilson vs fixed chance")
    above_chance_trained: Estimate = Estimate.empty("wilson vs fixed chance")


def training_verdict(
    realized_a: np.ndarray,
    realized_b: np.ndarray,
    reach_a: np.ndarray,
    reach_b: np.ndarray,
    prompts: Sequence[str] | None = None,
    *,
    margin: float = MARGIN,
    level: float = LEVEL,
    chance_a: np.ndarray | None = None,
    chance_b: np.ndarray | None = None,
) -> TrainingVerdict:
    """Training raised realized accuracy while the ceiling did not keep up. Checked in this
    order, each test at one-sided ``(1 - level) / 2``:

    0. (rules 3, where each model's per-question chance levels ``chance_a`` and ``chance_b``
       are given: the same tries scored against other questions' golds) *uninformative* where
       neither model's reach is resolved above its chance level: a ceiling that guessing alone
       gives, and any change in it, says nothing of what either model can reach (a change in
       how many different guesses a model makes is not a change of its ceiling). Where one of
       them is above chance, the rules below read the reach as measured, beside its chance;
    1. no resolved rise in realized accuracy: *uninformative* where the change is resolved
       below zero or shown flat (its 95% interval inside ``±margin``, both margin tests
       agreeing): there is no gain to attribute; otherwise *unresolved* (a rise not yet
       resolved), with the ``n`` that would resolve it;
    2. *against* where delta reachable is resolved above ``+margin`` (training expanded reach);
    3. *support* where both hold (an intersection-union test): delta reachable's upper bound
       below ``+margin`` (the score test at the margin), and ``Δr / 2 - Δk`` resolved above
       zero (the ceiling rose by less than half the realized rise, or fell);
    4. else *unresolved*, with the ``n`` that would decide the part that needs the most.

    Example:
        >>> base, trained = np.r_[np.ones(100), np.zeros(300)], np.r_[np.ones(300), np.zeros(100)]
        >>> training_verdict(base, trained, trained, trained).verdict.status   # the ceiling stayed put
        'support'
    """
    ra, rb, ka, kb = (np.asarray(x, float) for x in (realized_a, realized_b, reach_a, reach_b))
    dr = paired_difference(rb, ra, prompts, level=level)
    dk = paired_difference(kb, ka, prompts, level=level)
    if dr.is_empty:
        return TrainingVerdict(dr, dk, dk, Estimate.empty("score"), Verdict(UNINFORMATIVE, Reason("training:no-overlap")))
    ddr, ddk = rb - ra, kb - ka
    dk_margin = at_margin(dk, ddk, margin, prompts)
    gain = ceiling_contrast(ddr, ddk, prompts, level=level)
    empty = Estimate.empty("wilson vs fixed chance")
    ac_a = above_chance(ka, chance_a, prompts, level=level) if chance_a is not None else empty
    ac_b = above_chance(kb, chance_b, prompts, level=level) if chance_b is not None else empty

    def out(
        status: str, rule: str, plan: tuple[float | None, int | None] = (None, None), numbers: dict[str, Any] | None = None, **read: Estimate
    ) -> TrainingVerdict:
        reason = Reason(rule, {"margin": margin, **(numbers or {})}, {"delta_realized": dr, "delta_reachable": dk, **read})
        return TrainingVerdict(dr, dk, dk_margin, gain, Verdict(status, reason, *plan), ac_a, ac_b)

    if chance_a is not None and chance_b is not None and ac_a.resolved != "above" and ac_b.resolved != "above":
        return out(UNINFORMATIVE, "training:at-chance", base_above_chance=ac_a, trained_above_chance=ac_b)

    if dr.resolved != "above":
        flat = at_margin(dr, ddr, margin, prompts).resolved == "below" and at_margin(dr, ddr, -margin, prompts).resolved == "above"
        if dr.resolved == "below" or flat:
            return out(UNINFORMATIVE, "training:no-rise", numbers={"fell": dr.resolved == "below"})
        return out(UNRESOLVED, "training:rise-unresolved", _plan([(dr.value, ddr)], prompts, level))
    if dk_margin.resolved == "above":
        return out(AGAINST, "training:expanded", contrast=gain)
    if dk_margin.resolved == "below" and gain.resolved == "above":
        return out(SUPPORT, "training:kept", numbers={"fell": dk.resolved == "below"}, contrast=gain)
    parts = {  # support's two parts, by the names verdict_words.TRAINING_PARTS words them
        "margin": (dk_margin.resolved == "below", margin - dk.value, ddk),
        "contrast": (gain.resolved == "above", gain.value, 0.5 * ddr - ddk),
    }
    needs = _missing({name: ok for name, (ok, _, _) in parts.items()})
    plan = _plan([(distance, values) for ok, distance, values in parts.values() if not ok], prompts, level)
    return out(UNRESOLVED, "training:unresolved", plan, numbers={"needs": tuple(needs)}, contrast=gain)
