"""The reuse check: does a reuse of computed prompt states keep every stored bit, here?

A reuse (:mod:`rnr_lens.model.reuse`) moves part of a prompt's computation into another shape: the
shared opening into a one-row forward, a question's identity prefix into fewer rows, a
search candidate's first blocks into an earlier step's batch with another padding. Whether a
row's bits survive that depends on the machine's kernels at the model's shapes, so it is
measured, not assumed: :func:`check` runs a reuse's own path through the real generation code
on fixed prompts (:data:`OPENING` before :data:`EVEN` or :data:`MIXED` questions), in batches
of a few rows and of many, once with the reuse and once without, and compares every
number a try stores from a generation (each token, each step's log-probability and entropy) to
the bit. Any difference, or a reuse the prompts could not exercise, turns it off.

Before that, every reuse needs one property of the machine's kernels at the model's shapes: a
row of a product comes out the same however many rows the product holds, since each reuse
moves a prompt's rows into products of another size. :func:`rows_move_with_batch` measures it
on the model's own block layers over :data:`LADDER` (2 to 4,096 rows); where a row moves, every
reuse is off. An Intel Xeon with AVX-512 and AMX splits SmolLM2's 576-to-576 products into classes (1
row; 2 and 3; 4 and more) whose rows differ in their last bits, while the generations below
came out equal there and a 12-row chat batch did not (issue 58).

Invariant: the check decides from the same code path the run takes; it never changes what a
run computes, only whether a reuse may replace part of it. What it cannot see: a kernel that
changes its rounding only at shapes it never tried (the ladder stops at 4,096 rows, fewer where
:data:`LADDER_FLOPS` stops it on wide layers; the generations' batches span 2 to 16 rows of
about 10 to 20 tokens; the probes' batches hold up to 64 rows of up to a few hundred tokens;
docs/performance.md says what was measured where).

A verdict is remembered in ``$RNR_LENS_CACHE/reuse-checks.json`` under a key of everything the
kernels and the check depend on (:func:`setting_key`: the CPU's model and flags, torch and its
libraries, threads, the kernel libraries' environment variables, device, dtype, the model's
config and the check prompts' tokens, and this code), so a later process on the same machine
and model reads it instead of generating again; any change of those checks again.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import json
import os
import platform
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import torch
from torch import nn

from rnr_lens.core.files import write_atomic
from rnr_lens.core.phases import phase
from rnr_lens.errors import RnrLensError
from rnr_lens.model.adapters import decoder_layers_owner
from rnr_lens.model.generation import Generation, generate
from rnr_lens.model.model_cache import cache_dir
from rnr_lens.model.reuse import ReuseVerdict
from rnr_lens.model.routes import Route

if TYPE_CHECKING:
    from rnr_lens.model.generation import ModelLike

OPENING = "Answer with one number. "
"""What every check prompt opens with: with ``What is`` after it, an opening of at least
:data:`rnr_lens.model.generation.SHARED_PREFIX_MIN` tokens on the tokenizers seen (a chat template's
system prompt and tags stand in this way)."""

EVEN = tuple(f"What is {a} + {b}?" for a, b in ((7, 5), (3, 4), (6, 2), (9, 1), (8, 8), (2, 7), (5, 5), (4, 6), (1, 3)))
"""Questions of one length (single digits), for the shared opening, which runs only where a
batch's prompts are all alike long (:func:`rnr_lens.model.generation._prefill`)."""

MIXED = (
    "What is 7 + 5?",
    "A shop sells 12 pens a day. How many in 9 days?",
    "What is 38 + 68?",
    "Tom has 3 boxes of 14 apples. How many apples?",
    "What is 100 - 37?",
    "What is 6 * 7?",
    "Sara reads 23 pages and then 9 more. How many?",
    "What is 9 - 4?",
)
"""Questions of different lengths, so every batch pads its rows differently (the routes' reuses)."""

NEW_TOKENS = 2
"""Tokens generated per row: the prefill, and a decoding step over the cache it left."""


def _routes(n: int, question: int) -> list[Route]:
    """Four routes of question ``question`` that share blocks before their first edits, which
    fall in different places for different questions."""
    late, middle = n - 1, question % (n - 1)
    return [Route.identity(n), Route.skip(n, late), Route.repeat(n, middle), Route.skip(n, middle)]


def _routed(model: ModelLike, questions: range, step: int | None = None) -> list[Generation]:
    """Each of ``questions`` (of :data:`MIXED`) under its four routes in one batch, or, at a
    search ``step``, under one of them."""
    n = model.n_layers
    rows = [(OPENING + MIXED[q], r) for q in questions for r in (_routes(n, q) if step is None else [_routes(n, q)[(q + step) % 4]])]
    return generate(model, [p for p, _ in rows], route=[r for _, r in rows], max_new_tokens=NEW_TOKENS)


def _search_steps(model: ModelLike) -> list[Generation]:
    """Three steps as the search takes them, in one store: each step's rows continue routes of
    earlier steps (their states taken from the store) in a batch of another size and padding."""
    out: list[Generation] = []
    with model.engine.prefix_states(fresh=True):
        for step, k in enumerate((2, 3, 5)):
            out += _routed(model, range(k), step)
    return out


RUNS: dict[str, tuple[tuple[str, Callable[[ModelLike], list[Generation]]], ...]] = {
    "shared-prefix": (
        ("2 rows", lambda model: generate(model, [OPENING + q for q in EVEN[:2]], max_new_tokens=NEW_TOKENS)),
        (f"{len(EVEN)} rows", lambda model: generate(model, [OPENING + q for q in EVEN], max_new_tokens=NEW_TOKENS)),
    ),
    "shared-identity": (
        ("8 rows", lambda model: _routed(model, range(2))),
        ("16 rows", lambda model: _routed(model, range(2, 6))),
    ),
    "prefix-store": (("3 search steps of 2, 3 and 5 rows", _search_steps),),
}
"""Each reuse's check: its runs, each a label and a call that generates."""


LADDER = (2, 3, 4, 5, 7, 8, 9, 12, 16, 17, 24, 31, 32, 33, 48, 64, 65, 96, 128, 129, 256, 257, 512, 513, 1024, 1025, 2048, 2049, 4096)
"""Rows in one product that :func:`rows_move_with_batch` tries: dense where kernels switch
blocking (small products), then each power of two and the row past it."""

LADDER_FLOPS = 4e10
"""The most floating-point operations the ladder spends on one layer shape; on wide layers it
stops at a lower rung (at 257 rows for a 1536-to-8960 layer, 64 rows for 4096-to-14336)."""


def _block_layers(model: ModelLike) -> list[nn.Module]:
    """One layer of each shape, dtype, kind and bias among the model's blocks' dense products
    (``nn.Linear``, and GPT-2's ``Conv1D``, whose weight is stored transposed; a layer with a
    bias runs another kernel, ``addmm``, than one without). Not read: experts stored as one
    3-D weight, projections of other classes (the forward's reading covers them)."""
    owner, attribute = decoder_layers_owner(model.engine.bridge)
    kinds: dict[tuple[str, tuple[int, ...], torch.dtype, bool], nn.Module] = {}
    for block in getattr(owner, attribute):
        for module in block.modules():
            weight = getattr(module, "weight", None)
            if (isinstance(module, nn.Linear) or type(module).__name__ == "Conv1D") and isinstance(weight, torch.Tensor) and weight.dim() == 2:
                kinds.setdefault((type(module).__name__, tuple(weight.shape), weight.dtype, getattr(module, "bias", None) is None), module)
    return list(kinds.values())


PLACES = ((2, 1), (2, 3), (2, 8), (3, 0), (5, 2), (8, 5), (16, 13))
"""Batches (rows, left pads before the prompt) that :func:`rows_move_with_batch` places one
prompt in, beside the reference: two rows, no pad."""


def _placed(model: ModelLike, prompt: list[int], rows: int, pads: int) -> torch.Tensor:
    """``prompt``'s next-token logits as the first row of a batch of ``rows`` rows whose other
    rows are ``pads`` tokens longer (so ``prompt`` is left-padded by ``pads``)."""
    longer = (prompt * (pads // len(prompt) + 2))[: len(prompt) + pads]
    ids, mask = model.pad([prompt] + [longer] * (rows - 1))
    return model.forward_tokens(ids, mask, logits_to_keep=1)[0, -1]


def rows_move_with_batch(model: ModelLike) -> str | None:
    """Where a row comes out otherwise in another batch, in one phrase; None where it never did.

    Two readings: each of the model's block layers over :data:`LADDER` (the first two rows of a
    product of each size against a product of two rows; random inputs, fixed seed), then the
    whole forward on one prompt placed in each of :data:`PLACES` (its logits against a batch of
    two rows with no pad: attention over pads, norms and the products together)."""
    with torch.no_grad():
        moved = _products_move(model)
        if moved is not None:
            return moved
        prompt = model.encode(OPENING + MIXED[0])
        first = _placed(model, prompt, 2, 0)
        for rows, pads in PLACES:
            if not torch.equal(_placed(model, prompt, rows, pads), first):
                return f"a prompt's logits differ between a batch of 2 rows and one of {rows} rows with {pads} pads before it"
    return None


def _products_move(model: ModelLike) -> str | None:
    """The first of :func:`rows_move_with_batch`'s readings: a block layer's rows across
    :data:`LADDER`."""
    generator = torch.Generator().manual_seed(0)
    for layer in _block_layers(model):
        weight = cast(torch.Tensor, layer.weight)
        d_in, d_out = (int(weight.shape[1]), int(weight.shape[0])) if isinstance(layer, nn.Linear) else (int(weight.shape[0]), int(weight.shape[1]))
        x = torch.randn(LADDER[-1], d_in, generator=generator).to(weight.device, weight.dtype)
        first = layer(x[: LADDER[0]])
        spent = 0.0
        for rows in LADDER[1:]:
            spent += 2.0 * rows * d_in * d_out
            if spent > LADDER_FLOPS:
                break
            if not torch.equal(layer(x[:rows])[: LADDER[0]], first):
                return f"a {d_in}-to-{d_out} block layer's rows differ between products of {LADDER[0]} and {rows} rows"
    return None


def stored_bits(gens: Sequence[Generation]) -> list[tuple[Sequence[float], Sequence[float], Sequence[float]]]:
    """What a try stores from each generation: its tokens, and each step's log-probability and
    entropy."""
    return [(g.token_ids, g.logprobs, g.entropies) for g in gens]


def _first_difference(label: str, with_it: Sequence[Generation], without: Sequence[Generation]) -> str | None:
    """Where two arms' generations first differ, in one phrase; None where every bit agrees."""
    for i, (a, b) in enumerate(zip(stored_bits(with_it), stored_bits(without))):
        for what, x, y in zip(("tokens", "log-probs", "entropies"), a, b, strict=True):
            if x != y:
                step = next((j for j, (u, v) in enumerate(zip(x, y)) if u != v), min(len(x), len(y)))
                got = x[step] if step < len(x) else "(none)"
                want = y[step] if step < len(y) else "(none)"
                return f"{label}: row {i}'s {what} differ at step {step + 1}: {got!r} with it, {want!r} without"
    if len(with_it) != len(without):
        return f"{label}: {len(with_it)} generations with it, {len(without)} without"
    return None


CACHE_FILE = "reuse-checks.json"
"""Remembered verdicts, under :func:`rnr_lens.model.model_cache.cache_dir`."""

MAX_CACHE_BYTES = 1_000_000
"""A larger verdict file is not read (its verdicts are checked again and it is rewritten)."""

MAX_CACHED = 256
"""Verdicts kept; the oldest go first."""

_ENV_PREFIXES = ("MKL_", "OMP_", "KMP_", "DNNL_", "ONEDNN_", "ATEN_", "OPENBLAS_", "TORCH_", "CUDA_", "CUBLAS_", "NVIDIA_TF32")
_CODE = (
    "rnr_lens.model.reuse_check",
    "rnr_lens.model.reuse",
    "rnr_lens.model.generation",
    "rnr_lens.model.engine",
    "rnr_lens.model.adapters",
    "rnr_lens.model.prefix_states",
    "rnr_lens.model.lens",
)
"""The modules a reuse's verdict depends on, named as imported (a module moved between the
package's folders is found where it now is, or its name fails loudly)."""


def _cpu() -> str:
    """The CPU's model name and flags (Linux), or what the platform says."""
    try:
        lines = Path("/proc/cpuinfo").read_text(errors="replace").splitlines()
    except OSError:
        return platform.processor() or platform.machine()
    keep = ("model name", "flags", "vendor_id", "cpu family", "model\t")
    return "\n".join(dict.fromkeys(line for line in lines if line.startswith(keep)))


def setting_key(model: ModelLike, name: str) -> str:
    """What reuse ``name``'s verdict on ``model`` depends on, hashed: the machine's kernels
    (CPU, torch's build and CPU capability, threads, their environment variables, device and
    dtype), the model's shapes (its config) and tokens of the check's prompts, and this code."""
    first = next(model.engine.bridge.original_model.parameters())
    config = {k: v for k, v in model.engine.bridge.original_model.config.to_dict().items() if "name_or_path" not in k and k != "transformers_version"}
    device = str(first.device)
    parts: dict[str, Any] = {
        "reuse": name,
        "code": _code_hashes(),
        "cpu": _cpu(),
        "torch": [torch.__version__, torch.__config__.show(), torch.backends.cpu.get_cpu_capability(), torch.get_num_threads()],
        "cuda": [torch.version.cuda, torch.cuda.get_device_name(first.device)] if first.device.type == "cuda" else None,
        "env": sorted((k, v) for k, v in os.environ.items() if k.startswith(_ENV_PREFIXES)),
        "device": [device, str(first.dtype)],
        "config": config,
        "tokens": [model.encode(OPENING + q) for q in (*EVEN, *MIXED)],
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


@functools.cache
def _code_hashes() -> tuple[str, ...]:
    """The hashes of the code a verdict depends on (:data:`_CODE`), read once per process."""
    return tuple(hashlib.sha256(Path(_source(name)).read_bytes()).hexdigest() for name in _CODE)


def _source(module: str) -> str:
    """The file module ``module`` is loaded from."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise RnrLensError(f"reuse check: module {module} is not found; update reuse_check._CODE to where it moved")
    return spec.origin


def _remembered(path: Path) -> dict[str, dict[str, Any]]:
    """The verdicts remembered in ``path``: only well-formed entries of a file of bounded size;
    nothing where it is missing, too large or damaged (they are then checked again)."""
    try:
        if path.stat().st_size > MAX_CACHE_BYTES:
            return {}
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    found = data.get("verdicts") if isinstance(data, dict) else None
    if not isinstance(found, dict):
        return {}
    return {
        k: v
        for k, v in found.items()
        if isinstance(k, str) and isinstance(v, dict) and isinstance(v.get("on"), bool) and isinstance(v.get("why"), str) and len(v["why"]) < 1000
    }


def remembered_check(model: ModelLike, name: str) -> ReuseVerdict:
    """Reuse ``name``'s verdict on ``model``: remembered from an earlier process with the same
    :func:`setting_key`, or :func:`check` run now and remembered (a cache that cannot be written
    only costs the next process the check again)."""
    path = cache_dir() / CACHE_FILE
    key = setting_key(model, name)
    known = _remembered(path)
    if key in known:
        return ReuseVerdict(name, known[key]["on"], f"{known[key]['why']}; remembered from an earlier check here")
    verdict = check(model, name)
    known.pop(key, None)
    known[key] = {"on": verdict.on, "why": verdict.why}
    # no fault point: a cache, not a result (the point would let the fault campaign's crashes
    # land here instead of in the results they test)
    with contextlib.suppress(OSError, RnrLensError):
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps({"verdicts": dict(list(known.items())[-MAX_CACHED:])}, indent=1), fault_point=False)
    return verdict


_MOVED: dict[str, str | None] = {}
""":func:`rows_move_with_batch`'s reading per model and machine, within this process: every
reuse's check starts from it, and it is one reading of the model's kernels, not of a reuse."""


def _rows_moved(model: ModelLike) -> str | None:
    """:func:`rows_move_with_batch` read once per model and machine (keyed as the remembered
    verdicts are, :func:`setting_key`, with no reuse's name), however many reuses are checked."""
    key = setting_key(model, "rows move with batch")
    if key not in _MOVED:
        _MOVED[key] = rows_move_with_batch(model)
    return _MOVED[key]


def check(model: ModelLike, name: str) -> ReuseVerdict:
    """Try reuse ``name`` on ``model`` with and without, and say whether every bit is kept.

    Example:
        >>> check(model, "prefix-store")  # doctest: +SKIP
        ReuseVerdict(name='prefix-store', on=True, why='39 generations bit-identical with and without it (3 steps of 2, 5 and 8 rows)')
    """
    reuses = model.engine.reuses
    if name != "shared-prefix" and model.n_layers < 2:
        return ReuseVerdict(name, False, "a one-block model has no route prefix to share")
    compared, labels = 0, []
    with phase("reuse-check"), reuses.checking():
        moved = _rows_moved(model)
        if moved is not None:
            return ReuseVerdict(name, False, f"moves bits on this machine: {moved}")
        for label, run in RUNS[name]:
            before = reuses.used[name]
            with reuses.forced(name, True):
                with_it = run(model)
            if reuses.used[name] == before:
                return ReuseVerdict(name, False, f"its check could not exercise it on this model ({label})")
            with reuses.forced(name, False):
                without = run(model)
            differs = _first_difference(label, with_it, without)
            if differs is not None:
                return ReuseVerdict(name, False, f"moves bits on this machine: {differs}")
            compared += len(with_it)
            labels.append(label)
    return ReuseVerdict(name, True, f"{compared} generations bit-identical with and without it ({', '.join(labels)})")
