"""Statistics: estimates with intervals that hold at the sizes an audit actually has.

One type, :class:`Estimate`, carries every number the product reports with an interval: its
value, the interval, ``n``, the name of the method that made the interval, and, where a
verdict rests on it, the p-value of the test the interval inverts (so the printed p and the
printed interval never disagree), an exact test's p beside it where one exists, and the null
they test. The invariants: **an interval never collapses to a point because the data sit at an
edge** (0 of n, n of n, no discordant pair); **a printed p is the p of the test its interval
inverts**; and a difference is *resolved* only where its interval excludes the null **and** the
exact test beside it, where one stands, agrees at the same level (where the two tests disagree
the estimate is flagged, :attr:`Estimate.tests_disagree`, and not resolved).

- a rate (one value in ``[0, 1]`` per question): the Wilson score interval
  (``statsmodels.stats.proportion.proportion_confint``). For a mean of fractional values
  (a chance level, pass@k) the Wilson interval is conservative, since such a mean's variance
  is at most ``p(1 - p) / n``. Questions that repeat one prompt are not independent: the
  interval then uses the effective sample size ``n / deff``, with the design effect ``deff``
  of the cluster-level (ratio) estimator, between 1 and the mean cluster size.
- a paired difference of two rates on the same questions: Tango's score interval (Tango 1998;
  no library in our stack has it) with the score test it inverts (McNemar's statistic), and
  the exact sign test beside it (McNemar's exact test when every prompt is distinct; over
  prompts, a sign test of the prompts' mean differences) from ``scipy.stats.binom``'s tails.
- the mean of per-question values on a finite support (a contrast such as ``(R - D) -
  (S - D) / 2``, or Delta realized / 2 - Delta reachable): the same constrained-maximum-likelihood
  score construction applied to those values, with the score test it inverts
  (:func:`score_mean`; on 0/1 pairs it is Tango's interval), and that test at a shifted null (a
  margin, :func:`score_p`).
- a rate against its chance level (reachability against the derangement chance): the chance
  level treated as fixed, in the interval (the reach's Wilson interval, shifted) and in its
  score test against the mean chance level, with the exact Poisson-binomial test of the
  reached count against the per-question chance probabilities beside it (whole prompts drawn
  together).
- a rate against a fixed value (a repair rate against one half, a break rate against its
  bound): Wilson, with the score test it inverts (:func:`wilson_score_p`) and the exact
  binomial test beside it (:func:`binomial_p`).
- a ratio of paired means (retention of a gain): Fieller's interval, unbounded where the
  denominator is not resolved away from zero, with the t-test it inverts against a margin.

- power: the smallest effect an ``n`` resolves at the stated level with 80% power, and the
  ``n`` that would resolve an observed effect (``statsmodels.stats.power.NormalIndPower``,
  one sample, on the per-question standard deviation).

Every attached p-value is two-sided and taken **in the estimate's direction** (twice the tail on
the side the estimate lies): a test whose statistic points the other way than the estimate never
resolves it.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Collection, Hashable, Sequence
from dataclasses import dataclass
from math import comb
from typing import Any

import numpy as np
from scipy import stats as sps
from scipy.optimize import brentq
from statsmodels.stats.power import NormalIndPower
from statsmodels.stats.proportion import proportion_confint

LEVEL = 0.95
"""The stated level of every interval and test (two-sided)."""

POWER = 0.8
"""The power at which the product says what ``n`` would resolve an effect."""


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of Chen et al. (2021): ``1 - C(n-c, k) / C(n, k)``.

    Args:
        n: Tries made.
        c: Correct tries among them.
        k: Budget to estimate for (``1 <= k <= n``).
    """
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass_at_k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


@dataclass(frozen=True)
class Estimate:
    """A value with its interval, from the store to the page.

    Attributes:
        value: The point estimate (NaN over no questions).
        low, high: The interval at ``level`` (``high`` may be ``inf`` for an unbounded ratio).
        n: Questions (or prompts, where the method works over prompts) behind it.
        method: The method that made the interval (and test), by name.
        level: The interval's two-sided level.
        p: The two-sided p-value of the test the interval inverts, where one is attached.
        null: The value that test tests against (0 for a difference, 0.5 for "most").
        exact_p: Where one stands beside it, the two-sided p of a second, exact (or
            randomization) test of the same null, which the interval does not invert
            (the exact binomial, exact McNemar, exact Poisson-binomial or sign-flip test):
            stricter where the data are few. ``p`` is always the test the interval inverts,
            so the two printed together never disagree; where ``exact_p`` is on the other side
            of the level, the estimate is flagged (:attr:`tests_disagree`) and not resolved.

    Example:
        >>> e = rate([1, 1, 0, 1])
        >>> e.text()
        '0.75 [0.30,0.95]'
        >>> Estimate.from_dict(e.to_dict()) == e
        True
    """

    value: float
    low: float
    high: float
    n: int
    method: str = ""
    level: float = LEVEL
    p: float | None = None
    null: float | None = None
    exact_p: float | None = None

    @classmethod
    def empty(cls, method: str = "") -> Estimate:
        """An estimate over no questions. Its NaNs are the one ``math.nan`` object, as
        :meth:`from_dict`'s are, so two empty estimates compare equal (``==`` on a tuple of
        fields holds where they are the same object) and a record holding one equals itself
        read back from JSON.

        Example:
            >>> Estimate.empty("wilson") == Estimate.from_dict(Estimate.empty("wilson").to_dict())
            True
        """
        nan = math.nan
        return cls(nan, nan, nan, 0, method)

    @property
    def is_empty(self) -> bool:
        return self.n == 0 or self.value != self.value

    @property
    def deciding_p(self) -> float | None:
        """The p a decision reads: the larger of the interval's own test and the exact test
        beside it (both must agree for a difference to resolve, so a multiple-testing step such
        as Holm's reads this one); None without a test."""
        if self.p is None:
            return None
        return self.p if self.exact_p is None else max(self.p, self.exact_p)

    @property
    def tests_disagree(self) -> bool:
        """Do the interval's test and the exact test beside it fall on opposite sides of the
        level? (A page flags such a cell: the estimate is not resolved.)"""
        if self.p is None or self.exact_p is None:
            return False
        alpha = 1 - self.level
        return (self.p <= alpha) != (self.exact_p <= alpha)

    @property
    def excludes(self) -> str | None:
        """``"above"`` or ``"below"`` where the interval lies wholly on that side of the null,
        which is where the test it inverts (:attr:`p`) rejects; the exact test beside it is
        not consulted (a scan's first k, reported beside a simultaneous band, reads this; a
        verdict reads :attr:`resolved`)."""
        if self.null is None or self.is_empty:
            return None
        return "above" if self.low > self.null else "below" if self.high < self.null else None

    @property
    def resolved(self) -> str | None:
        """``"above"`` or ``"below"`` the null where the interval excludes it, its own test agrees
        (always, up to rounding: it is the test the interval inverts) and so does the exact test
        beside it, where one stands, at the same level; else None. Without a test attached
        nothing resolves: an interval alone never decides a difference."""
        p = self.deciding_p
        if self.null is None or p is None or self.is_empty or p > 1 - self.level:
            return None
        if self.low > self.null:
            return "above"
        if self.high < self.null:
            return "below"
        return None

    def text(self, digits: int = 2) -> str:
        """``0.58 [0.33,0.83]``; ``-`` over no questions (the one formatter of an estimate)."""
        if self.is_empty:
            return "-"

        def f(x: float) -> str:
            return "inf" if x == math.inf else "-inf" if x == -math.inf else f"{x:.{digits}f}"

        return f"{f(self.value)} [{f(self.low)},{f(self.high)}]"

    def p_text(self) -> str:
        """The attached p as a page prints it: the interval's own test, the exact test beside it
        where one stands, and a flag where the two disagree ('' without a test; the one
        formatter of an estimate's p).

        Example:
            >>> Estimate(0.1, 0.004, 0.23, 40, p=0.011, null=0.0, exact_p=0.125).p_text()
            'p 0.011 (exact 0.12: the tests disagree, not resolved)'
        """
        if self.p is None:
            return ""

        def f(p: float) -> str:  # a p below the smallest float prints as a bound, never as 0
            return f"{p:.2g}" if p > 0 else "< 1e-300"

        if self.exact_p is None:
            return f"p {f(self.p)}"
        flag = ": the tests disagree, not resolved" if self.tests_disagree else ""
        return f"p {f(self.p)} (exact {f(self.exact_p)}{flag})"

    def __str__(self) -> str:
        return self.text(3)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: NaN and infinite bounds become ``None``."""

        def clean(x: float | None) -> float | None:
            return None if x is None or not math.isfinite(x) else float(x)

        return {
            "value": clean(self.value),
            "low": clean(self.low),
            "high": clean(self.high),
            "n": self.n,
            "method": self.method,
            "level": self.level,
            "p": clean(self.p),
            "null": self.null,
        } | ({} if self.exact_p is None else {"exact_p": clean(self.exact_p)})

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Estimate:
        """The inverse of :meth:`to_dict` (a missing bound of a present value reads as unbounded)."""
        nan = math.nan  # the one NaN object, as in :meth:`empty`
        value = nan if d.get("value") is None else float(d["value"])
        low = (nan if value != value else -math.inf) if d.get("low") is None else float(d["low"])
        high = (nan if value != value else math.inf) if d.get("high") is None else float(d["high"])
        return cls(
            value,
            low,
            high,
            int(d.get("n") or 0),
            str(d.get("method", "")),
            float(d.get("level", LEVEL)),
            d.get("p"),
            d.get("null"),
            d.get("exact_p"),
        )


# ---------------------------------------------------------------------------------------------
# Rates
# ---------------------------------------------------------------------------------------------


def _alpha(level: float) -> float:
    return 1.0 - level


def percentile_bounds(level: float = LEVEL) -> tuple[float, float]:
    """The two quantiles of a two-sided percentile interval at ``level``, as exact decimals:
    ``(1 - 0.95) / 2`` is 0.025000000000000022 in floating point, which moves an
    ``inverted_cdf`` bound of 2,000 resamples by one draw.

    Example:
        >>> percentile_bounds(0.95)
        (0.025, 0.975)
    """
    tail = round((1.0 - level) / 2, 12)
    return tail, round(1.0 - tail, 12)


def wilson_score_p(value: float, n_eff: float, null: float) -> float:
    """The two-sided p of the score test that the Wilson interval inverts: ``(value - null) /
    sqrt(null (1 - null) / n_eff)``, so a Wilson interval at level L excludes ``null`` exactly
    where this p is at most ``1 - L`` (the p printed beside a Wilson interval).

    Example:
        >>> round(wilson_score_p(0.8, 20, 0.5), 4)   # 16 of 20 against one half
        0.0073
    """
    if n_eff <= 0 or value == null:
        return 1.0
    var = null * (1.0 - null) / n_eff
    if var <= 0:
        return 0.0
    return min(1.0, 2 * float(sps.norm.sf(abs(value - null) / math.sqrt(var))))


def design_effect(values: np.ndarray, clusters: Sequence[object] | None) -> tuple[float, int]:
    """The design effect of questions that share a prompt, and the number of prompts.

    ``deff`` is the variance of the cluster-level ratio estimator of the mean over the variance
    of the mean of independent questions, clipped to ``[1, sum(size**2) / n]`` (the worst case,
    every prompt's questions alike; the mean cluster size where prompts repeat equally often);
    where the values do not vary it is that worst case. Every prompt distinct: ``(1, n)``.

    Example:
        >>> design_effect(np.array([1.0, 1.0, 0.0, 0.0]), ["a", "a", "b", "b"])
        (2.0, 2)
    """
    n = len(values)
    if clusters is None or n == 0:
        return 1.0, n
    codes = np.unique(np.asarray([str(c) for c in clusters]), return_inverse=True)[1]
    m = int(codes.max()) + 1
    if m == n:
        return 1.0, n
    sums, sizes = np.bincount(codes, weights=values), np.bincount(codes).astype(float)
    worst = float((sizes**2).sum() / n)  # every prompt's questions alike: 1 + (m_i - 1) weighted by size
    var_srs = float(values.var(ddof=1)) / n if n > 1 else 0.0
    if m < 2 or var_srs == 0:
        return worst, m
    mean = values.mean()
    var_cluster = m / (m - 1) * float(((sums - mean * sizes) ** 2).sum()) / n**2
    return float(min(max(var_cluster / var_srs, 1.0), worst)), m


def _wilson(value: float, n_eff: float, level: float) -> tuple[float, float]:
    low, high = proportion_confint(value * n_eff, n_eff, alpha=_alpha(level), method="wilson")
    low = 0.0 if value == 0 else max(0.0, float(low))  # exactly 0 at 0 of n (not a rounding residue)
    high = 1.0 if value == 1 else min(1.0, float(high))
    return low, high


def rate(
    values: Sequence[float] | np.ndarray, clusters: Sequence[object] | None = None, *, null: float | None = None, level: float = LEVEL
) -> Estimate:
    """A rate over questions (one value in ``[0, 1]`` each) with its Wilson interval.

    Args:
        values: Per question, 1/0 (correct or not) or a probability (a chance level).
        clusters: Per question, its prompt: questions that repeat one prompt count as
            ``n / deff`` independent ones (:func:`design_effect`).
        null: Attach the score test the Wilson interval inverts against this value, with the
            exact binomial test beside it (only for 0/1 values over distinct prompts; otherwise
            no test is attached and the rate never counts as resolved against it).
        level: The interval's level.

    Example:
        >>> rate([0] * 40).text(3)   # 0 of 40 still has an upper bound
        '0.000 [0.000,0.088]'
    """
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return Estimate.empty("wilson")
    deff, m = design_effect(data, clusters)
    p = float(data.mean())
    low, high = _wilson(p, len(data) / deff, level)
    method = "wilson" if deff == 1 else f"wilson, design effect {deff:.2f} over {m} prompts"
    pvalue = exact = None
    binary = bool(np.isin(data, (0.0, 1.0)).all())
    if null is not None and binary and deff == 1:
        pvalue, exact = wilson_score_p(p, len(data), null), binomial_p(int(data.sum()), len(data), null)
        method += "; the score test it inverts, the exact binomial test beside it"
    return Estimate(p, low, high, len(data) if deff == 1 else m, method, level, pvalue, null, exact)


def binomial_p(successes: int, n: int, null: float) -> float:
    """The exact binomial test of ``successes`` of ``n`` against ``null``: twice the tail on
    the side the observed rate lies (at most 1; 1 at the null itself)."""
    if successes == n * null:
        return 1.0
    tail = sps.binom.sf(successes - 1, n, null) if successes > n * null else sps.binom.cdf(successes, n, null)
    return min(1.0, 2 * float(tail))


def wilson(successes: int, n: int, *, null: float | None = None, level: float = LEVEL) -> Estimate:
    """Wilson interval of ``successes`` of ``n`` (against ``null``: the score test it inverts,
    the exact binomial test beside it)."""
    return rate(np.r_[np.ones(successes), np.zeros(n - successes)], null=null, level=level)


# ---------------------------------------------------------------------------------------------
# Differences
# ---------------------------------------------------------------------------------------------


def sign_test(diff: np.ndarray, clusters: Sequence[object] | None = None) -> float:
    """Exact sign test of paired differences (McNemar's exact test for 0/1 pairs; over
    prompts, the sign of each prompt's mean difference), **in the direction of the mean
    difference**: twice the binomial tail on the side the mean points to (at most 1). A test
    whose majority points the other way than the mean (110 questions at +1 and 170 at -1/2 of
    725: mean +0.034, a majority below zero) never resolves it. 1.0 where none differs or the
    mean is zero.

    Example:
        >>> round(sign_test(np.r_[np.ones(6), np.zeros(34)]), 4)   # 6 of 6 discordant one way
        0.0312
    """
    diff = np.asarray(diff, float)
    mean = float(diff.mean()) if diff.size else 0.0
    if clusters is not None and len(set(map(str, clusters))) < len(diff):
        codes = np.unique(np.asarray([str(c) for c in clusters]), return_inverse=True)[1]
        diff = np.bincount(codes, weights=diff) / np.bincount(codes)
    pos, neg = int((diff > 0).sum()), int((diff < 0).sum())
    if pos + neg == 0 or mean == 0:
        return 1.0
    toward = pos if mean > 0 else neg
    return min(1.0, 2 * float(sps.binom.sf(toward - 1, pos + neg, 0.5)))


def tango(b: float, c: float, n: float, level: float = LEVEL) -> tuple[float, float]:
    """Tango's (1998) score interval for ``p(first only) - p(second only)`` of paired 0/1
    outcomes, from ``b`` pairs where only the first succeeds, ``c`` where only the second does,
    of ``n`` (counts may be fractional: an effective sample). It does not collapse where no pair
    is discordant (0 of 40 still allows about 0.09 either way) and inverts the score test
    whose statistic at zero is McNemar's.

    Example:
        >>> [round(x, 3) for x in tango(0, 0, 40)]
        [-0.088, 0.088]
    """
    if n <= 0:
        return float("nan"), float("nan")
    z = float(sps.norm.ppf(1 - _alpha(level) / 2))
    d_hat = (b - c) / n

    def score(delta: float) -> float:
        a2, b2, c2 = 2 * n, -b - c + (2 * n - b + c) * delta, -c * delta * (1 - delta)
        q21 = (-b2 + math.sqrt(max(b2 * b2 - 4 * a2 * c2, 0.0))) / (2 * a2)
        var = n * (2 * q21 + delta * (1 - delta))
        if var <= 0:
            return math.copysign(math.inf, b - c - n * delta) if b - c - n * delta else 0.0
        return (b - c - n * delta) / math.sqrt(var)

    eps = 1e-12
    low = _invert(score, z, -1 + eps, d_hat, -1.0) if d_hat > -1 else -1.0
    high = _invert(score, -z, d_hat, 1 - eps, 1.0) if d_hat < 1 else 1.0
    return low, high


def _invert(score: Callable[[float], float], target: float, lo: float, hi: float, edge: float) -> float:
    """Where a score statistic (decreasing in the null) crosses ``target`` between ``lo`` and
    ``hi``: an interval's bound; ``edge`` where it never does (the bound is the support's end)."""
    f_lo, f_hi = score(lo) - target, score(hi) - target
    if f_lo == 0:
        return lo
    if f_hi == 0:
        return hi
    if f_lo * f_hi > 0:
        return edge
    return float(brentq(lambda x: score(x) - target, lo, hi, xtol=1e-10))


def _constrained_sd(values: np.ndarray, weights: np.ndarray, delta: float, lo: float, hi: float) -> float:
    """The per-question sd of values on the support ``[lo, hi]`` under the multinomial's
    maximum-likelihood probabilities constrained to mean ``delta`` (Tango's construction for any
    finite set of values: observed values get ``w / (n + lam (v - delta))``; where the
    constraint cannot be met by them, the leftover mass sits on the support's far end, an
    unobserved value, which is what lets 0 of 40 keep an interval)."""
    n = float(weights.sum())
    d = values - delta
    lam_lo, lam_hi = -n / (hi - delta), n / (delta - lo)  # where the support's ends bind

    def g(lam: float) -> float:
        return float((weights * d / (n + lam * d)).sum())

    span = lam_hi - lam_lo
    a, b = lam_lo + 1e-12 * span, lam_hi - 1e-12 * span  # inside the bracket: observed ends make g infinite at its edges
    top_seen, bottom_seen = bool(np.isclose(values, hi).any()), bool(np.isclose(values, lo).any())
    g_a = g(lam_lo) if not top_seen else g(a)
    g_b = g(lam_hi) if not bottom_seen else g(b)
    if g_a <= 1e-12 * n:  # even all the room toward hi is not enough (g is decreasing): mass on hi
        lam, extra_at = lam_lo, hi
    elif g_b >= -1e-12 * n:
        lam, extra_at = lam_hi, lo
    else:
        lam = float(brentq(g, a, b, xtol=1e-14 * n)) if g(0.0) != 0 else 0.0
        extra_at = hi
    p = weights / (n + lam * d)
    extra = max(0.0, 1.0 - float(p.sum()))
    var = float((p * d * d).sum()) + extra * (extra_at - delta) ** 2
    return math.sqrt(max(var, 0.0))


def _score_z(values: np.ndarray, weights: np.ndarray, delta: float, lo: float, hi: float) -> float:
    n = float(weights.sum())
    mean = float((weights * values).sum()) / n
    if abs(mean - delta) < 1e-12:  # at the sample mean, up to rounding (115 values of 0.3 do not sum to 34.5 exactly)
        return 0.0
    if delta <= lo or delta >= hi:
        return math.copysign(math.inf, mean - delta) if mean != delta else 0.0
    sd = _constrained_sd(values, weights, delta, lo, hi)
    if sd == 0:
        return 0.0 if mean == delta else math.copysign(math.inf, mean - delta)
    return (mean - delta) * math.sqrt(n) / sd


def _tabulate(values: np.ndarray, clusters: Sequence[object] | None) -> tuple[np.ndarray, np.ndarray, float, int]:
    """Distinct values, their counts on the effective sample ``n / deff``, deff, prompts."""
    deff, m = design_effect(values, clusters)
    uniq, counts = np.unique(np.round(values, 12), return_counts=True)
    return uniq, counts / deff, deff, m


def score_mean(
    values: Sequence[float] | np.ndarray,
    support: tuple[float, float],
    clusters: Sequence[object] | None = None,
    *,
    null: float = 0.0,
    level: float = LEVEL,
) -> Estimate:
    """The mean of per-question values taking finitely many values in ``support`` (a contrast
    such as ``(R - D) - (S - D) / 2``, values in {-1, -1/2, 0, 1/2, 1}): the score interval of
    Tango's constrained-maximum-likelihood construction applied to those values (on
    ``n / deff`` where prompts repeat), with the score test it inverts against ``null``
    (two-sided; interval and test always agree). On a plain paired difference of 0/1 outcomes
    (support ``(-1, 1)``) it is Tango's interval; at 0 of n it does not collapse.

    Example:
        >>> c = np.r_[np.ones(110), np.full(170, -0.5), np.zeros(445)]   # mean +0.034 of 725
        >>> e = score_mean(c, (-1, 1))
        >>> e.text(3), e.resolved
        ('0.034 [0.002,0.069]', 'above')
    """
    x = np.asarray(values, dtype=float)
    lo, hi = float(support[0]), float(support[1])
    if x.size == 0:
        return Estimate.empty("score")
    if x.min() < lo - 1e-12 or x.max() > hi + 1e-12:
        raise ValueError(f"score_mean: values must lie in the support [{lo}, {hi}], got [{x.min()}, {x.max()}]")
    uniq, weights, deff, m = _tabulate(x, clusters)
    mean = float(x.mean())
    z = float(sps.norm.ppf(1 - _alpha(level) / 2))
    eps = 1e-9 * (hi - lo)

    def score(delta: float) -> float:
        return _score_z(uniq, weights, delta, lo, hi)

    low = _invert(score, z, lo + eps, mean, lo) if mean > lo else lo
    high = _invert(score, -z, mean, hi - eps, hi) if mean < hi else hi
    p = _score_p(uniq, weights, null, lo, hi)
    over = "" if deff == 1 and m == len(x) else f" over {m} prompts (design effect {deff:.2f})"
    return Estimate(mean, low, high, m, "constrained-ML score interval and score test" + over, level, p, null)


def score_p(values: Sequence[float] | np.ndarray, null: float, support: tuple[float, float], clusters: Sequence[object] | None = None) -> float:
    """The two-sided p of the score test that :func:`score_mean` inverts, against ``null`` (a
    margin: ``-0.05`` for non-inferiority). One-sided at level ``a`` is two-sided at ``2a``,
    read in the estimate's direction."""
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return 1.0
    uniq, weights, _, _ = _tabulate(x, clusters)
    return _score_p(uniq, weights, float(null), float(support[0]), float(support[1]))


def _score_p(values: np.ndarray, weights: np.ndarray, null: float, lo: float, hi: float) -> float:
    stat = _score_z(values, weights, null, lo, hi)
    return 1.0 if stat == 0 else min(1.0, 2 * float(sps.norm.sf(abs(stat))))


def paired_difference(
    a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, clusters: Sequence[object] | None = None, *, level: float = LEVEL
) -> Estimate:
    """``mean(a) - mean(b)`` of two 0/1 outcomes on the same questions: Tango's score interval
    (over prompts, on the effective sample ``n / deff`` of the paired differences) with the
    score test it inverts (:func:`tango_p`), and the exact sign test beside it (McNemar's exact
    test; over prompts, of the prompts' mean differences), tested against 0.

    Example:
        >>> d = paired_difference([1] * 4 + [0] * 36, [0] * 40)   # 4 of 40 discordant, all one way
        >>> d.text(3), round(d.p, 3), round(d.exact_p, 3)        # the interval's test and the exact one
        ('0.100 [0.004,0.231]', 0.046, 0.125)
        >>> d.resolved is None, d.tests_disagree                   # not resolved, and flagged
        (True, True)
    """
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.size == 0:
        return Estimate.empty("tango")
    diff = x - y
    deff, m = design_effect(diff, clusters)
    first, second = float((diff > 0).sum()), float((diff < 0).sum())
    low, high = tango(first / deff, second / deff, len(x) / deff, level)
    p = tango_p(first / deff, second / deff)
    over = "" if deff == 1 and m == len(x) else f" over {m} prompts (design effect {deff:.2f})"
    method = "tango paired score interval; the score test it inverts, the exact McNemar (sign) test beside it" + over
    return Estimate(float(diff.mean()), low, high, m, method, level, p, 0.0, sign_test(diff, clusters))


def tango_p(b: float, c: float) -> float:
    """The two-sided p of the score test Tango's interval inverts, at zero: McNemar's statistic
    ``(b - c) / sqrt(b + c)`` on the (effective) discordant counts, against the normal.

    Example:
        >>> round(tango_p(4, 0), 4), round(sign_test(np.r_[np.ones(4), np.zeros(36)]), 3)  # 4 of 40 one way
        (0.0455, 0.125)
    """
    if b == c:
        return 1.0
    return min(1.0, 2 * float(sps.norm.sf(abs(b - c) / math.sqrt(b + c))))


def _signs_only(x: np.ndarray) -> bool:
    """Is every paired difference -1, 0 or +1 (two 0/1 outcomes)?"""
    return bool(np.all(np.isin(np.round(x, 12), (-1.0, 0.0, 1.0))))


SIGN_FLIPS = 10_000
"""Random sign flips behind :func:`sign_flip_test` where it is not computed exactly."""


def sign_flip_test(diff: Sequence[float] | np.ndarray, clusters: Sequence[object] | None = None, *, seed: int = 0) -> float:
    """Two-sided randomization test of a mean paired difference against zero: under the null
    the two members of each pair are exchangeable, so each question's difference (each prompt's
    summed difference, over prompts) is as likely negated; the statistic is ``|sum|``. Where
    every difference is -1, 0 or +1 this is exactly :func:`sign_test` (McNemar's exact test);
    otherwise :data:`SIGN_FLIPS` seeded random flips give the p of Phipson and Smyth (2010),
    ``(1 + b) / (1 + B)``, which keeps its level at any number of flips. Unlike the sign test
    it weighs each difference by its size: 30 questions far above and 60 a little below can
    resolve.

    Example:
        >>> d = np.r_[np.full(30, 0.78), np.full(60, -0.016), np.zeros(10)]
        >>> round(sign_test(d), 3), sign_flip_test(d) < 0.001      # the sign test cannot see it
        (1.0, True)
    """
    x = np.asarray(diff, dtype=float)
    if x.size == 0 or abs(float(x.sum())) <= 1e-12 * x.size:
        return 1.0
    if _signs_only(x):
        return sign_test(x, clusters)
    if clusters is not None and len(set(map(str, clusters))) < len(x):
        codes = np.unique(np.asarray([str(c) for c in clusters]), return_inverse=True)[1]
        x = np.bincount(codes, weights=x)
    x = x[np.abs(x) > 1e-12]
    observed = abs(float(x.sum()))
    flips = np.random.default_rng(seed).integers(0, 2, size=(SIGN_FLIPS, len(x)), dtype=np.int8) * 2 - 1
    b = int((np.abs(flips @ x) >= observed - 1e-9).sum())
    return (1 + b) / (1 + SIGN_FLIPS)


def paired_mean_difference(diff: Sequence[float] | np.ndarray, clusters: Sequence[object] | None = None, *, level: float = LEVEL) -> Estimate:
    """The mean of paired per-question differences in ``[-1, 1]`` that need not be 0/1 (one
    question's pass@k under two models): :func:`score_mean`'s interval with the score test it
    inverts, and the randomization test :func:`sign_flip_test` beside it, so a difference is
    resolved only where a test that keeps its level at any n agrees too. Where every
    difference is -1, 0 or +1 (at k = K, a question reached or not) it is
    :func:`paired_difference`, and its method says so (Tango's interval, exact McNemar).

    Example:
        >>> d = paired_mean_difference(np.r_[np.full(30, 0.78), np.full(60, -0.016), np.zeros(10)])
        >>> d.text(3), d.resolved
        ('0.224 [0.160,0.300]', 'above')
    """
    x = np.asarray(diff, dtype=float)
    if x.size == 0:
        return Estimate.empty("score interval; sign-flip test")
    if _signs_only(x):  # named for what runs: Tango's interval and McNemar's exact test
        return paired_difference(x > 0, x < 0, clusters, level=level)
    e = score_mean(x, (-1, 1), clusters, level=level)
    method = e.method.replace(" and score test", "; the score test it inverts, the sign-flip randomization test beside it")
    return Estimate(e.value, e.low, e.high, e.n, method, level, e.p, 0.0, sign_flip_test(x, clusters))


def above_chance(
    reached: Sequence[float] | np.ndarray, chance: Sequence[float] | np.ndarray, clusters: Sequence[object] | None = None, *, level: float = LEVEL
) -> Estimate:
    """Reachability minus its chance level, the chance level treated as **fixed** (known
    per-question probabilities, not a second estimate) in both the interval and the tests: the
    reach's Wilson interval shifted by the mean chance, with the score test it inverts (the
    reach against the mean chance level, on the effective sample), and the exact
    Poisson-binomial test of the reached count against the per-question chance probabilities
    beside it (each prompt's questions drawn together), tested against 0 in the estimate's
    direction."""
    x, c = np.asarray(reached, dtype=float), np.asarray(chance, dtype=float)
    keep = ~np.isnan(c)
    x, c = x[keep], c[keep]
    groups = None if clusters is None else [g for g, k in zip(clusters, keep) if k]
    if x.size == 0:
        return Estimate.empty("wilson vs fixed chance")
    ex, level_c = rate(x, groups, level=level), float(c.mean())
    deff, _ = design_effect(x, groups)
    return Estimate(
        float(x.mean()) - level_c,
        ex.low - level_c,
        ex.high - level_c,
        ex.n,
        "wilson vs fixed chance; the score test it inverts, the exact poisson-binomial test beside it",
        level,
        wilson_score_p(float(x.mean()), len(x) / deff, level_c),
        0.0,
        _chance_test(x, c, groups),
    )


def _chance_test(reached: np.ndarray, chance: np.ndarray, clusters: Sequence[object] | None) -> float:
    """Two-sided p (twice the tail on the side the reached count lies, at most 1) of the
    reached count when each prompt is reached with its mean chance probability, all of its
    questions together."""
    if clusters is None:
        sizes, probs, observed = np.ones(len(reached), int), chance, reached
    else:
        codes = np.unique(np.asarray([str(g) for g in clusters]), return_inverse=True)[1]
        sizes = np.bincount(codes)
        probs = np.bincount(codes, weights=chance) / sizes
        observed = reached
    dist = np.zeros(int(sizes.sum()) + 1)
    dist[0] = 1.0
    for size, q in zip(sizes, np.clip(probs, 0.0, 1.0)):
        shifted = np.zeros_like(dist)
        shifted[size:] = dist[: len(dist) - size]
        dist = (1 - q) * dist + q * shifted
    s = int(round(float(observed.sum())))
    expected = float((sizes * np.clip(probs, 0.0, 1.0)).sum())
    if s == expected:
        return 1.0
    tail = float(dist[s:].sum()) if s > expected else float(dist[: s + 1].sum())  # the estimate's side
    return min(1.0, 2 * tail)


def ratio(num: np.ndarray, den: np.ndarray, clusters: Sequence[object] | None = None, *, null: float | None = None, level: float = LEVEL) -> Estimate:
    """``mean(num) / mean(den)`` of paired per-question values with Fieller's interval;
    unbounded (``-inf``/``inf``) where the denominator is not resolved away from zero. Each
    mean's variance is floored at that of one discordant question in ``n + 1``, so a sample
    without spread does not give a point.

    With ``null``, the test Fieller's interval inverts is attached: ``T = (mean(num) - null *
    mean(den)) / se`` on ``n - 1`` degrees of freedom, two-sided (a retention against its
    margin), so the interval and the test agree. Where ``clusters`` (prompts) repeat, the
    variances are inflated by the design effect of the linearized ratio, ``num - R * den``, and
    the degrees of freedom are the prompts'.
    """
    a, b = np.asarray(num, float), np.asarray(den, float)
    n = len(a)
    if n < 2 or b.mean() == 0:
        return Estimate.empty("fieller")
    ma, mb = a.mean(), b.mean()
    deff, m = design_effect(a - (ma / mb) * b, clusters)
    # never below the variance of one discordant question in n + 1: a sample with no spread
    # (every pick equal to the default) still leaves room, as a Wilson interval does at 0 of n
    floor = (1 / (n + 1)) * (1 - 1 / (n + 1)) / n
    va, vb, cab = (deff * x for x in (max(a.var(ddof=1) / n, floor), max(b.var(ddof=1) / n, floor), np.cov(a, b, ddof=1)[0, 1] / n))
    df = max(m - 1, 1)
    t = float(sps.t.ppf(1 - _alpha(level) / 2, df))
    p = None
    if null is not None:
        se = math.sqrt(max(va - 2 * null * cab + null * null * vb, 0.0))
        stat = (ma - null * mb) / se if se > 0 else math.copysign(math.inf, ma - null * mb)
        p = 1.0 if stat == 0 else min(1.0, 2 * float(sps.t.sf(abs(stat), df)))
    # (ma - R mb)^2 = t^2 (va - 2 R cab + R^2 vb)  ->  A R^2 - 2 B R + C = 0
    A, B, C = mb**2 - t**2 * vb, ma * mb - t**2 * cab, ma**2 - t**2 * va
    disc = B * B - A * C
    if A <= 0 or disc < 0:
        return Estimate(float(ma / mb), -math.inf, math.inf, m, "fieller (unbounded: the gain is not resolved above zero)", level, p, null)
    root = math.sqrt(disc)
    over = "" if deff == 1 else f" (design effect {deff:.2f} over {m} prompts)"
    return Estimate(
        float(ma / mb),
        float((B - root) / A),
        float((B + root) / A),
        m,
        ("fieller; the t-test it inverts" if null is not None else "fieller") + over,
        level,
        p,
        null,
    )


# ---------------------------------------------------------------------------------------------
# Power
# ---------------------------------------------------------------------------------------------


def per_question_sd(diff: np.ndarray) -> float:
    """The standard deviation of per-question differences, never below that of one
    discordant question in ``n + 1`` (so no discordance observed still plans for some)."""
    d = np.asarray(diff, float)
    d = d[~np.isnan(d)]
    n = len(d)
    floor = math.sqrt(1.0 / (n + 1)) if n else 1.0
    return max(float(d.std(ddof=1)) if n > 1 else 0.0, floor)


def detectable(sd: float, n: int, *, level: float = LEVEL, power: float = POWER) -> float | None:
    """The smallest mean effect ``n`` questions resolve at ``level`` with ``power``, for
    per-question values of standard deviation ``sd``."""
    if n < 2:
        return None
    es = NormalIndPower().solve_power(effect_size=None, nobs1=n, alpha=_alpha(level), power=power, ratio=0.0)
    return float(es) * sd


def n_needed(effect: float, sd: float, *, level: float = LEVEL, power: float = POWER) -> int | None:
    """Questions that resolve a mean effect of ``effect`` (per-question sd ``sd``) at ``level``
    with ``power``; None for no effect (no ``n`` resolves a zero)."""
    if not effect or not math.isfinite(effect) or sd <= 0:
        return None
    n = NormalIndPower().solve_power(effect_size=abs(effect) / sd, nobs1=None, alpha=_alpha(level), power=power, ratio=0.0)
    return int(math.ceil(float(np.atleast_1d(n)[0])))


def derangement_chance(said: Sequence[Collection[Hashable]], golds: Sequence[Hashable | None]) -> np.ndarray:
    """Per question, its chance of counting as reached by chance: ``said[q]`` holds the answers
    question ``q``'s tries gave (as keys its reader grades by), ``golds[j]`` question ``j``'s gold
    (None: unreadable). A uniformly random derangement of the golds (no question keeps its own)
    pairs ``q`` with each other question with probability ``1 / (n - 1)`` (by symmetry), so the
    chance is exactly the share of the other questions whose gold ``q``'s tries hold: no
    derangement is drawn (rules 3; version 2 averaged 200 seeded random derangements,
    ``permutation_chance``, whose Monte Carlo error this removes), and no n x n table is built:
    the work is linear in the answers (issue 73).

    The mean of the result is the reachability of the same tries against gold answers permuted
    across questions (the same answer distribution): what any-try-correct gives a probe that
    answers without regard to the question (a route that always says "12").

    Example:
        >>> derangement_chance([{"1", "2", "3"}, {"2"}, {"3"}], ["1", "2", "3"]).tolist()  # question 0 answers everything
        [1.0, 0.0, 0.0]
    """
    n = len(golds)
    if n < 2:
        return np.full(n, np.nan)
    owners = Counter(g for g in golds if g is not None)
    return np.array([(sum(owners[a] for a in set(s)) - (golds[q] is not None and golds[q] in s)) / (n - 1) for q, s in enumerate(said)], dtype=float)
