"""Ablations: what silencing one component of one block means, as a small frozen value.

An :class:`Ablation` silences one component of one block:

- ``component``: ``"mlp"`` (hook ``blocks.{i}.hook_mlp_out``), ``"attn"``
  (``blocks.{i}.hook_attn_out``) or ``"block"`` (the block's whole update,
  ``hook_resid_post - hook_resid_pre``);
- ``method``: ``"zero"``; ``"mean"`` (the component's mean output over a reference set of
  prompts, every position of every prompt, computed once per model and cached); or
  ``"resample"`` (the component's output on a donor prompt, aligned to the end of the prompt;
  positions before the donor's start take its first position, and generated tokens take its
  last prompt position).

This module holds the value and its arithmetic (:meth:`Ablation.replacement`,
:meth:`Ablation.patch`); :meth:`rnr_lens.lens.LensModel.intervene` attaches it through
:meth:`rnr_lens.engine.Engine.patch` to the component's output in every graph, where it
composes with any hooks the user adds to ``model.bridge`` (on the bridge it acts at the standard
hook point, so ``run_with_cache`` shows the ablated activation). Under a route that repeats a
block, the ablation applies at every visit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from jaxtyping import Float
from torch import Tensor

from rnr_lens.errors import RnrLensError
from rnr_lens.records import COMPONENTS as COMPONENTS  # re-exported: the vocabulary lives below torch
from rnr_lens.records import METHODS as METHODS
from rnr_lens.records import ablation_label

#: ``references(hook_name, prompts)`` -> one ``(pos, d_model)`` activation per prompt.
References = Callable[[str, Sequence[str]], "list[Float[Tensor, 'pos d_model']]"]


@dataclass(frozen=True)
class Ablation:
    """Silence ``component`` of block ``layer``.

    Args:
        layer: Block index (as in the identity route).
        component: ``"mlp"``, ``"attn"`` or ``"block"``.
        method: ``"zero"``, ``"mean"`` or ``"resample"``.
        reference: Prompts (rendered text) for ``mean``; the donor prompt (first entry) for
            ``resample``.

    Example:
        >>> str(Ablation(12))
        'mlp12:zero'
    """

    layer: int
    component: str = "mlp"
    method: str = "zero"
    reference: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.component not in COMPONENTS:
            raise RnrLensError(f"unknown ablation component {self.component!r}; use one of {', '.join(COMPONENTS)}")
        if self.method not in METHODS:
            raise RnrLensError(f"unknown ablation method {self.method!r}; use one of {', '.join(METHODS)}")
        if self.method != "zero" and not self.reference:
            raise RnrLensError(f"a {self.method} ablation needs reference prompts (reference=(...)) to take its activations from")
        object.__setattr__(self, "reference", tuple(self.reference))

    def __str__(self) -> str:
        return ablation_label(self.layer, self.component, self.method)

    @classmethod
    def parse(cls, text: str) -> Ablation:
        """Parse ``'mlp12'`` or ``'mlp12:zero'`` (mean and resample need reference prompts, so
        they are built in Python)."""
        name, _, method = text.partition(":")
        for comp in COMPONENTS:
            if name.startswith(comp) and name[len(comp) :].isdigit():
                return cls(int(name[len(comp) :]), comp, method or "zero")
        raise RnrLensError(f"cannot parse ablation {text!r}; write it like 'mlp12' or 'attn3:zero'")

    def hook_names(self) -> tuple[str, ...]:
        if self.component == "block":
            return (f"blocks.{self.layer}.hook_resid_pre", f"blocks.{self.layer}.hook_resid_post")
        return (f"blocks.{self.layer}.hook_{self.component}_out",)

    def check(self, n_layers: int) -> None:
        """Raise unless block ``layer`` exists in an ``n_layers``-block model."""
        if not 0 <= self.layer < n_layers:
            raise RnrLensError(f"ablation {self} names block {self.layer}, but the model has blocks 0..{n_layers - 1}")

    def replacement(self, references: References) -> Callable[[Tensor], Tensor]:
        """The function that maps the component's output to what replaces it.

        Args:
            references: ``references(hook_name, prompts)`` -> the activations at that hook for
                each prompt (``LensModel.reference_activations``); unused by ``zero``.
        """
        if self.method == "zero":
            return torch.zeros_like
        prompts = self.reference if self.method == "mean" else self.reference[:1]
        if self.component == "block":
            pre_name, post_name = self.hook_names()
            acts = [b - a for a, b in zip(references(pre_name, prompts), references(post_name, prompts))]
        else:
            acts = references(self.hook_names()[0], prompts)
        if self.method == "mean":
            mean = torch.cat(acts).mean(0)
            return lambda x: mean.to(x.dtype).expand_as(x).clone()
        donor = acts[0]
        return lambda x: _align_donor(donor, x)

    def patch(self, replacement: Callable[[Tensor], Tensor]) -> Callable[[Tensor, Tensor | None], Tensor]:
        """``patch(output, block_input)`` -> the ablated output (for :meth:`Engine.patch`): the
        replacement of the output, or for ``"block"`` the input plus the replaced update."""
        if self.component != "block":
            return lambda out, block_input: replacement(out)

        def block(out: Tensor, block_input: Tensor | None) -> Tensor:
            assert block_input is not None
            return block_input + replacement(out - block_input)

        return block


def _align_donor(donor: Float[Tensor, "pos d_model"], x: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch pos d_model"]:
    """Donor activations aligned to the right end of ``x`` (see module docstring)."""
    pos = x.shape[1]
    if pos == 1:
        out = donor[-1:]
    else:
        index = torch.arange(donor.shape[0] - pos, donor.shape[0]).clamp(min=0)
        out = donor[index]
    return out.to(x.dtype).unsqueeze(0).expand_as(x).clone()


def parse_ablations(specs: list[Ablation | str] | tuple[Ablation | str, ...]) -> list[Ablation]:
    return [a if isinstance(a, Ablation) else Ablation.parse(a) for a in specs]
