"""Provenance: which code, on which machine, with which weights, produced a report's numbers.

A :class:`Provenance` is recorded while a report runs and written into its ``claims.json``
(and its evidence), so a referee reading a verdict knows what it speaks for: each model's
weights fingerprint (a trained checkpoint's folder and the training command that made it),
the rnr_lens version and commit, the torch / transformers / TransformerLens versions, the
device, dtype and torch threads, the CPU, and each run's start and end (a grid resumed after a
crash is several runs). Invariant: provenance only describes; nothing in it decides a verdict,
and re-deriving a report from its evidence copies it unchanged (the code that re-derives is
compared with it, :func:`code_differences`, and said beside it, never written into it).

Example:
    >>> span = RunSpan.begin()
    >>> span.code.version == Code.here().version
    True
"""

from __future__ import annotations

import datetime as _dt
import importlib.util
import os
import platform
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from importlib import metadata
from pathlib import Path
from typing import Any

_PACKAGES = {
    "torch": "torch",
    "transformers": "transformers",
    "transformer_lens": "transformer-lens",
    "numpy": "numpy",
    "scipy": "scipy",
    "statsmodels": "statsmodels",
    "pandas": "pandas",
}
"""What computes a forward (torch, transformers, TransformerLens) and what computes a claim from
the tries (numpy, scipy, statsmodels, pandas)."""
DISTRIBUTION = "rnr-lens"
"""The name rnr_lens is installed under (pyproject.toml's ``project.name``)."""
_CODE_PATHS = ("rnr_lens", "pyproject.toml")
"""What in a checkout is the code: its other files (results, docs, notebooks) change no number."""


def _now() -> str:
    """Now, to the microsecond: a run is known by its start (:meth:`Provenance.with_run`), and
    two runs can start within one second (a re-grade, then ``--mine-again``, on a fast CPU)."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds")


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def checkout() -> Path | None:
    """The git checkout this package was imported from: the folder holding the ``rnr_lens``
    package, where it holds ``.git`` (None for an installed wheel, even one inside someone
    else's repository). Found from the package, not from this file's place in it, so a module
    moved between the package's folders keeps recording its commit."""
    spec = importlib.util.find_spec("rnr_lens")
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(next(iter(spec.submodule_search_locations))).resolve().parent
    return root if (root / ".git").exists() else None


def version() -> str:
    """rnr_lens' version, as its installed metadata states it (pyproject.toml is its one
    owner); ``"unknown"`` where the package runs uninstalled."""
    return _version(DISTRIBUTION) or "unknown"


def _git(*args: str) -> str | None:
    """``git`` in the checkout this package was imported from (None outside one)."""
    here = checkout()
    if here is None:
        return None
    try:
        out = subprocess.run(["git", "-C", str(here), *args], capture_output=True, text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, else :func:`platform.processor`)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@dataclass(frozen=True)
class Code:
    """The code that ran: rnr_lens' version; where it runs from a git checkout, the commit, the
    hash of its code (the ``rnr_lens`` tree and ``pyproject.toml`` at that commit: commits that
    change only results or docs share it) and whether the code had uncommitted changes; and the
    versions of the libraries that compute a forward and a claim."""

    version: str
    commit: str | None
    dirty: bool | None
    python: str
    libraries: Mapping[str, str | None]
    tree: str | None = None

    @classmethod
    def here(cls) -> Code:
        """The code this process runs."""
        commit = _git("rev-parse", "HEAD")
        status = _git("status", "--porcelain", "--untracked-files=no", "--", *_CODE_PATHS) if commit else None
        trees = [_git("rev-parse", f"HEAD:{p}") for p in _CODE_PATHS] if commit else []
        return cls(
            version(),
            commit,
            None if status is None else bool(status),
            platform.python_version(),
            {name: _version(dist) for name, dist in _PACKAGES.items()},
            "+".join(t[:12] for t in trees if t) if trees and all(trees) else None,
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON record (``tree`` only where known)."""
        out = {"version": self.version, "commit": self.commit, "dirty": self.dirty, "python": self.python, "libraries": dict(self.libraries)}
        if self.tree is not None:
            out["tree"] = self.tree
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Code:
        """The inverse of :meth:`to_dict`."""
        return cls(str(d["version"]), d.get("commit"), d.get("dirty"), str(d["python"]), dict(d["libraries"]), d.get("tree"))


@dataclass(frozen=True)
class Machine:
    """Where it ran: the CPU, the platform, the cores, torch's thread count and the vector
    instructions torch's CPU kernels use (``AVX512``, ``AVX2``, ...; None where not recorded:
    runs before it was). The last two move float sums, and with them trained weights
    (docs/reproducibility.md).

    Both torch facts are read from the torch the process has loaded; a process that loaded none
    (a re-reading of evidence without a model) computed nothing with it and records None (this
    floor never loads torch itself)."""

    cpu: str
    platform: str
    cores: int | None
    torch_threads: int | None
    cpu_capability: str | None = None

    @classmethod
    def here(cls) -> Machine:
        torch = sys.modules.get("torch")
        threads, capability = (torch.get_num_threads(), torch.backends.cpu.get_cpu_capability()) if torch is not None else (None, None)
        return cls(cpu_model(), platform.platform(), os.cpu_count(), threads, capability)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"cpu": self.cpu, "platform": self.platform, "cores": self.cores, "torch_threads": self.torch_threads}
        if self.cpu_capability is not None:  # absent from records made before it was kept, which re-derive byte for byte
            out["cpu_capability"] = self.cpu_capability
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Machine:
        threads = d.get("torch_threads")
        return cls(str(d["cpu"]), str(d["platform"]), d.get("cores"), None if threads is None else int(threads), d.get("cpu_capability"))


@dataclass(frozen=True)
class RunSpan:
    """One run of a report (a grid resumed after a crash has several): its start, its end so
    far (brought up to date after every stage), its code and its machine, and the grid models
    it kept as recorded without their weights (``keep_absent``: their settings were finished
    elsewhere, and this run neither loaded nor audited them)."""

    start: str
    end: str
    code: Code
    machine: Machine
    kept: tuple[str, ...] = ()

    @classmethod
    def begin(cls, kept: Sequence[str] = ()) -> RunSpan:
        now = _now()
        return cls(now, now, Code.here(), Machine.here(), tuple(kept))

    def touched(self) -> RunSpan:
        """This span, ending now; its machine read again where torch was not loaded when the
        span began and is now (a run that loads its model after it starts)."""
        if self.machine.torch_threads is None and "torch" in sys.modules:
            return replace(self, end=_now(), machine=Machine.here())
        return replace(self, end=_now())

    def to_dict(self) -> dict[str, Any]:
        out = {"start": self.start, "end": self.end, "code": self.code.to_dict(), "machine": self.machine.to_dict()}
        if self.kept:  # absent from a run that kept none, as from records made before it was kept
            out["kept"] = list(self.kept)
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RunSpan:
        return cls(str(d["start"]), str(d["end"]), Code.from_dict(d["code"]), Machine.from_dict(d["machine"]), tuple(map(str, d.get("kept", ()))))


@dataclass(frozen=True)
class Weights:
    """One model of a report: its spec, its name, its weights fingerprint (what an audit's id
    is made from), where it ran (device, dtype), and for a checkpoint made by ``rnr-lens
    train`` its folder, the training command and the base it was trained from."""

    spec: str
    name: str
    fingerprint: str
    device: str
    dtype: str
    checkpoint: str | None = None
    training: Mapping[str, Any] | None = None

    @classmethod
    def of(cls, spec: str, model: Any, training: Mapping[str, Any] | None = None) -> Weights:
        """The provenance of ``model`` (a loaded :class:`~rnr_lens.model.lens.LensModel`) loaded from
        ``spec``; ``training``: the checkpoint's own training record, where ``spec`` is a folder
        ``rnr-lens train`` wrote (:func:`rnr_lens.trained_pair.checkpoints.training_record`)."""
        dtype = next(iter(model.bridge.parameters())).dtype
        return cls(
            spec,
            model.name,
            model.fingerprint(),
            str(model.device),
            str(dtype).removeprefix("torch."),
            spec if training is not None else None,
            training,
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"spec": self.spec, "name": self.name, "fingerprint": self.fingerprint, "device": self.device, "dtype": self.dtype}
        if self.checkpoint is not None:
            out["checkpoint"] = self.checkpoint
            out["training"] = dict(self.training or {})
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Weights:
        return cls(str(d["spec"]), str(d["name"]), str(d["fingerprint"]), str(d["device"]), str(d["dtype"]), d.get("checkpoint"), d.get("training"))


@dataclass(frozen=True)
class Provenance:
    """What a report's numbers were computed with: every run of it, and every model's weights."""

    runs: tuple[RunSpan, ...] = ()
    models: tuple[Weights, ...] = field(default_factory=tuple)

    def with_run(self, span: RunSpan) -> Provenance:
        """This provenance with ``span`` as its newest run (replacing a span with its start)."""
        kept = tuple(r for r in self.runs if r.start != span.start)
        return replace(self, runs=(*kept, span))

    def with_model(self, weights: Weights) -> Provenance:
        """This provenance with ``weights`` recorded (once per spec: a resumed run that loads
        other weights under the same spec keeps both, so the mismatch is visible)."""
        if weights in self.models:
            return self
        return replace(self, models=(*self.models, weights))

    def to_dict(self) -> dict[str, Any]:
        return {"runs": [r.to_dict() for r in self.runs], "models": [m.to_dict() for m in self.models]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Provenance:
        return cls(tuple(RunSpan.from_dict(r) for r in d.get("runs", ())), tuple(Weights.from_dict(m) for m in d.get("models", ())))


def code_differences(recorded: Provenance, here: Code | None = None) -> list[str]:
    """How the code ``here`` (default: this process's) differs from the code of each run in
    ``recorded``: one line per difference (empty: the same code re-derives). The code is
    compared by its tree hash where both sides know it (a commit that changed only results or
    docs is the same code), else by commit, else by version; libraries by version; uncommitted
    changes on either side are said."""
    here = here or Code.here()
    lines: list[str] = []
    if here.dirty:
        lines.append("this checkout has uncommitted changes to its code")
    for i, run in enumerate(recorded.runs, 1):
        was = run.code
        label = f"run {i} of {len(recorded.runs)} ({run.start})"
        if was.tree and here.tree:
            if was.tree != here.tree:
                lines.append(f"{label} ran the code of commit {(was.commit or '?')[:12]}; this is the code of commit {(here.commit or '?')[:12]}")
        elif was.commit and here.commit:
            if was.commit != here.commit:
                lines.append(f"{label} ran commit {was.commit[:12]}; this is commit {here.commit[:12]}")
        elif was.version != here.version:
            lines.append(f"{label} ran rnr_lens {was.version}; this is {here.version}")
        else:
            lines.append(f"{label}: the commit is unknown on one side (rnr_lens {was.version} both), so the code may differ")
        if was.dirty:
            lines.append(f"{label} ran with uncommitted changes to its code")
        changed = [
            f"{name} {v} (was {was.libraries.get(name)})" for name, v in here.libraries.items() if name in was.libraries and was.libraries[name] != v
        ]
        if changed:
            lines.append(f"{label} ran other library versions: " + ", ".join(changed))
    return lines
