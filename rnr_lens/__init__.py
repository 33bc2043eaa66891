"""rnr_lens: is a benchmark gain realized or reachable? Audit a model question by question.

The public API is small; everything else lives in the module named after its concept. Every
public name loads on first use (PEP 562), so ``import rnr_lens.claims``, the CLI's ``--help``
and the values floor load no torch: only what a caller touches is imported.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what a type checker and an IDE see; at run time each name loads on first use
    from rnr_lens import failures, selectors, shards, stats, tasks, verdicts, viz, widgets
    from rnr_lens.audits import audit
    from rnr_lens.ceiling import Ceiling
    from rnr_lens.comparison import Comparison, compare, compare_ceiling
    from rnr_lens.deploy import DeploymentConfig, deployment_for, deployment_for_task
    from rnr_lens.errors import RnrLensError
    from rnr_lens.executors import run_audit
    from rnr_lens.generation import ContinuationScore, Generation
    from rnr_lens.grid import Grid
    from rnr_lens.interventions import Ablation
    from rnr_lens.lens import LensModel
    from rnr_lens.miner import mine
    from rnr_lens.model_cache import DEFAULT_MODEL, KNOWN_MODELS, list_models
    from rnr_lens.models import load_model
    from rnr_lens.probe_specs import ProbeSpec
    from rnr_lens.probes import AblationProbe, Probe, RandomRoutes, RouteSearch, Sampling, parse_probe
    from rnr_lens.prompts import ChatPrompt
    from rnr_lens.reports import Report, rederive, report
    from rnr_lens.results import AuditResult
    from rnr_lens.route_trace import RouteTrace
    from rnr_lens.routes import Route
    from rnr_lens.spot_check import verify
    from rnr_lens.stats import Estimate
    from rnr_lens.sweep_results import SweepResult
    from rnr_lens.sweeps import Bottleneck
    from rnr_lens.tiny import tiny_model
    from rnr_lens.training import TrainConfig, TrainResult, train
    from rnr_lens.verdicts import Verdict

_PUBLIC: dict[str, str] = {
    "failures": "rnr_lens.failures",
    "selectors": "rnr_lens.selectors",
    "shards": "rnr_lens.shards",
    "stats": "rnr_lens.stats",
    "tasks": "rnr_lens.tasks",
    "verdicts": "rnr_lens.verdicts",
    "audit": "rnr_lens.audits",
    "Ceiling": "rnr_lens.ceiling",
    "Comparison": "rnr_lens.comparison",
    "compare": "rnr_lens.comparison",
    "compare_ceiling": "rnr_lens.comparison",
    "DeploymentConfig": "rnr_lens.deploy",
    "deployment_for": "rnr_lens.deploy",
    "deployment_for_task": "rnr_lens.deploy",
    "RnrLensError": "rnr_lens.errors",
    "run_audit": "rnr_lens.executors",
    "ContinuationScore": "rnr_lens.generation",
    "Generation": "rnr_lens.generation",
    "Ablation": "rnr_lens.interventions",
    "LensModel": "rnr_lens.lens",
    "SweepResult": "rnr_lens.sweep_results",
    "mine": "rnr_lens.miner",
    "DEFAULT_MODEL": "rnr_lens.model_cache",
    "KNOWN_MODELS": "rnr_lens.model_cache",
    "list_models": "rnr_lens.model_cache",
    "load_model": "rnr_lens.models",
    "ProbeSpec": "rnr_lens.probe_specs",
    "AblationProbe": "rnr_lens.probes",
    "Probe": "rnr_lens.probes",
    "RandomRoutes": "rnr_lens.probes",
    "RouteSearch": "rnr_lens.probes",
    "Sampling": "rnr_lens.probes",
    "parse_probe": "rnr_lens.probes",
    "ChatPrompt": "rnr_lens.prompts",
    "Grid": "rnr_lens.grid",
    "Report": "rnr_lens.reports",
    "rederive": "rnr_lens.reports",
    "report": "rnr_lens.reports",
    "AuditResult": "rnr_lens.results",
    "RouteTrace": "rnr_lens.route_trace",
    "Route": "rnr_lens.routes",
    "Estimate": "rnr_lens.stats",
    "Bottleneck": "rnr_lens.sweeps",
    "tiny_model": "rnr_lens.tiny",
    "TrainConfig": "rnr_lens.training",
    "TrainResult": "rnr_lens.training",
    "train": "rnr_lens.training",
    "Verdict": "rnr_lens.verdicts",
    "verify": "rnr_lens.spot_check",
    "viz": "rnr_lens.viz",
    "widgets": "rnr_lens.widgets",
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
        globals()[name] = importlib.import_module("rnr_lens.provenance").version()
        return globals()[name]
    where = _PUBLIC.get(name)
    if where is None and not name.startswith("_") and importlib.util.find_spec(f"rnr_lens.{name}") is not None:
        where = f"rnr_lens.{name}"  # any submodule, as `R.store` always was: loaded on first use too
    if where is None:
        raise AttributeError(f"module 'rnr_lens' has no attribute {name!r}")
    module = importlib.import_module(where)
    value = module if where == f"rnr_lens.{name}" else getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_PUBLIC])
