"""Ablation methods: how an ablation silences a component, one registered entry per method.

An ablation silences one component (:data:`COMPONENTS`) of one block by a method. A method is an
:class:`AblationMethod`: its name, the word a figure uses for it, how many reference prompts it
takes its activations from, and how it builds the replacement from them. Everything else that
differs by method asks its entry:

- :class:`rnr_lens.model.interventions.Ablation` refuses an ablation that lacks the reference prompts
  its method takes, and builds its replacement through it;
- the miner takes reference prompts (the control set's) only where a method needs them, and the
  screen's first-order estimate is ``(replacement - activation) * gradient`` for every method;
- an audit's ablation probe, which has no reference prompts, refuses a method that needs them
  before any model loads;
- figures and the CLI's help read the names from here.

The registry holds ``zero`` (the paper's silencing), ``mean`` and ``resample``. A new method is
one :func:`register` call, in a module of one's own; a method a package installs is read from its
``rnr_lens.ablation_methods`` entry point on first lookup, as pytest and lm-eval read their plug-ins.
Invariant: a name means one computation. A method cannot be registered twice, so a stored
sweep's label (``mlp4:zero``, :func:`ablation_label`) always names what computed it.

This module is the vocabulary and loads no torch: a builder imports it when it runs.

Example:
    >>> [m.name for m in methods()][:3]
    ['zero', 'mean', 'resample']
    >>> ablation_method("mean").references is None  # every reference prompt
    True
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import TYPE_CHECKING

from rnr_lens.errors import RnrLensError

if TYPE_CHECKING:
    from jaxtyping import Float
    from torch import Tensor

COMPONENTS = ("mlp", "attn", "block")
"""What an ablation silences in a block: its MLP, its attention, or the whole block."""

ENTRY_POINTS = "rnr_lens.ablation_methods"
"""The entry-point group an installed package registers its methods under (each entry point
names an :class:`AblationMethod`)."""

_NAME = re.compile(r"[a-z][a-z0-9_-]{0,31}")

#: ``build(activations)`` -> the map from the component's output to what replaces it;
#: ``activations`` holds one ``(pos, d_model)`` tensor per reference prompt it takes.
Builder = Callable[[Sequence["Float[Tensor, 'pos d_model']"]], Callable[["Tensor"], "Tensor"]]


@dataclass(frozen=True)
class AblationMethod:
    """How an ablation silences a component.

    Args:
        name: The method's name in labels (``mlp4:NAME``), probe names and the CLI: lower case
            letters, digits, ``-`` and ``_``.
        past: The word a figure uses ("zeroed", "mean-ablated").
        references: How many reference prompts it takes activations from, from the first: 0
            (none), 1 (a donor), or None (every one).
        build: Builds the replacement from the reference prompts' activations (an empty list
            where ``references`` is 0).
    """

    name: str
    past: str
    references: int | None
    build: Builder

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise RnrLensError(f"ablation method name {self.name!r} must be lower case letters, digits, '-' or '_' (at most 32, a letter first)")
        if self.references is not None and (isinstance(self.references, bool) or not isinstance(self.references, int) or self.references < 0):
            raise RnrLensError(f"ablation method {self.name}: references must be a count of at least 0, or None for every prompt")

    @property
    def needs_reference(self) -> bool:
        """Does it take activations from reference prompts?"""
        return self.references != 0

    def prompts(self, reference: Sequence[str]) -> tuple[str, ...]:
        """The reference prompts it takes activations from."""
        return tuple(reference) if self.references is None else tuple(reference[: self.references])


_REGISTRY: dict[str, AblationMethod] = {}
_installed_read = False


def register(method: AblationMethod) -> AblationMethod:
    """Add ``method`` to the registry; a name already registered is refused (a name fixes what
    it computes). Returns it, so a module can write ``NOISE = register(AblationMethod(...))``."""
    if not isinstance(method, AblationMethod):
        raise RnrLensError(f"register takes an AblationMethod, got {type(method).__name__}")
    if method.name in _REGISTRY:
        raise RnrLensError(f"ablation method {method.name!r} is registered already; a name fixes what it computes, so choose another")
    _REGISTRY[method.name] = method
    return method


def _read_installed() -> None:
    """Register the methods installed packages name under :data:`ENTRY_POINTS` (once)."""
    global _installed_read
    if _installed_read:
        return
    _installed_read = True
    for entry in metadata.entry_points(group=ENTRY_POINTS):
        if entry.name in _REGISTRY:
            continue  # registered by importing its module already
        method = entry.load()
        if not isinstance(method, AblationMethod) or method.name != entry.name:
            raise RnrLensError(f"entry point {entry.name!r} ({entry.value}) in {ENTRY_POINTS} must name an AblationMethod called {entry.name!r}")
        if method.name not in _REGISTRY:
            register(method)


def methods() -> tuple[AblationMethod, ...]:
    """Every registered method, the built-in ones first."""
    _read_installed()
    return tuple(_REGISTRY.values())


def names(*, installed: bool = True) -> tuple[str, ...]:
    """Every registered method's name; with ``installed=False``, without reading the installed
    packages' entry points (which import their code: a parser's help does not)."""
    return tuple(m.name for m in methods()) if installed else tuple(_REGISTRY)


def ablation_method(name: str) -> AblationMethod:
    """The method called ``name``, or one line naming the registered ones."""
    if name not in _REGISTRY:
        _read_installed()
    if name not in _REGISTRY:
        raise RnrLensError(
            f"unknown ablation method {name!r}; use one of {', '.join(names())} (a new one is registered with rnr_lens.core.ablation_methods.register)"
        )
    return _REGISTRY[name]


def check_component(component: str) -> str:
    """``component``, or one line naming the components."""
    if component not in COMPONENTS:
        raise RnrLensError(f"unknown ablation component {component!r}; use one of {', '.join(COMPONENTS)}")
    return component


def ablation_label(layer: int, component: str, method: str) -> str:
    """An ablation's name, ``mlp4:zero``: the one spelling that
    :class:`rnr_lens.model.interventions.Ablation` prints and parses, and that sweep tables, pages and
    stored tries use for it (here, below torch, so torch-free readers name it alike).

    Example:
        >>> ablation_label(4, "mlp", "zero")
        'mlp4:zero'
    """
    return f"{component}{int(layer)}:{method}"


def _zero(activations: Sequence[Tensor]) -> Callable[[Tensor], Tensor]:
    import torch

    return torch.zeros_like


def _mean(activations: Sequence[Tensor]) -> Callable[[Tensor], Tensor]:
    """The mean output over every position of every reference prompt."""
    import torch

    mean = torch.cat(list(activations)).mean(0)
    return lambda x: mean.to(x.dtype).expand_as(x).clone()


def _resample(activations: Sequence[Tensor]) -> Callable[[Tensor], Tensor]:
    """The donor's output aligned to the end of the prompt: positions before the donor's start
    take its first position, and generated tokens (one position at a time) its last."""
    import torch

    donor = activations[0]

    def aligned(x: Tensor) -> Tensor:
        pos = x.shape[1]
        if pos == 1:
            out = donor[-1:]
        else:
            out = donor[torch.arange(donor.shape[0] - pos, donor.shape[0]).clamp(min=0)]
        return out.to(x.dtype).unsqueeze(0).expand_as(x).clone()

    return aligned


ZERO = register(AblationMethod("zero", "zeroed", 0, _zero))
MEAN = register(AblationMethod("mean", "mean-ablated", None, _mean))
RESAMPLE = register(AblationMethod("resample", "resampled", 1, _resample))
