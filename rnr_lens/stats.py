"""Statistics: the unbiased pass@k estimator and seeded bootstrap confidence intervals."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from math import comb

import numpy as np


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
    """A mean with its 95% bootstrap interval."""

    value: float
    low: float
    high: float
    n: int

    def __str__(self) -> str:
        return f"{self.value:.3f} [{self.low:.3f}, {self.high:.3f}]"

    def as_dict(self) -> dict[str, float | None]:
        """JSON-ready: an estimate over no questions (NaN) has ``None`` values."""
        return {
            k: (None if isinstance(v, float) and v != v else v)
            for k, v in (("value", self.value), ("low", self.low), ("high", self.high), ("n", self.n))
        }


def bootstrap(
    values: Sequence[float] | np.ndarray,
    *,
    seed: int = 0,
    n_boot: int = 2000,
    level: float = 0.95,
    statistic: Callable[[np.ndarray], np.ndarray] | None = None,
    clusters: Sequence[object] | None = None,
) -> Estimate:
    """Percentile bootstrap of the mean of per-question values (seeded, so reproducible).

    ``values`` may be 2-D (questions x paired columns) with a ``statistic`` that maps a
    resampled matrix to one number per resample, e.g. a paired difference.

    ``clusters`` (one label per question, e.g. its prompt) resamples whole clusters instead of
    questions: questions that repeat one prompt are not independent draws, and treating them
    as such narrows the interval. With every label distinct it equals the plain bootstrap.
    ``Estimate.n`` is then the number of clusters.
    """
    data = np.asarray(values, dtype=float)
    if data.shape[0] == 0:
        return Estimate(float("nan"), float("nan"), float("nan"), 0)
    if clusters is not None and len(set(clusters)) < data.shape[0]:
        if statistic is not None or data.ndim != 1:
            raise ValueError("a cluster bootstrap takes one value per question (pass the paired difference itself)")
        codes = np.unique(np.asarray([str(c) for c in clusters]), return_inverse=True)[1]
        sums, sizes = np.bincount(codes, weights=data), np.bincount(codes)
        rng = np.random.default_rng(seed)
        index = rng.integers(0, len(sizes), size=(n_boot, len(sizes)))
        resampled = sums[index].sum(axis=1) / sizes[index].sum(axis=1)
        alpha = (1 - level) / 2
        low, high = np.quantile(resampled, [alpha, 1 - alpha])
        return Estimate(float(data.mean()), float(low), float(high), int(len(sizes)))
    stat = statistic or (lambda m: m.mean(axis=1))
    rng = np.random.default_rng(seed)
    index = rng.integers(0, data.shape[0], size=(n_boot, data.shape[0]))
    resampled = stat(data[index])
    point = float(stat(data[None, ...])[0])
    alpha = (1 - level) / 2
    low, high = np.quantile(resampled, [alpha, 1 - alpha])
    return Estimate(point, float(low), float(high), int(data.shape[0]))


def wilson(successes: int, n: int, z: float = 1.96) -> Estimate:
    """Wilson score interval for a proportion (used where a bootstrap is overkill)."""
    if n == 0:
        return Estimate(float("nan"), float("nan"), float("nan"), 0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5) / denom
    return Estimate(p, max(0.0, centre - half), min(1.0, centre + half), n)


def permutation_chance(match: np.ndarray, *, n_perm: int = 200, seed: int = 0) -> np.ndarray:
    """Per question, how often it would count as reached by chance: ``match[q, j]`` says whether
    question ``q``'s tries hold question ``j``'s gold answer; each of ``n_perm`` random
    derangements (no question keeps its own gold) scores question ``q`` against ``j = pi(q)``.

    The mean of the result is the reachability of the same tries against gold answers permuted
    across questions (the same answer distribution): what any-try-correct gives a probe that
    answers without regard to the question (a route that always says "12").

    Example:
        >>> m = np.array([[1, 1, 1], [0, 1, 0], [0, 0, 1]], dtype=bool)  # question 0 answers everything
        >>> permutation_chance(m, seed=0).round(2).tolist()
        [1.0, 0.0, 0.0]
    """
    n = match.shape[0]
    if n < 2:
        return np.full(n, np.nan)
    rng = np.random.default_rng(seed)
    hits = np.zeros(n)
    rows = np.arange(n)
    for _ in range(n_perm):
        while True:  # rejection sampling: a uniform derangement (about e tries)
            perm = rng.permutation(n)
            if not np.any(perm == rows):
                break
        hits += match[rows, perm]
    return hits / n_perm
