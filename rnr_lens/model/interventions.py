"""Ablations: what silencing one component of one block means, as a small frozen value.

An :class:`Ablation` silences one component of one block:

- ``component``: ``"mlp"`` (hook ``blocks.{i}.hook_mlp_out``), ``"attn"``
  (``blocks.{i}.hook_attn_out``) or ``"block"`` (the block's whole update,
  ``hook_resid_post - hook_resid_pre``);
- ``method``: a registered :class:`~rnr_lens.core.ablation_methods.AblationMethod`: ``"zero"``;
  ``"mean"`` (the component's mean output over a reference set of prompts, every position of
  every prompt, computed once per model and cached); or ``"resample"`` (the component's output
  on a donor prompt, aligned to the end of the prompt; positions before the donor's start take
  its first position, and generated tokens take its last prompt position); or one registered
  from outside (:func:`rnr_lens.core.ablation_methods.register`).

This module holds the value and its arithmetic (:meth:`Ablation.replacement`,
:meth:`Ablation.patch`); :meth:`rnr_lens.model.lens.LensModel.intervene` attaches it through
:meth:`rnr_lens.model.engine.Engine.patch` to the component's output in every graph, where it
composes with any hooks the user adds to ``model.bridge`` (on the bridge it acts at the standard
hook point, so ``run_with_cache`` shows the ablated activation). Under a route that repeats a
block, the ablation applies at every visit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from jaxtyping import Float
from torch import Tensor

from rnr_lens.core.ablation_methods import COMPONENTS, ablation_label, ablation_method, check_component
from rnr_lens.errors import RnrLensError

#: ``references(hook_name, prompts)`` -> one ``(pos, d_model)`` activation per prompt.
References = Callable[[str, Sequence[str]], "list[Float[Tensor, 'pos d_model']]"]


@dataclass(frozen=True)
class Ablation:
    """Silence ``component`` of block ``layer``.

    Args:
        layer: Block index (as in the identity route).
        component: ``"mlp"``, ``"attn"`` or ``"block"``.
        method: A registered method's name: ``"zero"``, ``"mean"``, ``"resample"``, ...
        reference: Prompts (rendered text) for a method that takes them: every one for
            ``mean``, the donor (first entry) for ``resample``.

    Example:
        >>> str(Ablation(12))
        'mlp12:zero'
    """

    layer: int
    component: str = "mlp"
    method: str = "zero"
    reference: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_component(self.component)
        if ablation_method(self.method).needs_reference and not self.reference:
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
        """The function that maps the component's output to what replaces it, built by the
        method from the activations of the reference prompts it takes.

        Args:
            references: ``references(hook_name, prompts)`` -> the activations at that hook for
                each prompt (``LensModel.reference_activations``); unused by a method that
                takes none (``zero``).
        """
        method = ablation_method(self.method)
        prompts = method.prompts(self.reference)
        acts: list[Tensor] = []
        if prompts and self.component == "block":
            pre_name, post_name = self.hook_names()
            acts = [b - a for a, b in zip(references(pre_name, prompts), references(post_name, prompts))]
        elif prompts:
            acts = references(self.hook_names()[0], prompts)
        return method.build(acts)

    def patch(self, replacement: Callable[[Tensor], Tensor]) -> Callable[[Tensor, Tensor | None], Tensor]:
        """``patch(output, block_input)`` -> the ablated output (for :meth:`Engine.patch`): the
        replacement of the output, or for ``"block"`` the input plus the replaced update."""
        if self.component != "block":
            return lambda out, block_input: replacement(out)

        def block(out: Tensor, block_input: Tensor | None) -> Tensor:
            assert block_input is not None
            return block_input + replacement(out - block_input)

        return block


def parse_ablations(specs: list[Ablation | str] | tuple[Ablation | str, ...]) -> list[Ablation]:
    return [a if isinstance(a, Ablation) else Ablation.parse(a) for a in specs]
