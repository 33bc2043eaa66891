"""A model folder from outside (issue 73): links that leave it, devices, files past their cap,
a config that is not the weights', and tokenizer regexes that backtrack exponentially are
refused in one line before transformers reads any file; a folder save_pretrained wrote, or the
hub cache's snapshot of one, loads."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import rnr_lens as R
from rnr_lens.errors import RnrLensError
from rnr_lens.model.model_folder import check_model_folder, least_parameters, repeats_a_repetition, stored_parameters


@pytest.fixture
def folder(tmp_path) -> Path:
    return R.tiny_model(n_layers=2, seed=3).save_pretrained(tmp_path / "model")


def _refused(folder: Path, said: str) -> None:
    for attempt in (lambda: check_model_folder(folder), lambda: R.load_model(folder), lambda: R.models.load_tokenizer(folder)):
        with pytest.raises(RnrLensError, match=said) as refused:
            attempt()
        assert "\n" not in str(refused.value)


def test_a_folder_save_pretrained_wrote_passes_and_its_parameters_are_counted_from_headers(folder):
    from transformers import AutoModelForCausalLM

    check_model_folder(folder)
    held = AutoModelForCausalLM.from_pretrained(folder).num_parameters()  # tied embeddings counted once, as the file keeps them
    assert stored_parameters(folder) == held
    config = json.loads((folder / "config.json").read_text())
    assert 0 < least_parameters(config) <= stored_parameters(folder)


def test_a_link_leaving_the_folder_is_refused_and_nothing_outside_is_read(folder, tmp_path):
    """A chat_template.jinja linked to a private file put its text in every prompt and in run.db."""
    secret = tmp_path / "secret.txt"
    secret.write_text("{{ 'PRIVATE' }}")
    (folder / "chat_template.jinja").unlink()
    (folder / "chat_template.jinja").symlink_to(secret)
    before = secret.stat().st_atime_ns
    _refused(folder, "chat_template.jinja is a symbolic link to a file outside the model folder")
    assert secret.stat().st_atime_ns == before


@pytest.mark.parametrize(
    ("plant", "said"),
    [
        (lambda f: (f / "rnr_lens_checkpoint.json").symlink_to("/dev/zero"), "is a symbolic link to a file outside"),
        (lambda f: (f / "model.safetensors.index.json").symlink_to("/dev/zero"), "is a symbolic link to a file outside"),
        (lambda f: (f / "model.safetensors").unlink() or (f / "model.safetensors").symlink_to(f / "model.safetensors"), "loops or leads nowhere"),
        (lambda f: os.mkfifo(f / "tokenizer_config.json.extra"), "not a regular file"),
        (lambda f: _sparse(f / "config.json"), "over the cap of 1 MB"),
    ],
    ids=["checkpoint-to-dev-zero", "index-to-dev-zero", "weights-linked-to-themselves", "a-pipe", "sparse-config"],
)
def test_files_a_loader_would_read_without_end_are_refused(folder, monkeypatch, plant, said):
    monkeypatch.setenv("RNR_LENS_MAX_MODEL_FILE_MB", "1")
    plant(folder)
    _refused(folder, said)


def _sparse(path: Path) -> None:
    """A config.json of 1.5 GB that takes no disk: a JSON object padded with a hole of spaces."""
    with open(path, "r+b") as f:
        f.truncate(1_500_000_000)


def test_a_config_describing_more_layers_than_the_weights_hold_is_refused_before_allocation(folder):
    """num_hidden_layers = 1,000,000 over the weights of two blocks took 2.4 GB before it failed."""
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 1_000_000}))
    _refused(folder, r"describes a model of at least [\d,]+ parameters but its weights hold")


@pytest.mark.parametrize(
    ("pattern", "repeats"),
    [
        (r"(a+)+$", True),
        (r"(a|aa)*b", True),
        (r"(?:\d{1,3})+x", True),
        (r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+", False),  # GPT-2
        (
            r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
            False,
        ),  # Llama 3, Qwen 2
        (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?", False),  # o200k
        (r"[(+)|*]+", False),  # operators inside a class are characters
    ],
)
def test_a_regex_that_repeats_a_repetition_is_told_from_every_supported_tokenizers(pattern, repeats):
    assert repeats_a_repetition(pattern) is repeats


def test_a_tokenizer_whose_regex_backtracks_exponentially_is_refused_unless_trusted(folder, monkeypatch):
    path = folder / "tokenizer.json"
    tokenizer = json.loads(path.read_text())
    tokenizer["pre_tokenizer"] = {"type": "Split", "pattern": {"Regex": "(a+)+$"}, "behavior": "Isolated", "invert": False}
    path.write_text(json.dumps(tokenizer))
    _refused(folder, r"repeats a repetition .* RNR_LENS_TRUST_TOKENIZER_REGEX=1")
    monkeypatch.setenv("RNR_LENS_TRUST_TOKENIZER_REGEX", "1")
    check_model_folder(folder)


def test_a_hub_id_is_loaded_from_its_snapshot_checked_as_a_local_folder(folder, tmp_path, monkeypatch):
    """A hub model passes the same checks as a local folder: its snapshot (links into the
    cache's blob store, as the hub keeps files) loads; one linking outside the cache is refused."""
    repo = tmp_path / "hub" / "models--someone--tiny"
    snapshot = repo / "snapshots" / ("0" * 40)
    (repo / "blobs").mkdir(parents=True)
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0" * 40)
    for i, f in enumerate(sorted(folder.iterdir())):
        blob = repo / "blobs" / f"blob{i}"
        f.rename(blob)
        (snapshot / f.name).symlink_to(Path("..", "..", "blobs", blob.name))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub"))  # read when the library is imported
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model = R.load_model("someone/tiny")
    assert model.name == "someone/tiny" and model.n_layers == 2
    secret = tmp_path / "secret.jinja"
    secret.write_text("x")
    (snapshot / "chat_template.jinja").unlink()
    (snapshot / "chat_template.jinja").symlink_to(secret)
    with pytest.raises(RnrLensError, match="outside the model folder"):
        R.load_model("someone/tiny")


def test_a_file_no_load_reads_is_not_capped(folder, monkeypatch):
    """A training checkpoint's optimizer.pt (read weights-only by train --resume, never by a
    load) may be any size; the cap is on what a load reads (tutorial 4 trains one of 60 MB)."""
    monkeypatch.setenv("RNR_LENS_MAX_MODEL_FILE_MB", "1")
    (folder / "rnr_lens_checkpoint.json").write_text('{"name": "x"}')
    with open(folder / "optimizer.pt", "wb") as f:
        f.truncate(2_000_000)
    check_model_folder(folder)
    (folder / "tokenizer_config.json").write_bytes(b" " * 2_000_000)
    with pytest.raises(RnrLensError, match="tokenizer_config.json: a model folder's file other than its weights is over the cap of 1 MB"):
        check_model_folder(folder)
