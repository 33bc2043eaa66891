"""Claim 3 at large k: the reachable ceiling of a trained pair as pass@k curves, and where
they cross.

Claim 3 says training raises realized accuracy while what the model can reach at all stays
flat or shrinks. At k = 8 a sampling probe sees little of the ceiling; the work this builds on
measures it as pass@k at large k, where a base model's curve often overtakes its trained
model's. Given a base and a trained audit that ran the same sampling probe with a large budget
``K`` on the same questions, :func:`rnr_lens.trained_pair.comparison.compare_ceiling` reads their draws and
:func:`ceiling_of` gives:

- both **curves**: pass@k for k = 1..K, the unbiased estimator of Chen et al. (2021) from each
  question's K draws, averaged over questions, with Wilson intervals (conservative for a mean of
  fractional values; over prompts where questions repeat one);
- each curve's **chance level** (rules 3): the same draws scored against the other questions'
  golds, in expectation over a random derangement (:func:`chance_curves`), with its Wilson
  interval, and the distinct answers per question among the K draws, which is what a pass@k
  curve of guesses measures;
- the **paired difference** trained - base of each question's pass@k at every k (the score
  interval for a bounded mean with the score test it inverts, the sign-flip randomization test
  beside it; at k = K Tango's interval with exact McNemar beside it:
  :func:`rnr_lens.core.stats.paired_mean_difference`);
- the **crossing** (:class:`Crossing`): where trained first leads; the first k at which
  "base >= trained" is not excluded; the first k at which the pointwise interval puts base above
  trained; the first
  k after the lead at which the point estimates cross (strictly below zero), with a bootstrap
  interval over prompts; or where the curves meet without crossing (every question equal, as at
  saturation); and, where they neither cross nor meet by K and the gap is resolved to be
  closing, where its straight-line trend in log k over the top three octaves reaches zero (an
  interval conditional on the line: sampling error only); beside it, where trained still leads
  at K, where two bounded models fitted to each question's draws put the crossing
  (:mod:`rnr_lens.judge.passk_models`: beta-binomial and zero-inflated, "none by 10^7" where they
  put none), each with its log-likelihood; and the first k at which base lies above trained,
  by the pointwise interval and under a simultaneous max-abs-t bootstrap band over k;
- **claim 3's verdict** at each named k (1, 8, 32, K): :func:`rnr_lens.judge.verdicts.training_verdict`
  unchanged, with a question reached at k when one of its first k draws is correct, so the verdict
  at k = 8 reads the first 8 draws as an 8-sample probe would (its difference with Tango's
  interval, exact McNemar beside it), and its precondition the chance that one of a question's
  first k draws holds another question's gold.

Invariants: both curves cover the same questions (those complete in both audits,
:func:`rnr_lens.trained_pair.comparison.complete_in_both`) under the same probe (same temperature, draw and
budget: :func:`rnr_lens.trained_pair.comparison.compare`'s checks); the scan over k is pointwise (each k's
interval at 95%, not a family-wise band), and the crossing says so beside the band's k. The records here are plain
values (torch-free, below the store): a :class:`Ceiling` reads back from ``claims.json``, and a
referee re-derives it from stored draws without a model.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from rnr_lens.core.stats import LEVEL, Estimate, paired_mean_difference, percentile_bounds, rate
from rnr_lens.errors import RnrLensError
from rnr_lens.judge.passk_models import ModelCrossing, k_text, model_crossings
from rnr_lens.judge.verdicts import MARGIN, TrainingVerdict, Verdict, training_verdict

NAMED_K = (1, 8, 32)
"""The k's (besides the budget itself) at which the ceiling reports claim 3's verdict."""

BOOTSTRAP = 2000
"""Resamples of questions behind the crossing's interval (seeded: the same data give the same interval)."""

TREND_OCTAVES = 3
"""The trend that extrapolates an uncrossed gap is fitted over the top this-many octaves of k."""

MIN_PROMPTS = 30
"""Fewer prompts than this and the crossing gets no bootstrap interval and no extrapolation: a
percentile bootstrap over few clusters understates its spread (Cameron and Miller 2015, "A
practitioner's guide to cluster-robust inference", sec. VI)."""

LOG_FLOAT_MAX = math.log(sys.float_info.max)
"""The largest log k an extrapolation can turn back into a float."""

TIE = 1e-12
"""A mean difference within this of zero is zero (rounding, not a lead or a crossing)."""


@dataclass(frozen=True)
class CurvePoint:
    """Both curves, their chance levels and their difference at one k."""

    k: int
    base: Estimate
    trained: Estimate
    difference: Estimate
    """Trained - base, paired per question (:func:`rnr_lens.core.stats.paired_mean_difference`: the
    score interval with the score test it inverts, the sign-flip randomization test beside it;
    at k = K, Tango's interval with exact McNemar beside it)."""
    base_chance: Estimate = Estimate.empty("wilson")
    trained_chance: Estimate = Estimate.empty("wilson")
    """Each model's chance pass@k (:func:`chance_curves`: the same draws scored against the
    other questions' golds), with its Wilson interval; empty in files of rules before 3."""


@dataclass(frozen=True)
class Crossing:
    """Where the trained curve stops lying above the base curve.

    Point estimates of the mean difference within :data:`TIE` of zero count as zero: a curve
    that touches the other has not crossed it.

    Attributes:
        lead: The smallest k at which trained's point estimate lies above base's; None where it
            never does (there is no lead to lose, and nothing crosses).
        not_excluded: The smallest k at which base >= trained is not excluded (the difference's
            95% interval, pointwise, no longer lies above zero); None where it does up to K.
        reversed: The smallest k at which base > trained is resolved pointwise by the interval
            printed at that k and the score test it inverts (rules 3; the exact test beside it
            is not consulted: a scan's first k is read beside the simultaneous band, which
            answers for the many k's); None where it never is.
        point: The smallest k after the lead at which the point estimate of trained - base is
            below zero; None where it never is by K.
        tied: The smallest k after the lead from which every question's pass@k is the same
            under both models (both reach it at every remaining k, or neither ever does: the
            curves meet and can no longer cross); None where they do not meet by K.
        point_interval: A 95% percentile bootstrap interval of the crossing over prompts. Per
            resample the statistic is the first k after its first lead at which the difference
            is below zero, or 1 where the resample never leads (base at or above trained at
            every k: no lead to lose; counting it as "beyond K" would say the opposite). Each
            end None where in more than 2.5% of resamples no crossing follows the lead by K
            (trained still leads at K, or the curves only meet); None as a whole where fewer
            than :data:`MIN_PROMPTS` prompts make a bootstrap unreliable. Computed also where
            the observed curves have no lead (``point`` None).
        extrapolated: Where the curves neither cross nor meet by K, trained still leads at K, and
            the gap's slope in log k over the top :data:`TREND_OCTAVES` octaves is resolved
            negative (the bootstrap's 97.5% quantile below zero): the k at which that straight
            line in log k reaches zero, always beyond K (a guess, not a measurement); None
            otherwise.
        budget: K.
        never_leads: The share of bootstrap resamples in which trained never leads (each
            counted in ``point_interval`` as a crossing at k = 1); None without a bootstrap.
        extrapolated_interval: Where ``extrapolated`` is given, a 95% percentile bootstrap
            interval of it: each resample's own straight line through the same octaves, and
            where it reaches zero; the upper end None where in more than 2.5% of resamples the
            line never does (a slope of zero or above) or does beyond any float. It is
            conditional on the line: sampling error only, not the error of the line itself.
        reversed_band: The smallest k at which base > trained is resolved under a simultaneous
            95% band over k = 1..K (the max-abs-t bootstrap band over the same resamples: the
            band's upper edge below zero); None where it never is or without a bootstrap.
            ``reversed`` is pointwise, the first of K correlated tests; this one holds for
            the scan as a whole.
        models: Where trained still leads at K (no crossing and no meeting by K), the bounded
            models' crossings (:mod:`rnr_lens.judge.passk_models`): a per-question beta-binomial fit
            and its zero-inflated variant, each with its own bootstrap interval and its gap at
            the straight line's zero; empty otherwise.
    """

    lead: int | None
    not_excluded: int | None
    reversed: int | None
    point: int | None
    tied: int | None
    point_interval: tuple[int | None, int | None] | None
    extrapolated: float | None
    budget: int
    never_leads: float | None = None
    extrapolated_interval: tuple[float, float | None] | None = None
    reversed_band: int | None = None
    models: tuple[ModelCrossing, ...] = ()

    def text(self) -> str:
        """One sentence a page prints."""
        if self.lead is None:
            head = "trained never lies above base (no lead to lose: nothing crosses)"
            if self.point_interval is not None and self.never_leads is not None and self.never_leads < 1:
                head += f" (the crossing's {self._span()})"
        elif self.point is not None:
            span = f"no bootstrap interval: fewer than {MIN_PROMPTS} prompts" if self.point_interval is None else self._span()
            head = f"the point estimates cross at k = {self.point} ({span})"
        elif self.tied is not None:
            head = f"the curves meet at k = {self.tied} without crossing (every question's pass@k equal in both from there)"
        else:
            trend = (
                f"; the gap's straight-line trend in log k reaches zero near k = {_big(self.extrapolated)} "
                f"(extrapolated, conditional on the line (sampling error only){self._trend_span()})"
                if self.extrapolated is not None
                else "; the gap is not resolved to be closing over the top octaves"
            )
            head = f"the curves do not cross by k = {self.budget}{trend}{self._models_text()}"
        if self.not_excluded is None:
            return f"{head}; trained - base's pointwise 95% interval stays above zero at every k up to {self.budget}"
        band = (
            ""
            if self.reversed is None or self.never_leads is None
            else f" (k = {self.reversed_band} under a simultaneous 95% band over k)"
            if self.reversed_band is not None
            else " (and at no k under a simultaneous 95% band over k)"
        )
        # rules 3: "first" here reads the interval printed at each k (and the test it inverts),
        # not Estimate.resolved, which needs the exact test beside it too: worded apart
        rev = (
            f"; the pointwise 95% interval first puts base above trained at k = {self.reversed}{band}"
            if self.reversed is not None
            else "; the pointwise 95% interval never puts base above trained"
        )
        return f"{head}; base >= trained is first not excluded at k = {self.not_excluded} (pointwise 95%){rev}"

    def _span(self) -> str:
        """The crossing's bootstrap interval, and the share of resamples counted at k = 1."""
        assert self.point_interval is not None
        low, high = (f">{self.budget}" if end is None else str(end) for end in self.point_interval)
        counted = f"; trained never leads in {self.never_leads:.1%} of resamples, each counted as k = 1" if self.never_leads else ""
        return f"bootstrap 95%: {low} to {high}{counted}"

    def _models_text(self) -> str:
        """The bounded models' crossings, and what a measurement at the line's zero would tell
        apart ('' without models)."""
        if not self.models:
            return ""
        out = "; bounded models: " + "; ".join(m.text() for m in self.models)
        gaps = [(m.model, m.gap_at_line) for m in self.models if m.gap_at_line is not None]
        if gaps and self.extrapolated is not None:
            said = " and ".join(f"{name} {g.value:+.2f} [{g.low:+.2f}, {g.high:+.2f}]" for name, g in gaps)
            out += f"; at k = {_big(self.extrapolated)} the line says the gap is 0, the models {said}"
        return out

    def _trend_span(self) -> str:
        """The extrapolation's bootstrap interval, as the sentence prints it ('' without one)."""
        if self.extrapolated_interval is None:
            return ""
        low, high = self.extrapolated_interval
        return f"; bootstrap 95%: {_big(low)} to {'beyond any float' if high is None else _big(high)}"


def _big(k: float | None) -> str:
    """An extrapolated k (:func:`rnr_lens.judge.passk_models.k_text`)."""
    assert k is not None
    return k_text(k)


@dataclass(frozen=True)
class Ceiling:
    """Claim 3 at large k for one trained pair, task and probe (see the module docstring)."""

    base: str
    trained: str
    task: str
    probe: str
    questions: int
    excluded: int
    """Questions left out because they are not complete in both audits."""
    curve: tuple[CurvePoint, ...]
    crossing: Crossing
    verdicts: tuple[tuple[int, TrainingVerdict], ...]
    """Claim 3 at each named k and at K, a question reached at k when one of its first k draws is."""
    distinct: tuple[float, float] | None = None
    """The mean number of distinct answers per question among the K draws, base and trained:
    what a pass@k curve of guesses measures (None in files of rules before 3)."""
    audits: tuple[str, str] | None = None
    """The base and trained audits' ids, so a referee matches the ceiling to its evidence
    without relying on order (None in files of rules before 3, and where built from bare draws)."""

    def chance_text(self) -> str:
        """What guessing alone gives at K, beside the ceiling: each model's chance pass@K and
        its distinct answers per question ('' in files of rules before 3)."""
        top = self.curve[-1]
        if top.base_chance.is_empty:
            return ""
        shown = (
            f"chance pass@{self.budget} (the same draws against other questions' golds): base {top.base_chance.text()}, "
            f"trained {top.trained_chance.text()}"
        )
        if self.distinct is not None:
            shown += f"; distinct answers per question in {self.budget} draws: base {self.distinct[0]:.1f}, trained {self.distinct[1]:.1f}"
        return shown

    @property
    def budget(self) -> int:
        return len(self.curve)

    def extrapolation_cost(self) -> int | None:
        """Draws it would take, both models together, to reach the extrapolated crossing on
        these questions (None: nothing is extrapolated)."""
        k = self.crossing.extrapolated
        return None if k is None else 2 * math.ceil(k) * self.questions

    def at(self, k: int) -> CurvePoint:
        """The curves at ``k`` (1..K)."""
        if not 1 <= k <= self.budget:
            raise RnrLensError(f"k must be between 1 and the budget {self.budget}, got {k}")
        return self.curve[k - 1]

    def verdict(self, k: int) -> TrainingVerdict:
        """Claim 3's verdict at a named k."""
        for named, v in self.verdicts:
            if named == k:
                return v
        raise RnrLensError(f"no verdict at k = {k}; the named k's are {', '.join(str(n) for n, _ in self.verdicts)}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the curves, the crossing and each named k's verdict with its estimates
        (:meth:`from_dict` reads it back)."""
        return (
            {
                "base": self.base,
                "trained": self.trained,
                "task": self.task,
                "probe": self.probe,
                "questions": self.questions,
                "excluded": self.excluded,
                "curve": [_point_to_dict(p) for p in self.curve],
                "crossing": {
                    "lead": self.crossing.lead,
                    "not_excluded": self.crossing.not_excluded,
                    "reversed": self.crossing.reversed,
                    "point": self.crossing.point,
                    "tied": self.crossing.tied,
                    "point_interval": None if self.crossing.point_interval is None else list(self.crossing.point_interval),
                    "extrapolated": self.crossing.extrapolated,
                    "extrapolated_interval": None if self.crossing.extrapolated_interval is None else list(self.crossing.extrapolated_interval),
                    "budget": self.crossing.budget,
                    "never_leads": self.crossing.never_leads,
                    "reversed_band": self.crossing.reversed_band,
                    "models": [m.to_dict() for m in self.crossing.models],
                    "text": self.crossing.text(),
                    "extrapolation_cost": self.extrapolation_cost(),
                },
                "verdicts": [
                    {
                        "k": k,
                        **{f: getattr(v, f).to_dict() for f in _VERDICT_ESTIMATES[:4]},
                        **{f: getattr(v, f).to_dict() for f in _VERDICT_ESTIMATES[4:] if not getattr(v, f).is_empty},
                        "verdict": v.verdict.to_dict(),
                    }
                    for k, v in self.verdicts
                ],
            }
            | ({} if self.distinct is None else {"distinct": list(self.distinct)})
            | ({} if self.audits is None else {"audits": list(self.audits)})
        )

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Ceiling:
        """A ceiling read back from :meth:`to_dict` (``claims.json``)."""
        x = d["crossing"]
        interval = None if x["point_interval"] is None else (x["point_interval"][0], x["point_interval"][1])
        spread = x.get("extrapolated_interval")
        trend = None if spread is None else (float(spread[0]), None if spread[1] is None else float(spread[1]))
        crossing = Crossing(
            x["lead"],
            x["not_excluded"],
            x["reversed"],
            x["point"],
            x["tied"],
            interval,
            x["extrapolated"],
            int(x["budget"]),
            x.get("never_leads"),
            trend,
            x.get("reversed_band"),
            tuple(ModelCrossing.from_dict(m) for m in x.get("models", ())),
        )
        empty = Estimate.empty("wilson")
        curve = tuple(
            CurvePoint(
                int(p["k"]),
                Estimate.from_dict(p["base"]),
                Estimate.from_dict(p["trained"]),
                Estimate.from_dict(p["difference"]),
                Estimate.from_dict(p["base_chance"]) if "base_chance" in p else empty,
                Estimate.from_dict(p["trained_chance"]) if "trained_chance" in p else empty,
            )
            for p in d["curve"]
        )
        verdicts = tuple(
            (
                int(v["k"]),
                TrainingVerdict(
                    **{f: Estimate.from_dict(v[f]) for f in _VERDICT_ESTIMATES if f in v},
                    verdict=Verdict.from_dict(v["verdict"]),
                ),
            )
            for v in d["verdicts"]
        )
        distinct, audits = d.get("distinct"), d.get("audits")
        return cls(
            str(d["base"]),
            str(d["trained"]),
            str(d["task"]),
            str(d["probe"]),
            int(d["questions"]),
            int(d["excluded"]),
            curve,
            crossing,
            verdicts,
            None if distinct is None else (float(distinct[0]), float(distinct[1])),
            None if audits is None else (str(audits[0]), str(audits[1])),
        )


_VERDICT_ESTIMATES = (
    "delta_realized",
    "delta_reachable",
    "ceiling_vs_margin",
    "ceiling_vs_gain",
    "above_chance_base",
    "above_chance_trained",
)
"""A :class:`~rnr_lens.judge.verdicts.TrainingVerdict`'s estimates, in its field order (the last two
written where measured: rules 3)."""


def _point_to_dict(p: CurvePoint) -> dict[str, Any]:
    out = {"k": p.k, "base": p.base.to_dict(), "trained": p.trained.to_dict(), "difference": p.difference.to_dict()}
    if not p.base_chance.is_empty:
        out |= {"base_chance": p.base_chance.to_dict(), "trained_chance": p.trained_chance.to_dict()}
    return out


def pass_at_k_curves(correct: np.ndarray) -> np.ndarray:
    """Per question (rows of a ``(questions, K)`` 0/1 array), the unbiased pass@k for k = 1..K:
    ``1 - C(K - c, k) / C(K, k)``, ``c`` its correct draws (:func:`rnr_lens.core.stats.pass_at_k`,
    computed as a running product of ratios, each step exact to rounding, with no
    binomial coefficient formed)."""
    n_q, budget = correct.shape
    c = correct.sum(1)
    out = np.ones((n_q, budget))
    for q in range(n_q):
        out[q] = _pass_at_k_row(budget, int(c[q]))
    return out


def _pass_at_k_row(budget: int, c: int) -> np.ndarray:
    """pass@k for k = 1..``budget`` of one question with ``c`` correct draws of ``budget``."""
    out = np.ones(budget)
    # C(K - c, k) / C(K, k) = prod_{i<k} (K - c - i) / (K - i), zero once k > K - c
    ratio = 1.0
    for k in range(1, budget + 1):
        ratio *= max(budget - c - (k - 1), 0) / (budget - (k - 1))
        out[k - 1] = 1.0 - ratio
    return out


def chance_curves(answers: Sequence[Sequence[Hashable | None]], golds: Sequence[Hashable | None]) -> tuple[np.ndarray, np.ndarray]:
    """What guessing alone gives each question: its own draws (``answers``, ``(questions, K)``
    keys in try order as its reader grades them, :func:`rnr_lens.questions.answers.match_key`, None where
    none was read) scored against **the other questions' golds** (``golds``, keyed alike), in expectation over a uniform derangement of the golds (under which
    each other question's gold is paired with it with probability ``1 / (n - 1)``, so the
    expectation is exact: no derangements are drawn, and the work is linear in the draws).

    Returns two ``(questions, K)`` arrays: the chance pass@k for k = 1..K (the unbiased
    estimator with the deranged gold's count among the K draws), and the chance that one of the
    first k draws reaches (claim 3's reach at k). Rows are NaN where there is no other question.

    Example:
        >>> passk, first = chance_curves([["3", "3"], ["3", "4"], ["5", None]], ["3", "4", "3"])
        >>> first[1].tolist()   # question 1 said 3 first: the gold of questions 0 and 2, each half the time
        [1.0, 1.0]
        >>> passk[2].tolist()   # question 2 never says 3 or 4
        [0.0, 0.0]
    """
    n = len(golds)
    budget = len(answers[0]) if n else 0
    passk, first = np.zeros((n, budget)), np.zeros((n, budget))
    if n < 2:
        return np.full((n, budget), np.nan), np.full((n, budget), np.nan)
    owners: dict[Hashable, int] = {}
    for g in golds:
        if g is not None:
            owners[g] = owners.get(g, 0) + 1
    for q, said in enumerate(answers):
        seen: dict[Hashable, tuple[int, int]] = {}  # answer -> (first index, count)
        for i, a in enumerate(said):
            if a is not None and a in owners:
                at, count = seen.get(a, (i, 0))
                seen[a] = (at, count + 1)
        for a, (at, count) in seen.items():
            others = owners[a] - (golds[q] == a)  # the questions whose gold it is, itself left out
            if others:
                passk[q] += others * _pass_at_k_row(budget, count)
                first[q, at:] += others
    return passk / (n - 1), first / (n - 1)


def distinct_answers(answers: Sequence[Sequence[Hashable | None]]) -> float:
    """The mean number of distinct answers (read, canonical) per question among its draws."""
    return float(np.mean([len({a for a in said if a is not None}) for said in answers])) if len(answers) else math.nan


def curve_points(
    curves_base: np.ndarray,
    curves_trained: np.ndarray,
    prompts: Sequence[str],
    chance: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[CurvePoint, ...]:
    """Both curves and their paired difference at every k, from per-question pass@k arrays
    ``(questions, K)`` (:func:`pass_at_k_curves`) of the same questions in the same order, with
    each model's chance pass@k (``chance``: :func:`chance_curves`' first array per model)."""
    diff = curves_trained - curves_base
    empty = Estimate.empty("wilson")

    def level(curves: np.ndarray, k: int) -> Estimate:
        column = curves[:, k - 1]
        keep = ~np.isnan(column)
        return rate(column[keep], [p for p, ok in zip(prompts, keep) if ok]) if keep.any() else empty

    return tuple(
        CurvePoint(
            k,
            rate(curves_base[:, k - 1], prompts),
            rate(curves_trained[:, k - 1], prompts),
            paired_mean_difference(diff[:, k - 1], prompts),
            level(chance[0], k) if chance is not None else empty,
            level(chance[1], k) if chance is not None else empty,
        )
        for k in range(1, curves_base.shape[1] + 1)
    )


def find_crossing(
    curves_base: np.ndarray, curves_trained: np.ndarray, points: Sequence[CurvePoint], prompts: Sequence[str], seed: int = 0
) -> Crossing:
    """Where the trained curve stops lying above the base curve (:class:`Crossing`), from the
    per-question curves and their :func:`curve_points`; the bootstrap resamples whole prompts."""
    diff = curves_trained - curves_base
    budget = diff.shape[1]
    # rules 3: pointwise by the interval printed at each k and the test it inverts, beside the simultaneous band
    not_excluded = next((p.k for p in points if p.difference.excludes != "above"), None)
    reversed_at = next((p.k for p in points if p.difference.excludes == "below"), None)
    mean = diff.mean(0)
    lead, point = _lead_and_crossing(mean[None, :])
    lead_k = int(lead[0]) if lead[0] <= budget else None
    point_k = int(point[0]) if point[0] <= budget else None
    same = np.all(np.abs(diff) <= TIE, axis=0)  # every question equal at k (absorbing: see Crossing.tied)
    tied = next((k for k in range(lead_k + 1, budget + 1) if same[k - 1]), None) if lead_k is not None else None
    boot = _bootstrap_means(diff, prompts, seed)
    interval, never_leads, band = None, None, None
    if boot is not None:
        band = _first_below_band(mean, boot)
        leads, hits = _lead_and_crossing(boot)  # K + 1: no lead, or no crossing by K
        never = leads > budget
        hits = np.where(never, 1, hits)  # no lead to lose: base is at or above trained from k = 1
        low, high = (int(v) for v in np.quantile(hits, list(percentile_bounds()), method="inverted_cdf"))
        interval, never_leads = (low if low <= budget else None, high if high <= budget else None), float(never.mean())
    closing = lead_k is not None and point_k is None and tied is None and mean[-1] > TIE and boot is not None
    extrapolated, trend = _extrapolate(mean, boot) if closing and boot is not None else (None, None)
    return Crossing(lead_k, not_excluded, reversed_at, point_k, tied, interval, extrapolated, budget, never_leads, trend, band)


def _first_below_band(mean: np.ndarray, boot: np.ndarray) -> int | None:
    """The first k whose simultaneous 95% band lies below zero: the max-abs-t bootstrap band
    ``mean +- c * se`` over k = 1..K, ``se`` each k's bootstrap standard error and ``c`` the
    95% quantile over resamples of the largest ``|resample - mean| / se`` (k's whose resamples
    all agree have no spread and are left out); None where no k is."""
    se = boot.std(0, ddof=1)
    spread = se > TIE
    if not spread.any():
        return None
    t = np.abs(boot[:, spread] - mean[spread]) / se[spread]
    c = float(np.quantile(t.max(1), LEVEL, method="inverted_cdf"))
    below = spread & (mean + c * se < -TIE)  # a k without spread has no band to speak of
    return int(below.argmax()) + 1 if below.any() else None


def _lead_and_crossing(means: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each row of mean differences over k = 1..K: the first k above zero (the lead) and the
    first k after it below zero (the crossing), K + 1 where there is none."""
    budget = means.shape[1]
    above, below = means > TIE, means < -TIE
    lead = np.where(above.any(1), above.argmax(1) + 1, budget + 1)
    after = below & (np.arange(1, budget + 1)[None, :] > lead[:, None])
    return lead, np.where(after.any(1), after.argmax(1) + 1, budget + 1)


def _bootstrap_counts(prompts: Sequence[str], seed: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The crossing's :data:`BOOTSTRAP` resamples (seeded), whole prompts drawn together: each
    question's prompt code and, per resample, how often each prompt is drawn; None under
    :data:`MIN_PROMPTS` prompts."""
    groups = {g: i for i, g in enumerate(dict.fromkeys(prompts))}
    if len(groups) < MIN_PROMPTS:
        return None
    codes = np.array([groups[g] for g in prompts])
    return codes, np.random.default_rng(seed).multinomial(len(groups), np.full(len(groups), 1 / len(groups)), size=BOOTSTRAP)


def _bootstrap_means(diff: np.ndarray, prompts: Sequence[str], seed: int) -> np.ndarray | None:
    """The resamples of :func:`_bootstrap_counts`: the mean difference at every k in each."""
    drawn = _bootstrap_counts(prompts, seed)
    if drawn is None:
        return None
    codes, counts = drawn
    sums = np.zeros((counts.shape[1], diff.shape[1]))
    np.add.at(sums, codes, diff)
    sizes = np.bincount(codes, minlength=counts.shape[1]).astype(float)
    return _weighted_sums(counts, sums) / (counts @ sizes)[:, None]  # counts @ sizes: integers, exact in any order


def _weighted_sums(weights: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``weights @ rows``, summed over ``rows`` in their order, one element-wise step each: the
    same bits on every CPU, where a BLAS product sums in an order its kernel picks (an AMD EPYC
    and an Intel Xeon gave the seeds grid's extrapolations other last digits)."""
    out = np.zeros((weights.shape[0], rows.shape[1]))
    for j in range(rows.shape[0]):
        out += weights[:, j : j + 1] * rows[j]
    return out


def _extrapolate(mean: np.ndarray, boot: np.ndarray) -> tuple[float | None, tuple[float, float | None] | None]:
    """Where a straight line in log k through the top :data:`TREND_OCTAVES` octaves of the mean
    difference reaches zero: only where its slope is resolved negative over the bootstrap
    resamples ``boot`` (their 97.5% quantile below zero) and the zero lies beyond K and is a
    finite float; None otherwise, and for K < 3 (fewer than three points to fit). Computed in
    log k, so a nearly flat slope gives a large k, not an overflow. With it, the 95% percentile
    interval of the same zero over the resamples (see ``Crossing.extrapolated_interval``)."""
    budget = len(mean)
    ks = np.arange(max(1, budget >> TREND_OCTAVES), budget + 1)
    if len(ks) < 3:
        return None, None
    # least squares in log k with every sum in a fixed order and scalar logs (math.fsum,
    # math.log; _weighted_sums): the same bits on every CPU, which BLAS products, np.polyfit and
    # numpy's vectorised log do not promise
    logs = [math.log(k) for k in ks.tolist()]
    centre = math.fsum(logs) / len(logs)
    x = np.array([v - centre for v in logs])
    xx = math.fsum(v * v for v in x.tolist())
    tail = boot[:, ks - 1]
    slopes = _weighted_sums(tail, x[:, None])[:, 0] / xx  # each resample's least-squares slope
    ys = mean[ks - 1].tolist()
    slope = math.fsum(y * v for y, v in zip(ys, x.tolist())) / xx
    intercept = math.fsum(ys) / len(ys) - slope * centre
    if not (slope < 0 and float(np.quantile(slopes, percentile_bounds()[1])) < 0):
        return None, None
    log_k = -intercept / slope
    if not (math.log(budget) < log_k < LOG_FLOAT_MAX):
        return None, None
    tail_means = _weighted_sums(tail, np.ones((len(ks), 1)))[:, 0] / len(ks)
    with np.errstate(divide="ignore", invalid="ignore"):  # a flat resample never reaches zero
        zeros = np.where(slopes < 0, centre - tail_means / slopes, np.inf)
    low, high = (float(v) for v in np.quantile(zeros, list(percentile_bounds()), method="inverted_cdf"))
    top = math.exp(high) if high < LOG_FLOAT_MAX else None
    return float(math.exp(log_k)), (math.exp(min(low, LOG_FLOAT_MAX)), top)


def ceiling_of(
    names: tuple[str, str, str, str],
    draws_base: np.ndarray,
    draws_trained: np.ndarray,
    realized_base: np.ndarray,
    realized_trained: np.ndarray,
    prompts: Sequence[str],
    *,
    excluded: int = 0,
    named: Sequence[int] = NAMED_K,
    margin: float = MARGIN,
    seed: int = 0,
    answers: tuple[Sequence[Sequence[Hashable | None]], Sequence[Sequence[Hashable | None]], Sequence[Hashable | None]] | None = None,
) -> Ceiling:
    """The ceiling from both models' draws on the same questions, in the same order: the
    stages of :func:`rnr_lens.trained_pair.comparison.compare_ceiling` once it has read the audits.

    Args:
        names: ``(base, trained, task, probe)`` as the records name them.
        draws_base, draws_trained: ``(questions, K)`` 0/1 draws in try order.
        realized_base, realized_trained: Each question's greedy answer, correct (1) or not.
        prompts: Each question's prompt (questions that share one are drawn together).
        excluded: Questions left out as not complete in both audits.
        named: The k's besides K with claim 3's verdict (those above K are left out).
        margin: Claim 3's margin.
        seed: Seeds the crossing's bootstrap.
        answers: ``(base answers, trained answers, golds)``: each draw's canonical answer and
            each question's canonical gold, for the chance curves (:func:`chance_curves`), the
            distinct answers per question and claim 3's precondition at each k (rules 3); without
            them the ceiling has no chance level and its verdicts no precondition.
    """
    if draws_base.shape != draws_trained.shape or draws_base.shape[0] != len(prompts) or not draws_base.size:
        raise RnrLensError(f"the ceiling needs both models' draws on the same questions, got {draws_base.shape} and {draws_trained.shape}")
    curves_a, curves_b = pass_at_k_curves(draws_base), pass_at_k_curves(draws_trained)
    chance = None if answers is None else (chance_curves(answers[0], answers[2]), chance_curves(answers[1], answers[2]))
    points = curve_points(curves_a, curves_b, prompts, None if chance is None else (chance[0][0], chance[1][0]))
    budget = draws_base.shape[1]
    verdicts = tuple(
        (
            k,
            training_verdict(
                realized_base,
                realized_trained,
                draws_base[:, :k].max(1),
                draws_trained[:, :k].max(1),
                prompts,
                margin=margin,
                chance_a=None if chance is None else chance[0][1][:, k - 1],
                chance_b=None if chance is None else chance[1][1][:, k - 1],
            ),
        )
        for k in sorted({*(k for k in named if k < budget), budget})
    )
    crossing = find_crossing(curves_a, curves_b, points, prompts, seed)
    if crossing.lead is not None and crossing.point is None and crossing.tied is None:  # trained still leads at K
        drawn = _bootstrap_counts(prompts, seed)
        per_question = None if drawn is None else drawn[1][:, drawn[0]]  # the same resamples, question by question
        models = model_crossings(draws_base, draws_trained, curves_a.mean(0), curves_b.mean(0), per_question, crossing.extrapolated, TIE)
        crossing = replace(crossing, models=models)
    distinct = None if answers is None else (distinct_answers(answers[0]), distinct_answers(answers[1]))
    return Ceiling(*names, len(prompts), excluded, points, crossing, verdicts, distinct)
