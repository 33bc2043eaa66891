"""The training run folder: atomic, resumable checkpoints and the reward history.

``out/`` holds ``run.json`` (what is trained, on what), ``history.jsonl`` (one line per step),
the newest ``step-NNNNNN/`` checkpoint and, when done, ``final/``. Invariant: a folder that
exists is complete (each is written beside its place and renamed), so a crash at any moment
leaves a run that resumes from its last whole checkpoint to the same weights.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from rnr_lens.core.files import acquire_writer_lock, read_json, write_atomic
from rnr_lens.core.provenance import Machine
from rnr_lens.errors import RnrLensError, arg
from rnr_lens.model.lens import LensModel
from rnr_lens.model.model_folder import CHECKPOINT_FILE
from rnr_lens.questions.deploy import DeploymentConfig
from rnr_lens.questions.tasks import BUILTINS
from rnr_lens.questions.tasks.core import Task
from rnr_lens.trained_pair.dapo import TrainConfig

HISTORY_FILE = "history.jsonl"
"""A run folder's training history, one JSON line per step."""


@dataclass
class TrainState:
    """Where a run is: steps done, prompts consumed, one history record per step."""

    step: int = 0
    cursor: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)


def check_folder(folder: Path) -> dict[str, Any] | None:
    """The record (``run.json``) of the training run in ``folder``, or None where a new run may
    start there; one line for a file, a folder holding something else, or a damaged record.
    Needs no model, so the CLI calls it before loading one."""
    if folder.exists() and not folder.is_dir():
        raise RnrLensError(f"{folder} is a file; {arg('out')} takes a run folder (checkpoints, history.jsonl)")
    if not (folder / "run.json").exists():
        if folder.exists() and any(p for p in folder.iterdir() if not p.name.startswith(".")):
            raise RnrLensError(f"{folder} is not empty and holds no rnr_lens training run; choose a new {arg('out')} folder")
        return None
    return read_json(folder / "run.json", "training run record")


def trained_name(base_name: str, step: int, seed: int) -> str:
    """A checkpoint's display name: ``smollm2-135m-instruct+dapo30``, with ``-seed1`` added for a
    seed other than the default 0, so that a grid pairing one base with several seeds names each
    run apart (and the default seed keeps the name every earlier result carries)."""
    return f"{base_name}+dapo{step}" + (f"-seed{seed}" if seed else "")


class RunFolder:
    """``out/``: ``run.json`` (what is trained, on what), ``history.jsonl``, the newest
    ``step-NNNNNN/`` checkpoint and, when done, ``final/``."""

    def __init__(self, folder: Path, model: LensModel, task: Task, config: TrainConfig, deployment: DeploymentConfig) -> None:
        self.folder = folder
        self.model = model
        self.machines: list[dict[str, Any]] = []
        """The machines that trained this run's steps so far (the CPU and thread count move the
        weights), kept in every checkpoint."""
        self._release: Callable[[], None] = lambda: None
        self.meta: dict[str, Any] = {
            "base_model": model.name,
            "base_fingerprint": model.fingerprint(),
            "task": task.name,
            "task_fingerprint": task.fingerprint(),
            "train_config": config.to_dict(),
            "train_config_hash": config.hash(),
            "deployment_hash": deployment.hash(),
            "deployment": deployment.to_dict(),
        }

    def _lock(self) -> None:
        """One training process per run folder (see :func:`rnr_lens.core.files.writer_lock`)."""
        self._release = acquire_writer_lock(self.folder, f"the training run {self.folder}")
        weakref.finalize(self, self._release)

    def close(self) -> None:
        """Let go of the run folder (its writer lock)."""
        self._release()

    def checkpoints(self) -> list[Path]:
        found = [p for p in self.folder.glob("step-*") if (p / CHECKPOINT_FILE).exists()]
        return sorted(found)

    def open(self, resume: bool) -> Path | None:
        """Create the folder, or check that the run in it is this run; return the checkpoint to
        resume from (None: start fresh)."""
        meta_path = self.folder / "run.json"
        stored = check_folder(self.folder)
        if stored is None:
            self.folder.mkdir(parents=True, exist_ok=True)
            self._lock()
            write_atomic(meta_path, json.dumps(self.meta, indent=2))
            return None
        self._lock()
        if not resume:
            raise RnrLensError(
                f"{self.folder} already holds a training run; continue it (without {arg('no_resume')}) or choose a new {arg('out')} folder"
            )
        for key, what in (
            ("base_fingerprint", "base model"),
            ("task_fingerprint", "task"),
            ("train_config_hash", "training config"),
            ("deployment_hash", "deployment config"),
        ):
            if stored.get(key) != self.meta[key]:
                raise RnrLensError(
                    f"{self.folder} holds a run with a different {what}; resume it with the same settings or choose a new {arg('out')} folder"
                )
        self.meta = stored
        if (self.folder / "final" / CHECKPOINT_FILE).exists():
            return self.folder / "final"
        found = self.checkpoints()
        return found[-1] if found else None

    def restore(self, checkpoint: Path, params: dict[str, torch.nn.Parameter], optimizer: torch.optim.Optimizer) -> TrainState:
        from safetensors.torch import load_file

        tensors: dict[str, torch.Tensor] = {}
        for shard in sorted(checkpoint.glob("*.safetensors")):
            tensors.update(load_file(shard))
        with torch.no_grad():
            for name, param in params.items():
                if name not in tensors:
                    raise RnrLensError(f"checkpoint {checkpoint} lacks {name}; it was not written by this run, start a new {arg('out')} folder")
                param.copy_(tensors[name].to(param.dtype))
        info = json.loads((checkpoint / CHECKPOINT_FILE).read_text())
        optimizer.load_state_dict(torch.load(checkpoint / "optimizer.pt", weights_only=True))
        self.meta["final_name"] = info["name"]
        self.machines = list(info.get("machines", []))
        return TrainState(step=info["step"], cursor=info["cursor"], history=info["history"])

    def _machines_so_far(self) -> list[dict[str, Any]]:
        """The machines that trained the run, this one added once (a resumed run may have moved)."""
        here = Machine.here().to_dict()
        if here not in self.machines:
            self.machines.append(here)
        return list(self.machines)

    def write_history(self, history: list[dict[str, Any]]) -> None:
        write_atomic(self.folder / HISTORY_FILE, "".join(json.dumps(r) + "\n" for r in history))

    def save(self, state: TrainState, optimizer: torch.optim.Optimizer, *, final: bool, base_name: str) -> Path:
        info = {
            "name": trained_name(base_name, state.step, int(self.meta["train_config"]["seed"])),
            "base_model": base_name,
            "base_fingerprint": self.meta["base_fingerprint"],
            "step": state.step,
            "cursor": state.cursor,
            "task": self.meta["task"],
            "train_config": self.meta["train_config"],
            "deployment_hash": self.meta["deployment_hash"],
            "history": state.history,
            "machines": self._machines_so_far(),
        }
        target = self.folder / ("final" if final else f"step-{state.step:06d}")
        staging = self.folder / f".{target.name}.partial"
        shutil.rmtree(staging, ignore_errors=True)
        optimizer_bytes = _torch_bytes(optimizer.state_dict())
        self.model.save_pretrained(staging, extra_files={CHECKPOINT_FILE: json.dumps(info, indent=2).encode(), "optimizer.pt": optimizer_bytes})
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)
        for old in self.checkpoints():
            if old != target:
                shutil.rmtree(old, ignore_errors=True)
        return target


def _torch_bytes(obj: Any) -> bytes:

    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def read_history(folder: str | Path) -> list[dict[str, Any]]:
    """The per-step records of the run in ``folder`` (its reward curve)."""
    path = Path(folder) / HISTORY_FILE
    if not path.exists():
        raise RnrLensError(f"{folder} holds no history.jsonl; point at the {arg('out')} folder of a training run")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def training_record(folder: str | Path) -> dict[str, Any] | None:
    """How the checkpoint in ``folder`` was trained, read from its own record (None: not a
    checkpoint written by ``rnr-lens train``): the base model and its fingerprint, the task,
    the steps, the training config and the ``rnr-lens train`` command that gives it (rebuilt
    from the recorded config; the task's size and seed are in its fingerprint, not the command)."""
    path = Path(folder) / CHECKPOINT_FILE
    if not path.is_file():
        return None
    info = json.loads(path.read_text())
    config = TrainConfig(**info["train_config"])
    task = str(info["task"])
    task_arg = task.removesuffix("-train") if task.removesuffix("-train") in BUILTINS else task
    record = {
        "base_model": info["base_model"],
        "base_fingerprint": info["base_fingerprint"],
        "task": task,
        "steps": info["step"],
        "deployment_hash": info["deployment_hash"],
        "train_config": config.to_dict(),
        "command": f"rnr-lens train --model {info['base_model']} --task {task_arg} {config.command_flags()} --out {Path(folder).parent}".replace(
            "  ", " "
        ),
    }
    if "machines" in info:  # checkpoints written before the machines were kept lack it
        record["machines"] = info["machines"]
    return record
