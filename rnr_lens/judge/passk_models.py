"""pass@k beyond the budget under a bounded model: a per-question beta-binomial and its
zero-inflated variant, fitted by maximum likelihood to each model's draws.

The ceiling's straight line in log k (:func:`rnr_lens.judge.ceiling.find_crossing`) extrapolates a
gap that cannot keep its slope: both pass@k curves are bounded by 1 and must bend as they near
it. A *bounded* model of where the curves go draws each question's chance ``p`` of a correct
draw from one distribution per model and reads pass@k off it:

- **beta-binomial**: ``p ~ Beta(a, b)``, so a question with ``c`` correct of ``K`` draws has the
  beta-binomial likelihood, and ``pass@k = 1 - B(a, b + k) / B(a, b)``, which rises to 1;
- **zero-inflated**: a share ``pi`` of questions is unreachable (``p = 0``) and the rest are
  ``Beta(a, b)``: ``pass@k = (1 - pi) (1 - B(a, b + k) / B(a, b))``, which rises to ``1 - pi``.

Each is fitted to base and trained separately (maximum likelihood over the questions' counts of
correct draws), and :func:`model_crossing` finds the first k, up to :data:`HORIZON`, at which the
fitted trained curve falls below the fitted base curve after leading it, with a 95% percentile
interval over the same question-level bootstrap resamples as the ceiling's own (each resample
refitted). Invariant: what is stored is rounded far above an optimizer's last bits (a crossing
to two significant digits, parameters to three, the unreachable share and a gap to three
decimals), and every fit is driven to its optimum (until no step lowers its loss), not to
wherever an optimizer's path stopped: a last bit that moves between CPUs (numpy's SIMD
kernels differ) moves a stored number only where the optimum lies within it of a rounding
boundary, which the rounding makes rare (not impossible), so the same draws give the same
``claims.json``. "None by 10^7" says nothing of k beyond it: a beta-binomial pair whose
trained curve rises faster near 0 can still cross far beyond.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from jaxtyping import Float
from scipy.special import betaln, digamma, expit, expm1

from rnr_lens.core.stats import Estimate, percentile_bounds
from rnr_lens.errors import RnrLensError

HORIZON = 10**7
"""The largest k a model's crossing is looked for at; beyond it a crossing is "none by 10^7"."""

MODELS = ("beta-binomial", "zero-inflated")
"""The bounded models, by the name claims.json gives them."""

_GRID = np.unique(np.concatenate([np.arange(1, 1025), np.round(np.geomspace(1024, HORIZON, 2000))]).astype(np.int64))
"""The k's a crossing is first looked for at (every k to 1024, then 2000 steps in log k), each
bracket then bisected to its integer k."""


@dataclass(frozen=True)
class Fit:
    """One model's maximum-likelihood parameters for one curve: ``pi`` (the unreachable
    share; 0 for the beta-binomial), ``a`` and ``b`` (the beta distribution of the reachable
    questions' chance of a correct draw)."""

    pi: float
    a: float
    b: float

    def pass_at(self, k: np.ndarray) -> np.ndarray:
        """The model's pass@k at each k of ``k``."""
        return (1.0 - self.pi) * -expm1(betaln(self.a, self.b + k) - betaln(self.a, self.b))

    def to_dict(self) -> dict[str, float]:
        return {"pi": self.pi, "a": self.a, "b": self.b}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Fit:
        return cls(float(d["pi"]), float(d["a"]), float(d["b"]))


@dataclass(frozen=True)
class ModelCrossing:
    """Where one bounded model, fitted to both curves, puts their crossing.

    Attributes:
        model: One of :data:`MODELS`.
        base, trained: The fits (``a`` and ``b`` to three significant digits, ``pi`` to three
            decimals).
        misfit: The largest distance, over k = 1..K and both curves, between the model's
            pass@k and the observed (unbiased) pass@k: how well it describes what was measured.
        crossing: The first k after the fitted curves' lead at which trained falls below base,
            to two significant digits; None where it does not by :data:`HORIZON` ("none by
            10^7"); 1 where the fitted trained curve never leads.
        interval: The 95% percentile bootstrap interval of ``crossing`` over the ceiling's
            question-level resamples, each refitted; an end None where more than 2.5% of
            resamples have no crossing by :data:`HORIZON`.
        gap_at_line: The model's trained - base pass@k at the straight line's zero (where the
            line says the gap is 0), with its bootstrap interval; None without a line's zero.
            A measurement there tells the two apart.
        loglik: The maximized log-likelihood of both fits together, over every question's
            count of correct draws (the binomial coefficient included, so models compare on one
            scale), to one decimal; None in files of rules before 3. Models whose crossings
            differ by orders of magnitude may fit the measured draws almost equally well: the
            crossing holds only if its model is right.
    """

    model: str
    base: Fit
    trained: Fit
    misfit: float
    crossing: int | None
    interval: tuple[int | None, int | None] | None
    gap_at_line: Estimate | None = None
    loglik: float | None = None

    def text(self) -> str:
        """The model's crossing as a clause."""
        where = f"crosses at k = {k_text(self.crossing)}" if self.crossing is not None else f"crosses nowhere by k = {k_text(HORIZON)}"
        span = ""
        if self.interval is not None:
            low, high = (f"none by {k_text(HORIZON)}" if end is None else k_text(end) for end in self.interval)
            span = f" (bootstrap 95%: {low} to {high})"
        fitted = f"within {self.misfit:.2f} of both observed curves" + (f", log-likelihood {self.loglik:,.1f}" if self.loglik is not None else "")
        return f"a {self.model} fit ({fitted}) {where}{span}" + (", if that model is right" if self.loglik is not None else "")

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "base": self.base.to_dict(),
            "trained": self.trained.to_dict(),
            "misfit": self.misfit,
            "crossing": self.crossing,
            "interval": None if self.interval is None else list(self.interval),
            "gap_at_line": None if self.gap_at_line is None else self.gap_at_line.to_dict(),
        } | ({} if self.loglik is None else {"loglik": self.loglik})

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ModelCrossing:
        spread = d["interval"]
        gap = d.get("gap_at_line")
        return cls(
            str(d["model"]),
            Fit.from_dict(d["base"]),
            Fit.from_dict(d["trained"]),
            float(d["misfit"]),
            d["crossing"],
            None if spread is None else (spread[0], spread[1]),
            None if gap is None else Estimate.from_dict(gap),
            d.get("loglik"),
        )


def _sig(x: float, digits: int = 3) -> float:
    """``digits`` significant digits (what is stored never shows an optimizer's last bits)."""
    return float(f"{x:.{digits}g}")


def _round_k(k: int) -> int:
    """A model's crossing to two significant digits (k below 100 exact)."""
    return k if k < 100 else int(_sig(float(k), 2))


def k_text(k: float) -> str:
    """A k beyond a budget as a page prints it: with thousands separators below a million, a
    power of ten as ``10^7``, else two significant digits (``1.6e+06``)."""
    if k < 1e6:
        return f"{k:,.0f}"
    return f"10^{round(math.log10(k))}" if k == 10 ** round(math.log10(k)) else f"{k:.2g}"


def fit(counts: Float[np.ndarray, " bins"], budget: int, weights: Float[np.ndarray, " bins"], model: str, start: Fit | None = None) -> Fit:
    """The maximum-likelihood fit of ``model`` to questions with ``counts[i]`` correct of
    ``budget`` draws, each distinct count weighted by how many questions have it
    (``weights[i]``, a bootstrap resample's multiplicities included).

    Example (two questions never right in 8 draws, one half the time, two always: 0.6 of them
    reached at k = 8; the fitted curve says about as much):

        >>> f = fit(np.array([0.0, 4.0, 8.0]), 8, np.array([2.0, 1.0, 2.0]), "beta-binomial")
        >>> round(float(f.pass_at(np.array([8]))[0]), 2)
        0.61
    """
    return fit_many(counts, budget, weights[None, :], model, start)[0]


def fit_many(
    counts: Float[np.ndarray, " bins"], budget: int, weights: Float[np.ndarray, "fits bins"], model: str, start: Fit | None = None
) -> list[Fit]:
    """:func:`fit` for many weightings of the same counts at once (a bootstrap's resamples):
    Levenberg-Marquardt steps in (log a, log b, logit pi), all fits together, each with its own
    damping, from ``start`` (else a = b = 1, pi = 0.5; the zero-inflated model also from pi =
    1e-6 and 0.3, keeping the best optimum), until a step moves less than 1e-8 or
    none lowers the loss at all."""
    zero_inflated = model == "zero-inflated"
    if model not in MODELS:
        raise ValueError(f"unknown model {model!r}; one of {', '.join(MODELS)}")
    c, n = counts[None, :], float(budget)
    j0 = int(np.flatnonzero(counts == 0)[0]) if (counts == 0).any() else None
    size = 3 if zero_inflated else 2
    low, high = np.array([-12.0, -12.0, -20.0][:size]), np.array([12.0, 12.0, 20.0][:size])

    def log_p(a: np.ndarray, b: np.ndarray, j: int | None = None) -> np.ndarray:
        """log P(c | a, b), less the binomial coefficient: for every count, or count ``j`` alone."""
        cj = c if j is None else c[:, j : j + 1]
        return betaln(cj + a, n - cj + b) - betaln(a, b)

    def mixture(pi: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For count 0 under the zero-inflated model: P(0 | a, b) and pi + (1 - pi) P(0)."""
        p0 = np.exp(log_p(a, b, j0)[:, 0])
        return p0, pi[:, 0] + (1 - pi[:, 0]) * p0

    def loss(theta: np.ndarray, weights: np.ndarray) -> np.ndarray:
        a, b = np.exp(theta[:, :1]), np.exp(theta[:, 1:2])
        if not zero_inflated:
            return -(weights * log_p(a, b)).sum(1)
        pi = expit(theta[:, 2:3])
        ll = np.log1p(-pi) + log_p(a, b)  # c > 0: log(1 - pi) + log P(c); c = 0: log(pi + (1 - pi) P(0))
        if j0 is not None:
            ll[:, j0] = np.log(mixture(pi, a, b)[1])
        return -(weights * ll).sum(1)

    def gradient(theta: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """The loss's gradient, which needs no log-beta but count 0's: the Hessian's differences
        read it alone."""
        a, b = np.exp(theta[:, :1]), np.exp(theta[:, 1:2])
        both, total = digamma(a + b), digamma(n + a + b)
        da = digamma(c + a) - total - digamma(a) + both
        db = digamma(n - c + b) - total - digamma(b) + both
        if not zero_inflated:
            return -np.hstack([a * (weights * da).sum(1, keepdims=True), b * (weights * db).sum(1, keepdims=True)])
        pi = expit(theta[:, 2:3])
        share = np.ones((len(theta), c.shape[1]))  # d ll / d log P(c)
        dz = np.broadcast_to(-pi, share.shape).copy()
        if j0 is not None:
            p0, mix = mixture(pi, a, b)
            share[:, j0], dz[:, j0] = (1 - pi[:, 0]) * p0 / mix, pi[:, 0] * (1 - pi[:, 0]) * (1 - p0) / mix
        grad = [
            a * (weights * share * da).sum(1, keepdims=True),
            b * (weights * share * db).sum(1, keepdims=True),
            (weights * dz).sum(1, keepdims=True),
        ]
        return -np.hstack(grad)

    def objective(theta: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return loss(theta, weights), gradient(theta, weights)

    def descend(first: Fit) -> tuple[np.ndarray, np.ndarray]:
        pi0 = min(max(first.pi, 1e-6), 1 - 1e-6)
        theta = np.tile(np.array([math.log(first.a), math.log(first.b), math.log(pi0 / (1 - pi0))][:size]).clip(low, high), (len(weights), 1))
        value, grad = objective(theta, weights)
        damping = np.full(len(weights), 1e-6)
        eye, h = np.eye(size), 1e-5
        live = np.arange(len(weights))  # the fits not yet at their optimum
        for _ in range(200):
            t, w, g = theta[live], weights[live], grad[live]
            hessian = np.stack([(gradient(t + h * eye[i], w) - gradient(t - h * eye[i], w)) / (2 * h) for i in range(size)], 2)
            hessian = (hessian + hessian.transpose(0, 2, 1)) / 2
            # a modified Newton step: the Hessian shifted until positive definite, then damped
            scale = np.abs(np.diagonal(hessian, axis1=1, axis2=2)).mean(1) + 1e-9
            shift = np.maximum(0.0, -np.linalg.eigvalsh(hessian)[:, 0]) * 1.5 + damping[live] * scale
            step = np.linalg.solve(hessian + shift[:, None, None] * eye, g[:, :, None])[:, :, 0]
            trial = (t - step).clip(low, high)
            new_value, new_grad = objective(trial, w)
            better = np.isfinite(new_value) & (new_value < value[live])
            moved = np.abs(trial - t).max(1)
            theta[live[better]], value[live[better]], grad[live[better]] = trial[better], new_value[better], new_grad[better]
            newtonian = damping[live] <= 1e-4  # the step was (nearly) Newton's, not shrunk by damping
            damping[live] = np.where(better, np.maximum(damping[live] / 10, 1e-12), damping[live] * 10)
            # at the optimum: a nearly undamped step that still lowers the loss moves less than
            # 1e-8, or no step lowers it (the loss is flat to its last bit) at a millionfold damping
            finished = (better & newtonian & (moved < 1e-8)) | (damping[live] >= 1e6)
            live = live[~finished]
            if not len(live):
                break
        if len(live):
            raise RnrLensError(f"{len(live)} {model} fits did not reach their optimum in 200 steps; this is a bug, please report it")
        return theta, value

    # the zero-inflated likelihood has more than one local optimum (a few unreachable questions,
    # or many): every fit starts from each of these, and keeps its best
    starts = [start or Fit(0.5, 1.0, 1.0)]
    if zero_inflated:
        starts += [Fit(pi, starts[0].a, starts[0].b) for pi in (1e-6, 0.3)]
    best_theta, best_value = descend(starts[0])
    for other in starts[1:]:
        theta, value = descend(other)
        better = value < best_value - 1e-9 * np.maximum(weights.sum(1), 1.0)
        best_theta[better], best_value[better] = theta[better], value[better]
    theta = best_theta
    a, b = np.exp(theta[:, 0]), np.exp(theta[:, 1])
    pi = expit(theta[:, 2]) if zero_inflated else np.zeros(len(weights))
    return [Fit(float(p), float(x), float(y)) for p, x, y in zip(pi, a, b)]


def log_likelihood(f: Fit, counts: np.ndarray, budget: int, weights: np.ndarray) -> float:
    """The log-likelihood of questions with ``counts`` correct of ``budget`` draws (each count
    weighted by its questions) under the fit ``f``: beta-binomial, with a share ``pi`` of
    questions never correct (``scipy.stats.betabinom``; the binomial coefficient included).

    Example:
        >>> round(log_likelihood(Fit(0.0, 1.0, 1.0), np.array([0.0, 8.0]), 8, np.array([1.0, 1.0])), 3)  # uniform: 1/9 each
        -4.394
    """
    from scipy.stats import betabinom

    p = np.exp(betabinom.logpmf(counts, budget, f.a, f.b))
    p = (1.0 - f.pi) * p + f.pi * (counts == 0)
    return float((weights * np.log(p)).sum())


def first_crossing(base: Sequence[Fit], trained: Sequence[Fit], tie: float) -> np.ndarray:
    """For each pair of fits, the first k in 1..:data:`HORIZON` after the trained curve's lead
    (its pass@k above base's by more than ``tie``) at which it is below base's by more than
    ``tie``; 1 where trained never leads; ``HORIZON + 1`` where it does not cross by then."""
    out = np.full(len(base), HORIZON + 1, dtype=np.int64)
    for i, (fb, ft) in enumerate(zip(base, trained)):
        gap = ft.pass_at(_GRID) - fb.pass_at(_GRID)
        above, below = gap > tie, gap < -tie
        if not above.any():
            out[i] = 1
            continue
        after = below & (np.arange(len(_GRID)) > above.argmax())
        if not after.any():
            continue
        j = int(after.argmax())
        lo, hi = int(_GRID[j - 1]), int(_GRID[j])  # below at hi, not yet at lo
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if ft.pass_at(np.array([mid]))[0] - fb.pass_at(np.array([mid]))[0] < -tie:
                hi = mid
            else:
                lo = mid
        out[i] = hi
    return out


def model_crossings(
    draws_base: np.ndarray,
    draws_trained: np.ndarray,
    observed_base: np.ndarray,
    observed_trained: np.ndarray,
    multiplicities: np.ndarray | None,
    line_zero: float | None,
    tie: float,
) -> tuple[ModelCrossing, ...]:
    """Each of :data:`MODELS` fitted to both models' ``(questions, K)`` 0/1 draws, with its
    crossing, its misfit to the observed mean pass@k curves (``observed_*``, k = 1..K), and,
    where ``multiplicities`` (resamples x questions: how often each question is drawn) is
    given, each resample refitted for the crossing's interval and the gap at ``line_zero``."""
    budget = draws_base.shape[1]
    ks = np.arange(1, budget + 1)
    # each curve's distinct counts of correct draws, how many questions have each, and (per
    # resample) how often those questions are drawn: the same for every model
    curves = []
    for draws in (draws_base, draws_trained):
        values, codes = np.unique(draws.sum(1), return_inverse=True)
        resampled = np.zeros((0 if multiplicities is None else len(multiplicities), len(values)))
        if multiplicities is not None:
            for j in range(len(values)):
                resampled[:, j] = multiplicities[:, codes == j].sum(1)
        curves.append((values.astype(float), np.bincount(codes).astype(float), resampled))
    out = []
    for model in MODELS:
        fb, ft = (fit(values, budget, weights, model) for values, weights, _ in curves)
        misfit = max(float(np.abs(fb.pass_at(ks) - observed_base).max()), float(np.abs(ft.pass_at(ks) - observed_trained).max()))
        crossing = int(first_crossing([fb], [ft], tie)[0])
        interval, gap = None, None
        if multiplicities is not None:
            refits = [fit_many(values, budget, resampled, model, start=whole) for (values, _, resampled), whole in zip(curves, (fb, ft))]
            hits = first_crossing(refits[0], refits[1], tie)
            low, high = (int(v) for v in np.quantile(hits, list(percentile_bounds()), method="inverted_cdf"))
            interval = (_round_k(low) if low <= HORIZON else None, _round_k(high) if high <= HORIZON else None)
            if line_zero is not None:
                at = np.array([float(round(line_zero))])
                gaps = np.array([float(t.pass_at(at)[0] - b.pass_at(at)[0]) for b, t in zip(refits[0], refits[1])])
                g_low, g_high = np.quantile(gaps, list(percentile_bounds()), method="inverted_cdf")
                value = float(ft.pass_at(at)[0] - fb.pass_at(at)[0])
                gap = Estimate(
                    round(value, 3), round(float(g_low), 3), round(float(g_high), 3), draws_base.shape[0], "bootstrap percentile, refitted"
                )
        shown_base, shown_trained = (Fit(round(f.pi, 3), _sig(f.a), _sig(f.b)) for f in (fb, ft))
        kept = _round_k(crossing) if crossing <= HORIZON else None
        ll = sum(log_likelihood(f, values, budget, weights) for f, (values, weights, _) in zip((fb, ft), curves))
        out.append(ModelCrossing(model, shown_base, shown_trained, round(misfit, 3), kept, interval, gap, round(ll, 1)))
    return tuple(out)
