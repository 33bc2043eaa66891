"""rnr_lens: is a benchmark gain realized or reachable? Audit a model question by question.

The public API is small; everything else lives in the module named after its concept.
"""

from rnr_lens.errors import RnrLensError
from rnr_lens.generation import ContinuationScore, Generation
from rnr_lens.interventions import Ablation
from rnr_lens.lens import LensModel
from rnr_lens.models import DEFAULT_MODEL, KNOWN_MODELS, list_models, load_model, tiny_model
from rnr_lens.prompts import ChatPrompt
from rnr_lens.routes import Route

__all__ = [
    "Ablation",
    "ChatPrompt",
    "ContinuationScore",
    "DEFAULT_MODEL",
    "Generation",
    "KNOWN_MODELS",
    "LensModel",
    "Route",
    "RnrLensError",
    "list_models",
    "load_model",
    "tiny_model",
]
__version__ = "0.1.0"
