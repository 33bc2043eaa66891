"""Generation and scoring: KV cache under routes, batching, sampling seeds, stop conditions."""

import pytest
import torch

import rnr_lens as R
from rnr_lens.model.tiny import greedy_without_cache
from tests.conftest import prompts_for


def test_identity_route_matches_plain_hf_greedy_generation(model):
    prompt = prompts_for(model)[0]
    ids = torch.tensor([model.encode(prompt)])
    with torch.no_grad():
        plain = model.bridge.original_model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=12,
            do_sample=False,
            eos_token_id=sorted(model.eos_token_ids),
            pad_token_id=model.tokenizer.pad_token_id,
        )[0, ids.shape[1] :].tolist()
    plain = [t for t in plain if t not in model.eos_token_ids]
    ours = model.generate([prompt], route=R.Route.identity(model.n_layers), max_new_tokens=12)[0]
    assert ours.token_ids == plain[: len(ours.token_ids)]
    assert len(ours.token_ids) == len(plain)


@pytest.mark.parametrize("edit", ["skips_and_repeats", "segment_repeat"])
def test_kv_cached_route_matches_no_cache_reference(model, edit):
    n = model.n_layers
    if edit == "skips_and_repeats":
        route = R.Route.skip(n, 1).then_repeat(n - 2).then_repeat(0)
    else:
        route = R.Route(list(range(n // 2)) + list(range(n // 4, n)), n_layers=n)
    prompt = prompts_for(model)[1]
    reference = greedy_without_cache(model, prompt, 10, route=route)
    ours = model.generate([prompt], route=route, max_new_tokens=10)[0]
    assert ours.token_ids == reference


def test_prompt_alone_and_in_batch_give_same_greedy_tokens(model):
    prompts = prompts_for(model)
    batch = model.generate(prompts, max_new_tokens=10, batch_size=len(prompts))
    for i, prompt in enumerate(prompts):
        alone = model.generate([prompt], max_new_tokens=10)[0]
        assert batch[i].token_ids == alone.token_ids
        assert batch[i].prompt_index == i


def test_prompts_opening_alike_prefill_their_shared_opening_once(model):
    """Guards the shared-prefix prefill's mechanics (the tokens every prompt of a batch opens
    with run once, their keys and values copied to each row, each prompt's own tokens after
    them), forced on whatever this machine's check says: every row must get the tokens, and to
    float rounding the log-probs, of prefilling it whole (to the bit where the check passes:
    ``tests/model/test_reuse_check.py``); sampled rows the same draws."""
    from rnr_lens.model import generation

    opening = "Answer the question below with one number and nothing else, please. "
    prompts = [opening + q for q in ("What is 2 + 3?", "What is 7 + 1?", "What is 4 + 4?")]
    assert len({len(model.encode(p)) for p in prompts}) == 1
    assert generation._shared_prefix([model.encode(p) for p in prompts]) >= generation.SHARED_PREFIX_MIN, "the path under test runs"
    reuses = model.engine.reuses
    before = reuses.used["shared-prefix"]
    with reuses.forced("shared-prefix", True):
        shared = model.generate(prompts, max_new_tokens=8)
        sampled = model.generate(prompts, max_new_tokens=8, temperature=1.0, n=2, seed=3)
    assert reuses.used["shared-prefix"] == before + 2
    with reuses.forced("shared-prefix", False):
        whole = model.generate(prompts, max_new_tokens=8)
        whole_sampled = model.generate(prompts, max_new_tokens=8, temperature=1.0, n=2, seed=3)
    assert [g.token_ids for g in shared] == [g.token_ids for g in whole]
    for a, b in zip(shared, whole):
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)
    assert [g.token_ids for g in sampled] == [g.token_ids for g in whole_sampled]


def test_prompts_of_different_lengths_never_share_their_opening(tiny):
    """Guards the shared opening's layout rule (issue 58): a pad between the opening and a
    prompt's own tokens moved a row's last bits even on a CPU whose kernels keep them
    otherwise, so a batch of unequal prompts prefills each whole."""
    opening = "Answer the question below with one number and nothing else, please. "
    prompts = [opening + q for q in ("What is 2 + 3?", "What is 12 + 30, and then minus 4?")]
    before = tiny.engine.reuses.used["shared-prefix"]
    with tiny.engine.reuses.forced("shared-prefix", True):
        tiny.generate(prompts, max_new_tokens=2)
    assert tiny.engine.reuses.used["shared-prefix"] == before


def test_hooks_on_the_bridge_see_each_prompt_whole(tiny):
    """A user's hook reads the prompt's activations in one forward: the shared opening is not
    split off on the bridge."""
    opening = "Answer the question below with one number and nothing else, please. "
    prompts = [opening + q for q in ("What is 2 + 3?", "What is 12 + 30, and then minus 4?")]
    widths = []
    with tiny.bridge.hooks(fwd_hooks=[("blocks.0.hook_resid_pre", lambda x, hook: widths.append(x.shape[1]))]):
        tiny.generate(prompts, max_new_tokens=2)
    assert widths[0] == max(len(tiny.encode(p)) for p in prompts)


def test_a_sliding_window_is_read_from_the_config():
    """The shared-prefix prefill stays off where a sliding window could count its pads."""
    from rnr_lens.model.adapters import attention_window
    from rnr_lens.model.tiny import tiny_model

    assert attention_window(tiny_model(n_layers=2).bridge) is None
    windowed = tiny_model(n_layers=2)
    config = windowed.bridge.original_model.config
    config.sliding_window, config.layer_types = 16, ["sliding_attention", "full_attention"]
    assert attention_window(windowed.bridge) == 16


def test_routed_batch_matches_routed_single(tiny):
    route = R.Route([0, 1, 1, 2, 3, 3], n_layers=4)
    prompts = prompts_for(tiny)
    batch = tiny.generate(prompts, route=route, max_new_tokens=8, batch_size=3)
    for i, prompt in enumerate(prompts):
        assert batch[i].token_ids == tiny.generate([prompt], route=route, max_new_tokens=8)[0].token_ids


def _row_routes(n: int) -> list[R.Route]:
    return [R.Route.skip(n, 1), R.Route.identity(n), R.Route.repeat(n, n - 2), R.Route(list(range(n // 2)) + list(range(n // 4, n)), n_layers=n)]


def test_rows_with_their_own_routes_match_each_row_alone(model):
    """Guards the route search's batching: rows with different routes share each forward, and
    rows that stop early (a stop string) leave the others' tokens unchanged."""
    routes = _row_routes(model.n_layers)
    prompts = (prompts_for(model) * 2)[: len(routes)]
    alone = [model.generate([p], route=r, max_new_tokens=10)[0] for p, r in zip(prompts, routes)]
    stop = alone[0].text[1:3]  # the first row stops after a token or two; the others run on
    alone = [model.generate([p], route=r, max_new_tokens=10, stop=[stop])[0] for p, r in zip(prompts, routes)]
    together = model.generate(prompts, route=routes, max_new_tokens=10, stop=[stop])
    assert alone[0].finish_reason == "stop" and any(a.finish_reason != "stop" for a in alone)
    for a, b in zip(alone, together):
        assert (b.token_ids, b.text, b.finish_reason) == (a.token_ids, a.text, a.finish_reason)


def test_a_row_that_outlives_the_first_tick_still_reads_the_right_cache_length(tiny):
    """Guards RowRouteCache's emptied slots: when every row of the first tick (block 0) has
    finished, the cache's length and mask sizes must come from a slot that still holds rows."""
    n = tiny.n_layers
    routes = [R.Route.identity(n), R.Route(range(1, n), n_layers=n)]  # the second row never runs block 0
    prompts = [prompts_for(tiny)[1], prompts_for(tiny)[0]]  # the surviving row is the shorter: left padding must stay masked
    free = [tiny.generate([p], route=r, max_new_tokens=10)[0].text for p, r in zip(prompts, routes)]
    # a stop string early in the identity row's text that the other row never writes
    stop = [next(free[0][i : i + 2] for i in range(1, len(free[0]) - 1) if free[0][i : i + 2] not in free[1])]
    alone = [tiny.generate([p], route=r, max_new_tokens=10, stop=stop)[0] for p, r in zip(prompts, routes)]
    assert alone[0].finish_reason == "stop" and len(alone[1].token_ids) > len(alone[0].token_ids) + 1
    together = tiny.generate(prompts, route=routes, max_new_tokens=10, stop=stop)
    assert [g.token_ids for g in together] == [g.token_ids for g in alone]


def test_sampled_rows_with_their_own_routes_reproduce_alone(tiny):
    routes = _row_routes(tiny.n_layers)[:3]
    prompts = prompts_for(tiny)
    together = tiny.generate(prompts, route=routes, n=3, temperature=1.0, seed=[5, 6, 7], max_new_tokens=6)
    for g in together:
        alone = tiny.generate([prompts[g.prompt_index]], route=routes[g.prompt_index], n=1, temperature=1.0, seed=g.seed, max_new_tokens=6)[0]
        assert g.token_ids == alone.token_ids


def test_rows_with_their_own_routes_on_the_bridge_run_route_by_route(tiny):
    """With a user's hook attached the bridge runs, whose hooks see whole batches: one batch
    per distinct route, the same tokens."""
    routes = _row_routes(tiny.n_layers)[:3]
    prompts = prompts_for(tiny)
    on_twin = tiny.generate(prompts, route=routes, max_new_tokens=8)
    seen = []
    with tiny.bridge.hooks(fwd_hooks=[("blocks.0.hook_resid_pre", lambda x, hook: seen.append(x.shape[0]))]):
        assert not tiny.engine.can_route_rows()
        on_bridge = tiny.generate(prompts, route=routes, max_new_tokens=8)
    assert [g.token_ids for g in on_bridge] == [g.token_ids for g in on_twin]
    assert max(seen) == 1, "each distinct route (one prompt each here) runs as its own batch"


def test_one_route_per_prompt_is_checked(tiny):
    with pytest.raises(R.RnrLensError, match="one per prompt: 2 routes for 3 prompts"):
        tiny.generate(prompts_for(tiny), route=["4:0-3", "4:0,2-3"], max_new_tokens=2)
    with pytest.raises(R.RnrLensError, match="out of range"):
        tiny.generate(prompts_for(tiny)[:2], route=["4:0-3", [0, 9]], max_new_tokens=2)


def test_greedy_logprobs_match_teacher_forced_scores(tiny):
    prompt = prompts_for(tiny)[0]
    gen = tiny.generate([prompt], max_new_tokens=6)[0]
    ids = tiny.encode(prompt)
    with torch.no_grad():
        logits = tiny.forward_tokens(torch.tensor([ids + gen.token_ids]))
    lp = torch.log_softmax(logits[0], -1)
    expected = [float(lp[len(ids) - 1 + k, t]) for k, t in enumerate(gen.token_ids)]
    assert gen.logprobs == pytest.approx(expected, abs=1e-4)


def test_each_sample_reproduces_alone_from_its_seed(tiny):
    prompt = prompts_for(tiny)[0]
    samples = tiny.generate([prompt], n=4, temperature=1.0, seed=11, max_new_tokens=8)
    assert [s.seed for s in samples] == [11, 12, 13, 14]
    assert len({tuple(s.token_ids) for s in samples}) > 1, "samples at T=1 should differ"
    for s in samples:
        again = tiny.generate([prompt], n=1, temperature=1.0, seed=s.seed, max_new_tokens=8)[0]
        assert again.token_ids == s.token_ids


def test_sampling_is_deterministic_and_batch_independent(tiny):
    prompts = prompts_for(tiny)
    a = tiny.generate(prompts, n=3, temperature=0.8, top_p=0.9, seed=5, max_new_tokens=6, batch_size=9)
    b = tiny.generate(prompts, n=3, temperature=0.8, top_p=0.9, seed=5, max_new_tokens=6, batch_size=2)
    assert [x.token_ids for x in a] == [x.token_ids for x in b]
    assert [(x.prompt_index, x.sample_index) for x in a] == [(i, j) for i in range(3) for j in range(3)]


@pytest.mark.parametrize("draw", ["multinomial", "inverse-cdf"])
def test_each_draw_samples_the_distribution_it_is_given(draw):
    """Guards against a fast draw that is not exact (an off-by-one in the cumulative search, a
    zero-probability token drawn, a top-p cut ignored): 20,000 draws of each row against its
    probabilities, chi-square at 0.1%."""
    from scipy.stats import chisquare

    from rnr_lens.model.generation import draw_tokens

    probs = torch.tensor([[0.05, 0.0, 0.2, 0.5, 0.25, 0.0], [0.0, 0.0, 0.0, 0.0, 0.0, 1.0], [0.3, 0.3, 0.0, 0.0, 0.0, 0.4]])
    draws = 20_000
    gens = [torch.Generator().manual_seed(1000 + r) for r in range(len(probs))]
    counts = torch.zeros_like(probs)
    for _ in range(draws):
        chosen = draw_tokens(probs, gens, draw)
        counts[torch.arange(len(probs)), chosen] += 1
    assert (counts[probs == 0] == 0).all(), "a token of probability 0 was drawn"
    for row, p in zip(counts, probs):
        keep = p > 0
        if keep.sum() > 1:
            assert chisquare(row[keep].numpy(), p[keep].numpy() * draws).pvalue > 1e-3


def test_the_inverse_cdf_draw_reproduces_per_seed_and_is_its_own_probe(tiny):
    """The fast draw is a named part of the sampling probe: its samples reproduce from their
    seeds alone and in any batch, differ from the multinomial draw's (so a name must tell them
    apart), and old names keep meaning the multinomial draw."""
    from rnr_lens.measure.probes import parse_probe

    prompts = prompts_for(tiny)
    fast = tiny.generate(prompts, n=3, temperature=1.0, seed=5, max_new_tokens=6, batch_size=9, draw="inverse-cdf")
    again = tiny.generate(prompts, n=3, temperature=1.0, seed=5, max_new_tokens=6, batch_size=2, draw="inverse-cdf")
    assert [x.token_ids for x in fast] == [x.token_ids for x in again]
    alone = tiny.generate([prompts[1]], n=1, temperature=1.0, seed=fast[4].seed, max_new_tokens=6, draw="inverse-cdf")[0]
    assert alone.token_ids == fast[4].token_ids
    slow = tiny.generate(prompts, n=3, temperature=1.0, seed=5, max_new_tokens=6, draw="multinomial")
    assert [x.token_ids for x in fast] != [x.token_ids for x in slow]
    assert parse_probe("sampling:k=8,draw=inverse-cdf").name == "sampling:k=8,t=0.7,top_p=1.0,draw=inverse-cdf"
    assert parse_probe("sampling:k=8,t=0.7,top_p=1.0,draw=multinomial").draw == parse_probe("sampling:k=8").draw == "multinomial"
    with pytest.raises(R.RnrLensError, match="unknown draw"):
        tiny.generate(prompts, temperature=1.0, seed=1, draw="gumbel")


def test_greedy_n_copies_one_decode(tiny):
    out = tiny.generate(prompts_for(tiny)[:1], n=3, max_new_tokens=5)
    assert len(out) == 3 and len({tuple(o.token_ids) for o in out}) == 1
    assert all(o.seed is None for o in out)


def test_stop_strings_cut_the_text(tiny):
    prompt = prompts_for(tiny)[0]
    free = tiny.generate([prompt], max_new_tokens=12)[0]
    assert len(free.text) > 3
    stop = free.text[2:4]
    cut = tiny.generate([prompt], max_new_tokens=12, stop=[stop])[0]
    assert cut.finish_reason == "stop"
    assert stop not in cut.text
    assert free.text.startswith(cut.text)


def test_eos_stops_generation(tiny):
    """Force EOS by a hook that makes it the argmax: generation must stop with reason eos."""
    eos = min(tiny.eos_token_ids)
    point = tiny.bridge.get_hook_point("unembed.hook_out")
    handle = point.add_hook(lambda x, hook: x.index_fill(-1, torch.tensor([eos]), 1e4))
    try:
        out = tiny.generate(prompts_for(tiny)[:1], max_new_tokens=5)[0]
    finally:
        handle.hook.remove()
        point.fwd_hooks.remove(handle)
    assert out.finish_reason == "eos" and out.token_ids == []


def test_score_matches_manual_logprob(model):
    prompt = prompts_for(model)[0]
    cont = " 7."
    got = model.score([prompt, prompts_for(model)[1]], [cont, " 8"])
    ids = model.encode(prompt)
    c = model.tokenizer(cont, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        lp = torch.log_softmax(model.forward_tokens(torch.tensor([ids + c]))[0], -1)
    manual = sum(float(lp[len(ids) - 1 + k, t]) for k, t in enumerate(c))
    assert got[0].logprob == pytest.approx(manual, abs=1e-3)
    assert len(got[0].token_logprobs) == len(c)


def test_score_under_ablation_differs(tiny):
    prompt = prompts_for(tiny)[0]
    clean = tiny.score([prompt], [" 7"])[0].logprob
    ablated = tiny.score([prompt], [" 7"], ablations=["mlp3"])[0].logprob
    assert clean != pytest.approx(ablated)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"max_new_tokens": 0}, "max_new_tokens"),
        ({"temperature": 0.7}, "needs a seed"),
        ({"temperature": -1.0}, "temperature"),
        ({"top_p": 0.0}, "top_p"),
        ({"n": 0}, "n must be"),
    ],
)
def test_bad_generation_arguments(tiny, kwargs, message):
    with pytest.raises(R.RnrLensError, match=message):
        tiny.generate(["hi"], **kwargs)


def test_raw_text_and_empty_prompts(tiny):
    assert tiny.generate(["The quick brown"], max_new_tokens=3)[0].token_ids
    with pytest.raises(R.RnrLensError, match="empty prompt"):
        tiny.generate([""], max_new_tokens=3)


@pytest.mark.slow
def test_smollm2_answers_single_digit_additions(smol):
    """Real behaviour: with the answer prefix, SmolLM2 answers most easy additions correctly."""
    pairs = [(2, 3), (4, 5), (1, 6), (3, 3), (7, 2), (5, 4), (6, 1), (2, 2)]
    prompts = [R.ChatPrompt(f"What is {a} + {b}?", assistant_prefix="The answer is ") for a, b in pairs]
    outs = smol.generate(prompts, max_new_tokens=6)
    correct = sum(o.text.strip().startswith(str(a + b)) for o, (a, b) in zip(outs, pairs))
    assert correct >= len(pairs) // 2, [o.text for o in outs]
