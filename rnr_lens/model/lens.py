"""LensModel: a TransformerLens bridge with its tokenizer, run under routes and ablations.

The model's standard hook names keep working (``blocks.{i}.hook_mlp_out``,
``blocks.{i}.hook_resid_pre``, ...), so users can add their own hooks to ``model.bridge``
beside ours. Everything rnr_lens changes is scoped by :meth:`LensModel.intervene`::

    with model.intervene(route=Route.skip(model.n_layers, 3), ablations=[Ablation(12)]):
        logits = model.bridge(tokens)          # plain bridge forward, under the route
        _, cache = model.bridge.run_with_cache(tokens)
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import psutil
import torch
from jaxtyping import Float, Int

from rnr_lens.core.faults import point
from rnr_lens.core.files import refused_writes
from rnr_lens.errors import RnrLensError
from rnr_lens.model import adapters, generation, reuse_check, route_trace
from rnr_lens.model.engine import Engine
from rnr_lens.model.generation import ContinuationScore, Generation
from rnr_lens.model.interventions import Ablation, parse_ablations
from rnr_lens.model.prompts import PromptLike, render
from rnr_lens.model.route_trace import RouteTrace
from rnr_lens.model.routes import Route, as_route

MAX_AUTO_BATCH = 64  # rows per forward when the batch size is chosen from the machine's memory
CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC_CGROUP = Path("/proc/self/cgroup")


@functools.cache
def machine_memory() -> int:
    """The memory this machine gives a process, in bytes: its RAM, or the lowest memory limit
    of its cgroup and the cgroups above it where lower (cgroup v2's ``memory.max``, v1's
    ``memory.limit_in_bytes``; ``max``, an unreadable or absent file: no limit). Read once per
    process: a property of the machine, not of the moment.

    :meth:`LensModel.auto_batch_size` plans from it, never from the memory free at the moment: a
    row's last bits depend on the rows beside it (docs/performance.md), so batches that followed
    the free memory would let one configuration store other tries whenever other work ran beside
    it, and a resume batch otherwise than the run it continues.
    """
    limit = psutil.virtual_memory().total
    for path in _cgroup_limit_files():
        with contextlib.suppress(OSError, ValueError):
            limit = min(limit, int(path.read_text().strip()))
    return limit


def _cgroup_limit_files() -> Iterator[Path]:
    """The memory-limit files of this process's cgroups and every cgroup above them."""
    try:
        lines = PROC_CGROUP.read_text().splitlines()
    except OSError:
        return
    for line in lines:
        fields = line.split(":", 2)  # hierarchy id : controllers : the cgroup's path
        if len(fields) != 3:
            continue
        _, controllers, own = fields
        if controllers == "":
            base, name = CGROUP_ROOT, "memory.max"
        elif "memory" in controllers.split(","):
            base, name = CGROUP_ROOT / "memory", "memory.limit_in_bytes"
        else:
            continue
        where = PurePosixPath("/", own)
        for group in (where, *where.parents):
            yield base / group.relative_to("/") / name


class LensModel:
    """A language model wrapped for route and ablation experiments.

    Attributes:
        bridge: The TransformerLens 4.x ``TransformerBridge``.
        tokenizer: Its Hugging Face tokenizer (left padding).
        name: A short name for tables and the run store.
    """

    def __init__(self, bridge: Any, name: str, tokenizer: Any | None = None) -> None:
        self.bridge = bridge
        self.name = name
        self.tokenizer = tokenizer if tokenizer is not None else bridge.tokenizer
        if self.tokenizer is None:
            raise RnrLensError(f"model {name} has no tokenizer; build the bridge with tokenizer=")
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        adapters.install_compat_shims(bridge)
        bridge.eval()
        self.engine = Engine(bridge)
        """Which graph runs and where interventions attach (:class:`rnr_lens.model.engine.Engine`)."""
        self.engine.reuses.check = lambda name: reuse_check.remembered_check(self, name)
        self._route: Route | None = None
        self._reference_cache: dict[tuple[str, str, tuple[int, ...]], list[torch.Tensor]] = {}
        self._fingerprint: tuple[tuple, str] | None = None  # (weight versions, hash) of the last fingerprint

    # -- basic facts --------------------------------------------------------------------
    @property
    def n_layers(self) -> int:
        return len(self.bridge.blocks)

    @property
    def device(self) -> torch.device:
        return next(self.bridge.original_model.parameters()).device

    @property
    def chat_template(self) -> str | None:
        return getattr(self.tokenizer, "chat_template", None)

    @property
    def route(self) -> Route:
        """The route currently in force (identity outside :meth:`intervene`)."""
        return self._route or Route.identity(self.n_layers)

    @property
    def eos_token_ids(self) -> set[int]:
        ids: set[int] = set()
        for source in (self.tokenizer.eos_token_id, getattr(self.bridge.original_model.generation_config, "eos_token_id", None)):
            if isinstance(source, int):
                ids.add(source)
            elif isinstance(source, (list, tuple)):
                ids.update(int(i) for i in source)
        return ids

    @property
    def context_length(self) -> int | None:
        """The most positions the model attends over (``max_position_embeddings``), if known."""
        value = getattr(adapters.text_config(self.bridge), "max_position_embeddings", None)
        return int(value) if isinstance(value, int) and value > 0 else None

    def fingerprint(self) -> str:
        """A short hash of every byte of every weight (identifies a checkpoint in the run store).

        Every element counts: a model that differs in one weight gets another fingerprint, so
        a ``--resume`` can never mix results of two checkpoints (sha256 streams about 1.8 GB/s
        here, a third of a second for a 135M model in float32).
        """
        weights = sorted(adapters.hf_state_dict(self.bridge).items())
        # hashed again only when a weight changed: an in-place update (an optimizer step, a
        # load) bumps the tensor's version counter; a replaced tensor has another address
        key = tuple((name, t.data_ptr(), t._version) for name, t in weights)
        if self._fingerprint is not None and self._fingerprint[0] == key:
            return self._fingerprint[1]
        digest = hashlib.sha256()
        for name, tensor in weights:
            flat = tensor.detach().contiguous().cpu().reshape(-1)
            digest.update(f"{name}:{flat.dtype}:{tuple(tensor.shape)}".encode())
            digest.update(flat.view(torch.uint8).numpy().tobytes())
        self._fingerprint = (key, digest.hexdigest()[:16])
        return self._fingerprint[1]

    def save_pretrained(self, folder: str | Path, extra_files: dict[str, bytes] | None = None) -> Path:
        """Save weights (safetensors), config and tokenizer so ``load_model(folder)`` reloads them.

        The folder appears only once complete (written beside it, then renamed), together with
        any ``extra_files`` (name -> contents), such as a trainer's state.
        """
        folder = Path(folder)
        if folder.exists() and any(folder.iterdir()):
            raise RnrLensError(f"{folder} already exists and is not empty; choose a new folder for the checkpoint")
        folder.parent.mkdir(parents=True, exist_ok=True)
        need = sum(p.numel() * p.element_size() for p in self.bridge.original_model.parameters()) + sum(map(len, (extra_files or {}).values()))
        with refused_writes(folder, need=need):
            return self._save_whole(folder, extra_files)

    def _save_whole(self, folder: Path, extra_files: dict[str, bytes] | None) -> Path:
        staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.partial-", dir=folder.parent))
        try:
            self.bridge.original_model.save_pretrained(staging, state_dict=adapters.hf_state_dict(self.bridge), safe_serialization=True)
            point("save:weights")  # the weights written, not the tokenizer
            self.tokenizer.save_pretrained(staging)
            for name, data in (extra_files or {}).items():
                (staging / name).write_bytes(data)
            if folder.exists():
                folder.rmdir()
            os.replace(staging, folder)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return folder

    def __repr__(self) -> str:
        return f"LensModel({self.name!r}, n_layers={self.n_layers})"

    # -- text ---------------------------------------------------------------------------
    def render(self, prompt: PromptLike) -> tuple[str, bool]:
        """Render a prompt; see :func:`rnr_lens.model.prompts.render`."""
        return render(self.tokenizer, prompt)

    def encode(self, prompt: PromptLike) -> list[int]:
        text, special = self.render(prompt)
        ids = self.tokenizer(text, add_special_tokens=special)["input_ids"]
        if not ids:
            raise RnrLensError("an empty prompt has no tokens to condition on; give every question some text")
        return list(ids)

    def pad(self, sequences: Sequence[Sequence[int]]) -> tuple[Int[torch.Tensor, "batch pos"], Int[torch.Tensor, "batch pos"]]:
        """Left-pad token lists into ``(input_ids, attention_mask)``."""
        width = max(len(s) for s in sequences)
        pad_id = self.tokenizer.pad_token_id
        ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
        mask = torch.zeros((len(sequences), width), dtype=torch.long)
        for row, seq in enumerate(sequences):
            if len(seq):
                ids[row, width - len(seq) :] = torch.tensor(list(seq), dtype=torch.long)
                mask[row, width - len(seq) :] = 1
        return ids.to(self.device), mask.to(self.device)

    # -- forward ------------------------------------------------------------------------
    def forward_tokens(
        self,
        input_ids: Int[torch.Tensor, "batch pos"],
        attention_mask: Int[torch.Tensor, "batch total"] | None = None,
        *,
        position_ids: Int[torch.Tensor, "batch pos"] | None = None,
        cache: adapters.RouteCache | None = None,
        logits_to_keep: int = 0,
        inputs_embeds: Float[torch.Tensor, "batch pos d_model"] | None = None,
    ) -> Float[torch.Tensor, "batch kept d_vocab"]:
        """One forward pass under the current interventions. ``attention_mask`` spans the cached
        prefix plus ``input_ids``. The engine picks the graph (:meth:`Engine.path`): the bridge
        whenever a TransformerLens hook is attached to it, else the weight-sharing twin (same
        weights, same numbers)."""
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        if position_ids is None:
            position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)[:, -input_ids.shape[1] :]
        if cache is not None:
            cache.begin_forward()
        tokens = {"inputs_embeds": inputs_embeds} if inputs_embeds is not None else {"input_ids": input_ids}
        out = self.engine.module()(
            **tokens,
            attention_mask=attention_mask,
            position_ids=position_ids,
            cache=cache,
            use_cache=cache is not None,
            logits_to_keep=logits_to_keep,
        )
        return out.logits

    def residual_stream(
        self, input_ids: Int[torch.Tensor, "batch pos"], attention_mask: Int[torch.Tensor, "batch pos"] | None = None
    ) -> list[Float[torch.Tensor, "batch pos d_model"]]:
        """The residual stream entering each block (``hook_resid_pre``), one forward under the
        ablations in force (inside :meth:`intervene`; none outside it). ``attention_mask``
        defaults to every position real (a batch without padding). Under the identity route
        only, where each block runs once: under another route, :meth:`route_trace` records
        every pass by step."""
        if not self.route.is_identity:
            raise RnrLensError(
                f"residual_stream reads one pass per block, and route {self.route} skips or repeats blocks; use model.route_trace(ids) for every pass"
            )
        # not route_trace: it also keeps every block's output and copies each tensor, twice the
        # memory of the miner's screen, which reads only these inputs over a whole failure set
        captured: dict[int, torch.Tensor] = {}

        def grab(i: int) -> Callable[[torch.Tensor], None]:
            return lambda x: None if i in captured else captured.__setitem__(i, x)

        handles = [self.engine.block_input(i).read(grab(i)) for i in range(self.n_layers)]
        try:
            with torch.no_grad():
                self.forward_tokens(input_ids, attention_mask, logits_to_keep=1)
        finally:
            for h in handles:
                h.remove()
        return [captured[i] for i in range(self.n_layers)]

    def route_trace(self, input_ids: Int[torch.Tensor, "batch pos"], attention_mask: Int[torch.Tensor, "batch pos"] | None = None) -> RouteTrace:
        """One forward under the current route and interventions, with the residual stream
        around every pass of every block recorded by route step, a repeated block's passes
        each their own (:class:`~rnr_lens.model.route_trace.RouteTrace`)."""
        return route_trace.trace(self, input_ids, attention_mask)

    def auto_batch_size(self, seq_len: int) -> int:
        """A batch size whose KV cache (one slot per route position) and activations for
        ``seq_len`` positions fit in a quarter of the machine's memory (:func:`machine_memory`;
        at most :data:`MAX_AUTO_BATCH`): a function of the model, the length and the machine,
        so the same configuration batches alike however busy the machine is."""
        cfg = self.bridge.cfg
        n_kv = getattr(cfg, "n_key_value_heads", None) or cfg.n_heads
        bytes_per = torch.finfo(next(self.bridge.original_model.parameters()).dtype).bits // 8
        kv = 2 * len(self.route) * n_kv * cfg.d_head * seq_len * bytes_per
        acts = seq_len * (cfg.n_heads * seq_len + 4 * getattr(cfg, "d_mlp", 4 * cfg.d_model)) * bytes_per
        budget = machine_memory() // 4
        return int(max(1, min(MAX_AUTO_BATCH, budget // max(1, kv + acts))))

    def new_cache(self) -> adapters.RouteCache:
        """An empty KV cache with one slot per position of the current route."""
        return self.engine.new_cache(len(self.route))

    # -- interventions ------------------------------------------------------------------
    @contextlib.contextmanager
    def intervene(
        self,
        route: Route | str | Sequence[int] | None = None,
        ablations: Sequence[Ablation | str] = (),
    ) -> Iterator[LensModel]:
        """Apply a route and ablations to every call inside the block; restore exactly on exit.

        Applies to the plain bridge forward, ``run_with_cache``, :meth:`generate` and
        :meth:`score`. Contexts nest: an inner route replaces the outer one, ablations add up.

        Example:
            >>> with model.intervene(route="30:0-2,4-29", ablations=["mlp12"]):  # doctest: +SKIP
            ...     out = model.generate(["What is 2+3?"], max_new_tokens=8)
        """
        route = as_route(route, self.n_layers)
        with contextlib.ExitStack() as undo:  # unwinds in reverse, also on an exception
            undo.callback(setattr, self, "_route", self._route)
            # Ablations first: mean/resample statistics are taken before the route applies.
            for ablation in parse_ablations(list(ablations)):
                ablation.check(self.n_layers)
                patch = ablation.patch(ablation.replacement(self.reference_activations))
                for handle in self.engine.patch(ablation.layer, ablation.component, patch):
                    undo.callback(handle.remove)
            if route is not None:
                undo.enter_context(self.engine.routed(route.layers))
                self._route = route
            yield self

    def replacement(self, ablation: Ablation) -> Callable[[torch.Tensor], torch.Tensor]:
        """What ``ablation`` writes in place of its component's output on this model."""
        return ablation.replacement(self.reference_activations)

    def reference_activations(self, name: str, prompts: Sequence[str]) -> list[Float[torch.Tensor, "pos d_model"]]:
        """Activations at hook ``name`` for each reference prompt (raw text), on the clean
        model; cached per prompt set and checkpoint (a weight update invalidates them)."""
        key = (name, hashlib.sha256("\x00".join(prompts).encode()).hexdigest(), self.engine.weights_version())
        if key in self._reference_cache:
            return self._reference_cache[key]
        acts: list[torch.Tensor] = []
        captured: dict[str, torch.Tensor] = {}

        def grab(x: torch.Tensor, hook: object) -> None:
            captured["x"] = x.detach()

        with torch.no_grad(), self.bridge.hooks(fwd_hooks=[(name, grab)]):
            for text in prompts:
                ids = torch.tensor([self.tokenizer(text)["input_ids"]], device=self.device)
                self.forward_tokens(ids)
                acts.append(captured["x"][0])
        self._reference_cache[key] = acts
        return acts

    # -- generation and scoring (see rnr_lens.model.generation) ----------------------------------
    def generate(self, prompts: Sequence[PromptLike], **kwargs: Any) -> list[Generation]:
        """Batched generation; see :func:`rnr_lens.model.generation.generate`."""
        return generation.generate(self, prompts, **kwargs)

    def score(self, prompts: Sequence[PromptLike], continuations: Sequence[str], **kwargs: Any) -> list[ContinuationScore]:
        """Teacher-forced log-probabilities; see :func:`rnr_lens.model.generation.score`."""
        return generation.score(self, prompts, continuations, **kwargs)
