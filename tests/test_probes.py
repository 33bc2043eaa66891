import random

import pytest

from rnr_lens import RnrLensError, Route, tasks
from rnr_lens.deploy import DeploymentConfig
from rnr_lens.probes import (
    AblationProbe, Default, ProbeContext, RandomRoutes, RouteSearch, Sampling, draw_route, edits_to_route, parse_probe,
)


def _ctx(model, seed=0):
    ctx = ProbeContext(model, DeploymentConfig(max_new_tokens=6), "number", seed=seed)
    return ctx


def _run(probe, ctx, questions, done=None):
    out = []
    for batch in probe.run(ctx, questions, done or {}):
        out.extend(batch)
    return out


def test_parse_and_canonical_names():
    assert parse_probe("sampling:k=8,t=0.7").name == "sampling:k=8,t=0.7,top_p=1.0"
    assert parse_probe("routes:k=4").k == 4
    assert parse_probe("search:k=3,reward=oracle,algo=greedy").reward == "oracle"
    assert parse_probe("ablation:component=attn,layers=1+2").layers == (1, 2)
    for bad, msg in [("magic:k=1", "unknown probe"), ("sampling:q=1", "unknown or malformed"),
                     ("sampling:k=x", "not a valid int"), ("sampling:k=0", "budget k must be"), ("search:reward=gold", "reward")]:
        with pytest.raises(RnrLensError, match=msg):
            parse_probe(bad)


def test_draw_route_distribution_properties():
    rng = random.Random(0)
    routes = [draw_route(30, rng, edit_rate=0.5) for _ in range(200)]
    assert all(r[0] == 0 and r[-1] == 29 for r in routes), "first and last blocks are protected"
    assert all(len(r) <= 60 for r in routes)
    assert any(r.skipped for r in routes) and any(r.repeated for r in routes)
    assert all(draw_route(30, random.Random(5)) == draw_route(30, random.Random(5)) for _ in range(3))
    assert all(r.is_identity for r in (draw_route(30, random.Random(i), edit_rate=0.0) for i in range(5)))


def test_random_routes_are_prefix_stable():
    small, large = RandomRoutes(k=3), RandomRoutes(k=6)
    assert [small.route(30, 1, i) for i in range(3)] == [large.route(30, 1, i) for i in range(3)]


def test_sampling_probe_tries_are_reproducible_and_seeded(tiny):
    qs = list(tasks.get("add-small", n=3))
    probe = Sampling(k=3, t=1.0)
    a, b = _run(probe, _ctx(tiny), qs), _run(probe, _ctx(tiny), qs)
    assert [(t.question_id, t.try_index, t.text) for t in a] == [(t.question_id, t.try_index, t.text) for t in b]
    assert sorted({t.seed for t in a}) == [0, 1, 2]


def test_sampling_resumes_only_missing_tries(tiny):
    qs = list(tasks.get("add-small", n=2))
    probe = Sampling(k=3, t=1.0)
    full = {(t.question_id, t.try_index): t for t in _run(probe, _ctx(tiny), qs)}
    done = {k: v for k, v in full.items() if not (k[0] == qs[1].id and k[1] == 2)}
    rest = _run(probe, _ctx(tiny), qs, done)
    assert [(t.question_id, t.try_index) for t in rest] == [(qs[1].id, 2)]
    assert rest[0].text == full[(qs[1].id, 2)].text


def test_route_probe_records_routes(tiny):
    qs = list(tasks.get("add-small", n=2))
    tries = _run(RandomRoutes(k=2, edit_rate=0.9), _ctx(tiny), qs)
    assert len(tries) == 4 and all(Route.parse(t.route).n_layers == tiny.n_layers for t in tries)


@pytest.mark.parametrize("algo", ["mcts", "greedy"])
def test_route_search_spends_its_budget_on_distinct_routes(tiny, algo):
    q = tasks.get("add-small", n=1)[0]
    ctx = _ctx(tiny)
    ctx.defaults = {t.question_id: t for t in _run(Default(), ctx, [q])}
    probe = RouteSearch(k=3, algo=algo, protect=0)
    tries = _run(probe, ctx, [q])
    assert [t.try_index for t in tries] == [0, 1, 2]
    assert len({t.route for t in tries}) == 3 and all(t.reward is not None for t in tries)
    assert all(0 <= t.reward <= 1 for t in tries)
    # resuming replays the same search from stored tries and evaluates nothing new
    done = {(t.question_id, t.try_index): t for t in tries}
    assert _run(probe, ctx, [q], done) == []


def test_oracle_reward_is_correctness(tiny):
    q = tasks.get("add-small", n=1)[0]
    tries = _run(RouteSearch(k=2, reward="oracle", protect=0), _ctx(tiny), [q])
    assert all(t.reward == float(t.correct) for t in tries)


def test_edits_to_route():
    assert edits_to_route((0, 1, 2, 0)) == Route([0, 2, 2, 3], 4)


def test_ablation_probe_covers_every_block(tiny):
    qs = list(tasks.get("add-small", n=2))
    tries = _run(AblationProbe(), _ctx(tiny), qs)
    assert sorted({t.ablation for t in tries}) == [f"mlp{i}:zero" for i in range(tiny.n_layers)]
    assert len(tries) == 2 * tiny.n_layers
