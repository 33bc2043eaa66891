"""LensModel: forward under routes, scoped interventions, and exact restoration."""

from pathlib import Path

import pytest
import torch

import rnr_lens as R
from tests.conftest import prompts_for


def _ids(model, prompt):
    return torch.tensor([model.encode(prompt)])


def test_identity_route_reproduces_plain_bridge_forward(model):
    ids = _ids(model, prompts_for(model)[1])
    with torch.no_grad():
        plain = model.bridge(ids)
        with model.intervene(route=R.Route.identity(model.n_layers)):
            routed = model.bridge(ids)
        ours = model.forward_tokens(ids)
    assert torch.allclose(plain, routed, atol=1e-5)
    assert torch.allclose(plain, ours, atol=1e-5)


def test_route_changes_the_forward_and_is_restored(model):
    ids = _ids(model, prompts_for(model)[0])
    with torch.no_grad():
        clean = model.bridge(ids)
        with model.intervene(route=R.Route.skip(model.n_layers, 1)):
            skipped = model.bridge(ids)
            assert model.route == R.Route.skip(model.n_layers, 1)
        after = model.bridge(ids)
    assert not torch.allclose(clean, skipped, atol=1e-3)
    assert torch.equal(clean, after)
    assert model.route.is_identity


def test_block_ablation_equals_skipping_the_block(model):
    """Zeroing a block's whole update is the same computation as routing around it."""
    ids = _ids(model, prompts_for(model)[0])
    layer = model.n_layers // 2
    with torch.no_grad():
        with model.intervene(ablations=[R.Ablation(layer, "block")]):
            ablated = model.bridge(ids)
        with model.intervene(route=R.Route.skip(model.n_layers, layer)):
            skipped = model.bridge(ids)
    assert torch.allclose(ablated, skipped, atol=1e-4)


def test_run_with_cache_sees_the_route(model):
    """Hooks fire once per visit: a repeated block's hook fires twice."""
    ids = _ids(model, prompts_for(model)[0])
    seen = []
    point = model.bridge.get_hook_point("blocks.1.hook_mlp_out")
    handle = point.add_hook(lambda x, hook: seen.append(x.shape))
    try:
        with torch.no_grad(), model.intervene(route=R.Route.repeat(model.n_layers, 1, times=3)):
            model.bridge(ids)
    finally:
        handle.hook.remove()
        point.fwd_hooks.remove(handle)
    assert len(seen) == 3


def test_exception_inside_intervene_restores_clean_outputs(model):
    ids = _ids(model, prompts_for(model)[0])
    with torch.no_grad():
        clean = model.bridge(ids)
        layers_before = list(model.bridge.original_model.model.layers)
        n_hooks_before = sum(len(p.fwd_hooks) for p in model.bridge.hook_dict.values())
        with pytest.raises(RuntimeError, match="boom"):
            with model.intervene(route=R.Route([0, 0, 1], n_layers=model.n_layers), ablations=["mlp0", "attn1"]):
                assert not torch.allclose(model.bridge(ids), clean, atol=1e-3)
                raise RuntimeError("boom")
        assert torch.equal(model.bridge(ids), clean)
    assert list(model.bridge.original_model.model.layers) == layers_before
    assert model.bridge.original_model.config.num_hidden_layers == model.n_layers
    assert sum(len(p.fwd_hooks) for p in model.bridge.hook_dict.values()) == n_hooks_before


def test_user_hooks_compose_with_ablations(tiny):
    """A user's hook on the same point still runs beside an rnr_lens ablation."""
    ids = _ids(tiny, prompts_for(tiny)[0])
    calls = []
    with torch.no_grad():
        out = tiny.bridge.run_with_hooks(ids, fwd_hooks=[("blocks.0.hook_resid_pre", lambda x, hook: calls.append(1))])
        with tiny.intervene(ablations=["mlp2"]):
            ablated = tiny.bridge.run_with_hooks(ids, fwd_hooks=[("blocks.0.hook_resid_pre", lambda x, hook: calls.append(2))])
    assert calls == [1, 2]
    assert not torch.allclose(out, ablated)


def test_fingerprint_is_stable_and_weight_sensitive():
    a, b = R.tiny_model(seed=0), R.tiny_model(seed=0)
    c = R.tiny_model(seed=1)
    assert a.fingerprint() == b.fingerprint() != c.fingerprint()


def test_reference_activations_follow_in_place_weight_updates():
    """Guards the mean/resample reference cache: training updates weights in place, and a
    cached reference of the old weights would silently ablate with stale statistics."""
    model = R.tiny_model(seed=0)
    name, prompts = "blocks.1.hook_mlp_out", ("What is 1 + 1?",)
    before = model.reference_activations(name, prompts)[0]
    assert model.reference_activations(name, prompts)[0] is before, "cached while weights stay"
    with torch.no_grad():
        for p in model.engine.all_parameters():
            p.mul_(1.5)
    assert not torch.allclose(model.reference_activations(name, prompts)[0], before)


def test_residual_stream_defaults_its_mask_and_names_the_route_trace_under_a_route(tiny):
    """Issue 59: ``residual_stream`` needed a mask for an unpadded batch, and under a route it
    read one pass of each block (none of a skipped one)."""
    ids, mask = tiny.pad([tiny.tokenizer("What is 2 + 3?")["input_ids"]])
    default, explicit = tiny.residual_stream(ids), tiny.residual_stream(ids, mask)
    assert len(default) == tiny.n_layers and all(torch.equal(a, b) for a, b in zip(default, explicit))
    assert torch.equal(default[2], tiny.route_trace(ids, mask)["blocks.2.hook_resid_pre"])
    with tiny.intervene(ablations=["mlp1"]):  # the ablations in force apply
        ablated = tiny.residual_stream(ids)
    assert torch.equal(ablated[1], default[1]) and not torch.equal(ablated[2], default[2])
    with tiny.intervene(route=R.Route.skip(tiny.n_layers, 1)), pytest.raises(R.RnrLensError, match="use model.route_trace"):
        tiny.residual_stream(ids)


def test_a_hook_sees_transformerlens_4s_canonical_names(tiny):
    """What docs/howto/hooks.md tells a user about ``hook.name`` (issue 59)."""
    seen: list[str] = []
    ids, _ = tiny.pad([tiny.tokenizer("hi there")["input_ids"]])
    aliases = {
        "blocks.1.hook_resid_pre": "blocks.1.hook_in",
        "blocks.1.hook_mlp_out": "blocks.1.mlp.hook_out",
        "blocks.1.hook_resid_post": "blocks.1.hook_out",
    }
    with tiny.bridge.hooks(fwd_hooks=[(name, lambda x, hook: seen.append(hook.name)) for name in aliases]):
        tiny.bridge(ids)
    assert sorted(seen) == sorted(aliases.values())
    page = (Path(__file__).resolve().parents[2] / "docs" / "howto" / "hooks.md").read_text()
    assert all(f"`{standard}`" in page and f"`{canonical}`" in page for standard, canonical in aliases.items())


def test_the_automatic_batch_follows_the_machine_not_the_free_memory(tiny, monkeypatch, tmp_path):
    """A row's bits depend on its batch, and the automatic batch size once followed the memory
    free at the moment: the same audit beside other work planned smaller batches than alone.
    Now it reads the machine's memory (its RAM, or the lowest limit of the process's cgroups,
    v1 or v2), so a drop in free memory changes no batch, while a container allowed little
    memory still gets small batches."""
    import functools

    import psutil

    from rnr_lens.model import lens

    seq_len = 512  # a tiny-model row of about 6 MB: the 64-row cap on any machine of 2 GB
    root, proc = tmp_path / "cgroup", tmp_path / "self-cgroup"
    monkeypatch.setattr(lens, "CGROUP_ROOT", root)
    monkeypatch.setattr(lens, "PROC_CGROUP", proc)
    monkeypatch.setattr(lens, "machine_memory", functools.cache(lens.machine_memory.__wrapped__))  # this machine's reading stays for others

    def limits(lines: str, files: dict[str, str]) -> int:
        proc.write_text(lines)
        for rel, text in files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        lens.machine_memory.cache_clear()  # read once per process: again for each machine here
        return lens.machine_memory()

    real = psutil.virtual_memory()
    assert limits("0::/\n", {}) == real.total, "no limit file: the machine's RAM"
    alone = tiny.auto_batch_size(seq_len)
    assert alone > 1
    busy = real._replace(available=1 << 20, free=1 << 20)  # other work holds all but a MiB
    monkeypatch.setattr(psutil, "virtual_memory", lambda: busy)
    assert tiny.auto_batch_size(seq_len) == alone

    small = f"{32 << 20}\n"
    assert limits("0::/job/step\n", {"job/memory.max": small, "job/step/memory.max": "max\n"}) == 32 << 20, "v2: a parent's limit holds"
    assert tiny.auto_batch_size(seq_len) < alone
    unlimited = "9223372036854771712\n"  # v1's word for none
    assert limits("4:memory:/a\n1:cpu:/\n", {"memory/a/memory.limit_in_bytes": unlimited, "memory/memory.limit_in_bytes": small}) == 32 << 20
    assert limits("4:memory:/b\n", {"memory/b/memory.limit_in_bytes": "not a number\n", "memory/memory.limit_in_bytes": unlimited}) == real.total
