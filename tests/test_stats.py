from math import comb

import numpy as np
import pytest

from rnr_lens.stats import bootstrap, pass_at_k, wilson


def test_pass_at_k_matches_the_definition():
    # probability that k draws without replacement from n tries contain a correct one
    for n, c, k in [(10, 3, 1), (10, 3, 4), (8, 0, 3), (8, 8, 1), (5, 2, 5)]:
        expected = 1 - comb(n - c, k) / comb(n, k)
        assert pass_at_k(n, c, k) == pytest.approx(expected)
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)


def test_pass_at_k_against_simulation():
    rng = np.random.default_rng(0)
    n, c, k = 12, 4, 3
    hits = [(rng.permutation(n)[:k] < c).any() for _ in range(20000)]
    assert np.mean(hits) == pytest.approx(pass_at_k(n, c, k), abs=0.01)


def test_bootstrap_is_seeded_and_covers_the_mean():
    values = np.r_[np.ones(30), np.zeros(70)]
    a, b = bootstrap(values, seed=1), bootstrap(values, seed=1)
    assert a == b and a.value == pytest.approx(0.3)
    assert a.low < 0.3 < a.high and 0.18 < a.low and a.high < 0.42
    assert bootstrap(values, seed=2) != a


def test_paired_bootstrap_statistic():
    paired = np.c_[np.r_[np.ones(40), np.zeros(60)], np.r_[np.ones(60), np.zeros(40)]]
    est = bootstrap(paired, seed=0, statistic=lambda m: m[..., 1].mean(-1) - m[..., 0].mean(-1))
    assert est.value == pytest.approx(0.2) and est.low > 0


def test_wilson_interval():
    est = wilson(29, 40)
    assert est.low < 29 / 40 < est.high and 0.55 < est.low < 0.6
