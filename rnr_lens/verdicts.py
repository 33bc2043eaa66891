"""Verdicts: what one setting's numbers are allowed to say about one of the paper's claims.

A :class:`Verdict` has one of four statuses, always relative to the paper's claim:

- ``support``: the claim's inequality is resolved: a difference's interval and its exact test
  agree at the stated level; a margin (non-inferiority, equivalence) is read from the score
  interval alone (the confidence-interval method: no exact test of a shifted null for paired
  proportions is in scipy or statsmodels);
- ``against``: the opposite is resolved;
- ``unresolved``: neither is; the verdict then says the smallest effect this ``n`` could
  resolve (80% power) and roughly how many questions would resolve the effect observed;
- ``uninformative``: the setting cannot speak to the claim (no probe reaches above its chance
  level, no failure set, no realized gain to attribute).

An unresolved difference is never counted as support. Margins are stated once, here, with
their reasons, and are never tuned toward the paper's answers; a grid may set its own.
Every function takes per-question outcomes (0/1 arrays, or chance probabilities) and the
questions' prompts, and returns the :class:`~rnr_lens.stats.Estimate` values it decided on
beside the verdict.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rnr_lens.stats import LEVEL, Estimate, above_chance, design_effect, detectable, n_needed, paired_difference, per_question_sd, rate, ratio

SUPPORT, AGAINST, UNRESOLVED, UNINFORMATIVE = "support", "against", "unresolved", "uninformative"
STATUSES = (SUPPORT, AGAINST, UNRESOLVED, UNINFORMATIVE)

MARGIN = 0.05
"""Non-inferiority (claim 1) and equivalence (claim 3) margin on a difference of rates: five
points of accuracy, the smallest gain benchmark comparisons commonly report as a gain, so a
difference inside it is one a reader would call "the same"."""

RETENTION_MARGIN = 0.25
"""Claim 1's "answer-blind selectors retain almost none of the gain": retention below a
quarter of the oracle's gain counts as "almost none"; an interval wholly above it as "retains
some"."""

BREAK_BOUND = 0.2
"""The largest control break rate (point estimate) a bottleneck may have: a block whose
silencing breaks more than one in five of the questions the model gets right is no repair (the
miner's bound since its first version). The verdict further needs the break rate's upper bound
below one half."""

MOST = 0.5
"""Claim 2's "repairs most of a failure set": a held-out repair rate resolved above one half."""


@dataclass(frozen=True)
class Verdict:
    """A status, its one-sentence reason, and for an unresolved verdict what ``n`` would decide.

    Attributes:
        status: ``support``, ``against``, ``unresolved`` or ``uninformative``.
        text: The reason, with the estimates it rests on.
        detectable: The smallest effect (distance from the null or margin) this ``n``
            resolves at the stated level with 80% power.
        n_needed: Questions (per arm's shared set) that would resolve the observed effect with
            80% power; None where no ``n`` would (an observed effect of zero).
    """

    status: str
    text: str
    detectable: float | None = None
    n_needed: int | None = None

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"verdict status {self.status!r} is not one of {', '.join(STATUSES)}")

    @property
    def power_text(self) -> str:
        """For an unresolved or uninformative verdict: what this ``n`` can decide."""
        if self.status in (SUPPORT, AGAINST) or self.detectable is None:
            return ""
        need = (
            "no n resolves an observed effect of zero"
            if self.n_needed is None
            else f"about {self.n_needed} questions would resolve the effect observed"
        )
        return f"this n resolves effects of {self.detectable:.2f} or more (80% power); {need}"

    def __str__(self) -> str:
        return f"{self.status}: {self.text}" + (f" ({self.power_text})" if self.power_text else "")

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "text": self.text, "detectable": self.detectable, "n_needed": self.n_needed, "power": self.power_text}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Verdict:
        return cls(d["status"], d["text"], d.get("detectable"), d.get("n_needed"))


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


# ---------------------------------------------------------------------------------------------
# Claim 1: random routes against structured search
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RoutesVerdict:
    """Claim 1's first half on one setting: the estimates and the verdict."""

    difference: Estimate  # reach(random) - reach(search), paired per question
    above_chance_random: Estimate
    above_chance_search: Estimate
    verdict: Verdict


def routes_vs_search(
    reach_random: np.ndarray,
    reach_search: np.ndarray,
    chance_random: np.ndarray,
    chance_search: np.ndarray,
    prompts: Sequence[str] | None = None,
    *,
    margin: float = MARGIN,
    level: float = LEVEL,
) -> RoutesVerdict:
    """Claim 1 on one setting. Checked in this order: neither probe's reach resolved above its
    chance level: uninformative; random routes non-inferior to the search (``random >= search -
    margin``: the Tango interval's lower bound above ``-margin``, even where the search is
    resolved ahead by less than the margin): support; the search resolved above random
    (interval below zero and the exact McNemar test): against; else unresolved.

    Example:
        >>> both, none = np.ones(400), np.zeros(400)
        >>> routes_vs_search(both, both, none, none).verdict.status   # 400 questions show a 0.05 margin
        'support'
        >>> routes_vs_search(both[:40], both[:40], none[:40], none[:40]).verdict.status   # 40 cannot
        'unresolved'
    """
    diff = paired_difference(reach_random, reach_search, prompts, level=level)
    ac_r = above_chance(reach_random, chance_random, prompts, level=level)
    ac_s = above_chance(reach_search, chance_search, prompts, level=level)
    if diff.is_empty:
        return RoutesVerdict(diff, ac_r, ac_s, Verdict(UNINFORMATIVE, "no question has both probes' tries"))
    d = np.asarray(reach_random, float) - np.asarray(reach_search, float)
    n = len(d)  # questions: the sd below is inflated by the prompts' design effect instead
    sd = _sd(d, prompts)
    if ac_r.resolved != "above" and ac_s.resolved != "above":
        best, reach, chance = max(((ac_r, reach_random, chance_random), (ac_s, reach_search, chance_search)), key=lambda t: t[0].value)
        sd_c = _sd(np.asarray(reach, float) - np.asarray(chance, float), prompts)
        return RoutesVerdict(
            diff,
            ac_r,
            ac_s,
            Verdict(
                UNINFORMATIVE,
                f"neither probe reaches resolved above its chance level (random {ac_r.text()}, search {ac_s.text()} above chance), "
                "so their difference says nothing about reaching",
                detectable(sd_c, n, level=level),
                n_needed(best.value, sd_c, level=level) if best.value > 0 else None,
            ),
        )
    if diff.low > -margin:  # non-inferiority comes first: a search ahead by less than the margin is "the same"
        note = {"above": " (random routes resolved above the search)", "below": " (the search resolved ahead, by less than the margin)"}
        text = f"random routes reach at least as much as the search within {margin:.2f}: random - search {diff.text()}{note.get(diff.resolved or '', '')}"
        return RoutesVerdict(diff, ac_r, ac_s, Verdict(SUPPORT, text))
    if diff.resolved == "below":
        text = f"the search reaches more than random routes: random - search {diff.text()}, exact McNemar p = {diff.p:.3g}"
        return RoutesVerdict(diff, ac_r, ac_s, Verdict(AGAINST, text))
    # unresolved: how many questions would show non-inferiority (or the search's lead) at this size
    distance = diff.value + margin if diff.value > -margin else diff.value
    text = f"random - search {diff.text()} is neither within -{margin:.2f} (its lower bound) nor resolved below zero (p = {diff.p:.3g})"
    return RoutesVerdict(diff, ac_r, ac_s, Verdict(UNRESOLVED, text, detectable(sd, n, level=level), n_needed(distance, sd, level=level)))


@dataclass(frozen=True)
class Retention:
    """The share of the oracle's gain an answer-blind selector keeps: ``(blind - realized) /
    (oracle - realized)`` with Fieller's interval, or None (with the reason) where the probe's
    reach is not resolved above its chance level or its gain over realized is not resolved
    above zero (a share of a gain that may be chance, or absent, means nothing).

    ``detectable`` and ``n_needed`` plan the retention verdict: the smallest retention distance
    from the margin this ``n`` resolves (80% power), and the questions that would resolve the
    distance observed, from the linearized contrast ``(blind - realized) - margin * gain``."""

    selector: str
    estimate: Estimate | None
    reason: str = ""
    detectable: float | None = None
    n_needed: int | None = None


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
        return [Retention(s, None, "reach not resolved above chance") for s in selectors]
    real, reach = np.asarray(realized, float), np.asarray(reached, float)
    gain = gain if gain is not None else paired_difference(reach, real, prompts, level=level)
    if gain.resolved != "above":
        return [Retention(s, None, f"no gain over realized resolved ({gain.text()})") for s in selectors]
    out = []
    for s, v in selectors.items():
        kept = np.asarray(v, float) - real
        u = kept - margin * (reach - real)  # retention below the margin <=> mean(u) below zero
        sd = _sd(u, prompts)
        out.append(
            Retention(
                s,
                ratio(kept, reach - real, level=level),
                detectable=_over(detectable(sd, len(u), level=level), gain.value),
                n_needed=n_needed(float(u.mean()), sd, level=level),
            )
        )
    return out


def _over(x: float | None, scale: float) -> float | None:
    return None if x is None or not scale else x / scale


def retention_verdict(retentions: Sequence[Retention], *, margin: float = RETENTION_MARGIN) -> Verdict:
    """Claim 1's second half on one setting ("answer-blind procedures retain almost none of the
    gain"): support where every blind selector's Fieller interval lies wholly below ``margin``;
    against where one lies wholly above it; uninformative without a gain above chance. The
    interval alone decides (no exact test of a ratio is at hand), and the text says so."""
    measured = [r for r in retentions if r.estimate is not None and not r.estimate.is_empty]
    if not measured:
        reason = next((r.reason for r in retentions if r.reason), "no selections stored, or a gain of exactly zero")
        return Verdict(UNINFORMATIVE, f"no retention to judge: {reason}")
    above = [r for r in measured if r.estimate is not None and r.estimate.low > margin]
    if above:
        r = above[0]
        return Verdict(AGAINST, f"{r.selector} keeps {r.estimate.text() if r.estimate else '-'} of the gain, its interval wholly above {margin:.2f}")
    if all(r.estimate is not None and r.estimate.high < margin for r in measured):
        return Verdict(SUPPORT, f"every answer-blind selector keeps under {margin:.2f} of the gain (each interval wholly below)")
    worst = max(measured, key=lambda r: r.estimate.high if r.estimate else 0.0)
    text = f"{worst.selector} keeps {worst.estimate.text() if worst.estimate else '-'} of the gain: its interval straddles {margin:.2f}"
    return Verdict(UNRESOLVED, text, worst.detectable, worst.n_needed)


# ---------------------------------------------------------------------------------------------
# Claim 2: one MLP block
# ---------------------------------------------------------------------------------------------


def bottleneck_verdict(
    heldout_repaired: np.ndarray | None,
    break_rate: Estimate | None,
    nulls: Sequence[Estimate] = (),
    *,
    block: int | None,
    break_bound: float = BREAK_BOUND,
    level: float = LEVEL,
) -> tuple[Estimate | None, Verdict]:
    """Silencing one MLP block repairs most of a failure set. Checked in this order:

    - uninformative: no held-out failure to confirm on;
    - against: the held-out repair is resolved below one half (Wilson interval and exact
      binomial test);
    - unresolved: it is not resolved above one half (with what n would resolve it);
    - unresolved: the break rate is unmeasured, above ``break_bound`` (point), or has its upper
      bound at one half or more;
    - unresolved: its interval does not lie above each null's (an arbitrary block silenced; the
      unablated model re-run in the same batches);
    - support otherwise.

    The bottleneck was chosen on the discovery half, so only held-out questions decide.
    """
    if block is None or heldout_repaired is None or len(heldout_repaired) == 0:
        return None, Verdict(UNINFORMATIVE, "no held-out failures to confirm a block on")
    held = rate(np.asarray(heldout_repaired, float), null=MOST, level=level)
    sd = 0.5  # a binomial's sd at the null of one half
    plan = detectable(sd, held.n, level=level), n_needed(held.value - MOST, sd, level=level)
    named = f"MLP {block} repairs {held.text()} of {held.n} held-out failures"
    if held.resolved == "below":
        return held, Verdict(AGAINST, f"silencing {named}, resolved below one half")
    if held.resolved != "above":
        hopeless = " (no repair rate resolves above one half with this few held-out failures)" if plan[0] is None or plan[0] >= MOST else ""
        return held, Verdict(UNRESOLVED, f"{named}: not resolved at this failure-set size{hopeless}", *plan)
    if break_rate is None or break_rate.is_empty:
        return held, Verdict(UNRESOLVED, f"{named}, but its break rate is unmeasured (no realized control)")
    if break_rate.value > break_bound or break_rate.high >= MOST:
        n_break = n_needed(MOST - break_rate.value, 0.5, level=level) if break_rate.value < MOST else None
        text = f"{named} but breaks {break_rate.text()} of the realized controls (bound {break_bound:.2f}, upper bound below one half)"
        return held, Verdict(UNRESOLVED, text, detectable(0.5, break_rate.n, level=level), n_break)
    for null in nulls:
        if not null.is_empty and held.low <= null.high:
            return held, Verdict(UNRESOLVED, f"{named}, but its interval does not lie above the null's ({null.text()}, {null.method})")
    return held, Verdict(
        SUPPORT, f"silencing {named}, resolved above one half, its interval above each null's; breaks {break_rate.text()} of the controls"
    )


# ---------------------------------------------------------------------------------------------
# Claim 3: training
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrainingVerdict:
    """Claim 3 on one trained pair, task and probe."""

    delta_realized: Estimate
    delta_reachable: Estimate
    delta_reachable_tost: Estimate  # the (1 - 2 alpha) interval the equivalence test reads
    verdict: Verdict


def training_verdict(
    realized_a: np.ndarray,
    realized_b: np.ndarray,
    reach_a: np.ndarray,
    reach_b: np.ndarray,
    prompts: Sequence[str] | None = None,
    *,
    margin: float = MARGIN,
    level: float = LEVEL,
) -> TrainingVerdict:
    """Training raised realized accuracy while the ceiling fell or stayed flat. Checked in this
    order: no resolved rise in realized accuracy: uninformative (no gain to attribute); the
    ceiling resolved below zero: support; flat, i.e. equivalent within ``±margin`` by the two
    one-sided tests at ``1 - level`` (read as the ``1 - 2(1 - level)`` Tango interval inside the
    margin; a resolved rise smaller than the margin still counts as flat): support; the ceiling
    resolved above zero: against; else unresolved."""
    dr = paired_difference(realized_b, realized_a, prompts, level=level)
    dk = paired_difference(reach_b, reach_a, prompts, level=level)
    tost = paired_difference(reach_b, reach_a, prompts, level=1 - 2 * (1 - level))
    if dr.is_empty:
        return TrainingVerdict(dr, dk, tost, Verdict(UNINFORMATIVE, "no question complete in both audits"))
    ddr = np.asarray(realized_b, float) - np.asarray(realized_a, float)
    n = len(ddr)  # questions: the sd is inflated by the prompts' design effect instead
    ddk = np.asarray(reach_b, float) - np.asarray(reach_a, float)
    if dr.resolved != "above":
        sd = _sd(ddr, prompts)
        text = f"no rise in realized accuracy resolved (delta realized {dr.text()}), so there is no gain to attribute"
        return TrainingVerdict(
            dr, dk, tost, Verdict(UNINFORMATIVE, text, detectable(sd, n, level=level), n_needed(dr.value, sd, level=level) if dr.value > 0 else None)
        )
    if dk.resolved == "below":
        return TrainingVerdict(dr, dk, tost, Verdict(SUPPORT, f"realized rose ({dr.text()}) while the ceiling fell ({dk.text()})"))
    if tost.low > -margin and tost.high < margin:  # equivalence comes before a resolved rise smaller than the margin
        rise = " (a rise smaller than the margin is resolved)" if dk.resolved == "above" else ""
        text = f"realized rose ({dr.text()}) while the ceiling stayed flat: delta reachable within ±{margin:.2f} (TOST, {tost.level:.0%} interval {tost.text()}){rise}"
        return TrainingVerdict(dr, dk, tost, Verdict(SUPPORT, text))
    if dk.resolved == "above":
        return TrainingVerdict(
            dr, dk, tost, Verdict(AGAINST, f"realized rose ({dr.text()}) and so did the ceiling ({dk.text()}): training expanded reach")
        )
    sd = _sd(ddk, prompts)
    distance = margin - abs(dk.value) if abs(dk.value) < margin else dk.value
    text = f"realized rose ({dr.text()}); the ceiling's change {dk.text()} is neither resolved nor within ±{margin:.2f}"
    return TrainingVerdict(dr, dk, tost, Verdict(UNRESOLVED, text, detectable(sd, n, level=level), n_needed(distance, sd, level=level)))
