"""Claim 3 at large k (issue 41): pass@k curves of a trained pair and where they cross.

The curves' arithmetic and the crossing are checked on draws whose answer is known (a base
that reaches many questions rarely, a trained model that reaches few questions often: the
textbook crossing); the whole path is checked on real audits of tiny models of the real
architecture, whose claim-3 verdict at the budget must be the comparison's own verdict (the
same rule read from the same draws), so the two can never drift apart."""

import numpy as np
import pytest

import rnr_lens as R
from rnr_lens.ceiling import Ceiling, curve_points, find_crossing, pass_at_k_curves
from rnr_lens.comparison import compare_ceiling
from rnr_lens.deploy import DeploymentConfig
from rnr_lens.stats import pass_at_k
from rnr_lens.tasks import Question, Task, get

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
    assert f"cross at k = {crossing.point}" in crossing.text() and f"from k = {crossing.reversed}" in crossing.text()
    # the same data, the same seed: the same interval
    assert find_crossing(base, trained, points, prompts).point_interval == crossing.point_interval


def test_no_crossing_by_the_budget_says_where_the_trend_points():
    prompts = [f"q{i}" for i in range(200)]
    base = pass_at_k_curves(_draws([(150, 1), (50, 0)]))  # 0.75 at K, rising as k / K
    trained = pass_at_k_curves(_draws([(160, 12), (40, 0)]))  # 0.80 at K, nearly flat past k = 30
    points = curve_points(base, trained, prompts)
    crossing = find_crossing(base, trained, points, prompts)
    assert crossing.point is None and crossing.point_interval[1] is None
    assert crossing.extrapolated is not None and crossing.extrapolated > K
    assert "do not cross by k = 128" in crossing.text() and "extrapolated" in crossing.text()
    # identical curves: base >= trained is not excluded from the first k, and nothing is reversed
    same = find_crossing(base, base, curve_points(base, base, prompts), prompts)
    assert (same.not_excluded, same.point, same.reversed) == (1, 1, None)


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
    # at the budget, reached = one of all K draws correct: the comparison's own claim-3 verdict
    assert c.verdict(16) == R.compare(base, trained).verdict(PROBE)
    d = c.to_dict()
    assert Ceiling.from_dict(d).to_dict() == d, "claims.json reads back into the record that wrote it"
    assert d["crossing"]["text"] == c.crossing.text() and len(d["curve"]) == 16 and d["verdicts"][-1]["k"] == 16


def test_the_ceiling_refuses_what_it_cannot_read(pair, tiny):
    base, trained, db = pair
    with pytest.raises(R.RnrLensError, match="reads a sampling probe's draws"):
        compare_ceiling(base, trained, "routes:k=2")
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
