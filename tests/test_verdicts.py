"""Verdicts on hand-built outcomes whose right answer is known.

Guards against the report saying more than its data: an interval that spans zero counted as
support (``sub``: -0.07 [-0.17, 0.03] read as "random not below search"), four discordant pairs
all one way read as resolved, a below-chance setting given a retention, a block that breaks
most realized questions named the bottleneck, "flat" said of any interval that covers zero.
"""

from __future__ import annotations

import numpy as np
import pytest

from rnr_lens import verdicts as V
from rnr_lens.stats import rate


def ones(k: int, n: int) -> np.ndarray:
    return np.r_[np.ones(k), np.zeros(n - k)]


CHANCE_LOW = np.full(40, 0.02)


def test_an_interval_that_spans_zero_is_not_support():
    """sub: random - search -0.07 [-0.17, 0.03] was counted as support."""
    random_, search = ones(10, 40), np.r_[ones(10, 40)[:37], [1.0, 1.0, 1.0]]  # search ahead by 3 questions
    v = V.routes_vs_search(random_, search, CHANCE_LOW, CHANCE_LOW)
    assert v.difference.value == pytest.approx(-3 / 40) and v.difference.low < 0 < v.difference.high
    assert v.verdict.status == V.UNRESOLVED
    assert v.verdict.n_needed is not None and v.verdict.detectable is not None and "questions would resolve" in str(v.verdict)


def test_four_discordant_pairs_one_way_leave_claim_one_unresolved():
    random_, search = ones(14, 40), ones(10, 40)  # random ahead on 4 questions, none the other way
    v = V.routes_vs_search(search, random_, CHANCE_LOW, CHANCE_LOW)  # search - ... as "random" : random behind by 4
    assert v.difference.p == pytest.approx(0.125) and v.difference.resolved is None
    assert v.verdict.status == V.UNRESOLVED


def test_claim_one_support_against_and_uninformative():
    same = ones(30, 40)
    assert V.routes_vs_search(same, same, CHANCE_LOW, CHANCE_LOW).verdict.status == V.UNRESOLVED, "n=40 cannot show a 0.05 margin"
    big = np.tile(same, 10)
    assert V.routes_vs_search(big, big, np.full(400, 0.02), np.full(400, 0.02)).verdict.status == V.SUPPORT, "n=400 can"
    behind = V.routes_vs_search(ones(5, 40), ones(25, 40), CHANCE_LOW, CHANCE_LOW)
    assert behind.verdict.status == V.AGAINST and "McNemar" in behind.verdict.text
    below_chance = V.routes_vs_search(ones(4, 40), ones(5, 40), np.full(40, 0.15), np.full(40, 0.15))
    assert below_chance.verdict.status == V.UNINFORMATIVE, "neither probe above its chance level"


def test_retention_is_given_only_above_chance_and_decided_against_its_margin():
    realized, reached = ones(10, 200), ones(110, 200)
    above = V.routes_vs_search(reached, reached, np.full(200, 0.02), np.full(200, 0.02)).above_chance_random
    keep_none = V.retention({"majority": realized.copy()}, realized, reached, above)
    assert keep_none[0].estimate is not None and keep_none[0].estimate.high < V.RETENTION_MARGIN
    assert V.retention_verdict(keep_none).status == V.SUPPORT
    keep_all = V.retention({"majority": reached.copy()}, realized, reached, above)
    assert V.retention_verdict(keep_all).status == V.AGAINST
    chance = V.routes_vs_search(ones(4, 40), ones(4, 40), np.full(40, 0.15), np.full(40, 0.15)).above_chance_random
    gated = V.retention({"majority": ones(4, 40)}, np.zeros(40), ones(4, 40), chance)
    assert gated[0].estimate is None and V.retention_verdict(gated).status == V.UNINFORMATIVE


def test_a_block_that_breaks_most_controls_is_not_a_bottleneck():
    held = np.ones(12)
    _, v = V.bottleneck_verdict(held, rate(ones(20, 29)), block=4)
    assert v.status == V.UNRESOLVED and "breaks" in v.text
    _, ok = V.bottleneck_verdict(held, rate(ones(2, 29)), (rate(np.zeros(12)),), block=4)
    assert ok.status == V.SUPPORT


def test_claim_two_at_the_sizes_we_have():
    """MLP 4 on add-small repaired 2 of 3 held-out failures (0.67 [0.21, 0.94]): the README
    said the claim "does not hold"; the interval covers one half, so it is unresolved."""
    held, v = V.bottleneck_verdict(ones(2, 3), rate(ones(3, 29)), block=4)
    assert held is not None and held.low < 0.5 < held.high
    assert v.status == V.UNRESOLVED and "not resolved at this failure-set size" in v.text and v.n_needed and v.n_needed > 3
    assert V.bottleneck_verdict(np.zeros(10), rate(ones(1, 29)), block=4)[1].status == V.AGAINST
    _, arbitrary = V.bottleneck_verdict(np.ones(12), rate(ones(1, 29)), (rate(ones(8, 12)),), block=4)
    assert arbitrary.status == V.UNRESOLVED and "null" in arbitrary.text, "an arbitrary block repairing as much is no bottleneck"
    assert V.bottleneck_verdict(None, None, block=None)[1].status == V.UNINFORMATIVE


def test_retention_needs_a_gain_and_never_collapses_to_a_point():
    """A selector that always kept the default answer read 0.00 [0.00, 0.00] and counted as
    support; reach below realized still got a retention."""
    realized, reached = ones(10, 200), ones(110, 200)
    above = V.routes_vs_search(reached, reached, np.full(200, 0.02), np.full(200, 0.02)).above_chance_random
    (kept,) = V.retention({"logprob-or-default": realized.copy()}, realized, reached, above)
    assert kept.estimate is not None and kept.estimate.value == 0 and kept.estimate.high > 0
    lost = V.retention({"majority": realized.copy()}, ones(150, 200), reached, above)
    assert lost[0].estimate is None and "no gain" in lost[0].reason


def test_claim_three_flat_means_equivalent_not_merely_unresolved():
    n = 40
    ra, rb = ones(10, n), ones(25, n)  # realized rose by 15 questions
    flat_small = V.training_verdict(ra, rb, ones(30, n), ones(30, n))
    assert flat_small.verdict.status == V.UNRESOLVED, "an interval covering zero at n=40 is not 'flat'"
    big = 400
    flat = V.training_verdict(np.tile(ra, 10), np.tile(rb, 10), ones(300, big), ones(300, big))
    assert flat.verdict.status == V.SUPPORT and "TOST" in flat.verdict.text
    assert flat.delta_reachable_tost.level == pytest.approx(0.90)
    fell = V.training_verdict(ra, rb, ones(35, n), ones(20, n))
    assert fell.verdict.status == V.SUPPORT and "fell" in fell.verdict.text
    rose = V.training_verdict(ra, rb, ones(10, n), ones(30, n))
    assert rose.verdict.status == V.AGAINST
    nothing = V.training_verdict(ra, ra, ones(30, n), ones(30, n))
    assert nothing.verdict.status == V.UNINFORMATIVE


def test_verdicts_round_trip_and_count():
    v = V.Verdict(V.UNRESOLVED, "x", 0.21, 150)
    assert V.Verdict.from_dict(v.to_dict()) == v
    assert V.counts([v, v, V.Verdict(V.SUPPORT, "y")]) == {"support": 1, "against": 0, "unresolved": 2, "uninformative": 0}
    with pytest.raises(ValueError, match="not one of"):
        V.Verdict("maybe", "z")
