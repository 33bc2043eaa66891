"""rnr_lens: is a benchmark gain realized or reachable? Audit a model question by question.

The public API is small; everything else lives in the module named after its concept, in the
folder of its floor (``core``, ``model``, ``judge``, ``questions``, ``measure``, ``bottleneck``,
``trained_pair``, ``present``, ``grids``, ``cli``: :data:`FOLDERS`, bottom to top). Every public
name loads on first use (PEP 562), so ``import rnr_lens.judge.claims``, the CLI's ``--help`` and
the core and judge folders load no torch: only what a caller touches is imported. Every module
is also an attribute of the package by its own name (``R.viz``, ``R.store``), loaded on first use.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what a type checker and an IDE see; at run time each name loads on first use
    from rnr_lens.bottleneck import failures
    from rnr_lens.bottleneck.miner import mine
    from rnr_lens.bottleneck.sweep_results import SweepResult
    from rnr_lens.core import shards, stats
    from rnr_lens.core.stats import Estimate
    from rnr_lens.errors import RnrLensError
    from rnr_lens.grids.grid import Grid
    from rnr_lens.grids.reports import Report, rederive, report
    from rnr_lens.grids.spot_check import verify
    from rnr_lens.judge import verdicts
    from rnr_lens.judge.ceiling import Ceiling
    from rnr_lens.judge.sweeps import Bottleneck
    from rnr_lens.judge.verdicts import Verdict
    from rnr_lens.measure import selectors
    from rnr_lens.measure.audits import audit
    from rnr_lens.measure.executors import run_audit
    from rnr_lens.measure.probe_specs import ProbeSpec
    from rnr_lens.measure.probes import AblationProbe, Probe, RandomRoutes, RouteSearch, Sampling, parse_probe
    from rnr_lens.measure.results import AuditResult
    from rnr_lens.model.generation import ContinuationScore, Generation
    from rnr_lens.model.interventions import Ablation
    from rnr_lens.model.lens import LensModel
    from rnr_lens.model.model_cache import DEFAULT_MODEL, KNOWN_MODELS, list_models
    from rnr_lens.model.models import load_model
    from rnr_lens.model.prompts import ChatPrompt
    from rnr_lens.model.route_trace import RouteTrace
    from rnr_lens.model.routes import Route
    from rnr_lens.model.tiny import tiny_model
    from rnr_lens.present import viz, widgets
    from rnr_lens.questions import tasks
    from rnr_lens.questions.deploy import DeploymentConfig, deployment_for, deployment_for_task
    from rnr_lens.trained_pair.comparison import Comparison, compare, compare_ceiling
    from rnr_lens.trained_pair.training import TrainConfig, TrainResult, train

FOLDERS = ("core", "model", "judge", "questions", "measure", "bottleneck", "trained_pair", "present", "grids", "cli")
"""The package's concept folders, in import order (a folder imports only those before it, never
one on its own floor: ``model`` and ``judge``, ``bottleneck`` and ``trained_pair`` share one)."""

_PUBLIC: dict[str, str] = {
    "failures": "rnr_lens.bottleneck.failures",
    "selectors": "rnr_lens.measure.selectors",
    "shards": "rnr_lens.core.shards",
    "stats": "rnr_lens.core.stats",
    "tasks": "rnr_lens.questions.tasks",
    "verdicts": "rnr_lens.judge.verdicts",
    "audit": "rnr_lens.measure.audits",
    "Ceiling": "rnr_lens.judge.ceiling",
    "Comparison": "rnr_lens.trained_pair.comparison",
    "compare": "rnr_lens.trained_pair.comparison",
    "compare_ceiling": "rnr_lens.trained_pair.comparison",
    "DeploymentConfig": "rnr_lens.questions.deploy",
    "deployment_for": "rnr_lens.questions.deploy",
    "deployment_for_task": "rnr_lens.questions.deploy",
    "RnrLensError": "rnr_lens.errors",
    "run_audit": "rnr_lens.measure.executors",
    "ContinuationScore": "rnr_lens.model.generation",
    "Generation": "rnr_lens.model.generation",
    "Ablation": "rnr_lens.model.interventions",
    "LensModel": "rnr_lens.model.lens",
    "SweepResult": "rnr_lens.bottleneck.sweep_results",
    "mine": "rnr_lens.bottleneck.miner",
    "DEFAULT_MODEL": "rnr_lens.model.model_cache",
    "KNOWN_MODELS": "rnr_lens.model.model_cache",
    "list_models": "rnr_lens.model.model_cache",
    "load_model": "rnr_lens.model.models",
    "ProbeSpec": "rnr_lens.measure.probe_specs",
    "AblationProbe": "rnr_lens.measure.probes",
    "Probe": "rnr_lens.measure.probes",
    "RandomRoutes": "rnr_lens.measure.probes",
    "RouteSearch": "rnr_lens.measure.probes",
    "Sampling": "rnr_lens.measure.probes",
    "parse_probe": "rnr_lens.measure.probes",
    "ChatPrompt": "rnr_lens.model.prompts",
    "Grid": "rnr_lens.grids.grid",
    "Report": "rnr_lens.grids.reports",
    "rederive": "rnr_lens.grids.reports",
    "report": "rnr_lens.grids.reports",
    "AuditResult": "rnr_lens.measure.results",
    "RouteTrace": "rnr_lens.model.route_trace",
    "Route": "rnr_lens.model.routes",
    "Estimate": "rnr_lens.core.stats",
    "Bottleneck": "rnr_lens.judge.sweeps",
    "tiny_model": "rnr_lens.model.tiny",
    "TrainConfig": "rnr_lens.trained_pair.training",
    "TrainResult": "rnr_lens.trained_pair.training",
    "train": "rnr_lens.trained_pair.training",
    "Verdict": "rnr_lens.judge.verdicts",
    "verify": "rnr_lens.grids.spot_check",
    "viz": "rnr_lens.present.viz",
    "widgets": "rnr_lens.present.widgets",
}
"""Each public name and the module that defines it (a module's own name: the module itself)."""

__all__ = [
    "Ablation",
    "AblationProbe",
    "AuditResult",
    "Bottleneck",
    "Ceiling",
    "Comparison",
    "compare",
    "compare_ceiling",
    "ChatPrompt",
    "ContinuationScore",
    "DEFAULT_MODEL",
    "DeploymentConfig",
    "deployment_for",
    "deployment_for_task",
    "Estimate",
    "Generation",
    "Grid",
    "KNOWN_MODELS",
    "LensModel",
    "Probe",
    "ProbeSpec",
    "RandomRoutes",
    "RnrLensError",
    "Route",
    "RouteSearch",
    "RouteTrace",
    "Sampling",
    "SweepResult",
    "TrainConfig",
    "TrainResult",
    "Verdict",
    "audit",
    "failures",
    "list_models",
    "load_model",
    "mine",
    "parse_probe",
    "Report",
    "rederive",
    "report",
    "run_audit",
    "selectors",
    "shards",
    "stats",
    "tasks",
    "tiny_model",
    "train",
    "verdicts",
    "verify",
    "viz",
    "widgets",
]


def __getattr__(name: str) -> Any:
    """Load public name ``name`` on first use (and keep it, so the next use is a plain lookup);
    ``__version__`` is read from the installed metadata (pyproject.toml is its one owner)."""
    if name == "__version__":
        globals()[name] = importlib.import_module("rnr_lens.core.provenance").version()
        return globals()[name]
    where = _PUBLIC.get(name)
    if where is None and not name.startswith("_"):  # a folder, or any module by its own name, as `R.store` always was
        where = next((m for m in (f"rnr_lens.{name}", *(f"rnr_lens.{f}.{name}" for f in FOLDERS)) if importlib.util.find_spec(m)), None)
    if where is None:
        raise AttributeError(f"module 'rnr_lens' has no attribute {name!r}")
    module = importlib.import_module(where)
    value = module if where.rsplit(".", 1)[-1] == name else getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_PUBLIC])
