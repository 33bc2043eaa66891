"""Loading a model: a known offline name, a GGUF file, a Hugging Face folder or hub id.

``load_model(spec)`` accepts

- a name from :data:`~rnr_lens.model.model_cache.KNOWN_MODELS` (``"smollm2-135m-instruct"``, the
  default, or ``"gemma3-270m"``), served from the offline cache (:mod:`rnr_lens.model.model_cache`);
- a local ``.gguf`` file (dequantized and cached the same way);
- a local Hugging Face folder, or a Hugging Face hub id (where the hub is reachable);
- an already built ``TransformerBridge``.

and returns it wrapped in TransformerLens 4.x as a :class:`~rnr_lens.model.lens.LensModel`.
Weights are only ever read from safetensors or GGUF (never unpickled), and
``trust_remote_code`` stays off unless the caller turns it on.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from rnr_lens.core.faults import point
from rnr_lens.errors import RnrLensError, arg

if TYPE_CHECKING:
    from rnr_lens.model.lens import LensModel

from rnr_lens.core.untrusted import loads_json
from rnr_lens.model.model_cache import DEFAULT_MODEL, KNOWN_MODELS, cached_gguf, ensure_cached
from rnr_lens.model.model_folder import CHECKPOINT_FILE, check_model_folder, read_model_file

__all__ = ["DEFAULT_MODEL", "load_model", "load_tokenizer"]

# ---------------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------------


def _placement(device: str | None, device_map: str | dict[str, Any] | None, n_devices: int | None) -> dict[str, Any]:
    """``from_pretrained`` keywords that place the model: one device, or spread over GPUs."""
    if n_devices is not None:
        if n_devices < 1:
            raise RnrLensError(f"n_devices must be at least 1, got {n_devices}")
        if device_map is not None:
            raise RnrLensError("give either device_map or n_devices, not both")
        if not torch.cuda.is_available() or torch.cuda.device_count() < n_devices:
            have = torch.cuda.device_count() if torch.cuda.is_available() else 0
            raise RnrLensError(f"n_devices={n_devices} needs {n_devices} CUDA GPUs, this machine has {have}")
        if n_devices == 1:
            return {"device_map": {"": 0}}
        total = {i: torch.cuda.get_device_properties(i).total_memory for i in range(n_devices)}
        return {"device_map": "auto", "max_memory": {i: int(m * 0.9) for i, m in total.items()}}
    if device_map is not None:
        if device is not None:
            raise RnrLensError("give either device or device_map, not both")
        try:
            import accelerate  # noqa: F401
        except ImportError:
            raise RnrLensError("device_map needs accelerate; pip install accelerate") from None
        return {"device_map": device_map}
    return {}


def _load_hf(
    source: str | Path, *, dtype: torch.dtype, device: str | None, trust_remote_code: bool, placement: dict[str, Any] | None = None
) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kwargs: dict[str, Any] = {"trust_remote_code": trust_remote_code, "local_files_only": True}
    try:
        with _quiet_hub():
            tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
            model = AutoModelForCausalLM.from_pretrained(source, dtype=dtype, use_safetensors=True, **kwargs, **(placement or {}))
    except RnrLensError:
        raise
    except Exception as exc:
        raise _load_error(source, exc, local=True) from exc
    model.eval()
    if device is not None and not placement:
        model.to(device)  # type: ignore[arg-type]  # transformers annotates .to() through a decorator mypy misreads
    return model, tokenizer


def _load_error(source: str | Path, exc: Exception, local: bool) -> RnrLensError:
    """The one-line error for a model transformers could not load."""
    first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
    if local:
        return RnrLensError(
            f"could not load the model in {source} ({type(exc).__name__}: {first}); if it is a cache entry, delete the folder and load again"
        )
    return RnrLensError(
        f"could not load {source!r} from the Hugging Face hub ({type(exc).__name__}: {first}); check the id and your network, or pass a local folder, a .gguf file, or one of: {', '.join(KNOWN_MODELS)}"
    )


def _hub_unreachable(timeout: float = 5.0) -> str | None:
    """Why the Hugging Face hub cannot be reached (None when it can, or when the user chose
    offline mode, in which case only the local cache is read anyway)."""
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return "HF_HUB_OFFLINE is set"
    endpoint = urllib.parse.urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    host, port = endpoint.hostname or "huggingface.co", endpoint.port or (443 if endpoint.scheme == "https" else 80)
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:
        return f"{host}:{port}: {exc.strerror or type(exc).__name__}"
    return None


@contextlib.contextmanager
def _quiet_hub() -> Iterator[None]:
    """Silence huggingface_hub's per-retry warnings (the one-line error says what failed)."""
    logger = logging.getLogger("huggingface_hub")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def wrap_bridge(model: Any, tokenizer: Any, name: str) -> Any:
    """Wrap a loaded HF causal LM in a TransformerLens 4.x TransformerBridge."""
    from transformer_lens.model_bridge.sources._bridge_builder import build_bridge_from_module

    from rnr_lens.model.adapters import supported_architectures

    architecture = (getattr(model.config, "architectures", None) or [type(model).__name__])[0]
    if architecture not in supported_architectures():
        raise RnrLensError(
            f"TransformerLens 4.3 cannot wrap architecture {architecture!r} (model {name}); use a model of a supported architecture such as LlamaForCausalLM, Qwen2ForCausalLM or Gemma3ForCausalLM"
        )
    try:
        bridge = build_bridge_from_module(model, architecture, hf_config=model.config, model_name=name)
    except Exception as exc:
        raise RnrLensError(f"TransformerLens could not wrap {name} ({architecture}): {str(exc).splitlines()[0][:200]}") from exc
    # The bridge gets TransformerLens' own view of the tokenizer (it reloads it with a BOS for
    # its to_tokens conventions); rnr_lens keeps the model's original tokenizer for prompts.
    try:
        bridge.tokenizer = tokenizer
    except Exception:  # an in-memory tokenizer cannot be reloaded by name
        bridge._tokenizer = tokenizer
    return bridge


def _checkpoint_name(folder: Path) -> str | None:
    """The display name an rnr_lens training checkpoint records (e.g. ``smollm2-135m-instruct+dapo40``)."""
    info = folder / CHECKPOINT_FILE
    if not info.is_file():
        return None
    try:
        name = loads_json(read_model_file(info), info)["name"]
    except (RnrLensError, KeyError, TypeError):
        return None
    return name if isinstance(name, str) else None


def _is_hub_id(text: str) -> bool:
    return text.count("/") == 1 and not text.startswith((".", "/", "~")) and not text.endswith(".gguf")


def check_spec(spec: str | os.PathLike[str]) -> None:
    """Refuse a model spec that names nothing :func:`load_model` could load, without loading
    anything: a known name, an existing folder or ``.gguf`` file, or a hub id ``org/name``
    pass (a hub id is only looked up when loaded)."""
    text = os.fspath(spec)
    path = Path(text).expanduser()
    if text in KNOWN_MODELS or _is_hub_id(text):
        return
    if path.exists():
        if path.is_dir():
            check_model_folder(path)  # a grid refuses a folder before hours of work, not when it loads
        return
    if path.suffix == ".gguf":
        raise RnrLensError(f"GGUF file {path} does not exist; check the path")
    raise RnrLensError(
        f"unknown model {text!r}: not a known name ({', '.join(KNOWN_MODELS)}), an existing folder or .gguf file, or a hub id like 'org/name'"
    )


@dataclass(frozen=True)
class Source:
    """Where a model spec's files are: a local folder (the hub's snapshot of a hub id), checked
    by :func:`~rnr_lens.model.model_folder.check_model_folder`; ``offline`` marks the offline cache
    (known names, GGUF files), whose code is never trusted."""

    path: Path
    name: str
    offline: bool


def resolve(spec: str | os.PathLike[str]) -> Source:
    """The files a model spec names, made ready without loading them: a known name is
    fetched into the offline cache, a GGUF file converted (both once); a folder or hub id is
    returned as it is."""
    text = os.fspath(spec)
    check_spec(text)
    path = Path(text).expanduser()
    if text in KNOWN_MODELS:
        return Source(ensure_cached(text), text, offline=True)
    if text.endswith(".gguf") or path.suffix == ".gguf":
        if not path.is_file():
            raise RnrLensError(f"GGUF file {path} does not exist; check the path")
        return Source(cached_gguf(path), path.stem, offline=True)
    if path.suffix == ".safetensors" and path.is_file():
        raise RnrLensError(
            f"{path} is a bare weights file without its config and tokenizer; pass the folder that holds it together with config.json "
            "and the tokenizer files (save_pretrained writes all of them)"
        )
    if path.exists():
        if not path.is_dir():
            raise RnrLensError(f"{path} is neither a Hugging Face model folder nor a .gguf file")
        check_model_folder(path)  # before anything reads the folder, its tokenizer included
        return Source(path, _checkpoint_name(path) or path.name, offline=False)
    return Source(_hub_snapshot(text), text, offline=False)  # a hub id: check_spec let nothing else through


HUB_FILES = ("*.json", "*.safetensors", "*.jinja", "*.txt", "*.model", "*.tiktoken", "*.py")
"""What a hub model's snapshot downloads: its config, tokenizer, chat template, safetensors
weights and code (which runs only with ``trust_remote_code``), never a pickle."""


def _hub_snapshot(repo_id: str) -> Path:
    """The local snapshot of a hub model (downloaded where the hub is reachable, else from the
    local Hugging Face cache), checked as a local folder is (issue 73) before anything reads it."""
    from huggingface_hub import snapshot_download

    unreachable = _hub_unreachable()
    try:
        with _quiet_hub():
            folder = Path(snapshot_download(repo_id, allow_patterns=list(HUB_FILES), local_files_only=unreachable is not None))
    except Exception as exc:
        if unreachable is not None:
            raise RnrLensError(
                f"cannot reach the Hugging Face hub ({unreachable}) and {repo_id!r} is not in the local Hugging Face cache; "
                f"connect, or pass a local folder, a .gguf file, or one of: {', '.join(KNOWN_MODELS)}"
            ) from exc
        raise _load_error(repo_id, exc, local=False) from exc
    check_model_folder(folder)
    return folder


def load_tokenizer(spec: str | os.PathLike[str] | Any, *, trust_remote_code: bool = False) -> Any:
    """A model's tokenizer without its weights (seconds, not a model load): what the CLI and
    a Ray driver read to choose the default deployment (:func:`rnr_lens.questions.deploy.deployment_for`)
    before any worker loads the model. A loaded model gives its own tokenizer."""
    if not isinstance(spec, (str, os.PathLike)):
        return getattr(spec, "tokenizer", None)
    from transformers import AutoTokenizer

    source = resolve(spec)
    kwargs: dict[str, Any] = {"trust_remote_code": trust_remote_code and not source.offline, "local_files_only": True}
    try:
        with _quiet_hub():
            return AutoTokenizer.from_pretrained(source.path, **kwargs)
    except Exception as exc:
        raise _load_error(source.path, exc, local=True) from exc


def load_model(
    spec: str | os.PathLike[str] | Any = DEFAULT_MODEL,
    *,
    dtype: torch.dtype | str = torch.float32,
    device: str | None = None,
    trust_remote_code: bool = False,
    device_map: str | dict[str, Any] | None = None,
    n_devices: int | None = None,
) -> LensModel:
    """Load a model as a :class:`~rnr_lens.model.lens.LensModel`.

    Args:
        spec: A known offline name (see :func:`list_models`), a local ``.gguf`` file, a local
            Hugging Face folder, a hub id, or a ``TransformerBridge``.
        dtype: Weight dtype (``torch.float32`` on CPU; ``"bfloat16"`` suits GPUs).
        device: Where to put the model (default: where it loads, the CPU), e.g. ``"cuda"``.
        trust_remote_code: Allow a hub model's own Python code to run (off by default).
        device_map: Hugging Face/accelerate placement (``"auto"`` spreads a large model over
            every GPU); the model is then wrapped in TransformerLens as placed.
        n_devices: Spread the model over the first ``n_devices`` GPUs (TransformerLens'
            ``n_devices``; accelerate places whole blocks on each).

    Returns:
        The wrapped model.

    Example:
        >>> model = load_model("smollm2-135m-instruct")  # doctest: +SKIP
        >>> model.n_layers  # doctest: +SKIP
        30
    """
    from rnr_lens.model.lens import LensModel

    if isinstance(dtype, str):
        resolved = getattr(torch, dtype, None)
        if not isinstance(resolved, torch.dtype):
            raise RnrLensError(f"unknown dtype {dtype!r}; use float32, bfloat16 or float16")
        dtype = resolved
    if device is not None and device.startswith("cuda") and not torch.cuda.is_available():
        raise RnrLensError(f"device {device!r} asked for, but this machine has no CUDA GPU; leave out {arg('device')} to run on the CPU")
    placement = _placement(device, device_map, n_devices)
    if not isinstance(spec, (str, os.PathLike)):
        from transformer_lens.model_bridge import TransformerBridge

        if isinstance(spec, TransformerBridge):
            return LensModel(spec, name=getattr(spec.cfg, "model_name", None) or "bridge")
        if isinstance(spec, LensModel):
            return spec
        raise RnrLensError(f"load_model needs a name, a path or a TransformerBridge, not {type(spec).__name__}")

    source = resolve(spec)
    point("model:load")  # every check that needs no weights is behind us
    model, tok = _load_hf(source.path, dtype=dtype, device=device, trust_remote_code=trust_remote_code and not source.offline, placement=placement)
    name = source.name
    lens = LensModel(wrap_bridge(model, tok, name), name=name, tokenizer=tok)
    if len({str(d) for d in (getattr(model, "hf_device_map", None) or {}).values()}) > 1:
        # the weight-sharing twin has no accelerate hooks to move activations between devices
        lens.engine.disable_twin("the model is spread over several devices, and the twin has no accelerate hooks to move activations between them")
    return lens
