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


def test_permutation_chance_is_the_share_of_other_golds_matched():
    from rnr_lens.stats import permutation_chance

    golds = np.array([12] * 5 + [3, 4, 5, 6, 7])
    said_12 = np.array([[g == 12 for g in golds]] * 10)  # every question's tries say "12"
    chance = permutation_chance(said_12, n_perm=4000, seed=1)
    # under a derangement a gold-12 question meets 4 of the 9 other golds = 12, the others 5 of 9
    assert chance[:5] == pytest.approx(4 / 9, abs=0.03) and chance[5:] == pytest.approx(5 / 9, abs=0.03)
    assert np.isnan(permutation_chance(np.ones((1, 1), dtype=bool))).all(), "one question has no other gold"
    assert (permutation_chance(np.eye(6, dtype=bool)) == 0).all(), "answers right only for itself: never by chance"


def test_cluster_bootstrap_resamples_prompts_not_questions():
    """25 questions on 9 prompts read 0.76 [0.57, 0.89] when repeats were taken as independent."""
    values = np.array([1.0] * 5 + [0.0] * 5)
    prompts = ["a"] * 5 + ["b"] * 5
    naive, clustered = bootstrap(values, seed=0), bootstrap(values, seed=0, clusters=prompts)
    assert naive.value == clustered.value == 0.5 and clustered.n == 2 and naive.n == 10
    assert (clustered.low, clustered.high) == (0.0, 1.0) and naive.high - naive.low < 0.7, "two prompts: anything from 0 to 1"
    distinct = bootstrap(values, seed=0, clusters=[str(i) for i in range(10)])
    assert (distinct.low, distinct.high) == (naive.low, naive.high), "all prompts distinct: the plain bootstrap"
    with pytest.raises(ValueError, match="one value per question"):
        bootstrap(np.c_[values, values], seed=0, clusters=prompts, statistic=lambda m: m.mean(axis=(1, 2)))
