"""Claim 3 at large k: the reachable ceiling of a trained pair as pass@k curves, and where
they cross.

Claim 3 says training raises realized accuracy while what the model can reach at all stays
flat or shrinks. At k = 8 a sampling probe sees little of the ceiling; the work this builds on
measures it as pass@k at large k, where a base model's curve often overtakes its trained
model's. Given a base and a trained audit that ran the same sampling probe with a large budget
``K`` on the same questions, :func:`rnr_lens.comparison.compare_ceiling` reads their draws and
:func:`ceiling_of` gives:

- both **curves**: pass@k for k = 1..K, the unbiased estimator of Chen et al. (2021) from each
  question's K draws, averaged over questions, with Wilson intervals (conservative for a mean of
  fractional values; over prompts where questions repeat one);
- the **paired difference** trained - base of each question's pass@k at every k (the score
  interval for a bounded mean, with the score test it inverts; :func:`rnr_lens.stats.score_mean`);
- the **crossing**: the smallest k at which "base >= trained" is not excluded (the difference is
  no longer resolved above zero); the smallest k at which base > trained is resolved; where the
  point estimates cross, with a bootstrap interval over questions (how sure the crossing is);
  and, where they do not cross by K, where the trend over the top three octaves of k reaches zero;
- **claim 3's verdict** at each named k (1, 8, 32, K): :func:`rnr_lens.verdicts.training_verdict`
  unchanged, with a question reached at k when one of its first k draws is correct, so the verdict
  at k = 8 reads the 8-sample probe itself (its difference with Tango's interval and the exact
  McNemar test).

Invariants: both curves cover the same questions (those complete in both audits,
:func:`rnr_lens.comparison.complete_in_both`) under the same probe (same temperature, draw and
budget: :func:`rnr_lens.comparison.compare`'s checks); the scan over k is pointwise (each k's
interval at 95%, not a family-wise band), and the crossing says so. The records here are plain
values (torch-free, below the store): a :class:`Ceiling` reads back from ``claims.json``, and a
referee re-derives it from stored draws without a model.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rnr_lens.errors import RnrLensError
from rnr_lens.stats import LEVEL, Estimate, rate, score_mean
from rnr_lens.verdicts import MARGIN, TrainingVerdict, Verdict, training_verdict

NAMED_K = (1, 8, 32)
"""The k's (besides the budget itself) at which the ceiling reports claim 3's verdict."""

BOOTSTRAP = 2000
"""Resamples of questions behind the crossing's interval (seeded: the same data give the same interval)."""

TREND_OCTAVES = 3
"""The trend that extrapolates an uncrossed gap is fitted over the top this-many octaves of k."""


@dataclass(frozen=True)
class CurvePoint:
    """Both curves and their difference at one k."""

    k: int
    base: Estimate
    trained: Estimate
    difference: Estimate
    """Trained - base, paired per question (score interval and test, support [-1, 1])."""


@dataclass(frozen=True)
class Crossing:
    """Where the trained curve stops lying above the base curve.

    Attributes:
        not_excluded: The smallest k at which base >= trained is not excluded (the difference is
            not resolved above zero); None where trained stays resolved above base up to K.
        reversed: The smallest k at which base > trained is resolved; None where it never is.
        point: The smallest k at which the point estimate of trained - base is at most zero.
        point_interval: A 95% percentile bootstrap interval of ``point`` over questions (``None``
            at an end: no crossing by K in more than 2.5% of resamples).
        extrapolated: Where no point crossing happens by K and the gap is closing: the k at which
            a straight line in log k through the top :data:`TREND_OCTAVES` octaves reaches zero
            (a guess, not a measurement); None otherwise.
        budget: K.
    """

    not_excluded: int | None
    reversed: int | None
    point: int | None
    point_interval: tuple[int | None, int | None]
    extrapolated: float | None
    budget: int

    def text(self) -> str:
        """One sentence a page prints."""
        if self.point is None:
            trend = (
                f"; the gap's trend in log k reaches zero near k = {self.extrapolated:,.0f} (extrapolated)"
                if self.extrapolated is not None
                else "; the gap is not closing over the top octaves"
            )
            head = f"the curves do not cross by k = {self.budget}{trend}"
        else:
            low, high = self.point_interval
            span = f"{low if low is not None else 1}-{high if high is not None else f'>{self.budget}'}"
            head = f"the point estimates cross at k = {self.point} (bootstrap 95%: {span})"
        if self.not_excluded is None:
            return f"{head}; trained stays resolved above base at every k up to {self.budget}"
        rev = f"; base is resolved above trained from k = {self.reversed}" if self.reversed is not None else "; base is never resolved above trained"
        return f"{head}; base >= trained is not excluded from k = {self.not_excluded} (pointwise 95%){rev}"


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
        return {
            "base": self.base,
            "trained": self.trained,
            "task": self.task,
            "probe": self.probe,
            "questions": self.questions,
            "excluded": self.excluded,
            "curve": [{"k": p.k, "base": p.base.to_dict(), "trained": p.trained.to_dict(), "difference": p.difference.to_dict()} for p in self.curve],
            "crossing": {
                "not_excluded": self.crossing.not_excluded,
                "reversed": self.crossing.reversed,
                "point": self.crossing.point,
                "point_interval": list(self.crossing.point_interval),
                "extrapolated": self.crossing.extrapolated,
                "budget": self.crossing.budget,
                "text": self.crossing.text(),
                "extrapolation_cost": self.extrapolation_cost(),
            },
            "verdicts": [
                {"k": k, **{f: getattr(v, f).to_dict() for f in _VERDICT_ESTIMATES}, "verdict": v.verdict.to_dict()} for k, v in self.verdicts
            ],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Ceiling:
        """A ceiling read back from :meth:`to_dict` (``claims.json``)."""
        x = d["crossing"]
        low, high = x["point_interval"]
        crossing = Crossing(x["not_excluded"], x["reversed"], x["point"], (low, high), x["extrapolated"], int(x["budget"]))
        curve = tuple(
            CurvePoint(int(p["k"]), Estimate.from_dict(p["base"]), Estimate.from_dict(p["trained"]), Estimate.from_dict(p["difference"]))
            for p in d["curve"]
        )
        verdicts = tuple(
            (int(v["k"]), TrainingVerdict(**{f: Estimate.from_dict(v[f]) for f in _VERDICT_ESTIMATES}, verdict=Verdict.from_dict(v["verdict"])))
            for v in d["verdicts"]
        )
        return cls(
            str(d["base"]), str(d["trained"]), str(d["task"]), str(d["probe"]), int(d["questions"]), int(d["excluded"]), curve, crossing, verdicts
        )


_VERDICT_ESTIMATES = ("delta_realized", "delta_reachable", "ceiling_vs_margin", "ceiling_vs_gain")
"""A :class:`~rnr_lens.verdicts.TrainingVerdict`'s estimates, in its field order."""


def pass_at_k_curves(correct: np.ndarray) -> np.ndarray:
    """Per question (rows of a ``(questions, K)`` 0/1 array), the unbiased pass@k for k = 1..K:
    ``1 - C(K - c, k) / C(K, k)``, ``c`` its correct draws (:func:`rnr_lens.stats.pass_at_k`,
    computed as a running product so K = 128 stays exact in floating point)."""
    n_q, budget = correct.shape
    c = correct.sum(1)
    out = np.ones((n_q, budget))
    for q in range(n_q):
        # C(K - c, k) / C(K, k) = prod_{i<k} (K - c - i) / (K - i), zero once k > K - c
        ratio = 1.0
        for k in range(1, budget + 1):
            ratio *= max(budget - c[q] - (k - 1), 0) / (budget - (k - 1))
            out[q, k - 1] = 1.0 - ratio
    return out


def curve_points(curves_base: np.ndarray, curves_trained: np.ndarray, prompts: Sequence[str]) -> tuple[CurvePoint, ...]:
    """Both curves and their paired difference at every k, from per-question pass@k arrays
    ``(questions, K)`` (:func:`pass_at_k_curves`) of the same questions in the same order."""
    diff = curves_trained - curves_base
    return tuple(
        CurvePoint(k, rate(curves_base[:, k - 1], prompts), rate(curves_trained[:, k - 1], prompts), score_mean(diff[:, k - 1], (-1, 1), prompts))
        for k in range(1, curves_base.shape[1] + 1)
    )


def find_crossing(
    curves_base: np.ndarray, curves_trained: np.ndarray, points: Sequence[CurvePoint], prompts: Sequence[str], seed: int = 0
) -> Crossing:
    """Where the trained curve stops lying above the base curve (:class:`Crossing`), from the
    per-question curves and their :func:`curve_points`; the bootstrap resamples whole prompts."""
    diff = curves_trained - curves_base
    clusters = prompts
    budget = diff.shape[1]
    not_excluded = next((p.k for p in points if p.difference.resolved != "above"), None)
    reversed_at = next((p.k for p in points if p.difference.resolved == "below"), None)

    def first_at_or_below_zero(mean: np.ndarray) -> int | None:
        hit = np.nonzero(mean <= 0)[0]
        return int(hit[0]) + 1 if hit.size else None

    mean = diff.mean(0)
    point = first_at_or_below_zero(mean)
    # resample whole prompts (questions that share one are drawn together), seeded
    groups = {g: i for i, g in enumerate(dict.fromkeys(clusters))}
    codes = np.array([groups[g] for g in clusters])
    sums = np.zeros((len(groups), budget))
    np.add.at(sums, codes, diff)
    sizes = np.bincount(codes, minlength=len(groups)).astype(float)
    counts = np.random.default_rng(seed).multinomial(len(groups), np.full(len(groups), 1 / len(groups)), size=BOOTSTRAP)
    boot = (counts @ sums) / (counts @ sizes)[:, None]  # each resample's mean difference at every k
    hits = np.where((boot <= 0).any(1), (boot <= 0).argmax(1) + 1, budget + 1)  # K + 1: no crossing by K
    low, high = (int(v) for v in np.quantile(hits, [(1 - LEVEL) / 2, (1 + LEVEL) / 2], method="inverted_cdf"))
    interval = (low if low <= budget else None, high if high <= budget else None)
    return Crossing(not_excluded, reversed_at, point, interval, _extrapolate(mean) if point is None else None, budget)


def _extrapolate(mean: np.ndarray) -> float | None:
    """Where a straight line in log k through the top :data:`TREND_OCTAVES` octaves of the mean
    difference reaches zero, if it is falling; None where it is not (or K < 4)."""
    budget = len(mean)
    start = max(1, budget >> TREND_OCTAVES)
    ks = np.arange(start, budget + 1)
    if len(ks) < 3:
        return None
    slope, intercept = np.polyfit(np.log(ks), mean[ks - 1], 1)
    if slope >= 0:
        return None
    return float(math.exp(-intercept / slope))


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
) -> Ceiling:
    """The ceiling from both models' draws on the same questions, in the same order: the
    stages of :func:`rnr_lens.comparison.compare_ceiling` once it has read the audits.

    Args:
        names: ``(base, trained, task, probe)`` as the records name them.
        draws_base, draws_trained: ``(questions, K)`` 0/1 draws in try order.
        realized_base, realized_trained: Each question's greedy answer, correct (1) or not.
        prompts: Each question's prompt (questions that share one are drawn together).
        excluded: Questions left out as not complete in both audits.
        named: The k's besides K with claim 3's verdict (those above K are left out).
        margin: Claim 3's margin.
        seed: Seeds the crossing's bootstrap.
    """
    if draws_base.shape != draws_trained.shape or draws_base.shape[0] != len(prompts) or not draws_base.size:
        raise RnrLensError(f"the ceiling needs both models' draws on the same questions, got {draws_base.shape} and {draws_trained.shape}")
    curves_a, curves_b = pass_at_k_curves(draws_base), pass_at_k_curves(draws_trained)
    points = curve_points(curves_a, curves_b, prompts)
    budget = draws_base.shape[1]
    verdicts = tuple(
        (k, training_verdict(realized_base, realized_trained, draws_base[:, :k].max(1), draws_trained[:, :k].max(1), prompts, margin=margin))
        for k in sorted({*(k for k in named if k < budget), budget})
    )
    crossing = find_crossing(curves_a, curves_b, points, prompts, seed)
    return Ceiling(*names, len(prompts), excluded, points, crossing, verdicts)
