"""The training run folder: one writer, a record that refuses another run's settings, and a
checkpoint that restores the weights, the optimizer and the step it saved."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

import rnr_lens as R
from rnr_lens.errors import RnrLensError
from rnr_lens.trained_pair.checkpoints import CHECKPOINT_FILE, RunFolder, TrainState, check_folder, read_history, trained_name, training_record
from rnr_lens.trained_pair.training import trainable_parameters


def _folder(path, model, steps: int = 1, seed: int = 0) -> RunFolder:
    task = R.tasks.get("add-small", n=4, split="train")
    return RunFolder(path, model, task, R.dapo.TrainConfig(steps=steps, seed=seed), R.DeploymentConfig())


@pytest.mark.slow  # starts a process
def test_a_training_folder_has_one_writer(tmp_path):
    model = R.tiny_model(n_layers=2)
    folder = _folder(tmp_path / "run", model)
    folder.open(resume=True)
    code = f"from rnr_lens.core.files import acquire_writer_lock\nacquire_writer_lock({str(tmp_path / 'run')!r}, 'the training run')"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert other.returncode != 0 and "the training run is being written by" in other.stderr
    folder.close()
    with pytest.raises(RnrLensError, match="already holds a training run"):
        _folder(tmp_path / "run", model).open(resume=False)


def test_a_checkpoint_restores_the_weights_optimizer_and_step_it_saved(tmp_path):
    """Guards the resume a crashed run relies on: every trained tensor, the optimizer's moments
    and the step come back from the newest whole checkpoint, and only that one is kept."""
    model = R.tiny_model(n_layers=2, seed=0)
    params = trainable_parameters(model, [1])  # what train() updates, by their Hugging Face names
    optimizer = torch.optim.AdamW(params.values(), lr=1e-2)
    folder = _folder(tmp_path / "run", model, steps=3, seed=1)
    assert folder.open(resume=True) is None, "a new run starts fresh"
    for step in (1, 2):
        sum(p.sum() for p in params.values()).backward()
        optimizer.step()
        optimizer.zero_grad()
        state = TrainState(step=step, cursor=4 * step, history=[{"step": s, "reward": 0.5 * s} for s in range(1, step + 1)])
        saved = folder.save(state, optimizer, final=False, base_name="tiny")
    folder.write_history(state.history)
    folder.close()
    assert [p.name for p in folder.checkpoints()] == ["step-000002"] and saved == folder.checkpoints()[0]
    assert json.loads((saved / CHECKPOINT_FILE).read_text())["name"] == trained_name("tiny", 2, 1) == "tiny+dapo2-seed1"
    assert read_history(tmp_path / "run") == state.history

    fresh = R.tiny_model(n_layers=2, seed=0)
    fresh_params = trainable_parameters(fresh, [1])
    fresh_optimizer = torch.optim.AdamW(fresh_params.values(), lr=1e-2)
    again = _folder(tmp_path / "run", fresh, steps=3, seed=1)
    assert again.open(resume=True) == saved
    restored = again.restore(saved, fresh_params, fresh_optimizer)
    again.close()
    assert (restored.step, restored.cursor, restored.history) == (2, 8, state.history)
    assert all(torch.equal(fresh_params[n], params[n]) for n in params)
    moments = [s["exp_avg"] for s in optimizer.state_dict()["state"].values()]
    assert all(torch.equal(a, b) for a, b in zip(moments, [s["exp_avg"] for s in fresh_optimizer.state_dict()["state"].values()]))
    assert training_record(saved)["base_model"] == "tiny" and training_record(tmp_path) is None


def test_a_run_folder_refuses_another_runs_settings_and_a_foreign_folder(tmp_path):
    model = R.tiny_model(n_layers=2, seed=0)
    first = _folder(tmp_path / "run", model, steps=1)
    first.open(resume=True)
    first.close()
    other = _folder(tmp_path / "run", model, steps=2)
    with pytest.raises(RnrLensError, match="holds a run with a different training config"):
        other.open(resume=True)
    other.close()
    (tmp_path / "stray").mkdir()
    (tmp_path / "stray" / "notes.txt").write_text("mine")
    with pytest.raises(RnrLensError, match="is not empty and holds no rnr_lens training run"):
        check_folder(tmp_path / "stray")
    assert check_folder(tmp_path / "new") is None
