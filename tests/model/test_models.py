"""Model loading: specs, safety and error messages."""

import os
from pathlib import Path

import pytest
import torch

import rnr_lens as R
from rnr_lens.model import model_cache


def _save_tiny(tmp_path: Path, n_layers: int = 2) -> Path:
    return R.tiny_model(n_layers=n_layers, seed=3).save_pretrained(tmp_path / "tiny-folder")


def test_local_folder_loads_with_identical_logits(tmp_path):
    folder = _save_tiny(tmp_path)
    original = R.tiny_model(n_layers=2, seed=3)
    loaded = R.load_model(folder)
    ids = torch.tensor([original.encode("What is 3 + 4?")])
    with torch.no_grad():
        assert torch.allclose(original.forward_tokens(ids), loaded.forward_tokens(ids), atol=1e-5)
    assert loaded.name == "tiny-folder" and loaded.n_layers == 2


def test_save_refuses_a_non_empty_folder(tmp_path):
    folder = _save_tiny(tmp_path)
    with pytest.raises(R.RnrLensError, match="not empty"):
        R.tiny_model(n_layers=2).save_pretrained(folder)


def test_existing_bridge_is_wrapped_as_is(tiny):
    again = R.load_model(tiny.bridge)
    assert again.bridge is tiny.bridge and again.n_layers == tiny.n_layers


def test_folder_with_only_pickled_weights_is_refused(tmp_path):
    folder = _save_tiny(tmp_path)
    torch.save({"w": torch.zeros(2)}, folder / "pytorch_model.bin")
    for f in folder.glob("*.safetensors"):
        f.unlink()
    with pytest.raises(R.RnrLensError, match="never unpickles"):
        R.load_model(folder)


@pytest.mark.parametrize(
    "plant, message",
    [
        (lambda f: (f / "extra.pt").write_bytes(b"\x80\x04N."), r"holds pickle files \(extra.pt\)"),
        (
            lambda f: (f / "model.safetensors.index.json").write_text('{"weight_map": {"w": "pytorch_model.bin"}}'),
            "does not map the weights to .safetensors",
        ),
        (
            lambda f: (f / "model.safetensors.index.json").write_text('{"weight_map": {"w": "../x.safetensors"}}'),
            "does not map the weights to .safetensors",
        ),
        (lambda f: (f / "model.safetensors.index.json").write_text("[1]"), "does not map the weights to .safetensors"),
    ],
    ids=["a-pickle-beside", "an-index-naming-a-pickle", "an-index-leaving-the-folder", "an-index-not-a-map"],
)
def test_weights_that_could_reach_an_unpickler_are_refused_before_anything_reads_the_folder(tmp_path, plant, message):
    folder = _save_tiny(tmp_path)
    plant(folder)
    with pytest.raises(R.RnrLensError, match=message):
        R.load_model(folder)
    with pytest.raises(R.RnrLensError, match=message):
        R.models.load_tokenizer(folder)


def test_a_training_checkpoints_own_optimizer_state_is_not_a_stray_pickle(tmp_path):
    folder = _save_tiny(tmp_path)
    (folder / "optimizer.pt").write_bytes(b"\x80\x04N.")
    with pytest.raises(R.RnrLensError, match="holds pickle files"):
        R.load_model(folder)
    (folder / "rnr_lens_checkpoint.json").write_text("{}")
    __import__("rnr_lens.model.model_folder").model_folder.check_model_folder(folder)  # the checkpoint's layout: train --resume reads it weights-only


def test_pickles_beside_safetensors_load_only_when_the_user_says_so(tmp_path, monkeypatch):
    """A Trainer's training_args.bin is a pickle: refused unless the user sets the variable;
    then the safetensors load and the pickle is never read."""
    folder = _save_tiny(tmp_path)
    (folder / "training_args.bin").write_bytes(b"cbuiltins\nexec\n(Vraise SystemExit('unpickled')\ntR.")
    with pytest.raises(R.RnrLensError, match="RNR_LENS_ALLOW_PICKLE_FILES=1"):
        R.load_model(folder)
    monkeypatch.setenv("RNR_LENS_ALLOW_PICKLE_FILES", "1")
    assert R.load_model(folder).n_layers == 2


def test_truncated_safetensors_is_a_clear_error(tmp_path):
    folder = _save_tiny(tmp_path)
    weights = next(folder.glob("*.safetensors"))
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(R.RnrLensError, match="ends before its header does; it is truncated") as info:
        R.load_model(folder)
    assert "\n" not in str(info.value)


def test_corrupt_gguf_is_a_clear_error(tmp_path, cache):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + os.urandom(2048))
    with pytest.raises(R.RnrLensError, match="not a GGUF file"):
        R.load_model(bad)
    # the failed conversion left no cache entry behind
    assert not any((cache / "models").glob("gguf-*")) if (cache / "models").exists() else True


def test_unsupported_architecture_is_a_clear_error(tmp_path):
    from transformers import BioGptConfig, BioGptForCausalLM

    folder = tmp_path / "biogpt"
    cfg = BioGptConfig(vocab_size=400, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64)
    BioGptForCausalLM(cfg).save_pretrained(folder, safe_serialization=True)
    R.tiny_model(n_layers=1).tokenizer.save_pretrained(folder)
    with pytest.raises(R.RnrLensError, match="cannot wrap architecture 'BioGptForCausalLM'"):
        R.load_model(folder)


@pytest.mark.parametrize(
    "spec, message",
    [
        ("no-such-model", "unknown model 'no-such-model'"),
        ("/nonexistent/model.gguf", "does not exist"),
    ],
)
def test_bad_specs(spec, message):
    with pytest.raises(R.RnrLensError, match=message):
        R.load_model(spec)


@pytest.mark.parametrize("how", ["closed port", "offline mode"])
def test_unreachable_hub_is_one_quiet_line(monkeypatch, capfd, how):
    """Guards against huggingface_hub's five retries per file (23 lines of noise, ~45 s)
    before the error: an unreachable hub is found at once and named in one line."""
    if how == "closed port":
        monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # the discard port: nothing listens
    else:
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(R.RnrLensError, match=r"cannot reach the Hugging Face hub .* 'someone/not-a-real-model' is not in the local") as info:
        R.load_model("someone/not-a-real-model")
    assert "\n" not in str(info.value)
    assert "Retrying" not in capfd.readouterr().err


def test_bare_safetensors_file_gets_advice(tmp_path):
    folder = _save_tiny(tmp_path)
    with pytest.raises(R.RnrLensError, match="bare weights file .* pass the folder that holds it"):
        R.load_model(folder / "model.safetensors")


def test_fingerprint_sees_every_weight(tiny):
    """Guards against the sampled fingerprint (one element in numel//4096): zeroing all of three
    MLPs but the sampled elements left it unchanged, so --resume mixed two models' results."""
    before = tiny.fingerprint()
    weight = tiny.bridge.original_model.model.layers[1].mlp.down_proj.weight
    with torch.no_grad():
        old = weight[3, 5].item()
        weight[3, 5] = old + 1e-3  # one element, not on any sampling grid
        try:
            assert tiny.fingerprint() != before
        finally:
            weight[3, 5] = old
    assert tiny.fingerprint() == before


@pytest.mark.slow
def test_smollm2_loads_offline_from_the_cache(smol):
    assert smol.n_layers == 30 and smol.bridge.cfg.d_model == 576
    assert model_cache.is_cached("smollm2-135m-instruct")
    assert smol.chat_template and "<|im_start|>" in smol.chat_template


def test_dtype_and_placement_pass_through(tmp_path):
    folder = R.tiny_model(n_layers=2, seed=0).save_pretrained(tmp_path / "tiny")
    half = R.load_model(folder, dtype="bfloat16", device="cpu")
    assert {p.dtype for p in half.bridge.original_model.parameters()} == {torch.bfloat16}
    out = half.generate([R.ChatPrompt("What is 1 + 1?")], max_new_tokens=3)
    assert out[0].token_ids, "a bfloat16 model generates"
    if not torch.cuda.is_available():
        with pytest.raises(R.RnrLensError, match="no CUDA GPU"):
            R.load_model(folder, device="cuda")
        with pytest.raises(R.RnrLensError, match="needs 2 CUDA GPUs"):
            R.load_model(folder, n_devices=2)
    with pytest.raises(R.RnrLensError, match="either device or device_map"):
        R.load_model(folder, device="cpu", device_map="auto")
    with pytest.raises(R.RnrLensError, match="unknown dtype"):
        R.load_model(folder, dtype="float12")
