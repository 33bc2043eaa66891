"""A model folder from outside: what transformers may read of it, checked before it reads any.

A Hugging Face folder (a local one, or a hub snapshot once downloaded) is hostile until
:func:`check_model_folder` has passed it, and nothing of it is opened before (issue 73):

- weights only in safetensors, never anything torch would unpickle (a weight index maps only
  to ``.safetensors`` files in the folder);
- every file is a regular file inside the folder: a symbolic link that leaves it (to a private
  file, to ``/dev/zero``), that loops, or that leads nowhere is refused (a hub snapshot's links
  into its own blob store excepted: that is how the hub's cache keeps files);
- every file a load reads besides the weights (:data:`READ_SUFFIXES`) is capped in size
  (:data:`MODEL_FILE_BYTES`) before it is read;
- ``config.json``'s sizes are checked against the weights' own headers before anything is
  allocated (a million layers over the weights of four took 2.4 GB);
- a tokenizer's regular expressions hold no nested or alternating repetition: the tokenizer's
  regex engine (Rust, Oniguruma) backtracks exponentially on one, and no time cap can stop
  native code, so such a tokenizer is refused unless the user opts in.

Example:
    >>> import rnr_lens as R, tempfile, pathlib
    >>> folder = R.tiny_model(n_layers=2).save_pretrained(pathlib.Path(tempfile.mkdtemp()) / "m")
    >>> check_model_folder(folder)  # passes: nothing returned
    >>> (folder / "chat_template.jinja").unlink(); (folder / "chat_template.jinja").symlink_to("/etc/hostname")
    >>> check_model_folder(folder)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    rnr_lens.errors.RnrLensError: .../chat_template.jinja is a symbolic link to a file outside the model folder; ...
"""

from __future__ import annotations

import math
import os
import re
import stat
import struct
from pathlib import Path
from typing import Any

from rnr_lens.core.untrusted import Limit, loads_json, quoted
from rnr_lens.errors import RnrLensError

MODEL_FILE_BYTES = Limit("a model folder's file other than its weights", 40, "RNR_LENS_MAX_MODEL_FILE_MB")
"""Every file of a model folder but its ``.safetensors`` weights: config, tokenizer, chat
template, index, a weight file's header. 1.2 times Gemma 3's tokenizer.json (33 MB), the largest
of any supported model; a crafted 1.5 GB sparse config.json took 2.2 GB to read."""
WEIGHT_SUFFIX = ".safetensors"
READ_SUFFIXES = (".json", ".jinja", ".txt", ".model", ".tiktoken")
"""The files a load reads whole besides the weights (config, tokenizer, chat template, index,
checkpoint record): each is capped by :data:`MODEL_FILE_BYTES`. Others are never read by a load
(a checkpoint's optimizer.pt, a README), so their size is not this check's."""
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt")
"""Files that torch would unpickle: a model folder holding one is refused (its code could run)."""
ALLOW_PICKLES_ENV = "RNR_LENS_ALLOW_PICKLE_FILES"
"""Set to ``1`` to load a folder's safetensors beside pickle files (a Trainer's
``training_args.bin``, a hub clone's ``pytorch_model.bin``): they are never read."""
TRUST_REGEX_ENV = "RNR_LENS_TRUST_TOKENIZER_REGEX"
"""Set to ``1`` to load a tokenizer whose regular expression repeats a repetition."""
CHECKPOINT_FILE = "rnr_lens_checkpoint.json"
"""Written into every checkpoint folder beside its weights: the model's display name and how it
was trained (:mod:`rnr_lens.trained_pair.checkpoints` writes it; its optimizer state, ``optimizer.pt``, is
read weights-only by ``train --resume``, never by a load)."""
_PARAMETER_SLACK = 8
"""How many times more parameters config.json may describe than the weights hold (a format that
packs eight 4-bit weights in one int32 holds an eighth); past it, the config is not the weights'."""
_FIX = "rnr_lens reads weights only from safetensors or GGUF, never unpickles: convert with save_pretrained(safe_serialization=True)"


def check_model_folder(folder: str | os.PathLike[str]) -> None:
    """Refuse, in one line, a model folder transformers should not read (see the module's
    list); pass a folder a ``save_pretrained`` wrote, or the hub's snapshot of one."""
    folder = Path(folder)
    roots = _allowed_roots(folder)
    for path in _entries(folder):
        _check_entry(path, folder, roots)
    _check_weight_files(folder)
    _check_sizes(folder)
    _check_tokenizer_regexes(folder)


def _allowed_roots(folder: Path) -> tuple[Path, ...]:
    """Where a link in ``folder`` may lead: the folder, and for a hub snapshot
    (``models--org--name/snapshots/<revision>``) its repository's blob store."""
    here = folder.resolve()
    if here.parent.name == "snapshots" and here.parent.parent.name.startswith("models--"):
        return here, here.parent.parent / "blobs"
    return (here,)


def _entries(folder: Path) -> list[Path]:
    """Every entry under ``folder`` (links listed, never followed into)."""
    found = []
    for top, dirs, files in os.walk(folder):
        found += [Path(top) / name for name in (*dirs, *files)]
    return found


def _check_entry(path: Path, folder: Path, roots: tuple[Path, ...]) -> None:
    where = path
    if path.is_symlink():
        try:
            target = path.resolve(strict=True)
        except (OSError, RuntimeError):  # a loop (ELOOP; RuntimeError before Python 3.13) or nothing there
            raise RnrLensError(f"{where} is a symbolic link that loops or leads nowhere; replace it with the file itself") from None
        if not any(target.is_relative_to(root) for root in roots):
            raise RnrLensError(
                f"{where} is a symbolic link to a file outside the model folder; rnr_lens reads nothing outside it, so copy the file in"
            )
    info = path.stat()
    if stat.S_ISDIR(info.st_mode):
        return
    if not stat.S_ISREG(info.st_mode):
        raise RnrLensError(f"{where} is not a regular file (a device, a pipe or a socket); a model folder holds files only")
    if path.suffix in READ_SUFFIXES and info.st_size > MODEL_FILE_BYTES.value:
        raise MODEL_FILE_BYTES.refusal(where)


def read_model_file(path: Path) -> str:
    """A model folder's small file (checked by :func:`check_model_folder`), read within
    :data:`MODEL_FILE_BYTES` whatever happened since."""
    with open(path, "rb") as f:
        data = f.read(MODEL_FILE_BYTES.value + 1)
    if len(data) > MODEL_FILE_BYTES.value:
        raise MODEL_FILE_BYTES.refusal(path)
    return data.decode("utf-8", errors="replace")


def _check_weight_files(folder: Path) -> None:
    """Refuse weights that could reach an unpickler: no ``.safetensors`` weights, pickle files
    beside them, or a ``*.index.json`` naming anything but ``.safetensors`` files of the folder
    (transformers follows the index)."""
    own = {"optimizer.pt"} if (folder / CHECKPOINT_FILE).is_file() else set()
    pickles = sorted(p.name for p in folder.iterdir() if p.suffix in PICKLE_SUFFIXES and p.name not in own)
    if pickles and os.environ.get(ALLOW_PICKLES_ENV) != "1":
        raise RnrLensError(
            f"{folder} holds pickle files ({', '.join(pickles[:3])}); {_FIX}, and move them out of the folder "
            f"(or set {ALLOW_PICKLES_ENV}=1 to load the safetensors beside them, which are never unpickled)"
        )
    for index in folder.glob("*.index.json"):
        body = loads_json(read_model_file(index), index)
        named = set(body["weight_map"].values()) if isinstance(body, dict) and isinstance(body.get("weight_map"), dict) else None
        if named is None or not all(isinstance(n, str) and n.endswith(WEIGHT_SUFFIX) and "/" not in n and "\\" not in n for n in named):
            raise RnrLensError(f"{index} does not map the weights to .safetensors files in its folder; {_FIX}")
    if not any(p.stat().st_size > 0 for p in folder.glob(f"*{WEIGHT_SUFFIX}")):
        raise RnrLensError(f"{folder} holds no .safetensors weights; {_FIX}")


def stored_parameters(folder: Path) -> int:
    """How many numbers the folder's safetensors weights hold, from their headers alone."""
    total = 0
    for weights in sorted(folder.glob(f"*{WEIGHT_SUFFIX}")):
        with open(weights, "rb") as f:
            head = f.read(8)
            size = struct.unpack("<Q", head)[0] if len(head) == 8 else -1
            if not 2 <= size <= MODEL_FILE_BYTES.value:
                raise RnrLensError(f"{weights} does not begin with a safetensors header of a sane size; it is truncated or not safetensors")
            raw = f.read(size)
        if len(raw) < size:
            raise RnrLensError(f"{weights} ends before its header does; it is truncated or not safetensors: copy or download it again")
        header = loads_json(raw, f"{weights}'s header")
        if not isinstance(header, dict):
            raise RnrLensError(f"{weights}'s header is not a safetensors header; it is damaged or not safetensors")
        for name, entry in header.items():
            if name == "__metadata__":
                continue
            shape = entry.get("shape") if isinstance(entry, dict) else None
            if not (isinstance(shape, list) and all(isinstance(n, int) and n >= 0 for n in shape)):
                raise RnrLensError(f"{weights}'s header gives {quoted(name)} no shape; it is not a safetensors header")
            total += math.prod(shape)
    return total


_SIZE_FIELDS = {
    "layers": ("num_hidden_layers", "n_layer", "num_layers"),
    "width": ("hidden_size", "n_embd", "d_model"),
    "mlp": ("intermediate_size", "n_inner", "ffn_dim"),
    "vocab": ("vocab_size",),
}


def least_parameters(config: dict[str, Any]) -> int:
    """The fewest numbers a model of this config holds: its token embedding and each block's
    MLP (two matrices; a block's attention where it names no MLP), the text model's for a
    multimodal config; 0 where the config names no sizes.

    Example:
        >>> least_parameters({"num_hidden_layers": 2, "hidden_size": 4, "intermediate_size": 8, "vocab_size": 10})
        168
    """
    text = config.get("text_config")
    if isinstance(text, dict):
        return max(least_parameters(text), least_parameters({k: v for k, v in config.items() if k != "text_config"}))
    size = {}
    for what, keys in _SIZE_FIELDS.items():
        value = next((config[k] for k in keys if k in config), None)
        size[what] = value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
    width = size["width"]
    return size["vocab"] * width + size["layers"] * (2 * width * size["mlp"] if size["mlp"] else width * width)


def _check_sizes(folder: Path) -> None:
    """Refuse a config.json describing far more parameters than the weights hold."""
    path = folder / "config.json"
    if not path.is_file():
        return
    config = loads_json(read_model_file(path), path)
    if not isinstance(config, dict):
        raise RnrLensError(f"{path} is not a mapping; it is not a model's config")
    least, held = least_parameters(config), stored_parameters(folder)
    if least > _PARAMETER_SLACK * held + 10**6:
        raise RnrLensError(
            f"{path} describes a model of at least {least:,} parameters but its weights hold {held:,}; "
            "the config is not the weights' (save both with save_pretrained)"
        )


# ---------------------------------------------------------------------------------------------
# A tokenizer's regular expressions
# ---------------------------------------------------------------------------------------------


def _regexes(value: Any) -> list[str]:
    """Every ``{"Regex": ...}`` pattern in a tokenizer.json (its normalizer, pre-tokenizer, decoder)."""
    found, stack = [], [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            if isinstance(v.get("Regex"), str):
                found.append(v["Regex"])
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return found


_REPEAT = re.compile(r"[*+]|\{\d*,\}|\{\d+,\d+\}")


def repeats_a_repetition(pattern: str) -> bool:
    """Whether ``pattern`` repeats (``*``, ``+``, ``{n,}``, ``{n,m}``) a group that holds a
    repetition or an alternation: the shape that backtracks exponentially (``(a+)+``,
    ``(a|a)*``). Every tokenizer rnr_lens supports has none (GPT-2's, Llama 3's, Qwen 2's).

    Example:
        >>> repeats_a_repetition(r"(a+)+$"), repeats_a_repetition(r" ?\\p{L}+|\\s+(?!\\S)|(?i:'s|'t)")
        (True, False)
    """
    groups: list[bool] = []  # for each open group: whether it holds a repetition or an alternation
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":  # a character class: nothing inside is an operator
            i += 1
            if i < n and pattern[i] == "^":
                i += 1
            if i < n and pattern[i] == "]":
                i += 1
            while i < n and pattern[i] != "]":
                i += 2 if pattern[i] == "\\" else 1
            i += 1
            continue
        if c == "(":
            groups.append(False)
        elif c == ")" and groups:
            risky = groups.pop()
            repeated = _REPEAT.match(pattern, i + 1)
            if risky and repeated:
                return True
            if groups and (risky or repeated):
                groups[-1] = True
        elif c == "|" and groups:
            groups[-1] = True
        elif groups and _REPEAT.match(pattern, i):
            groups[-1] = True
        i += 1
    return False


def _check_tokenizer_regexes(folder: Path) -> None:
    path = folder / "tokenizer.json"
    if not path.is_file() or os.environ.get(TRUST_REGEX_ENV) == "1":
        return
    for pattern in _regexes(loads_json(read_model_file(path), path)):
        if repeats_a_repetition(pattern):
            raise RnrLensError(
                f"{path} splits text with the regular expression {quoted(pattern)}, which repeats a repetition and can take "
                f"exponential time on one question; no supported tokenizer does (set {TRUST_REGEX_ENV}=1 if you trust it)"
            )
