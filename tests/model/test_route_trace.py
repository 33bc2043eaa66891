"""Route traces (issue 59): under a route that skips one block and repeats another, every pass
is recorded by route step, each step's input holds the bits of the step before's output, a
skipped or repeated block is refused in one line, and the logit lens after the last step is the
model's own logit; on every tiny architecture of the matrix and on both graphs (the twin, and
the bridge when a user's TransformerLens hook is attached), then on SmolLM2."""

from __future__ import annotations

import pytest
import torch

import rnr_lens as R
from rnr_lens.errors import RnrLensError
from rnr_lens.model.route_trace import logit_lens
from tests.model.test_adapters import ARCHITECTURES, LAYERS, PROMPTS, _build

ROUTE = R.Route.skip(LAYERS, 1).then_repeat(2)  # 0, 2, 2, 3: block 1 skipped, block 2 run twice


@pytest.fixture(scope="module", params=sorted(ARCHITECTURES))
def arch_model(request, tmp_path_factory) -> R.LensModel:
    return _build(request.param, tmp_path_factory.mktemp(request.param))


def _ids(model: R.LensModel) -> tuple[torch.Tensor, torch.Tensor]:
    return model.pad([model.tokenizer(p)["input_ids"] for p in PROMPTS])


def _check_trace(model: R.LensModel, route: R.Route, ids: torch.Tensor, mask: torch.Tensor) -> None:
    with model.intervene(route=route):
        trace = model.route_trace(ids, mask)
        logits = model.forward_tokens(ids, mask, logits_to_keep=1)[:, -1]
    assert trace.route == route and len(trace.resid_pre) == len(trace.resid_post) == len(route)
    for i in range(1, len(route)):  # one pass's output is the next pass's input, to the bit
        assert torch.equal(trace.resid_pre[i], trace.resid_post[i - 1]), f"step {i}"
    # the logit lens after the last step is the model's own logit (greedy token's), through the same graph's readout
    top = logits.argmax(-1)
    lens = logit_lens(model, trace, top)
    assert lens.shape == (len(ids), len(route)) and torch.equal(trace.logits, logits)
    torch.testing.assert_close(lens[:, -1], logits[torch.arange(len(top)), top].float(), rtol=1e-6, atol=1e-5)


def test_a_trace_records_every_pass_in_route_order_on_both_graphs(arch_model):
    ids, mask = _ids(arch_model)
    _check_trace(arch_model, ROUTE, ids, mask)
    with arch_model.intervene(route=ROUTE):
        trace = arch_model.route_trace(ids, mask)
    assert not torch.equal(trace.resid_pre[1], trace.resid_pre[2]), "the repeated block's second pass reads the first's output"
    assert trace.steps_of(2) == (1, 2) and trace.steps_of(1) == ()
    # a user's TransformerLens hook moves the forward to the bridge: the same trace, every pass
    with arch_model.bridge.hooks(fwd_hooks=[("blocks.0.hook_resid_pre", lambda x, hook: None)]):
        assert arch_model.engine.path().graph == "bridge"
        _check_trace(arch_model, ROUTE, ids, mask)
        with arch_model.intervene(route=ROUTE):
            on_bridge = arch_model.route_trace(ids, mask)
    for a, b in zip(trace.resid_post, on_bridge.resid_post):  # the same function; GPT-2's bridge splits its fused qkv,
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)  # so the graphs agree to float rounding, not to the bit


def test_under_the_identity_a_trace_is_transformerlens_cache(arch_model):
    """Where every block runs once, a trace answers the plain TransformerLens names, as
    ``run_with_cache`` does."""
    ids, mask = _ids(arch_model)
    trace = arch_model.route_trace(ids, mask)
    _, cache = arch_model.bridge.run_with_cache(ids, attention_mask=mask)
    for b in range(arch_model.n_layers):
        for hook in ("hook_resid_pre", "hook_resid_post"):
            # run_with_cache runs the bridge, the trace the twin: equal to float rounding (see above)
            torch.testing.assert_close(trace[f"blocks.{b}.{hook}"], cache[f"blocks.{b}.{hook}"], rtol=1e-4, atol=1e-4)


def test_a_silenced_pass_of_a_repeated_block_carries_its_input_on(arch_model):
    """A whole-block zero ablation makes a block the identity on the stream, on every pass:
    each pass of the repeated block leaves the stream as it entered, on both graphs."""
    ids, mask = _ids(arch_model)
    with arch_model.intervene(route=ROUTE, ablations=["block2"]):
        trace = arch_model.route_trace(ids, mask)
        with arch_model.bridge.hooks(fwd_hooks=[("blocks.0.hook_resid_pre", lambda x, hook: None)]):
            on_bridge = arch_model.route_trace(ids, mask)
    for t in (trace, on_bridge):
        assert t.steps_of(2) == (1, 2)
        for step in (1, 2):
            torch.testing.assert_close(t.resid_post[step], t.resid_pre[step], rtol=0, atol=1e-6)
        assert not torch.equal(t.resid_post[0], t.resid_pre[0]), "an unsilenced block moves the stream"


def test_a_skipped_or_repeated_block_is_named_in_one_line(tiny):
    ids, mask = tiny.pad([tiny.tokenizer(PROMPTS[0])["input_ids"]])
    route = R.Route.skip(tiny.n_layers, 1).then_repeat(2)
    with tiny.intervene(route=route):
        trace = tiny.route_trace(ids, mask)
    assert torch.equal(trace["blocks.0.hook_resid_post"], trace["steps.0.hook_resid_post"])
    cases = {
        "blocks.1.hook_resid_post": f"blocks.1 is skipped by route {route}; it has no pass to read",
        "blocks.2.hook_resid_pre": f"blocks.2 runs 2 times under route {route} (steps 1, 2); name one pass, e.g. steps.2.hook_resid_pre",
        f"blocks.{tiny.n_layers}.hook_resid_pre": f"blocks.{tiny.n_layers} is not a block of this {tiny.n_layers}-block model",
        f"steps.{len(route)}.hook_resid_pre": f"there is no step {len(route)}",
        "blocks.0.hook_mlp_out": "read other hooks with model.bridge.run_with_cache",
    }
    for name, message in cases.items():
        with pytest.raises(RnrLensError) as err:
            trace[name]
        assert message in str(err.value) and "\n" not in str(err.value), name
    assert set(trace.names()) >= {"steps.1.hook_resid_post", "steps.2.hook_resid_post", "blocks.0.hook_resid_pre", "blocks.3.hook_resid_post"}
    assert not any(n.startswith(("blocks.1.", "blocks.2.")) for n in trace.names())


def test_an_ablated_pass_is_what_the_trace_records(tiny):
    """A trace records the stream the route really carried: silencing a block's MLP changes
    that block's output in the trace, and only from that step on."""
    ids, mask = tiny.pad([tiny.tokenizer(PROMPTS[0])["input_ids"]])
    clean = tiny.route_trace(ids, mask)
    with tiny.intervene(ablations=["mlp2"]):
        ablated = tiny.route_trace(ids, mask)
    assert all(torch.equal(a, b) for a, b in zip(clean.resid_post[:2], ablated.resid_post[:2]))
    assert not torch.equal(clean.resid_post[2], ablated.resid_post[2])


@pytest.mark.slow
def test_a_trace_on_smollm2_under_a_skip_and_repeat_route(smol):
    ids, mask = smol.pad([smol.tokenizer(PROMPTS[0])["input_ids"]])
    route = R.Route.skip(smol.n_layers, 20).then_repeat(10)
    _check_trace(smol, route, ids, mask)
    with smol.intervene(route=route):
        trace = smol.route_trace(ids, mask)
    with pytest.raises(RnrLensError, match=f"blocks.20 is skipped by route {route}"):
        trace["blocks.20.hook_resid_post"]
