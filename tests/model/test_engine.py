"""The engine: which graph a forward runs on (the weight-sharing twin, or the bridge where
TransformerLens hooks are attached), and that the two give the same numbers under routes and
ablations."""

import pytest
import torch

import rnr_lens as R
from rnr_lens.model.engine import EnginePath
from tests.conftest import prompts_for

ABLATIONS = [
    R.Ablation(1, "mlp"),
    R.Ablation(2, "attn"),
    R.Ablation(1, "block"),
    R.Ablation(2, "mlp", "mean", reference=("What is 1 + 1?", "Tom has 3 apples.")),
    R.Ablation(1, "block", "mean", reference=("What is 1 + 1?",)),
    R.Ablation(3, "attn", "resample", reference=("Tom has 3 apples and buys 5 more.",)),
]


@pytest.mark.parametrize("ablation", ABLATIONS, ids=str)
def test_fast_path_twin_matches_the_bridge(tiny, ablation):
    """Hook-free runs use a weight-sharing plain HF twin; it must give the bridge's numbers,
    under routes and ablations alike."""
    seqs = [tiny.encode(p) for p in prompts_for(tiny)]
    ids, mask = tiny.pad(seqs)
    route = R.Route([0, 1, 1, 2, 3, 3], n_layers=4)
    outs = {}
    for fast in (True, False):
        if not fast:
            tiny.engine.disable_twin("this test compares the graphs")
        try:
            with torch.no_grad(), tiny.intervene(route=route, ablations=[ablation]):
                assert tiny.engine.path().graph == ("twin" if fast else "bridge")
                outs[fast] = tiny.forward_tokens(ids, mask)
        finally:
            tiny.engine.enable_twin()
    assert torch.allclose(outs[True], outs[False], atol=1e-5)


def test_twin_shares_weights_without_copies(tiny):
    twin_params = {p.data_ptr() for p in tiny.engine.twin.parameters()}
    bridge_params = {p.data_ptr() for p in tiny.bridge.original_model.parameters()}
    assert twin_params <= bridge_params


def test_a_user_hook_sends_generation_through_the_bridge(tiny):
    seen = []
    point = tiny.bridge.get_hook_point("blocks.2.hook_resid_pre")
    handle = point.add_hook(lambda x, hook: seen.append(x.shape[1]))
    try:
        assert tiny.engine.path() == EnginePath("bridge", "TransformerLens hooks are attached to the bridge")
        assert tiny.engine.module() is tiny.bridge.original_model
        tiny.generate(prompts_for(tiny)[:1], max_new_tokens=3)
    finally:
        handle.hook.remove()
        point.fwd_hooks.remove(handle)
    assert len(seen) >= 2 and seen[1] == 1, "prefill, then one position per cached decoding step"
    assert tiny.engine.path().graph == "twin" and tiny.engine.module() is tiny.engine.twin
