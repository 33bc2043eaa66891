import dataclasses
import random
from typing import ClassVar

import pytest

from rnr_lens import RnrLensError, Route
from rnr_lens.measure.probes import (
    AblationProbe,
    Default,
    ProbeContext,
    RandomRoutes,
    RouteSearch,
    Sampling,
    parse_probe,
)
from rnr_lens.questions import tasks
from rnr_lens.questions.deploy import DeploymentConfig
from tests.conftest import reuse_holds


def _ctx(model, seed=0):
    ctx = ProbeContext(model, DeploymentConfig(max_new_tokens=6), "number", seed=seed)
    return ctx


def _run(probe, ctx, questions, done=None):
    out = []
    for batch in probe.run(ctx, questions, done or {}):
        out.extend(batch)
    return out


def test_parse_and_canonical_names():
    assert parse_probe("sampling:k=8,t=0.7").name == "sampling:k=8,t=0.7,top_p=1.0,draw=multinomial", "the draw is named"
    assert parse_probe("search:k=8").name.endswith(",expand=distinct"), "the expansion rule is named"
    assert parse_probe("routes:k=4").k == 4
    assert parse_probe("search:k=3,reward=oracle,algo=greedy").reward == "oracle"
    assert parse_probe("ablation:component=attn,layers=1+2").layers == (1, 2)
    for bad, msg in [
        ("magic:k=1", "unknown probe"),
        ("sampling:q=1", "unknown setting 'q'; sampling takes k, t, top_p, draw"),
        ("sampling:k", "malformed setting 'k'; write each setting as key=value"),
        ("ablation:layers=3+x", "layers='3\\+x' is not a valid list of blocks"),
        ("ablation:ablation=zero", "unknown setting 'ablation'; ablation takes component, method, layers"),
        ("sampling:k=x", "not a valid int"),
        ("sampling:k=0", "budget k must be"),
        ("search:reward=gold", "reward"),
        ("search:expand=graph", "expand='graph' is not known; choose one of distinct, tree"),
        ("sampling:draw=gumbel", "draw='gumbel' is not known"),
    ]:
        with pytest.raises(RnrLensError, match=msg):
            parse_probe(bad)


def test_random_routes_are_prefix_stable():
    small, large = RandomRoutes(k=3), RandomRoutes(k=6)
    assert small.routes(30, 1, "q") == large.routes(30, 1, "q")[:3]


def test_random_routes_are_drawn_per_question_distinct_and_reproducible():
    """Every question once shared one draw of k routes (route i from (seed, i) alone), so every
    interval was conditional on that draw; and a question could spend two tries on one route."""
    probe = RandomRoutes(k=8, edits=1)
    a, b = probe.routes(30, 0, "q1"), probe.routes(30, 0, "q2")
    assert a != b, "each question draws its own routes"
    assert a == RandomRoutes(k=8, edits=1).routes(30, 0, "q1"), "identical across reruns"
    assert len(set(a)) == 8 and not any(r.is_identity for r in a)
    full = RandomRoutes(k=56, edits=1)  # every single-edit route of a 30-block model with protect=1
    assert len(set(full.routes(30, 0, "q"))) == 56
    with pytest.raises(RnrLensError, match="only 56 routes"):
        RandomRoutes(k=57, edits=1).check(30)
    shared = parse_probe("routes:k=4,edits=2,shared=true")
    assert shared.name == "routes:k=4,edits=2,protect=1,shared=true"
    assert shared.routes(30, 0, "q1") == shared.routes(30, 0, "q2"), "shared=true: one draw for every question"


def test_sampling_probe_tries_are_reproducible_and_seeded(tiny):
    qs = list(tasks.get("add-small", n=3))
    probe = Sampling(k=3, t=1.0)
    a, b = _run(probe, _ctx(tiny), qs), _run(probe, _ctx(tiny), qs)
    assert [(t.question_id, t.try_index, t.text) for t in a] == [(t.question_id, t.try_index, t.text) for t in b]
    from rnr_lens.measure.probes import question_seed

    assert {(t.question_id, t.seed) for t in a} == {(q.id, question_seed(0, q.id) + i) for q in qs for i in range(3)}


@pytest.mark.parametrize("draw", ["multinomial", "inverse-cdf"])
def test_sampling_resumes_only_missing_tries(tiny, draw):
    """A resumed sample is the one the whole run draws, under either draw."""
    qs = list(tasks.get("add-small", n=2))
    probe = Sampling(k=3, t=1.0, draw=draw)
    full = {(t.question_id, t.try_index): t for t in _run(probe, _ctx(tiny), qs)}
    done = {k: v for k, v in full.items() if not (k[0] == qs[1].id and k[1] == 2)}
    rest = _run(probe, _ctx(tiny), qs, done)
    assert [(t.question_id, t.try_index) for t in rest] == [(qs[1].id, 2)]
    assert rest[0].text == full[(qs[1].id, 2)].text


@pytest.mark.parametrize(
    "probe",
    [Default(), Sampling(k=3, t=1.0), RandomRoutes(k=3), RouteSearch(k=3, reward="confidence"), AblationProbe(layers=(0, 1))],
    ids=lambda p: p.family,
)
def test_a_resume_generates_the_batches_of_a_clean_run(tiny, probe):
    """A row's last bits depend on the rows beside it, so a resumed probe that batched only its
    missing tries could store other bits, and a token where two were within them (a CI run saw
    a greedy answer change after a resume batched 6 of a clean run's 8 questions). Whatever
    part of the tries the store holds, every batch a resume generates is one a clean run
    generates, and the tries it yields are exactly the missing ones, to the bit."""
    qs = list(tasks.get("add-small", n=5))

    def recorded(done):
        ctx = _ctx(tiny)
        ctx.batch_size = 4  # several batches per probe, so a resume can start mid-way through one
        ctx.defaults = defaults
        calls, real = [], ctx.generate

        def generate(questions, **kw):
            calls.append(([q.id for q in questions], repr(sorted(kw.items()))))
            return real(questions, **kw)

        ctx.generate = generate
        return _run(probe, ctx, qs, done), calls

    defaults = {t.question_id: t for t in _run(Default(), _ctx(tiny), qs)}
    clean, clean_calls = recorded({})
    key = lambda t: (t.question_id, t.try_index)  # noqa: E731
    first = [t for t in clean if t.question_id == qs[0].id]  # one question whole, the rest not started
    for kept in (clean[::2], clean[1::2], clean[: len(clean) // 2], first):  # any part: a crash leaves whole batches, other writers need not
        done = {key(t): t for t in kept}
        rest, calls = recorded(done)
        assert sorted(map(key, rest)) == sorted(key(t) for t in clean if key(t) not in done)
        assert calls and all(c in clean_calls for c in calls), "a resume generated a batch the clean run never did"
        assert len(calls) == len(set(map(repr, calls))) <= len(clean_calls), "a resume generated a batch twice"
        by_key = {key(t): t for t in clean}
        assert all(t == by_key[key(t)] for t in rest), "a resumed try differs from the clean run's"


def test_a_search_refuses_a_store_that_holds_another_search_under_its_name(tiny):
    """A stored pick on another route than the search picks was generated again and its key
    dropped by the store, so one question's tries mixed two trees; now it is refused."""
    qs = list(tasks.get("add-small", n=2))
    ctx = _ctx(tiny)
    ctx.defaults = {t.question_id: t for t in _run(Default(), ctx, qs)}
    probe = RouteSearch(k=2, reward="confidence")
    tries = _run(probe, ctx, qs)
    other = RandomRoutes(k=1).routes(tiny.n_layers, 7, "elsewhere")[0]
    done = {(t.question_id, t.try_index): t for t in tries}
    done[(qs[1].id, 1)] = dataclasses.replace(done[(qs[1].id, 1)], route=str(other))
    with pytest.raises(RnrLensError, match=rf"the store holds try 1 of question '{qs[1].id}' on route .*; it holds another search under this name"):
        _run(probe, ctx, qs, done)


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


def _same_tries(a, b):
    """Equal tries: the same routes, texts and answers, and rewards equal to float precision (a
    row's log-probabilities in a batch differ from its own in the last bits, since batched
    matrix products sum in another order; no token changed here)."""
    key = lambda t: (t.question_id, t.try_index)  # noqa: E731
    a, b = sorted(a, key=key), sorted(b, key=key)
    assert [(t.question_id, t.try_index, t.route, t.text, t.correct) for t in a] == [
        (t.question_id, t.try_index, t.route, t.text, t.correct) for t in b
    ]
    assert [t.reward is None for t in a] == [t.reward is None for t in b]
    assert [t.reward for t in a if t.reward is not None] == pytest.approx([t.reward for t in b if t.reward is not None], rel=1e-4)


@pytest.mark.parametrize("algo", ["mcts", "greedy"])
def test_lockstep_search_stores_the_tries_of_a_per_question_search(model, algo):
    """Guards the batched route search: all questions searched in lockstep (one batched call
    per step, one route per row) must store the tries of searching one question at a time
    (same routes, texts and answers), and a run resumed from part of them must finish with
    the rest."""
    qs = list(tasks.get("add-small", n=5))
    ctx = _ctx(model)
    ctx.defaults = {t.question_id: t for t in _run(Default(), ctx, qs)}
    probe = RouteSearch(k=4, algo=algo, reward="confidence")
    one_by_one = [t for q in qs for t in _run(probe, ctx, [q])]
    calls = []
    real = ctx.generate
    ctx.generate = lambda questions, **kw: calls.append(len(questions)) or real(questions, **kw)
    _same_tries(_run(probe, ctx, qs), one_by_one)
    assert len(calls) <= probe.k and max(calls) == len(qs), "one batched call per search step"
    # resume: the first half of each question's tries are stored; the rest come out the same
    done = {(t.question_id, t.try_index): t for t in one_by_one if t.try_index < 2}
    _same_tries(_run(probe, ctx, qs, done), [t for t in one_by_one if t.try_index >= 2])


@pytest.mark.slow
def test_the_search_keeps_prompt_states_across_steps_to_the_bit(smol):
    """Guards the prefix store on a real model (issues 39 and 58): where the store's check
    passed on this machine, the search, keeping each question's prompt states from step to step
    so that a candidate runs only the blocks after those it shares with an earlier one, must
    store exactly the tries it stores without the store (route, text, and mean log-probability,
    entropy and reward to the last bit: audit ids and the golden search tries rest on them) and
    must have taken states from it; where the check failed (an Intel Xeon with AVX-512 moved a
    log-probability's seventh digit), the store must not run, and the tries are the same."""
    qs = list(tasks.get("add-two-digit", n=6))
    ctx = _ctx(smol)
    ctx.defaults = {t.question_id: t for t in _run(Default(), ctx, qs)}
    probe = RouteSearch(k=6)

    def bits(tries):
        return [(t.question_id, t.try_index, t.route, t.text, t.mean_logprob, t.mean_entropy, t.reward) for t in tries]

    reuse_holds(smol, "prefix-store", lambda: _run(probe, ctx, qs), bits)  # where on: states were taken from the store


def test_random_routes_batch_route_indices_with_the_tokens_of_each_row_alone(tiny):
    qs = list(tasks.get("add-small", n=3))
    probe = RandomRoutes(k=4, edit_rate=0.5)
    batched, calls = _ctx(tiny), []
    real = batched.generate
    batched.generate = lambda questions, **kw: calls.append(len(questions)) or real(questions, **kw)
    together = _run(probe, batched, qs)
    alone = _ctx(tiny)
    alone.batch_size = 1  # one row per forward
    assert calls == [len(qs) * probe.k], "all route indices fit in one call"
    _same_tries(together, _run(probe, alone, qs))


def test_oracle_reward_is_correctness(tiny):
    q = tasks.get("add-small", n=1)[0]
    tries = _run(RouteSearch(k=2, reward="oracle", protect=0), _ctx(tiny), [q])
    assert all(t.reward == float(t.correct) for t in tries)


def test_ablation_probe_covers_every_block(tiny):
    qs = list(tasks.get("add-small", n=2))
    tries = _run(AblationProbe(), _ctx(tiny), qs)
    assert sorted({t.ablation for t in tries}) == [f"mlp{i}:zero" for i in range(tiny.n_layers)]
    assert len(tries) == 2 * tiny.n_layers


@pytest.mark.parametrize("method", ["mean", "resample"])
def test_an_ablation_probe_that_needs_reference_prompts_is_refused_before_any_model_loads(tmp_path, capsys, method):
    """Issue 74: ``ablation:kind=mean`` (now ``method=mean``) was accepted when read, and the audit failed after the
    model had loaded and the default tries had run ("a mean ablation needs reference prompts").
    A probe is given no reference prompts, so it is refused where it is read, in one line that
    names the way that has them; the model named here does not exist, so its error would come
    first were the probe read after it."""
    from rnr_lens.cli import main

    with pytest.raises(RnrLensError, match=rf"method={method} needs reference prompts, .* use method=zero, or 'rnr-lens mine --method {method}'"):
        parse_probe(f"ablation:method={method},layers=1")
    argv = ["audit", "--model", str(tmp_path / "no-model"), "--task", "add-small", "--n", "2", "--probe", f"ablation:method={method}"]
    assert main([*argv, "--out", str(tmp_path / "run.db")]) == 2
    said = capsys.readouterr().err.strip().splitlines()
    assert len(said) == 1 and said[0].startswith(f"error: ablation probe: method={method} needs reference prompts")
    assert not list(tmp_path.iterdir()), "nothing written"


def test_what_other_code_needs_of_a_family_is_a_property_of_its_class(monkeypatch):
    """Issue 74: the ceiling refused every family but the string "sampling", and the reward
    selector was offered to the string "search". Each asks the family's class: independent
    draws (the ceiling) and a reward per try (the selector). A family registered from outside
    is parsed, and has the properties it declares; a family name is registered once."""
    from rnr_lens.measure import probes, selectors
    from rnr_lens.measure.probes import PROBES, Sampling, probe_class, register_probe

    assert [f for f, c in PROBES.items() if c.independent_draws] == ["sampling"]
    assert [f for f, c in PROBES.items() if c.rewarded] == ["search"]
    assert "reward" in selectors.names_for("search:k=4") and "reward" not in selectors.names_for("routes:k=4")
    monkeypatch.setattr(probes, "PROBES", dict(PROBES))

    @register_probe
    @dataclasses.dataclass(repr=False)
    class Greedy(Sampling):  # a family of one's own, in one class
        family: ClassVar[str] = "greedy-again"
        independent_draws: ClassVar[bool] = False

    assert isinstance(parse_probe("greedy-again:k=2"), Greedy) and not probe_class("greedy-again:k=2").independent_draws
    with pytest.raises(RnrLensError, match="'sampling' is registered already"):
        register_probe(type("Other", (Sampling,), {"family": "sampling"}))
    with pytest.raises(
        RnrLensError, match="unknown probe 'nothing' in 'nothing:k=2'; choose one of sampling, routes, search, ablation, greedy-again"
    ):
        probe_class("nothing:k=2")


def test_routes_from_the_search_move_set():
    """routes:k=8,edits=d draws from the route search's own neighbourhood (d single-block
    skip/repeat edits), so random and structured search can be compared over the same moves."""
    from collections import Counter

    from rnr_lens.model.routes import draw_edits

    probe = parse_probe("routes:k=8,edits=2")
    assert probe.name == "routes:k=8,edits=2,protect=1,shared=false"
    assert parse_probe("routes:k=8").name == "routes:k=8,edit_rate=0.25,max_segment=4,protect=1,shared=false", "the draw is named"
    routes = [r for q in range(250) for r in probe.routes(30, 0, f"q{q}")]
    edited = Counter()
    for r in routes:
        changed = set(r.skipped) | set(r.repeated)
        assert len(changed) == 2 and all(r.repeated.get(b, 2) == 2 for b in changed), "exactly two single-block edits"
        assert 0 not in changed and 29 not in changed, "protected blocks are never edited"
        assert sorted(r.layers) == list(r.layers), "skip/repeat moves keep the block order"
        edited.update(changed)
    assert set(edited) == set(range(1, 29))
    expected = 2000 * 2 / 28
    assert all(abs(n - expected) < 5 * expected**0.5 for n in edited.values()), "edits uniform over unprotected blocks"
    small = draw_edits(4, random.Random(0), 2)
    assert set(small.skipped) | set(small.repeated) == {1, 2}, "on 4 blocks, both unprotected blocks are edited"
    with pytest.raises(RnrLensError, match="edits=3 needs that many unprotected blocks"):
        parse_probe("routes:k=2,edits=3").check(4)


def test_sampling_seeds_differ_per_question_and_reproduce_alone(tiny, tmp_path):
    """Sample i of every question was seeded seed + i: questions with the same prompt got
    identical samples, counted as independent evidence."""
    import json

    import rnr_lens as R
    from rnr_lens.measure.probes import question_seed

    path = tmp_path / "repeats.jsonl"
    path.write_text("\n".join(json.dumps({"id": f"r{i}", "question": "What is 3 + 4?", "answer": "7"}) for i in range(3)) + "\n")
    task = R.tasks.get(str(path), id="id")
    assert "3 questions hold 1 distinct prompts" in task.repeated_prompts()
    with pytest.warns(UserWarning, match="distinct prompts"):
        result = R.audit(tiny, task, ["sampling:k=4,t=1.5"], progress=False)
    tries = result.probe_tries(result.probes[0])
    by_q = {qid: list(g.sort_values("try_index").seed) for qid, g in tries.groupby("question_id")}
    assert by_q["r0"] == [question_seed(0, "r0") + i for i in range(4)] and by_q["r0"] != by_q["r1"]
    texts = {qid: tuple(g.sort_values("try_index").text) for qid, g in tries.groupby("question_id")}
    assert len(set(texts.values())) > 1, "repeated prompts draw different samples"
    config = result.config
    t = tries.iloc[5]
    alone = tiny.generate(
        [config.prompt(task.by_id(t.question_id))], n=1, temperature=1.5, seed=int(t.seed), max_new_tokens=config.max_new_tokens, stop=config.stop
    )[0]
    assert alone.text == t.text, "one sample reproduces alone from its stored seed"
    (row,) = result.summary_records()
    assert row["prompts"] == 1 and row["reachable"]["n"] == 1, "the interval resamples the one distinct prompt"


def test_random_routes_refuse_an_edit_rate_of_zero():
    """edit_rate=0 could draw only the identity, which is the default answer, never a try."""
    with pytest.raises(RnrLensError, match="edit_rate"):
        parse_probe("routes:k=2,edit_rate=0")


def test_the_search_expansion_rules_differ_only_where_two_paths_meet(tiny):
    """expand=tree is the rule before fad12eb (two paths may try one route twice), expand=distinct
    the rule after it: one name per rule, so a store never mixes them under one name."""
    import random as _random

    from rnr_lens.measure.probes import _advance

    n, seen_twice = tiny.n_layers + 6, {}
    for expand in ("distinct", "tree"):
        probe = parse_probe(f"search:k=40,expand={expand},epsilon=0.5")
        search = probe._mcts(n, _random.Random("search:0:q"), 0.0)
        routes, request = [], _advance(search, None)
        while request is not None:
            routes.append(request[1])
            request = _advance(search, 0.5)
        seen_twice[expand] = len(routes) - len(set(routes))
    assert seen_twice["distinct"] == 0 and seen_twice["tree"] > 0


def test_a_legacy_name_says_why_it_cannot_be_resumed():
    from rnr_lens.measure.probes import legacy_name_note

    old_search = "search:k=8,reward=confidence,algo=mcts,c=1.0,length_penalty=0.1,epsilon=0.1,protect=1"
    assert "fad12eb" in legacy_name_note(old_search) and "expand=tree" in legacy_name_note(old_search)
    assert "6b624c3" in legacy_name_note("sampling:k=8,t=0.7,top_p=1.0"), "sampling changed its seeding under one name"
    assert legacy_name_note(parse_probe("search:k=8").name) is None and legacy_name_note(parse_probe("routes:k=8").name) is None


def test_an_ablation_probe_names_its_method_as_method_and_reads_names_stored_with_kind(tiny, tmp_path):
    """Issue 74: the ablation probe stored ``method`` under the key ``kind``. Its name now says
    ``method=``; a name stored before 0.2.0 (``kind=``) still reads as the same probe, and an
    audit stored under it is found by either spelling; both keys at once are refused."""
    import json
    import sqlite3

    from rnr_lens.measure.audits import audit
    from rnr_lens.measure.results import AuditResult
    from rnr_lens.measure.store import RunStore

    assert parse_probe("ablation:kind=zero,layers=1").name == "ablation:component=mlp,method=zero,layers=1"
    assert parse_probe("ablation:kind=zero") == parse_probe("ablation:method=zero")
    with pytest.raises(RnrLensError, match="method is given twice"):
        parse_probe("ablation:kind=zero,method=zero")
    result = audit(tiny, tasks.get("add-small", n=2), ["ablation:layers=0+1"], store=tmp_path / "run.db", progress=False)
    old = "ablation:component=mlp,kind=zero,layers=0+1"
    with sqlite3.connect(tmp_path / "run.db") as conn:  # as a store written before 0.2.0 names it
        conn.execute("UPDATE tries SET probe = ? WHERE probe = ?", (old, "ablation:component=mlp,method=zero,layers=0+1"))
        conn.execute("UPDATE audits SET probes_json = ? WHERE id = ?", (json.dumps([old]), result.id))
    conn.close()
    stored = AuditResult.load(RunStore(tmp_path / "run.db"), result.id)
    assert old in stored.probes
    for spelling in ("ablation:kind=zero,layers=0+1", "ablation:method=zero,layers=0+1"):
        assert stored.probe_name(spelling) == old and stored.budget(spelling) == 2
