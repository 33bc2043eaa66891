"""Ablations and scoped interventions, expressed as TransformerLens hooks.

An :class:`Ablation` silences one component of one block:

- ``component``: ``"mlp"`` (hook ``blocks.{i}.hook_mlp_out``), ``"attn"``
  (``blocks.{i}.hook_attn_out``) or ``"block"`` (the block's whole update,
  ``hook_resid_post - hook_resid_pre``);
- ``kind``: ``"zero"``; ``"mean"`` (the component's mean output over a reference set of
  prompts, every position of every prompt, computed once per model and cached); or
  ``"resample"`` (the component's output on a donor prompt, aligned to the end of the prompt;
  positions before the donor's start take its first position, and generated tokens take its
  last prompt position).

Ablations are applied by :meth:`rnr_lens.lens.LensModel.intervene`, together with a route,
and compose with any hooks the user adds to ``model.bridge``. Under a route that repeats a
block, the ablation applies at every visit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import torch
from jaxtyping import Float

from rnr_lens.errors import RnrLensError

if TYPE_CHECKING:
    from rnr_lens.lens import LensModel

COMPONENTS = ("mlp", "attn", "block")
KINDS = ("zero", "mean", "resample")

HookFn = Callable[..., torch.Tensor | None]


@dataclass(frozen=True)
class Ablation:
    """Silence ``component`` of block ``layer``.

    Args:
        layer: Block index (as in the identity route).
        component: ``"mlp"``, ``"attn"`` or ``"block"``.
        kind: ``"zero"``, ``"mean"`` or ``"resample"``.
        reference: Prompts (rendered text) for ``mean``; the donor prompt (first entry) for
            ``resample``.

    Example:
        >>> str(Ablation(12))
        'mlp12:zero'
    """

    layer: int
    component: str = "mlp"
    kind: str = "zero"
    reference: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.component not in COMPONENTS:
            raise RnrLensError(f"unknown ablation component {self.component!r}; use one of {', '.join(COMPONENTS)}")
        if self.kind not in KINDS:
            raise RnrLensError(f"unknown ablation kind {self.kind!r}; use one of {', '.join(KINDS)}")
        if self.kind != "zero" and not self.reference:
            raise RnrLensError(f"a {self.kind} ablation needs reference prompts (reference=(...)) to take its activations from")
        object.__setattr__(self, "reference", tuple(self.reference))

    def __str__(self) -> str:
        return f"{self.component}{self.layer}:{self.kind}"

    @classmethod
    def parse(cls, text: str) -> "Ablation":
        """Parse ``'mlp12'`` or ``'mlp12:zero'`` (mean and resample need reference prompts, so
        they are built in Python)."""
        name, _, kind = text.partition(":")
        for comp in COMPONENTS:
            if name.startswith(comp) and name[len(comp):].isdigit():
                return cls(int(name[len(comp):]), comp, kind or "zero")
        raise RnrLensError(f"cannot parse ablation {text!r}; write it like 'mlp12' or 'attn3:zero'")

    def hook_names(self) -> tuple[str, ...]:
        if self.component == "block":
            return (f"blocks.{self.layer}.hook_resid_pre", f"blocks.{self.layer}.hook_resid_post")
        return (f"blocks.{self.layer}.hook_{self.component}_out",)

    def hooks(self, model: "LensModel") -> list[tuple[str, HookFn]]:
        """The ``(hook name, hook fn)`` pairs that implement this ablation on ``model``."""
        if not 0 <= self.layer < model.n_layers:
            raise RnrLensError(f"ablation {self} names block {self.layer}, but the model has blocks 0..{model.n_layers - 1}")
        replacement = self._replacement(model)
        if self.component != "block":
            (name,) = self.hook_names()
            return [(name, lambda x, hook: replacement(x))]
        pre_name, post_name = self.hook_names()
        stash: dict[str, torch.Tensor] = {}

        def keep_pre(x: torch.Tensor, hook: object) -> None:
            stash["pre"] = x

        def replace_post(x: torch.Tensor, hook: object) -> torch.Tensor:
            pre = stash.pop("pre")
            return pre + replacement(x - pre)

        return [(pre_name, keep_pre), (post_name, replace_post)]

    def module_hooks(self, model: "LensModel", layers: "torch.nn.ModuleList") -> list["torch.utils.hooks.RemovableHandle"]:
        """The same ablation as PyTorch hooks on a plain HF model's decoder ``layers`` (the
        weight-sharing twin used for hook-free generation); returns the handles."""
        from rnr_lens.adapters import component_module_names

        replacement = self._replacement(model)
        layer = layers[self.layer]
        if self.component != "block":
            module = getattr(layer, component_module_names(model.bridge)[self.component])

            def on_output(mod: object, args: object, out: object) -> object:
                if isinstance(out, tuple):
                    return (replacement(out[0]), *out[1:])
                return replacement(out)  # type: ignore[arg-type]

            return [module.register_forward_hook(on_output)]
        stash: dict[str, torch.Tensor] = {}

        def on_input(mod: object, args: tuple, kwargs: dict) -> None:
            stash["pre"] = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]

        def on_block_output(mod: object, args: object, kwargs: object, out: object) -> object:
            pre = stash.pop("pre")
            if isinstance(out, tuple):
                return (pre + replacement(out[0] - pre), *out[1:])
            return pre + replacement(out - pre)  # type: ignore[operator]

        return [layer.register_forward_pre_hook(on_input, with_kwargs=True),
                layer.register_forward_hook(on_block_output, with_kwargs=True)]

    def _replacement(self, model: "LensModel") -> Callable[[torch.Tensor], torch.Tensor]:
        if self.kind == "zero":
            return torch.zeros_like
        prompts = self.reference if self.kind == "mean" else self.reference[:1]
        if self.component == "block":
            pre_name, post_name = self.hook_names()
            pre = model.reference_activations(pre_name, prompts)
            post = model.reference_activations(post_name, prompts)
            acts = [b - a for a, b in zip(pre, post)]
        else:
            acts = model.reference_activations(self.hook_names()[0], prompts)
        if self.kind == "mean":
            mean = torch.cat([a for a in acts]).mean(0)
            return lambda x: mean.to(x.dtype).expand_as(x).clone()
        donor = acts[0]
        return lambda x: _align_donor(donor, x)


def _align_donor(donor: Float[torch.Tensor, "pos d_model"], x: Float[torch.Tensor, "batch seq d_model"]) -> torch.Tensor:
    """Donor activations aligned to the right end of ``x`` (see module docstring)."""
    seq = x.shape[1]
    if seq == 1:
        out = donor[-1:]
    else:
        index = torch.arange(donor.shape[0] - seq, donor.shape[0]).clamp(min=0)
        out = donor[index]
    return out.to(x.dtype).unsqueeze(0).expand_as(x).clone()


def parse_ablations(specs: "list[Ablation | str] | tuple[Ablation | str, ...]") -> list[Ablation]:
    return [a if isinstance(a, Ablation) else Ablation.parse(a) for a in specs]
