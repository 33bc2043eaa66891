from math import comb

import numpy as np
import pytest
from scipy.stats import binomtest, norm
from statsmodels.stats.proportion import proportion_confint

from rnr_lens.core.stats import (
    Estimate,
    above_chance,
    design_effect,
    detectable,
    n_needed,
    paired_difference,
    paired_mean_difference,
    pass_at_k,
    per_question_sd,
    rate,
    ratio,
    score_mean,
    score_p,
    sign_flip_test,
    sign_test,
    tango,
    wilson,
)


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


def test_rates_have_wilson_intervals_that_hold_at_the_edges():
    """0 of 40 realized printed 0.00 [0.00, 0.00] under the percentile bootstrap: an interval
    that claims certainty the data cannot give."""
    zero, full = rate([0] * 40), rate([1] * 40)
    low, high = proportion_confint(0, 40, alpha=0.05, method="wilson")
    assert (zero.value, zero.low) == (0.0, 0.0) and zero.high == pytest.approx(high) and zero.high > 0.08
    assert full.high == 1.0 and full.low == pytest.approx(1 - high) and full.low < 0.92
    assert zero.method == "wilson" and zero.n == 40
    mid = wilson(29, 40)
    assert mid.low < 29 / 40 < mid.high and 0.55 < mid.low < 0.6
    assert rate([]).is_empty and rate([]).text() == "-"


def test_a_rate_against_a_fixed_value_prints_its_score_test_with_the_exact_binomial_beside():
    e = rate([1] * 9 + [0], null=0.5)
    z = (0.9 - 0.5) / np.sqrt(0.25 / 10)
    assert e.p == pytest.approx(2 * norm.sf(z)), "the printed p is the score test the Wilson interval inverts"
    assert e.exact_p == pytest.approx(binomtest(9, 10, 0.5).pvalue) and e.resolved == "above"
    assert rate([1, 1, 0], null=0.5).resolved is None, "2 of 3 is not most, resolved"


@pytest.mark.parametrize("n", [10, 17, 26, 40, 115])
def test_a_wilson_interval_and_its_printed_p_never_disagree(n):
    """Rules 3: every printed p is the test its interval inverts. For every count of n and
    nulls across [0.05, 0.95], the Wilson interval excludes the null exactly where p <= 0.05."""
    for k in range(n + 1):
        for null in np.linspace(0.05, 0.95, 19):
            e = wilson(k, n, null=float(null))
            excluded = e.low > null or e.high < null
            if min(abs(e.low - null), abs(e.high - null)) > 1e-9:  # not on the bound itself
                assert excluded == (e.p <= 0.05), (k, n, null, e)


def test_repeated_prompts_widen_the_interval_by_their_design_effect():
    """25 questions on 9 prompts read as 25 independent draws gave too narrow an interval."""
    values = np.array([1.0] * 5 + [0.0] * 5)
    prompts = ["a"] * 5 + ["b"] * 5
    naive, clustered = rate(values), rate(values, prompts)
    assert naive.value == clustered.value == 0.5 and clustered.n == 2 and naive.n == 10
    assert clustered.high - clustered.low > naive.high - naive.low, "two prompts are two draws, not ten"
    assert design_effect(values, prompts) == (5.0, 2)
    distinct = rate(values, [str(i) for i in range(10)])
    assert (distinct.low, distinct.high) == (naive.low, naive.high), "all prompts distinct: the plain interval"
    mixed = np.array([1.0, 0.0] * 5)
    assert design_effect(mixed, prompts)[0] == 1.0, "no correlation within prompts: no inflation"


def test_four_discordant_pairs_all_one_way_do_not_resolve():
    """4 of 40 discordant pairs, all one way, gave a bootstrap lower bound of 0.025 ("resolved")
    where the exact sign test gives p = 0.125."""
    d = paired_difference([1] * 4 + [0] * 36, [0] * 40)
    assert d.value == pytest.approx(0.1) and d.exact_p == pytest.approx(0.125)
    assert d.low > 0 and d.p == pytest.approx(2 * norm.sf(4 / np.sqrt(4))), "the printed p is the score test Tango's interval inverts"
    assert d.resolved is None and d.tests_disagree, "the score interval barely clears zero; the exact test does not agree: flagged, not resolved"
    assert "tests disagree" in d.p_text()
    assert paired_difference([1] * 6 + [0] * 34, [0] * 40).resolved == "above", "6 of 6 one way: exact p = 0.031"
    twelve = paired_difference([1] * 12 + [0] * 28, [0] * 40)
    assert twelve.low > 0 and twelve.exact_p == pytest.approx(binomtest(12, 12, 0.5).pvalue) and twelve.resolved == "above"
    assert not twelve.tests_disagree
    none = paired_difference([0] * 40, [0] * 40)
    assert none.value == 0 and none.low == pytest.approx(-none.high) and none.high > 0.08, "no discordant pair still leaves room either way"
    same = paired_difference([1] * 30 + [0] * 10, [1] * 30 + [0] * 10)
    assert same.high == pytest.approx(none.high), "only the discordant pairs and n matter"
    assert paired_difference([1] * 40, [1] * 40).p == 1.0


@pytest.mark.parametrize(("p_both", "p_first", "p_second"), [(0.1, 0.05, 0.0), (0.3, 0.15, 0.05), (0.0, 0.02, 0.02)])
def test_paired_interval_covers_at_the_sizes_we_have(p_both, p_first, p_second):
    """The interval must hold at n = 40 with few discordant pairs, where the percentile
    bootstrap under-covered (it cannot reach beyond what the sample shows)."""
    rng = np.random.default_rng(0)
    truth, hits, reps, n = p_first - p_second, 0, 600, 40
    cells = rng.choice(4, size=(reps, n), p=[p_both, p_first, p_second, 1 - p_both - p_first - p_second])
    for row in cells:
        first = np.isin(row, (0, 1)).astype(float)
        second = np.isin(row, (0, 2)).astype(float)
        d = paired_difference(first, second)
        hits += d.low <= truth <= d.high
    assert hits / reps >= 0.93, f"coverage {hits / reps:.3f} at n={n}"


def test_reach_against_chance_uses_the_exact_poisson_binomial_test():
    reached = np.r_[np.ones(10), np.zeros(30)]
    e = above_chance(reached, np.full(40, 0.15))
    assert e.exact_p == pytest.approx(2 * binomtest(10, 40, 0.15, alternative="greater").pvalue, rel=1e-6), "equal chances: the binomial tail"
    assert e.p == pytest.approx(2 * norm.sf((0.25 - 0.15) / np.sqrt(0.15 * 0.85 / 40))), "the printed p: the score test the interval inverts"
    assert e.resolved is None, "10 of 40 against a chance of 0.15 is not resolved"
    below = above_chance(np.r_[np.ones(4), np.zeros(36)], np.full(40, 0.15))
    assert below.value < 0 and below.resolved is None
    far = above_chance(np.r_[np.ones(20), np.zeros(20)], np.full(40, 0.1))
    assert far.resolved == "above" and far.low > 0


def test_chance_is_fixed_in_the_interval_and_the_test_alike():
    """Above chance's MOVER interval treated the averaged chance as binomial while its exact
    test treated it as fixed: one quantity, one interval, one test."""
    reached, chance = np.r_[np.ones(14), np.zeros(26)], np.full(40, 0.15)
    e, reach = above_chance(reached, chance), rate(reached)
    assert (e.low, e.high) == pytest.approx((reach.low - 0.15, reach.high - 0.15))
    assert e.value == pytest.approx(0.35 - 0.15) and e.resolved == "above"


def test_the_score_mean_is_tangos_interval_on_paired_differences():
    """Guards the generalization (claim 1's and 3's contrasts) against drifting from Tango's
    published interval, including 0 of n, n of n and repeated prompts."""
    rng = np.random.default_rng(0)
    for b, c, n in [(0, 0, 40), (4, 0, 40), (3, 7, 40), (0, 5, 20), (40, 0, 40), (84, 62, 725), (1, 1, 3)]:
        d = np.r_[np.ones(b), -np.ones(c), np.zeros(n - b - c)]
        e = score_mean(d, (-1, 1))
        assert (e.low, e.high) == pytest.approx(tango(b, c, n), abs=1e-8)
    for _ in range(20):
        x, y = rng.integers(0, 2, 30).astype(float), rng.integers(0, 2, 30).astype(float)
        prompts = [f"p{i % 10}" for i in range(30)]
        pd_, sm = paired_difference(x, y, prompts), score_mean(x - y, (-1, 1), prompts)
        assert (pd_.low, pd_.high) == pytest.approx((sm.low, sm.high), abs=1e-8)
    assert score_mean(np.zeros(40), (-1, 1)).text(3) == "0.000 [-0.088,0.088]", "0 of 40 keeps an interval"


def test_the_score_test_inverts_the_interval_at_any_null():
    c = np.r_[np.ones(30), np.full(25, -0.5), np.zeros(145)]
    e = score_mean(c, (-1, 1))
    for null in (e.low, e.high):
        assert score_p(c, null, (-1, 1)) == pytest.approx(0.05, abs=1e-6), "the bound is where the test's p is 5%"
    assert score_p(c, e.low - 0.01, (-1, 1)) < 0.05 < score_p(c, e.low + 0.01, (-1, 1))


def test_values_all_equal_keep_an_interval_around_their_mean_that_agrees_with_the_test():
    """Guards against the score statistic reading a rounding error at the sample mean as an
    infinite z (115 values of 0.3 do not sum to 34.5 exactly): the interval's low end fell to
    -1 while the test resolved the mean above zero."""
    for v, n in [(0.3, 115), (-1 / 3, 40), (0.037, 100)]:
        e = score_mean(np.full(n, v), (-1, 1))
        assert e.low <= v <= e.high and e.high - e.low < 0.5
        assert (e.low > 0) == (e.resolved == "above") and (e.high < 0) == (e.resolved == "below")


def test_the_sign_flip_test_is_mcnemar_on_zero_one_differences_and_keeps_its_level():
    rng = np.random.default_rng(1)
    for _ in range(10):
        d = rng.choice([-1.0, 0.0, 1.0], size=40, p=[0.15, 0.6, 0.25])
        prompts = [f"p{i // 2}" for i in range(40)]
        assert sign_flip_test(d) == sign_test(d) and sign_flip_test(d, prompts) == sign_test(d, prompts)
    # fractional differences symmetric about zero (the null): rejections at 5% stay near 5%
    rejections = [sign_flip_test(rng.choice([-1, 1], 40) * rng.random(40), seed=i) <= 0.05 for i in range(200)]
    assert np.mean(rejections) <= 0.09
    # many small differences one way and few large the other: the test weighs sizes, the sign test counts
    d = np.r_[np.full(30, 0.78), np.full(60, -0.016), np.zeros(10)]
    assert sign_test(d) == 1.0 and sign_flip_test(d) < 0.001
    assert paired_mean_difference(d).resolved == "above"
    assert paired_mean_difference(-d).resolved == "below"
    assert "sign-flip randomization test" in paired_mean_difference(d).method


def test_a_paired_mean_of_signs_is_named_for_the_test_that_ran():
    """Issue 54: at k = K every difference is -1, 0 or +1, where the sign-flip test is exactly
    McNemar's and the score interval Tango's; the estimate says so, and is paired_difference's."""
    rng = np.random.default_rng(3)
    d = rng.choice([-1.0, 0.0, 1.0], size=60, p=[0.2, 0.5, 0.3])
    prompts = [f"p{i // 3}" for i in range(60)]
    for clusters in (None, prompts):
        e, same = paired_mean_difference(d, clusters), paired_difference(d > 0, d < 0, clusters)
        assert e == same and "exact McNemar" in e.method and "sign-flip" not in e.method
        fractional = paired_mean_difference(np.where(d == 0, 0.5, d), clusters)
        assert "sign-flip randomization test" in fractional.method


def test_a_test_pointing_the_other_way_never_resolves():
    """Estimate.resolved checks the test's direction, not only its p: over prompts, the mean
    can be positive while most prompts' differences are negative."""
    diff = np.r_[np.full(3, 1.0), np.full(9, -0.1)]  # mean +0.175, nine of twelve below zero
    assert sign_test(diff) == 1.0
    assert sign_test(-np.r_[np.ones(6), np.zeros(34)]) == pytest.approx(binomtest(0, 6, 0.5).pvalue)
    first = np.r_[np.ones(8), np.zeros(32)]
    second = np.r_[np.zeros(8), np.zeros(32)]
    assert paired_difference(first, second).resolved == "above"


def test_the_binomial_test_is_scipys_at_one_half_and_directional_elsewhere():
    for k, n in [(9, 10), (1, 10), (5, 10), (6, 6)]:
        assert rate(np.r_[np.ones(k), np.zeros(n - k)], null=0.5).exact_p == pytest.approx(binomtest(k, n, 0.5).pvalue)
    assert rate(np.r_[np.ones(3), np.zeros(17)], null=0.2).exact_p == pytest.approx(min(1, 2 * binomtest(3, 20, 0.2, alternative="less").pvalue))


def test_fieller_carries_the_test_it_inverts():
    kept = np.r_[np.ones(37), np.zeros(163)]
    gain = np.r_[np.ones(100), np.zeros(100)]
    for margin in (0.2, 0.25, 0.3, 0.5):
        e = ratio(kept, gain, null=margin)
        excluded = not (e.low <= margin <= e.high)
        assert (e.p is not None and e.p < 0.05) == excluded


def test_fieller_ratio_is_unbounded_where_the_gain_is_not_resolved():
    tiny_gain = ratio(np.array([0.0] * 9 + [1.0]), np.array([0.0] * 8 + [1.0, 1.0]))
    assert tiny_gain.high == np.inf and tiny_gain.low == -np.inf
    big = ratio(np.r_[np.ones(10), np.zeros(30)], np.r_[np.ones(30), np.zeros(10)])
    assert big.value == pytest.approx(1 / 3) and big.low < 1 / 3 < big.high < 1


def test_power_says_what_n_resolves():
    sd = per_question_sd(np.r_[np.ones(4), np.zeros(36)])
    smallest = detectable(sd, 40)
    assert 0 < smallest < 1
    assert n_needed(smallest, sd) == pytest.approx(40, abs=1), "the detectable effect at n needs n"
    assert n_needed(smallest / 2, sd) == pytest.approx(160, rel=0.05), "half the effect: four times the questions"
    assert n_needed(0.0, sd) is None


def test_estimates_round_trip_through_json_with_unbounded_bounds():
    e = Estimate(0.3, -np.inf, np.inf, 12, "fieller")
    back = Estimate.from_dict(e.to_dict())
    assert (back.low, back.high, back.n, back.method) == (-np.inf, np.inf, 12, "fieller")
    assert e.text() == "0.30 [-inf,inf]"
    assert Estimate.from_dict(Estimate.empty().to_dict()).is_empty


def test_the_derangement_chance_is_the_share_of_other_golds_matched():
    from itertools import permutations

    from rnr_lens.core.stats import derangement_chance

    golds = [12] * 5 + [3, 4, 5, 6, 7]
    chance = derangement_chance([{12}] * 10, golds)  # every question's tries say "12"
    # under a derangement a gold-12 question meets 4 of the 9 other golds = 12, the others 5 of 9
    assert chance[:5] == pytest.approx(4 / 9) and chance[5:] == pytest.approx(5 / 9)
    assert np.isnan(derangement_chance([{1}], [1])).all(), "one question has no other gold"
    assert (derangement_chance([{g} for g in range(6)], list(range(6))) == 0).all(), "answers right only for itself: never by chance"
    assert derangement_chance([{None}, set()], [None, None]).tolist() == [0.0, 0.0], "an unreadable gold is no one's"
    rng = np.random.default_rng(0)
    golds5 = ["a", "b", "a", "c", "d"]
    said = [set(rng.choice(["a", "b", "c", "d", "e"], size=2).tolist()) for _ in range(5)]
    every = [p for p in permutations(range(5)) if all(p[i] != i for i in range(5))]
    by_hand = np.mean([[golds5[p[q]] in said[q] for q in range(5)] for p in every], axis=0)
    assert derangement_chance(said, golds5) == pytest.approx(by_hand), "exactly the mean over every derangement"


def test_a_pass_at_k_difference_prints_its_score_test_and_flags_the_sign_flip_beside_it():
    """Rules 3: '-0.00 [-0.04, 0.03], p 0.0001' paired a score interval with a sign-flip test.
    The printed p is now the score test's; the randomization test stands beside it, and where
    the two disagree the cell is flagged and not resolved."""
    diff = np.r_[np.full(12, -0.004), np.zeros(100), np.full(3, 0.0)]
    e = paired_mean_difference(diff)
    assert e.low < 0 < e.high and e.p > 0.05, "the interval and its printed p agree"
    assert e.exact_p is not None and e.exact_p < 0.05 and e.tests_disagree and e.resolved is None
    assert "tests disagree" in e.p_text()
    assert e.p == pytest.approx(score_p(diff, 0.0, (-1, 1)))


def test_percentile_bounds_are_exact_decimals():
    from rnr_lens.core.stats import percentile_bounds

    assert (1 - 0.95) / 2 != 0.025, "the float this guards against"
    assert percentile_bounds(0.95) == (0.025, 0.975)
    draws = np.arange(1, 2001)
    assert np.quantile(draws, percentile_bounds()[0], method="inverted_cdf") == 50, "the 50th of 2,000, not the 51st"


def test_a_round_trip_keeps_the_exact_test_beside():
    e = paired_difference([1] * 4 + [0] * 36, [0] * 40)
    assert Estimate.from_dict(e.to_dict()) == e and "exact_p" in e.to_dict()
    assert "exact_p" not in score_mean(np.r_[np.ones(3), np.zeros(5)], (-1, 1)).to_dict(), "no exact test: no key"
