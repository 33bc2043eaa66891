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

    def fingerprint(self) -> str:
        """A short hash of the weights (identifies a checkpoint in the run store)."""
        digest = hashlib.sha256()
        for name, tensor in sorted(adapters.hf_state_dict(self.bridge).items()):
            digest.update(name.encode())
            flat = tensor.detach().flatten()
            digest.update(flat[:: max(1, flat.numel() // 4096)].float().cpu().numpy().tobytes())
        return digest.hexdigest()[:16]

    def save_pretrained(self, folder: str | Path) -> Path:
        """Save weights (safetensors), config and tokenizer so ``load_model(folder)`` reloads them.

        The folder appears only once complete (written beside it, then renamed).
        """
        folder = Path(folder)
        if folder.exists() and any(folder.iterdir()):
            raise RnrLensError(f"{folder} already exists and is not empty; choose a new folder for the checkpoint")
        folder.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.partial-", dir=folder.parent))
        try:
            self.bridge.original_model.save_pretrained(staging, state_dict=adapters.hf_state_dict(self.bridge), safe_serialization=True)
            self.tokenizer.save_pretrained(staging)
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
    def forward_tokens(
        self,
        input_ids: Int[torch.Tensor, "batch seq"],
        attention_mask: Int[torch.Tensor, "batch total"] | None = None,
        *,
        position_ids: Int[torch.Tensor, "batch seq"] | None = None,
        cache: adapters.RouteCache | None = None,
        logits_to_keep: int = 0,
    ) -> Float[torch.Tensor, "batch kept vocab"]:
        """One forward pass under the current interventions (the HF forward, through the bridge's
        components and hooks). ``attention_mask`` spans the cached prefix plus ``input_ids``."""
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        if position_ids is None:
            position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)[:, -input_ids.shape[1]:]
        if cache is not None:
            cache.begin_forward()
        out = self.bridge.original_model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            cache=cache,
            use_cache=cache is not None,
            logits_to_keep=logits_to_keep,
        )
        return out.logits

    def new_cache(self) -> adapters.RouteCache:
        """An empty KV cache with one slot per position of the current route."""
        return adapters.RouteCache(len(self.route), config=adapters.hf_config(self.bridge))

    def logits(self, prompts: Sequence[PromptLike], **intervention: Any) -> list[Float[torch.Tensor, "seq vocab"]]:
        """Per-prompt logits (padding removed) under an optional route/ablations."""
        seqs = [self.encode(p) for p in prompts]
        ids, mask = self.pad(seqs)
        with self.intervene(**intervention), torch.no_grad():
            out = self.forward_tokens(ids, mask)
        return [out[i, out.shape[1] - len(s):] for i, s in enumerate(seqs)]

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
        previous_route = self._route
        saved_layers = getattr(self._layers_parent, self._layers_attr)
        config = adapters.text_config(self.bridge)
        saved_config: dict[str, Any] = {}
        try:
            # Hooks first: mean/resample statistics are taken before the route changes the model.
            for ablation in abl:
                for name, fn in ablation.hooks(self):
                    point = self.bridge.get_hook_point(name)
                    if point is None:
                        raise RnrLensError(f"this model has no hook point {name}; it cannot take ablation {ablation}")
                    handles.append((point, point.add_hook(fn)))
            if route is not None:
                for key, value in adapters.route_config_values(config, route.layers).items():
                    saved_config[key] = getattr(config, key, None)
                    setattr(config, key, value)
                blocks = self.bridge.blocks
                setattr(self._layers_parent, self._layers_attr, torch.nn.ModuleList([blocks[i] for i in route.layers]))
                self._route = route
            yield self
        finally:
            for point, handle in reversed(handles):
                handle.hook.remove()
                if handle in point.fwd_hooks:
                    point.fwd_hooks.remove(handle)
            setattr(self._layers_parent, self._layers_attr, saved_layers)
            for key, value in saved_config.items():
                setattr(config, key, value)
            self._route = previous_route

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
