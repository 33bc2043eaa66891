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
import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator, Sequence

import torch
from jaxtyping import Float, Int

from rnr_lens import adapters
from rnr_lens.errors import RnrLensError
from rnr_lens.interventions import Ablation, parse_ablations
from rnr_lens.prompts import PromptLike, render
from rnr_lens.routes import Route, as_route


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
        self._layers_parent, self._layers_attr = adapters.decoder_layers_owner(bridge)
        self._route: Route | None = None
        self._reference_cache: dict[tuple[str, str], list[torch.Tensor]] = {}
        self.fast_path = True
        """Run hook-free forwards on the weight-sharing twin (see :func:`adapters.build_twin`)."""
        self._twin: torch.nn.Module | None = None
        self._twin_error: str | None = None
        self._fingerprint: tuple[tuple, str] | None = None  # (weight versions, hash) of the last fingerprint
        self._own_hooks = 0  # bridge hooks rnr_lens itself attached (ablations inside intervene)

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
            digest.update(memoryview(flat.view(torch.uint8).numpy()))
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
        staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.partial-", dir=folder.parent))
        try:
            self.bridge.original_model.save_pretrained(staging, state_dict=adapters.hf_state_dict(self.bridge), safe_serialization=True)
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
        """Render a prompt; see :func:`rnr_lens.prompts.render`."""
        return render(self.tokenizer, prompt)

    def encode(self, prompt: PromptLike) -> list[int]:
        text, special = self.render(prompt)
        ids = self.tokenizer(text, add_special_tokens=special)["input_ids"]
        if not ids:
            raise RnrLensError("an empty prompt has no tokens to condition on; give every question some text")
        return list(ids)

    def pad(self, sequences: Sequence[Sequence[int]]) -> tuple[Int[torch.Tensor, "batch seq"], Int[torch.Tensor, "batch seq"]]:
        """Left-pad token lists into ``(input_ids, attention_mask)``."""
        width = max(len(s) for s in sequences)
        pad_id = self.tokenizer.pad_token_id
        ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
        mask = torch.zeros((len(sequences), width), dtype=torch.long)
        for row, seq in enumerate(sequences):
            if len(seq):
                ids[row, width - len(seq):] = torch.tensor(list(seq), dtype=torch.long)
                mask[row, width - len(seq):] = 1
        return ids.to(self.device), mask.to(self.device)

    # -- forward ------------------------------------------------------------------------
    @property
    def twin(self) -> torch.nn.Module | None:
        """The plain HF twin sharing this model's weights (None if it cannot be built)."""
        if self._twin is None and self._twin_error is None:
            try:
                self._twin = adapters.build_twin(self.bridge)
            except Exception as exc:  # an architecture the twin cannot mirror: the bridge path is always correct
                self._twin_error = f"{type(exc).__name__}: {exc}"
        return self._twin

    def _bridge_hook_count(self) -> int:
        points = {id(p): p for p in self.bridge._hook_registry.values()}  # aliases share a point
        return sum(len(p.fwd_hooks) + len(p.bwd_hooks) for p in points.values())

    def runner(self) -> torch.nn.Module:
        """The module the next forward runs: the bridge's HF model (its hooks fire), or the
        twin when nobody but rnr_lens' own ablations has hooked the bridge."""
        if self.fast_path and self.twin is not None and self._bridge_hook_count() == self._own_hooks:
            return self.twin
        return self.bridge.original_model

    def forward_tokens(
        self,
        input_ids: Int[torch.Tensor, "batch seq"],
        attention_mask: Int[torch.Tensor, "batch total"] | None = None,
        *,
        position_ids: Int[torch.Tensor, "batch seq"] | None = None,
        cache: adapters.RouteCache | None = None,
        logits_to_keep: int = 0,
        inputs_embeds: Float[torch.Tensor, "batch seq d_model"] | None = None,
    ) -> Float[torch.Tensor, "batch kept vocab"]:
        """One forward pass under the current interventions. ``attention_mask`` spans the cached
        prefix plus ``input_ids``. Runs through the bridge (its components and hooks) whenever a
        hook is attached to it, else on the weight-sharing twin (same weights, same numbers)."""
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        if position_ids is None:
            position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)[:, -input_ids.shape[1]:]
        if cache is not None:
            cache.begin_forward()
        tokens = {"inputs_embeds": inputs_embeds} if inputs_embeds is not None else {"input_ids": input_ids}
        out = self.runner()(
            **tokens,
            attention_mask=attention_mask,
            position_ids=position_ids,
            cache=cache,
            use_cache=cache is not None,
            logits_to_keep=logits_to_keep,
        )
        return out.logits

    def block_modules(self) -> list[torch.nn.Module]:
        """The decoder layers of the module :meth:`runner` returns, in block order."""
        if self.runner() is self.twin:
            return list(self._canonical_twin_layers())
        return list(self.bridge.blocks)

    def residual_stream(
        self, input_ids: Int[torch.Tensor, "batch seq"], attention_mask: Int[torch.Tensor, "batch seq"]
    ) -> list[Float[torch.Tensor, "batch seq d_model"]]:
        """The residual stream entering each block (``hook_resid_pre``) on a clean forward pass."""
        captured: dict[int, torch.Tensor] = {}
        handles = []
        for i, layer in enumerate(self.block_modules()):
            def grab(mod: object, args: tuple, kwargs: dict, i: int = i) -> None:
                captured.setdefault(i, kwargs["hidden_states"] if "hidden_states" in kwargs else args[0])
            handles.append(layer.register_forward_pre_hook(grab, with_kwargs=True))
        try:
            with torch.no_grad():
                self.forward_tokens(input_ids, attention_mask, logits_to_keep=1)
        finally:
            for h in handles:
                h.remove()
        return [captured[i] for i in range(self.n_layers)]

    def new_cache(self) -> adapters.RouteCache:
        """An empty KV cache with one slot per position of the current route."""
        return adapters.RouteCache(len(self.route), config=adapters.hf_config(self.bridge))

    # -- interventions ------------------------------------------------------------------
    @contextlib.contextmanager
    def intervene(
        self,
        route: "Route | str | Sequence[int] | None" = None,
        ablations: Sequence[Ablation | str] = (),
    ) -> Iterator["LensModel"]:
        """Apply a route and ablations to every call inside the block; restore exactly on exit.

        Applies to the plain bridge forward, ``run_with_cache``, :meth:`generate` and
        :meth:`score`. Contexts nest: an inner route replaces the outer one, ablations add up.

        Example:
            >>> with model.intervene(route="30:0-2,4-29", ablations=["mlp12"]):  # doctest: +SKIP
            ...     out = model.generate(["What is 2+3?"], max_new_tokens=8)
        """
        route = as_route(route, self.n_layers)
        abl = parse_ablations(list(ablations))
        handles = []
        twin_handles: list[torch.utils.hooks.RemovableHandle] = []
        previous_route = self._route
        twin = self.twin
        lists = [(self._layers_parent, self._layers_attr, self.bridge.blocks)]
        if twin is not None:
            parent, attr = adapters.decoder_layers_owner(self.bridge, root=twin)
            lists.append((parent, attr, getattr(parent, attr) if previous_route is None else self._twin_blocks))
        saved_lists = [(parent, attr, getattr(parent, attr)) for parent, attr, _ in lists]
        configs = [adapters.text_config(self.bridge)] + ([adapters.text_config(self.bridge, twin)] if twin is not None else [])
        saved_config: list[tuple[Any, str, Any]] = []
        try:
            # Hooks first: mean/resample statistics are taken before the route changes the model.
            for ablation in abl:
                for name, fn in ablation.hooks(self):
                    point = self.bridge.get_hook_point(name)
                    if point is None:
                        raise RnrLensError(f"this model has no hook point {name}; it cannot take ablation {ablation}")
                    handles.append((point, point.add_hook(fn)))
                    self._own_hooks += 1
                if twin is not None:
                    twin_handles.extend(ablation.module_hooks(self, self._canonical_twin_layers()))
            if route is not None:
                for config in configs:
                    for key, value in adapters.route_config_values(config, route.layers).items():
                        saved_config.append((config, key, getattr(config, key, None)))
                        setattr(config, key, value)
                if twin is not None and previous_route is None:
                    self._twin_blocks = getattr(lists[1][0], lists[1][1])
                for parent, attr, blocks in lists:
                    setattr(parent, attr, torch.nn.ModuleList([blocks[i] for i in route.layers]))
                self._route = route
            yield self
        finally:
            for point, handle in reversed(handles):
                handle.hook.remove()
                if handle in point.fwd_hooks:
                    point.fwd_hooks.remove(handle)
                self._own_hooks -= 1
            for handle in twin_handles:
                handle.remove()
            for parent, attr, saved in saved_lists:
                setattr(parent, attr, saved)
            for config, key, value in reversed(saved_config):
                setattr(config, key, value)
            self._route = previous_route

    def _canonical_twin_layers(self) -> torch.nn.ModuleList:
        """The twin's decoder layers in block order (also while a route is in force)."""
        if self._route is not None:
            return self._twin_blocks
        parent, attr = adapters.decoder_layers_owner(self.bridge, root=self.twin)
        return getattr(parent, attr)

    def reference_activations(self, name: str, prompts: Sequence[str]) -> list[Float[torch.Tensor, "pos d_model"]]:
        """Activations at hook ``name`` for each reference prompt (raw text), cached per model."""
        key = (name, hashlib.sha256("\x00".join(prompts).encode()).hexdigest())
        if key in self._reference_cache:
            return self._reference_cache[key]
        acts: list[torch.Tensor] = []
        point = self.bridge.get_hook_point(name)
        captured: dict[str, torch.Tensor] = {}

        def grab(x: torch.Tensor, hook: object) -> None:
            captured["x"] = x.detach()

        handle = point.add_hook(grab)
        try:
            with torch.no_grad():
                for text in prompts:
                    ids = torch.tensor([self.tokenizer(text)["input_ids"]], device=self.device)
                    self.forward_tokens(ids)
                    acts.append(captured["x"][0])
        finally:
            handle.hook.remove()
            point.fwd_hooks.remove(handle)
        self._reference_cache[key] = acts
        return acts

    # -- generation and scoring (see rnr_lens.generation) ----------------------------------
    def generate(self, prompts: Sequence[PromptLike], **kwargs: Any):  # noqa: ANN201
        """Batched generation; see :func:`rnr_lens.generation.generate`."""
        from rnr_lens.generation import generate

        return generate(self, prompts, **kwargs)

    def score(self, prompts: Sequence[PromptLike], continuations: Sequence[str], **kwargs: Any):  # noqa: ANN201
        """Teacher-forced log-probabilities; see :func:`rnr_lens.generation.score`."""
        from rnr_lens.generation import score

        return score(self, prompts, continuations, **kwargs)
