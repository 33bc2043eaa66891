"""rnr_lens: is a benchmark gain realized or reachable? Audit a model question by question.

The public API is small; everything else lives in the module named after its concept.
``viz`` and ``widgets`` load on first use (they pull in plotly and ipywidgets).
"""

from typing import Any

from rnr_lens import failures, selectors, shards, stats, tasks, verdicts
from rnr_lens.audits import audit
from rnr_lens.ceiling import Ceiling
from rnr_lens.comparison import Comparison, compare, compare_ceiling
from rnr_lens.deploy import DeploymentConfig, deployment_for, deployment_for_task
from rnr_lens.errors import RnrLensError
from rnr_lens.executors import run_audit
from rnr_lens.generation import ContinuationScore, Generation
from rnr_lens.interventions import Ablation
from rnr_lens.lens import LensModel
from rnr_lens.miner import SweepResult, mine
from rnr_lens.model_cache import DEFAULT_MODEL, KNOWN_MODELS, list_models
from rnr_lens.models import load_model
from rnr_lens.probe_specs import ProbeSpec
from rnr_lens.probes import AblationProbe, Probe, RandomRoutes, RouteSearch, Sampling, parse_probe
from rnr_lens.prompts import ChatPrompt
from rnr_lens.reports import Grid, Report, rederive, report
from rnr_lens.results import AuditResult
from rnr_lens.route_trace import RouteTrace
from rnr_lens.routes import Route
from rnr_lens.stats import Estimate
from rnr_lens.sweeps import Bottleneck
from rnr_lens.tiny import tiny_model
from rnr_lens.training import TrainConfig, TrainResult, train
from rnr_lens.verdicts import Verdict

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
    "viz",
    "widgets",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name in ("viz", "widgets"):
        import importlib

        return importlib.import_module(f"rnr_lens.{name}")
    raise AttributeError(f"module 'rnr_lens' has no attribute {name!r}")
