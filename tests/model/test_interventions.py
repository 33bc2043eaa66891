"""Ablations: each method and component against hand-written TransformerLens hooks."""

import pytest
import torch

import rnr_lens as R
from tests.conftest import prompts_for


def _ids(model, i=0):
    return torch.tensor([model.encode(prompts_for(model)[i])])


def test_zeroed_mlp_matches_hand_written_hook(model):
    ids = _ids(model)
    layer = model.n_layers - 2
    with torch.no_grad():
        reference = model.bridge.run_with_hooks(ids, fwd_hooks=[(f"blocks.{layer}.hook_mlp_out", lambda x, hook: torch.zeros_like(x))])
        with model.intervene(ablations=[R.Ablation(layer, "mlp", "zero")]):
            ours = model.bridge(ids)
        clean = model.bridge(ids)
    assert torch.allclose(ours, reference, atol=1e-5)
    assert not torch.allclose(ours, clean, atol=1e-3)


def test_zeroed_attention_matches_hand_written_hook(tiny):
    ids = _ids(tiny)
    with torch.no_grad():
        reference = tiny.bridge.run_with_hooks(ids, fwd_hooks=[("blocks.1.hook_attn_out", lambda x, hook: torch.zeros_like(x))])
        with tiny.intervene(ablations=["attn1"]):
            ours = tiny.bridge(ids)
    assert torch.allclose(ours, reference, atol=1e-5)


def test_mean_ablation_uses_the_reference_mean(tiny):
    reference = ("What is 1 + 1?", "The quick brown fox jumps over the lazy dog.")
    acts = []
    point = tiny.bridge.get_hook_point("blocks.2.hook_mlp_out")
    with torch.no_grad():
        for text in reference:
            _, cache = tiny.bridge.run_with_cache(torch.tensor([tiny.tokenizer(text)["input_ids"]]))
            acts.append(cache["blocks.2.hook_mlp_out"][0])
        mean = torch.cat(acts).mean(0)
        ids = _ids(tiny)
        expected = tiny.bridge.run_with_hooks(ids, fwd_hooks=[("blocks.2.hook_mlp_out", lambda x, hook: mean.expand_as(x))])
        with tiny.intervene(ablations=[R.Ablation(2, "mlp", "mean", reference=reference)]):
            ours = tiny.bridge(ids)
    assert point is not None
    assert torch.allclose(ours, expected, atol=1e-5)


def test_resample_ablation_takes_the_donor_activation(tiny):
    donor = "Tom has 3 apples and buys 5 more."
    ids = _ids(tiny)
    with torch.no_grad():
        _, cache = tiny.bridge.run_with_cache(torch.tensor([tiny.tokenizer(donor)["input_ids"]]))
        donor_act = cache["blocks.1.hook_mlp_out"][0]
        seq = ids.shape[1]
        index = torch.arange(donor_act.shape[0] - seq, donor_act.shape[0]).clamp(min=0)
        expected = tiny.bridge.run_with_hooks(ids, fwd_hooks=[("blocks.1.hook_mlp_out", lambda x, hook: donor_act[index][None])])
        with tiny.intervene(ablations=[R.Ablation(1, "mlp", "resample", reference=(donor,))]):
            ours = tiny.bridge(ids)
    assert torch.allclose(ours, expected, atol=1e-5)


def test_mean_block_ablation_adds_the_mean_update(tiny):
    reference = ("What is 1 + 1?",)
    with torch.no_grad():
        _, cache = tiny.bridge.run_with_cache(torch.tensor([tiny.tokenizer(reference[0])["input_ids"]]))
        update = (cache["blocks.2.hook_resid_post"] - cache["blocks.2.hook_resid_pre"])[0].mean(0)
        ids = _ids(tiny)
        store = {}
        expected = tiny.bridge.run_with_hooks(
            ids,
            fwd_hooks=[
                ("blocks.2.hook_resid_pre", lambda x, hook: store.__setitem__("pre", x)),
                ("blocks.2.hook_resid_post", lambda x, hook: store["pre"] + update),
            ],
        )
        with tiny.intervene(ablations=[R.Ablation(2, "block", "mean", reference=reference)]):
            ours = tiny.bridge(ids)
    assert torch.allclose(ours, expected, atol=1e-5)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: R.Ablation(1, "ffn"), "unknown ablation component"),
        (lambda: R.Ablation(1, "mlp", "noise"), "unknown ablation method"),
        (lambda: R.Ablation(1, "mlp", "mean"), "needs reference prompts"),
        (lambda: R.Ablation.parse("mlpx"), "cannot parse ablation"),
    ],
)
def test_bad_ablations(make, message):
    with pytest.raises(R.RnrLensError, match=message):
        make()


def test_ablation_of_missing_block_is_a_clear_error(tiny):
    with pytest.raises(R.RnrLensError, match="blocks 0..3"):
        with tiny.intervene(ablations=[R.Ablation(9)]):
            pass


def test_parse_round_trip():
    assert R.Ablation.parse("mlp12") == R.Ablation(12)
    assert R.Ablation.parse(str(R.Ablation(3, "attn"))) == R.Ablation(3, "attn")
