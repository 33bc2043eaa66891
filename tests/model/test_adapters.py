"""Architecture matrix: every architecture rnr_lens claims loads, routes and ablates correctly.

Guards against a regression in what varies by architecture (adapters.py: where the layer list
lives, per-layer config fields, the twin, the cache shim) showing up on one architecture only:
for ten tiny random models of the real Hugging Face code, saved as local folders and loaded
through ``load_model``, KV-cached generation on the twin under the identity, a skip+repeat
route and ablations must give exactly the tokens of a no-cache reference that recomputes the
whole sequence through the bridge at every step, and every ablation (each component, each
method) must give the bridge's logits on the twin.

(A resample ablation is left out of the no-cache comparison by definition: its donor is aligned
to the end of the prompt at prefill and generated tokens take the donor's last position, so a
recompute that re-aligns the donor at every step is a different intervention.)
"""

from __future__ import annotations

import pytest
import torch

import rnr_lens as R
from rnr_lens.model import adapters
from rnr_lens.model.tiny import greedy_without_cache, random_causal_lm, tiny_tokenizer
from tests.conftest import reuse_holds

D, HEADS, LAYERS = 64, 4, 4

# model_type -> config fields beyond the shared ones (names differ between families)
GQA = {"num_key_value_heads": 2}  # grouped-query attention where the family has it
ARCHITECTURES: dict[str, dict] = {
    "llama": GQA,
    "qwen2": GQA,
    "qwen3": {**GQA, "head_dim": D // HEADS},
    "mistral": {**GQA, "sliding_window": None},
    "gemma2": {**GQA, "head_dim": D // HEADS, "query_pre_attn_scalar": D // HEADS, "sliding_window": 64},
    "gemma3_text": {**GQA, "head_dim": D // HEADS, "query_pre_attn_scalar": D // HEADS, "sliding_window": 64},
    "phi3": {**GQA, "pad_token_id": None},
    "olmo2": GQA,
    "gpt2": {"n_embd": D, "n_layer": LAYERS, "n_head": HEADS, "n_positions": 512},
    "gpt_neox": {"rotary_pct": 1.0},
}
PROMPTS = ["What is 3 + 4? The answer is", "Tom has 5 apples and buys 2 more. How many?"]
REFERENCE = ("What is 1 + 1?", "Tom has 3 apples.")


def _build(model_type: str, folder) -> R.LensModel:
    tok = tiny_tokenizer()
    shared = {
        "vocab_size": len(tok),
        "hidden_size": D,
        "intermediate_size": 2 * D,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "max_position_embeddings": 512,
        "initializer_range": 0.3,  # peaked distributions: greedy tokens are stable under float reordering
        "bos_token_id": tok.bos_token_id,
        "eos_token_id": tok.eos_token_id,
        "pad_token_id": tok.pad_token_id,
    }
    model = random_causal_lm(model_type, seed=0, **{**shared, **ARCHITECTURES[model_type]})
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return R.load_model(folder)


@pytest.fixture(scope="module", params=sorted(ARCHITECTURES))
def arch_model(request, tmp_path_factory) -> R.LensModel:
    return _build(request.param, tmp_path_factory.mktemp(request.param))


def test_standard_hook_names_are_present(arch_model):
    names = set(arch_model.bridge.hook_dict)
    for i in range(arch_model.n_layers):
        for hook in ("hook_resid_pre", "hook_attn_out", "hook_mlp_out", "hook_resid_post"):
            assert f"blocks.{i}.{hook}" in names


INTERVENTIONS = {
    "identity": {},
    "skip+repeat": {"route": R.Route.skip(LAYERS, 1).then_repeat(2)},
    "mlp:zero": {"ablations": [R.Ablation(1, "mlp")]},
    "attn:mean": {"ablations": [R.Ablation(2, "attn", "mean", reference=REFERENCE)]},
    "block:mean": {"ablations": [R.Ablation(1, "block", "mean", reference=REFERENCE)]},
    "route+ablation": {"route": R.Route([0, 1, 1, 3], n_layers=LAYERS), "ablations": [R.Ablation(1, "mlp")]},
}


@pytest.mark.parametrize("name", list(INTERVENTIONS))
def test_cached_generation_on_the_twin_matches_the_no_cache_reference(arch_model, name):
    intervention = INTERVENTIONS[name]
    with arch_model.intervene(**intervention):
        assert arch_model.engine.path().graph == "twin", arch_model.engine.path()
        ours = arch_model.generate(PROMPTS, max_new_tokens=8)
    for prompt, gen in zip(PROMPTS, ours):
        assert gen.token_ids == greedy_without_cache(arch_model, prompt, 8, **intervention)


ABLATIONS = [
    R.Ablation(layer, component, method, reference=() if method == "zero" else REFERENCE)
    for layer, component in ((1, "mlp"), (2, "attn"), (1, "block"))
    for method in ("zero", "mean", "resample")
]


@pytest.mark.parametrize("ablation", ABLATIONS, ids=str)
def test_every_ablation_gives_the_bridge_logits_on_the_twin(arch_model, ablation):
    """Guards the twin's ablation sites: on post-norm architectures (OLMo-2, Gemma-2/3) the
    residual write is the post-norm output, and a mean or resample ablation of the sublayer's
    own output gave other numbers on the twin than on the bridge."""
    ids, mask = arch_model.pad([arch_model.encode(p) for p in PROMPTS])
    logits = {}
    for graph in ("twin", "bridge"):
        if graph == "bridge":
            arch_model.engine.disable_twin("this test compares the graphs")
        try:
            with torch.no_grad(), arch_model.intervene(ablations=[ablation]):
                assert arch_model.engine.path().graph == graph
                logits[graph] = arch_model.forward_tokens(ids, mask)
        finally:
            arch_model.engine.enable_twin()
    assert torch.allclose(logits["twin"], logits["bridge"], atol=1e-4)


# one route per row: the identity, a skip, a repeat, a revisited segment, a short route
ROW_ROUTES = [
    R.Route.identity(LAYERS),
    R.Route.skip(LAYERS, 1),
    R.Route.repeat(LAYERS, 2),
    R.Route([0, 1, 2, 1, 2, 3], n_layers=LAYERS),
    R.Route([0, 3], n_layers=LAYERS),
]
ROW_PROMPTS = [PROMPTS[i % 2] + " " * (i // 2) + "." * i for i in range(len(ROW_ROUTES))]  # differing lengths: left padding varies


def test_a_questions_routes_share_their_identity_prefix_bit_for_bit(arch_model):
    """Guards the shared identity prefix (issue 39) on every architecture: the routes of one
    question run the blocks before their first edit once in the prompt's forward where the
    reuse's check passed, and every row must then hold exactly the bits the batch computes
    for it without sharing (tokens, log-probs, entropies: audit ids and golden tries rest on
    them); where the check failed (issue 58), no block runs shared. Two questions of five
    routes each: block 0 runs on two rows."""
    routes = [R.Route.identity(LAYERS), R.Route.skip(LAYERS, 2), R.Route.repeat(LAYERS, 3), R.Route.skip(LAYERS, 1), R.Route.identity(LAYERS)] * 2
    prompts = [PROMPTS[0]] * 5 + [PROMPTS[1]] * 5
    rows: list[int] = []

    def run() -> list:
        arch_model.engine.reuses.decide(["shared-identity", "prefix-store"])  # a check's own forwards stay out of the count
        handle = arch_model.engine.blocks("twin")[0].register_forward_hook(lambda module, args, out: rows.append(args[0].shape[0]))
        try:
            return arch_model.generate(prompts, route=routes, max_new_tokens=5)
        finally:
            handle.remove()

    verdict = reuse_holds(arch_model, "shared-identity", run)
    assert rows[0] == (2 if verdict.on else 10), "the prompt's forward runs block 0 once per question where sharing is on"


def test_prompt_states_kept_across_forwards_give_the_same_bits(arch_model):
    """Guards the prefix store's placement (issue 39: the route search keeps each question's
    prompt states from step to step): a forward whose rows share route prefixes with an
    earlier forward's must take those blocks' states from the store, each into its own row
    and padding, and give every row the tokens it gets without the store. The second batch
    holds a longer third prompt, so each stored state goes into another padding, in a batch of
    another size, than it was computed in. The store is forced on, whatever this machine's
    check says, to test where it puts each state: log-probabilities and entropies agree to
    1e-5 where a CPU's kernels round a row differently with the batch's size (seen at 64-wide
    shapes: gemma2, 7e-7), and to the bit where the check passed."""
    a, b, c = PROMPTS[0], PROMPTS[1], PROMPTS[1] + " And then?"
    steps = [
        ([a, b], [R.Route([0, 1, 3], n_layers=LAYERS), R.Route([0, 1, 1, 2, 3], n_layers=LAYERS)]),
        ([a, b, c], [R.Route([0, 1, 3, 3], n_layers=LAYERS), R.Route([0, 1, 1, 3], n_layers=LAYERS), R.Route.identity(LAYERS)]),
    ]

    def run() -> list[list[tuple]]:
        out = []
        for prompts, routes in steps:
            gens = arch_model.generate(prompts, route=routes, max_new_tokens=5)
            out.append([(g.token_ids, g.logprobs, g.entropies) for g in gens])
        return out

    plain = run()
    reuses = arch_model.engine.reuses
    reuses.decide(["prefix-store"])
    with arch_model.engine.prefix_states() as store, reuses.forced("prefix-store", True):
        kept = run()
    for got, want in zip(sum(kept, []), sum(plain, [])):
        assert got[0] == want[0]
        assert got[1] + got[2] == pytest.approx(want[1] + want[2], abs=1e-5)
    if adapters.attention_window(arch_model.engine.bridge) is not None:  # sliding layers run without the store (engine.routed_rows)
        assert store.hits == 0
        return
    assert store.hits == 6, "a and b each take three blocks' states from the first step: (0), (0, 1) and (0, 1, 3) or (0, 1, 1)"
    if reuses.verdict("prefix-store").on:
        assert kept == plain, "to the bit where the store's check passed"


@pytest.mark.parametrize(
    "ablations", [[], [R.Ablation(1, "mlp")], [R.Ablation(2, "attn", "mean", reference=REFERENCE)]], ids=["none", "mlp:zero", "attn:mean"]
)
def test_rows_with_different_routes_match_the_no_cache_reference_in_one_forward_per_step(arch_model, ablations):
    """Guards per-row routing (engine.routed_rows, the route search's batching): each row must
    get exactly the tokens a no-cache recompute gives it under its own route, while the whole
    batch advances in one forward per step."""
    calls = []
    handle = arch_model.engine.twin.register_forward_hook(lambda *args: calls.append(1))
    try:
        ours = arch_model.generate(ROW_PROMPTS, route=ROW_ROUTES, ablations=ablations, max_new_tokens=6)
    finally:
        handle.remove()
    assert len(calls) <= 6, "rows with different routes must share each forward"
    for prompt, route, gen in zip(ROW_PROMPTS, ROW_ROUTES, ours):
        assert gen.token_ids == greedy_without_cache(arch_model, prompt, 6, route=route, ablations=ablations), str(route)


NORMED_OUTPUTS = ("Gemma2ForCausalLM", "Gemma3ForCausalLM", "Olmo2ForCausalLM")
"""The architectures that norm a sublayer's output before adding it to the residual stream."""


def test_each_architectures_layout_is_read_from_transformer_lens(arch_model):
    """An architecture's block layout is one value (issue 74): where its layers live, each
    component's module and the module whose output it writes, read from TransformerLens'
    adapter; the twin ablates at the layout's outputs (the norm after the sublayer where the
    architecture has one)."""
    bridge = arch_model.bridge
    layout = adapters.block_layout(bridge)
    assert layout == adapters.transformer_lens_layout(bridge) and set(layout.modules) == set(layout.outputs) == {"attn", "mlp"}
    owner, attribute = adapters.decoder_layers_owner(bridge)
    assert len(getattr(owner, attribute)) == arch_model.n_layers
    assert (layout.outputs != layout.modules) == (type(bridge.original_model).__name__ in NORMED_OUTPUTS)
    twin_block = arch_model.engine.blocks("twin")[1]
    assert arch_model.engine.component(1, "mlp", "twin").module is twin_block.get_submodule(layout.outputs["mlp"])


def test_a_mapping_that_names_no_mlp_is_refused_in_one_line(tiny, monkeypatch):
    """An architecture whose MLP sits under another name than TransformerLens' ``mlp`` was a bare
    ``KeyError``; it is one line saying how to register where the module lives."""
    blocks = tiny.bridge.adapter.component_mapping["blocks"]
    monkeypatch.setattr(blocks, "submodules", {k: v for k, v in blocks.submodules.items() if k != "mlp"})
    with pytest.raises(R.RnrLensError, match=r"names no mlp module in a block; say where it lives with one @adapters.register_layout") as refused:
        adapters.transformer_lens_layout(tiny.bridge)
    assert "\n" not in str(refused.value)


def test_a_registered_layout_is_what_routes_and_ablations_ask(tiny, monkeypatch):
    """A layout registered for an architecture replaces TransformerLens' for it: here one that
    names the post-attention norm as the MLP's output (wrong for Llama, and so visible), and no
    per-layer config field. An architecture is registered once."""
    monkeypatch.setattr(adapters, "LAYOUTS", dict(adapters.LAYOUTS))
    arch = type(tiny.bridge.original_model).__name__
    default = adapters.block_layout(tiny.bridge)

    @adapters.register_layout(arch)
    def _odd(bridge):
        return adapters.BlockLayout(default.layers, default.modules, {**default.outputs, "mlp": "post_attention_layernorm"}, per_layer_config=())

    twin_block = tiny.engine.blocks("twin")[1]
    assert tiny.engine.component(1, "mlp", "twin").module is twin_block.post_attention_layernorm
    assert adapters.block_layout(tiny.bridge).per_layer_config == ()
    with pytest.raises(R.RnrLensError, match=f"a block layout for {arch} is registered already"):
        adapters.register_layout(arch)(_odd)
