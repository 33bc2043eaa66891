"""Bounded models of pass@k beyond the budget (issue 54): maximum-likelihood fits recover the
parameters of draws simulated from them, their pass@k is the model's own expectation, and their
crossing is where the two fitted curves meet."""

import numpy as np
import pytest

from rnr_lens.judge.ceiling import Ceiling, ceiling_of, pass_at_k_curves
from rnr_lens.judge.passk_models import HORIZON, Fit, ModelCrossing, first_crossing, fit

K = 128


def _simulated(pi: float, a: float, b: float, questions: int, seed: int) -> np.ndarray:
    """``(questions, K)`` 0/1 draws: each question unreachable with chance ``pi``, else its
    chance of a correct draw drawn from Beta(a, b)."""
    rng = np.random.default_rng(seed)
    p = np.where(rng.random(questions) < pi, 0.0, rng.beta(a, b, questions))
    return (rng.random((questions, K)) < p[:, None]).astype(float)


def _fit(draws: np.ndarray, model: str) -> Fit:
    values, codes = np.unique(draws.sum(1), return_inverse=True)
    return fit(values.astype(float), draws.shape[1], np.bincount(codes).astype(float), model)


def test_the_fits_recover_the_parameters_they_were_simulated_with():
    found = _fit(_simulated(0.0, 0.5, 2.0, 4000, seed=1), "beta-binomial")
    assert found.pi == 0 and found.a == pytest.approx(0.5, rel=0.1) and found.b == pytest.approx(2.0, rel=0.15)
    inflated = _fit(_simulated(0.3, 0.8, 1.5, 4000, seed=2), "zero-inflated")
    assert inflated.pi == pytest.approx(0.3, abs=0.03) and inflated.a == pytest.approx(0.8, rel=0.15)


def test_a_fits_pass_at_k_is_its_expected_unbiased_estimate():
    """pass@k = 1 - B(a, b + k) / B(a, b) = 1 - E[(1 - p)^k]: on many simulated questions the
    unbiased estimator's mean comes close to it at every k."""
    truth = Fit(0.2, 0.4, 1.2)
    observed = pass_at_k_curves(_simulated(truth.pi, truth.a, truth.b, 6000, seed=3)).mean(0)
    assert np.abs(truth.pass_at(np.arange(1, K + 1)) - observed).max() < 0.02
    # 1 - E[(1 - p)^8] over the Beta(a, b) distribution, integrated by scipy
    from scipy.stats import beta

    expected = (1 - truth.pi) * (1 - beta(truth.a, truth.b).expect(lambda p: (1 - p) ** 8))
    assert truth.pass_at(np.array([8]))[0] == pytest.approx(expected, abs=1e-8)


def test_the_crossing_is_where_the_fitted_curves_meet():
    # trained: most questions often right, a tenth unreachable; base: all reachable, rarely
    base, trained = Fit(0.0, 0.2, 2.0), Fit(0.1, 2.0, 0.5)
    k = int(first_crossing([base], [trained], 1e-12)[0])
    gap = lambda k: float(trained.pass_at(np.array([k]))[0] - base.pass_at(np.array([k]))[0])  # noqa: E731
    assert 1 < k <= HORIZON and gap(k) < 0 <= gap(k - 1)
    # without an unreachable share the trained curve rises to 1 faster: it never falls below
    assert first_crossing([base], [Fit(0.0, 2.0, 0.5)], 1e-12)[0] == HORIZON + 1
    # a trained curve never above base crosses at k = 1, as the observed crossing's resamples do
    assert first_crossing([Fit(0.0, 2.0, 0.5)], [base], 1e-12)[0] == 1


@pytest.mark.slow  # over 5 s on two cores (CONTRIBUTING's table)
def test_a_trained_model_that_still_leads_at_the_budget_gets_both_models():
    """Base reaches many questions rarely, trained a few often, a fifth never: trained leads at
    K = 128 and the bounded models say where each puts the crossing, with intervals from the
    same resamples, and read back from claims.json as they were written."""
    base, trained = _simulated(0.0, 0.15, 2.0, 60, seed=4), _simulated(0.2, 0.3, 0.1, 60, seed=5)
    prompts = [f"q{i}" for i in range(60)]
    ceiling = ceiling_of(("b", "b+t", "task", "sampling:k=128"), base, trained, base[:, 0], trained[:, 0], prompts)
    crossing = ceiling.crossing
    assert crossing.lead is not None and crossing.point is None and crossing.tied is None
    assert [m.model for m in crossing.models] == ["beta-binomial", "zero-inflated"]
    for m in crossing.models:
        assert m.misfit < 0.1 and m.interval is not None
        assert m.crossing is None or m.crossing > K
        assert m.text() in crossing.text()
    assert crossing.models[1].trained.pi > 0.05, "the unreachable fifth is seen"
    again = Ceiling.from_dict(ceiling.to_dict())
    assert again == ceiling and again.crossing.text() == crossing.text()
    assert ModelCrossing.from_dict(crossing.models[0].to_dict()) == crossing.models[0]


def test_curves_that_cross_within_the_budget_need_no_model():
    base, trained = _simulated(0.0, 0.2, 2.0, 40, seed=6), _simulated(0.5, 2.0, 0.5, 40, seed=7)
    ceiling = ceiling_of(("b", "b+t", "task", "p"), base, trained, base[:, 0], trained[:, 0], [f"q{i}" for i in range(40)])
    assert ceiling.crossing.point is not None and ceiling.crossing.models == ()
