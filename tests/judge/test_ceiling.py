"""Claim 3 at large k (issue 41): pass@k curves of a trained pair and where they cross.

The curves' arithmetic and the crossing are checked on draws whose answer is known (a base
that reaches many questions rarely, a trained model that reaches few questions often: the
textbook crossing); the whole path is checked on real audits of tiny models of the real
architecture, whose claim-3 verdict at the budget must be the comparison's own verdict (the
same rule read from the same draws), so the two can never drift apart."""

import numpy as np
import pytest

import rnr_lens as R
from rnr_lens.core.stats import paired_difference, pass_at_k
from rnr_lens.judge.ceiling import Ceiling, Crossing, chance_curves, curve_points, distinct_answers, find_crossing, pass_at_k_curves
from rnr_lens.questions.deploy import DeploymentConfig
from rnr_lens.questions.tasks import Question, Task, get
from rnr_lens.trained_pair.comparison import compare_ceiling

K = 128


def _draws(counts: list[tuple[int, int]], budget: int = K) -> np.ndarray:
    """``(questions, budget)`` 0/1 draws: for each ``(questions, correct)`` pair, that many
    questions with that many correct draws (first in order)."""
    rows = [np.r_[np.ones(c), np.zeros(budget - c)] for n, c in counts for _ in range(n)]
    return np.array(rows)


def test_the_curves_are_the_unbiased_estimator_at_every_k():
    rng = np.random.default_rng(0)
    draws = (rng.random((7, 40)) < rng.random((7, 1))).astype(float)
    curves = pass_at_k_curves(draws)
    for q in range(7):
        c = int(draws[q].sum())
        assert curves[q] == pytest.approx([pass_at_k(40, c, k) for k in range(1, 41)], abs=1e-12)
    # K = 128 with one correct draw: k / K exactly, no overflow of C(128, 64)
    assert pass_at_k_curves(_draws([(1, 1)]))[0] == pytest.approx(np.arange(1, K + 1) / K)


def test_a_rarely_reaching_base_overtakes_an_often_reaching_trained_model():
    """Base: 60 of 100 questions with 2 correct draws of 128. Trained: 30 questions with 100
    of 128. Trained leads at k = 1 (0.23 against 0.01); at k = 128 base reaches 0.60 against 0.30."""
    prompts = [f"q{i}" for i in range(100)]
    base = pass_at_k_curves(_draws([(60, 2), (40, 0)]))
    trained = pass_at_k_curves(_draws([(30, 100), (70, 0)]))
    points = curve_points(base, trained, prompts)
    assert points[0].difference.resolved == "above" and points[-1].difference.resolved == "below"
    crossing = find_crossing(base, trained, points, prompts)
    expected = int(np.argmax(trained.mean(0) - base.mean(0) <= 0)) + 1
    assert crossing.point == expected and 20 < expected < 60
    assert crossing.not_excluded < crossing.point < crossing.reversed
    low, high = crossing.point_interval
    assert low <= crossing.point <= high
    assert crossing.extrapolated is None, "the curves cross: nothing to extrapolate"
    assert crossing.lead == 1 and crossing.tied is None
    text = crossing.text()
    assert (
        f"cross at k = {crossing.point}" in text and f"the pointwise 95% interval first puts base above trained at k = {crossing.reversed} (" in text
    )
    # the simultaneous band over k resolves the reversal too, here later than the pointwise scan
    assert crossing.reversed_band is not None and crossing.reversed_band >= crossing.reversed
    assert f"k = {crossing.reversed_band} under a simultaneous 95% band over k" in text
    # the same data, the same seed: the same interval
    assert find_crossing(base, trained, points, prompts).point_interval == crossing.point_interval
    # rules 3: the scan's first k's read the interval printed at each k (and the test it inverts)
    assert crossing.reversed == next(p.k for p in points if p.difference.high < 0)
    assert crossing.not_excluded == next(p.k for p in points if not p.difference.low > 0)


def test_a_resample_in_which_trained_never_leads_crosses_at_one_not_beyond_the_budget():
    """Trained's lead at k = 1 is +0.0008 (10 questions with 13 of 128 correct draws against
    base's 60 with 2), gone by k = 3. In many resamples trained never leads at all: base is at
    or above it from k = 1, so their crossing is k = 1 (guards against counting them as
    crossings beyond K, which printed the interval's upper end as ">128" although no resample
    had trained ahead at 128)."""
    prompts = [f"q{i}" for i in range(100)]
    base = pass_at_k_curves(_draws([(60, 2), (40, 0)]))
    trained = pass_at_k_curves(_draws([(10, 13), (90, 0)]))
    crossing = find_crossing(base, trained, curve_points(base, trained, prompts), prompts)
    assert (crossing.lead, crossing.point) == (1, 3)
    low, high = crossing.point_interval
    assert low == 1 and high is not None and crossing.point <= high < K
    assert 0.025 < crossing.never_leads < 1
    assert f"trained never leads in {crossing.never_leads:.1%} of resamples, each counted as k = 1" in crossing.text()
    # one correct draw fewer: no lead in the data, yet about half the resamples lead at k = 1;
    # the crossing's interval is still computed and printed beside "never lies above"
    trained = pass_at_k_curves(_draws([(10, 12), (90, 0)]))
    crossing = find_crossing(base, trained, curve_points(base, trained, prompts), prompts)
    assert crossing.lead is None and crossing.point is None and crossing.point_interval[0] == 1
    assert 0.025 < crossing.never_leads < 0.975
    assert (
        f"never lies above base (no lead to lose: nothing crosses) (the crossing's bootstrap 95%: 1 to {crossing.point_interval[1]};"
        in crossing.text()
    )


def test_no_crossing_by_the_budget_says_where_the_trend_points():
    prompts = [f"q{i}" for i in range(200)]
    base = pass_at_k_curves(_draws([(150, 1), (50, 0)]))  # 0.75 at K, rising as k / K
    trained = pass_at_k_curves(_draws([(160, 12), (40, 0)]))  # 0.80 at K, nearly flat past k = 30
    points = curve_points(base, trained, prompts)
    crossing = find_crossing(base, trained, points, prompts)
    assert crossing.point is None and crossing.point_interval[1] is None
    assert crossing.extrapolated is not None and crossing.extrapolated > K
    assert "do not cross by k = 128" in crossing.text() and "extrapolated" in crossing.text()
    low, high = crossing.extrapolated_interval  # each resample's own line: the guess's spread
    assert low < crossing.extrapolated and (high is None or crossing.extrapolated < high)
    assert f"(extrapolated, conditional on the line (sampling error only); bootstrap 95%: {low:,.0f} to " in crossing.text()
    # identical curves: trained never leads, so nothing crosses, and base >= trained is not excluded at once
    same = find_crossing(base, base, curve_points(base, base, prompts), prompts)
    assert (same.lead, same.not_excluded, same.point, same.tied, same.reversed, same.extrapolated) == (None, 1, None, None, None, None)
    assert "never lies above base" in same.text()


def test_curves_that_meet_at_saturation_tie_without_crossing():
    """Both models reach every question eventually: trained (100 of 128 correct) saturates at
    k = 29, base (2 of 128) only at k = 127. From there every question is equal: a tie, not a
    crossing, and no zero-width interval counts as one."""
    prompts = [f"q{i}" for i in range(100)]
    base, trained = pass_at_k_curves(_draws([(100, 2)])), pass_at_k_curves(_draws([(100, 100)]))
    crossing = find_crossing(base, trained, curve_points(base, trained, prompts), prompts)
    assert (crossing.lead, crossing.point, crossing.tied, crossing.reversed, crossing.extrapolated) == (1, None, 127, None, None)
    assert crossing.not_excluded <= 127, "at the tie the difference is exactly zero: base >= trained is no longer excluded"
    assert "meet at k = 127 without crossing" in crossing.text()


def test_a_nearly_flat_gap_extrapolates_to_nothing_rather_than_overflowing():
    """A gap falling by 1e-6 per unit of log k would close near k = e^300000: beyond any float,
    so no extrapolation (the old fit overflowed). A gap whose slope is not resolved negative
    across resamples is not extrapolated either."""
    prompts = [f"q{i}" for i in range(60)]
    ks = np.log(np.arange(1, K + 1))
    base = np.tile(0.4 + 0.1 * ks / ks[-1], (60, 1))
    flat = base + 0.3 - 1e-6 * ks
    crossing = find_crossing(base, flat, curve_points(base, flat, prompts), prompts)
    assert crossing.point is None and crossing.tied is None and crossing.extrapolated is None
    assert crossing.extrapolated_interval is None
    assert "not resolved to be closing" in crossing.text()
    noisy = base + 0.3 + np.random.default_rng(0).normal(0, 0.05, (60, 1)) * (ks - ks.mean())  # slopes of either sign
    crossing = find_crossing(base, noisy, curve_points(base, noisy, prompts), prompts)
    assert crossing.extrapolated is None


def test_few_prompts_give_no_bootstrap_interval():
    prompts = [f"q{i}" for i in range(20)]  # under MIN_PROMPTS
    base = pass_at_k_curves(_draws([(12, 2), (8, 0)]))
    trained = pass_at_k_curves(_draws([(6, 100), (14, 0)]))
    crossing = find_crossing(base, trained, curve_points(base, trained, prompts), prompts)
    assert crossing.point is not None and crossing.point_interval is None
    assert "no bootstrap interval: fewer than 30 prompts" in crossing.text()


def test_the_crossings_text_names_ends_beyond_the_budget():
    x = Crossing(lead=1, not_excluded=90, reversed=None, point=120, tied=None, point_interval=(None, None), extrapolated=None, budget=K)
    assert "bootstrap 95%: >128 to >128" in x.text() and "the pointwise 95% interval never puts base above trained" in x.text()
    far = Crossing(lead=1, not_excluded=None, reversed=None, point=None, tied=None, point_interval=None, extrapolated=3.2e9, budget=K)
    assert (
        "near k = 3.2e+09 (extrapolated, conditional on the line (sampling error only))" in far.text()
        and "pointwise 95% interval stays above zero at every k up to 128" in far.text()
    )


def test_at_the_budget_the_difference_is_exact_mcnemar():
    """At k = K a question's pass@K is 0 or 1 (reached or not), so the curve's difference must be
    the paired comparison's own estimate: Tango's interval and exact McNemar (guards against an
    asymptotic test resolving what the exact one does not)."""
    rng = np.random.default_rng(3)
    draws_a, draws_b = (rng.random((80, 16)) < rng.random((80, 1)) * 0.2).astype(float), (rng.random((80, 16)) < 0.1).astype(float)
    prompts = [f"p{i // 2}" for i in range(80)]
    last = curve_points(pass_at_k_curves(draws_a), pass_at_k_curves(draws_b), prompts)[-1].difference
    expected = paired_difference(draws_b.max(1), draws_a.max(1), prompts)
    assert (last.value, last.p) == pytest.approx((expected.value, expected.p))
    assert (last.low, last.high) == pytest.approx((expected.low, expected.high), abs=1e-6)


def test_the_chance_curves_are_the_expectation_over_every_derangement():
    """Rules 3: each ceiling beside what guessing gives. The chance pass@k is the same draws
    scored against a deranged gold, exactly in expectation: here every derangement of five
    questions is enumerated and averaged by hand."""
    from itertools import permutations

    answers = [["1", "2", "2", None], ["3", "3", "3", "3"], ["4", "1", "9", "1"], [None, None, "5", "5"], ["2", "2", "2", "1"]]
    golds = ["1", "2", "2", "3", "5"]
    n, budget = len(golds), 4
    passk, first = chance_curves(answers, golds)
    derangements = [p for p in permutations(range(n)) if all(p[i] != i for i in range(n))]
    for q in range(n):
        for k in range(1, budget + 1):
            hits = [sum(a == golds[p[q]] for a in answers[q]) for p in derangements]
            want = np.mean([pass_at_k(budget, c, k) for c in hits])
            reached = np.mean([golds[p[q]] in answers[q][:k] for p in derangements])
            assert passk[q, k - 1] == pytest.approx(want) and first[q, k - 1] == pytest.approx(reached), (q, k)
    assert distinct_answers(answers) == pytest.approx((2 + 1 + 3 + 1 + 2) / 5)
    lone, _ = chance_curves([["1"]], ["1"])
    assert np.isnan(lone).all(), "one question has no other gold to be scored against"


def test_a_ceiling_at_chance_cannot_speak_to_claim_three():
    """Rules 3. Gemma add-two-digit: base reach 0.322 at k = 128 against a chance level of 0.274.
    Where neither model's reach is resolved above its chance level, claim 3 is uninformative
    whatever the reaches do; where one is, the rules read the reach beside its chance."""
    from rnr_lens.judge import verdicts as V

    n = 200
    base_reach, trained_reach = np.r_[np.ones(64), np.zeros(136)], np.r_[np.ones(20), np.zeros(180)]
    realized_a, realized_b = np.zeros(n), np.r_[np.ones(30), np.zeros(170)]
    at_chance = V.training_verdict(realized_a, realized_b, base_reach, trained_reach, chance_a=np.full(n, 0.30), chance_b=np.full(n, 0.12))
    assert at_chance.verdict.status == V.UNINFORMATIVE and "neither model's reach is resolved above its chance level" in at_chance.verdict.text
    assert at_chance.above_chance_base.resolved is None and not at_chance.above_chance_base.is_empty
    speaks = V.training_verdict(realized_a, realized_b, base_reach, trained_reach, chance_a=np.full(n, 0.05), chance_b=np.full(n, 0.05))
    assert speaks.verdict.status != V.UNINFORMATIVE and speaks.above_chance_base.resolved == "above"
    assert speaks.verdict == V.training_verdict(realized_a, realized_b, base_reach, trained_reach).verdict, "past the gate, the same rules"


CONFIG = DeploymentConfig.default_for("string").with_(max_new_tokens=4)
PROBE = "sampling:k=16,t=1.0,draw=inverse-cdf"


@pytest.fixture(scope="module")
def pair(tiny, tmp_path_factory):
    """A base and a "trained" tiny model (another seed's weights) audited on a task whose gold
    answers are planted from their own draws (the draws depend on the question id and seed,
    never on the gold), so both curves rise above zero."""
    other = R.tiny_model(n_layers=4, seed=5)
    blank = Task("planted", tuple(Question(q.id, q.prompt, "?") for q in get("add-small", n=12)), "string")
    first = [R.audit(m, blank, [PROBE], CONFIG, progress=False).probe_tries("sampling") for m in (tiny, other)]
    gold = {}
    for i, q in enumerate(blank):
        tries = first[i % 2]  # alternate whose draw is planted
        answers = tries[(tries.question_id == q.id) & tries.extracted.notna()].sort_values("try_index").extracted.tolist()
        gold[q.id] = answers[(3 * i) % len(answers)]
    task = Task("planted", tuple(Question(q.id, q.prompt, gold[q.id]) for q in blank), "string")
    db = tmp_path_factory.mktemp("ceiling") / "pair.db"
    base, trained = (R.audit(m, task, [PROBE, "routes:k=2"], CONFIG, store=db, progress=False) for m in (tiny, other))
    return base, trained, db


def test_the_ceiling_of_real_audits_matches_the_comparison(pair):
    base, trained, db = pair
    c = compare_ceiling(base, trained, PROBE)
    assert (c.budget, c.questions, c.excluded) == (16, 12, 0)
    assert [k for k, _ in c.verdicts] == [1, 8, 16]
    # the curves are each audit's own pass@k
    for result, side in ((base, "base"), (trained, "trained")):
        own = result.pass_at_k(PROBE)
        assert [getattr(p, side).value for p in c.curve] == pytest.approx(own.pass_at_k.tolist())
    assert c.at(16).base.value > 0 and c.at(16).trained.value > 0, "the planted answers are reached"
    # rules 3: every point beside its chance level, every verdict beside its precondition
    assert all(not p.base_chance.is_empty and not p.trained_chance.is_empty for p in c.curve)
    assert c.distinct is not None and c.distinct[0] >= 1 and "chance pass@16" in c.chance_text()
    assert all(not v.above_chance_base.is_empty for _, v in c.verdicts)
    # at the budget, reached = one of all K draws correct: the comparison's own claim-3 verdict
    assert c.verdict(16) == R.compare(base, trained).verdict(PROBE)
    d = c.to_dict()
    assert Ceiling.from_dict(d).to_dict() == d, "claims.json reads back into the record that wrote it"
    assert d["crossing"]["text"] == c.crossing.text() and len(d["curve"]) == 16 and d["verdicts"][-1]["k"] == 16


def test_the_ceiling_refuses_what_it_cannot_read(pair, tiny):
    base, trained, db = pair
    with pytest.raises(R.RnrLensError, match=r"k independent draws per question, which routes:k=2,\S* does not make"):
        compare_ceiling(base, trained, "routes:k=2")  # read by the family's property, not its name (issue 74)
    other = R.audit(tiny, get("add-small", n=3), [PROBE], CONFIG, progress=False)
    with pytest.raises(R.RnrLensError, match="differ in their task"):
        compare_ceiling(base, other, PROBE)
    with pytest.raises(R.RnrLensError, match="between 1 and the budget 16"):
        compare_ceiling(base, trained, PROBE).at(17)


def test_rnr_lens_compare_prints_the_ceiling_and_saves_its_figure(pair, tmp_path, capsys):
    import json

    from rnr_lens.cli import main

    base, trained, db = pair
    figure = tmp_path / "ceiling.html"
    assert main(["compare", str(db), "--a", base.id, "--b", trained.id, "--ceiling", PROBE, "--figure", str(figure)]) == 0
    out = capsys.readouterr().out
    assert "the ceiling at large k" in out and "crossing: " in out and figure.stat().st_size > 0
    c = compare_ceiling(base, trained, PROBE)
    assert c.crossing.text() in out
    assert main(["compare", str(db), "--a", base.id, "--b", trained.id, "--ceiling", PROBE, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ceiling"]["crossing"]["text"] == c.crossing.text()
    assert main(["compare", str(db), "--a", base.id, "--b", trained.id, "--figure", str(figure)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "add --ceiling PROBE" in err


def test_the_extrapolation_has_the_same_bits_on_every_cpu():
    """Guards the seeds grid's re-derivation on another CPU (it failed on an AMD EPYC for a
    claims.json written elsewhere: a BLAS product and np.polyfit summed in the kernel's order):
    the bootstrap's weighted sums and the trend's least squares are scalar IEEE steps in a fixed
    order, so they equal a plain Python loop over the same numbers to the bit."""
    import math

    import numpy as np

    from rnr_lens.judge.ceiling import _weighted_sums

    rng = np.random.default_rng(0)
    weights, rows = rng.integers(0, 4, size=(5, 7)).astype(float), rng.normal(size=(7, 3))
    loop = [[0.0] * 3 for _ in range(5)]
    for i in range(5):
        for j in range(7):
            for c in range(3):
                loop[i][c] = loop[i][c] + weights[i, j] * rows[j, c]
    assert _weighted_sums(weights, rows).tolist() == loop
    assert math.fsum([0.1] * 10) == 1.0, "fsum is exactly rounded, whatever the CPU"
