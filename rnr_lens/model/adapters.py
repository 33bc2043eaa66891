"""Everything that varies between architectures and library versions, kept in one place.

TransformerLens' ``TransformerBridge`` swaps its own components into a Hugging Face model in
place, so the HF model's forward runs through bridge blocks and fires bridge hooks. rnr_lens
runs routes by handing that forward a different list of blocks; this module knows where the
list lives, which config fields must follow the route, and the compatibility shims needed for
the pinned library versions.

Where an architecture keeps its blocks is one :class:`BlockLayout`: read from TransformerLens'
architecture adapter (one file per family there), or registered for an architecture whose
mapping does not say what rnr_lens needs (:func:`register_layout`). Everything that routes or
ablates a block asks :func:`block_layout`.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import torch
from torch import nn
from transformers import DynamicCache

from rnr_lens.errors import RnrLensError


@dataclass(frozen=True)
class BlockLayout:
    """Where an architecture keeps its blocks, by Hugging Face attribute names: everything
    rnr_lens needs to route and ablate them.

    Args:
        layers: The decoder layer list's path in the model (``model.layers``).
        modules: Each component's module inside a layer (``{"attn": "self_attn", "mlp": "mlp"}``).
        outputs: Each component's module whose output is what it writes to the residual stream:
            the module itself, or the norm after it where the architecture norms a sublayer's
            output before adding it (OLMo-2, Gemma-2, Gemma-3).
        per_layer_config: Config fields holding one entry per layer, which follow a route
            (``layer_types``: which layers attend over a sliding window).
    """

    layers: str
    modules: Mapping[str, str]
    outputs: Mapping[str, str]
    per_layer_config: tuple[str, ...] = ("layer_types",)


def transformer_lens_layout(bridge: Any) -> BlockLayout:
    """The layout TransformerLens' architecture adapter declares (its ``component_mapping``:
    ``blocks``, and in each block ``attn``, ``mlp`` and the optional output norms ``ln1_post`` /
    ``ln2_post``): every architecture's, unless one registers its own (:func:`register_layout`)."""
    blocks = bridge.adapter.component_mapping["blocks"]
    subs = blocks.submodules
    missing = [name for name in ("attn", "mlp") if name not in subs]
    if missing:
        raise RnrLensError(
            f"{type(bridge.adapter).__name__}: TransformerLens' mapping names no {' or '.join(missing)} module in a block; "
            "say where it lives with one @adapters.register_layout entry for this architecture"
        )
    return BlockLayout(
        layers=blocks.name,
        modules={"attn": subs["attn"].name, "mlp": subs["mlp"].name},
        outputs={"attn": (subs.get("ln1_post") or subs["attn"]).name, "mlp": (subs.get("ln2_post") or subs["mlp"]).name},
    )


LAYOUTS: dict[str, Callable[[Any], BlockLayout]] = {}
"""Layouts registered per Hugging Face architecture (the model's class name, as a config's
``architectures`` names it); an architecture not here has :func:`transformer_lens_layout`."""


def register_layout(architecture: str) -> Callable[[Callable[[Any], BlockLayout]], Callable[[Any], BlockLayout]]:
    """Register a function ``bridge -> BlockLayout`` for ``architecture`` (a decorator): where
    TransformerLens' mapping does not say what rnr_lens needs, one entry says it. An
    architecture is registered once.

    Example:
        >>> @register_layout("MyForCausalLM")  # doctest: +SKIP
        ... def _mine(bridge):
        ...     return replace(transformer_lens_layout(bridge), per_layer_config=("layer_types", "sliding_windows"))
    """

    def add(derive: Callable[[Any], BlockLayout]) -> Callable[[Any], BlockLayout]:
        if architecture in LAYOUTS:
            raise RnrLensError(f"a block layout for {architecture} is registered already; change that entry instead")
        LAYOUTS[architecture] = derive
        return derive

    return add


def block_layout(bridge: Any) -> BlockLayout:
    """The layout of the bridge's model: its architecture's registered one, else TransformerLens'."""
    return LAYOUTS.get(type(bridge.original_model).__name__, transformer_lens_layout)(bridge)


def decoder_layers_owner(bridge: Any, root: nn.Module | None = None) -> tuple[nn.Module, str]:
    """Return ``(parent, attribute)`` such that ``getattr(parent, attribute)`` is the HF layer
    list of the bridge's model (or of ``root``, a model of the same class)."""
    path = block_layout(bridge).layers  # e.g. "model.layers"
    parent: Any = bridge.original_model if root is None else root
    *head, last = path.split(".")
    for part in head:
        parent = getattr(parent, part)
    return parent, last


def hf_config(bridge: Any) -> Any:
    return bridge.original_model.config


def text_config(bridge: Any, root: nn.Module | None = None) -> Any:
    """The config that owns ``num_hidden_layers`` (multimodal models nest it), of the bridge's
    model or of ``root``."""
    config = hf_config(bridge) if root is None else root.config
    return getattr(config, "text_config", None) or config


def attention_window(bridge: Any) -> int | None:
    """The fewest past positions any layer attends over (its sliding window), or None when
    every layer sees the whole sequence. Conservative: a window the config names counts even
    where the architecture may not use it."""
    config = text_config(bridge)
    window = getattr(config, "sliding_window", None)
    types = getattr(config, "layer_types", None)
    if not window or getattr(config, "use_sliding_window", True) is False or (types is not None and "sliding_attention" not in types):
        return None
    return int(window)


def readout(bridge: Any, root: nn.Module | None = None) -> Callable[[torch.Tensor], torch.Tensor]:
    """What turns a residual stream into logits in the wrapped model, or in ``root`` (the twin;
    default: the bridge's model): its final norm and output embedding (TransformerLens'
    ``ln_final`` and ``unembed``), then the final scaling of the architectures that have one
    (Gemma-2's soft-capping ``tanh(x / c) * c``, Cohere's ``logit_scale``, Granite's
    ``logits_scaling``). The logit lens reads a stream through it; the modules are those of
    the graph given, so a forward's own logits come out."""
    mapping = bridge.adapter.component_mapping
    if "ln_final" not in mapping:
        raise RnrLensError(f"{type(bridge.original_model).__name__} names no final norm for TransformerLens; the logit lens cannot read it")
    model = bridge.original_model if root is None else root
    output_embeddings = cast(Callable[[], nn.Module], model.get_output_embeddings)  # an HF model's method; nn.Module does not declare it
    norm, unembed = model.get_submodule(mapping["ln_final"].name), output_embeddings()
    config = text_config(bridge, root)
    cap = getattr(config, "final_logit_softcapping", None)
    scale = getattr(config, "logit_scale", None)  # Cohere: multiplied
    divide = getattr(config, "logits_scaling", None)  # Granite: divided

    def read(stream: torch.Tensor) -> torch.Tensor:
        logits = unembed(norm(stream))
        if scale:
            logits = logits * scale
        if divide:
            logits = logits / divide
        return logits if not cap else torch.tanh(logits / cap) * cap

    return read


def hf_state_dict(bridge: Any) -> dict[str, torch.Tensor]:
    """The wrapped model's weights under their original Hugging Face names.

    The bridge nests each HF module as ``_original_component`` and also registers aliases
    (``blocks.0.attn.q``); a fresh model of the same class, built on the meta device, names
    the keys that belong in a checkpoint.
    """
    model = bridge.original_model
    with torch.device("meta"):
        wanted = set(type(model)(model.config).state_dict())
    return _hf_names_only(model.state_dict().items(), wanted)


def _hf_names_only(items: Any, wanted: set[str]) -> dict[str, Any]:
    """``items`` (bridge name, value) under HF names, keeping the ``wanted`` names only."""
    clean: dict[str, Any] = {}
    for key, value in items:
        name = key.replace("._original_component", "")
        if name in wanted and name not in clean:
            clean[name] = value
    missing = wanted - set(clean)
    if missing:
        raise RuntimeError(f"could not map bridge weights back to HF names: {sorted(missing)[:3]}")
    return clean


def component_output_names(bridge: Any) -> Mapping[str, str]:
    """HF attribute names, inside a decoder layer, of the modules whose output is what ``attn``
    and ``mlp`` write to the residual stream (``hook_attn_out`` / ``hook_mlp_out``): the
    layout's ``outputs``."""
    return block_layout(bridge).outputs


def block_parameters(bridge: Any, layers: Sequence[int], component: str | None = None) -> dict[str, nn.Parameter]:
    """The parameters of decoder ``layers`` (or of their ``component``, ``"attn"``/``"mlp"``),
    by their Hugging Face names (``model.layers.3.mlp.up_proj.weight``)."""
    layout = block_layout(bridge)
    path = layout.layers
    sub = "" if component is None else layout.modules[component] + "."
    prefixes = tuple(f"{path}.{layer}.{sub}" for layer in layers)
    model = bridge.original_model
    with torch.device("meta"):
        wanted = {name for name, _ in type(model)(model.config).named_parameters()}
    named = _hf_names_only(model.named_parameters(remove_duplicate=False), wanted)
    return {name: p for name, p in named.items() if name.startswith(prefixes)}


def build_twin(bridge: Any) -> nn.Module:
    """A plain HF model of the wrapped model's class that shares its parameter and buffer
    tensors (no copy): the same weights without the bridge's wrappers and hook points.

    rnr_lens runs generation on the twin when no hook is attached to the bridge, which is
    what makes hook-free decoding cost what plain Hugging Face decoding costs.
    """
    model = bridge.original_model
    config = copy.deepcopy(model.config)
    # The bridge computes attention eagerly; so does the twin, so both give the same numbers.
    config._attn_implementation = "eager"
    with torch.device("meta"):
        twin = type(model)(config)
    params = _hf_names_only(model.named_parameters(remove_duplicate=False), {n for n, _ in twin.named_parameters(remove_duplicate=False)})
    buffers = _hf_names_only(model.named_buffers(remove_duplicate=False), {n for n, _ in twin.named_buffers(remove_duplicate=False)})
    for name, _ in list(twin.named_parameters(remove_duplicate=False)):
        owner, _, leaf = name.rpartition(".")
        setattr(twin.get_submodule(owner), leaf, params[name])
    for name, _ in list(twin.named_buffers(remove_duplicate=False)):
        owner, _, leaf = name.rpartition(".")
        twin.get_submodule(owner)._buffers[leaf] = buffers[name]
    for name, tensor in list(twin.named_parameters()) + list(twin.named_buffers()):
        if tensor.is_meta:
            raise RuntimeError(f"twin tensor {name} has no counterpart in the bridge")
    for module in twin.modules():  # attributes computed at init (rotary scaling) may be meta too
        for attr, value in list(vars(module).items()):
            if isinstance(value, torch.Tensor) and value.is_meta:
                raise RuntimeError(f"twin attribute {attr} of {type(module).__name__} is on the meta device")
    twin.generation_config = model.generation_config
    return twin.eval()


def route_config_values(config: Any, layers: tuple[int, ...], fields: Sequence[str] = BlockLayout.per_layer_config) -> dict[str, Any]:
    """Config values that make an HF decoder run ``layers`` in that order: its layer count, and
    each of the layout's per-layer ``fields`` in route order. The engine sets them on the live
    config while a route is in force and restores them after
    (:meth:`rnr_lens.model.engine.Engine.routed`): a forward of the same model in another thread
    meanwhile would see them."""
    values: dict[str, Any] = {"num_hidden_layers": len(layers), "use_cache": False}
    for name in fields:
        per_layer = getattr(config, name, None)
        if isinstance(per_layer, (list, tuple)) and per_layer:
            values[name] = [per_layer[i] for i in layers]
    return values


def _cache_kwarg_shim(module: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    # transformers >= 5.20 passes the KV cache to attention as ``cache=``; TransformerLens 4.3's
    # attention bridges read ``past_key_values=`` and would silently skip the cache update, so
    # cached decoding would attend only to the newest token.
    if kwargs.get("past_key_values") is None and kwargs.get("cache") is not None:
        kwargs["past_key_values"] = kwargs["cache"]
    return args, kwargs


def install_compat_shims(bridge: Any) -> None:
    """Install the version shims on every attention bridge (idempotent)."""
    for block in bridge.blocks:
        attn = getattr(block, "attn", None)
        if attn is None or getattr(attn, "_rnr_cache_shim", False):
            continue
        attn.register_forward_pre_hook(_cache_kwarg_shim, with_kwargs=True)
        attn._rnr_cache_shim = True


class RouteCache(DynamicCache):
    """A KV cache with one slot per route position, not per block.

    Under a route a repeated block runs twice per forward; its attention reports the same
    ``layer_idx`` both times, which would make the second visit overwrite the first's keys and
    values. Blocks on a route run in a fixed order, so the k-th ``update`` call of a forward
    belongs to route position ``k``: this cache maps calls to slots by that order.
    """

    def __init__(self, n_slots: int, config: Any | None = None) -> None:
        super().__init__(config=config) if config is not None else super().__init__()
        self.n_slots = n_slots
        self._calls = 0

    def begin_forward(self) -> None:
        """Reset the slot counter (called before every forward that uses this cache)."""
        self._calls = 0

    def next_slot(self) -> int:
        slot = self._calls % self.n_slots
        self._calls += 1
        return slot

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return super().update(key_states, value_states, self.next_slot(), *args, **kwargs)

    def select_rows(self, rows: torch.Tensor) -> None:
        """Keep only the given batch rows (used to drop finished sequences)."""
        self.batch_select_indices(rows)


class RowRouteCache(RouteCache):
    """The KV cache of a batch whose rows follow different routes: one slot per tick of
    :func:`rnr_lens.model.routes.schedule`, holding the keys and values of that tick's rows only.

    ``rows[slot]`` lists the batch rows a slot holds, in the batch's current numbering: it is
    renumbered when finished rows are dropped (:meth:`select_rows`) and when rows are copied
    for several samples (:meth:`batch_repeat_interleave`). A slot whose rows have all finished
    is empty; lengths and mask sizes are then read from a live slot of the same attention kind
    (all rows grow together).

    The hand-off with the engine: each tick of :meth:`rnr_lens.model.engine.Engine.routed_rows`
    calls :meth:`enter` before its block runs, and the block's attention then writes to that
    tick's slot (:meth:`next_slot`). That call is the only writer of :attr:`slot`.
    """

    def __init__(self, rows: Sequence[Sequence[int]], n_rows: int, config: Any | None = None) -> None:
        super().__init__(len(rows), config=config)
        self.rows = [torch.tensor(list(r), dtype=torch.long) for r in rows]
        self.n_rows = n_rows
        self.slot = 0

    def enter(self, slot: int) -> torch.Tensor:
        """Tick ``slot`` runs next: its attention's ``update`` writes to that slot. Returns the
        batch rows the slot holds."""
        self.slot = slot
        return self.rows[slot]

    def next_slot(self) -> int:
        return self.slot  # set by enter(): under per-row routes a slot is a tick, not a call count

    def holds(self, slot: int) -> bool:
        """Whether ``slot`` already holds keys and values (the prompt's forward has run it)."""
        return slot < len(self.layers) and bool(getattr(self.layers[slot], "is_initialized", False))

    def place_rows(self, slot: int, keys: Sequence[torch.Tensor], values: Sequence[torch.Tensor], index: torch.Tensor) -> None:
        """Make ``slot`` hold, for each of its rows, row ``index[i]`` of what was written to it
        (the tick's computed rows) followed by ``keys`` and ``values`` (states computed before,
        ``kv_heads x positions x d_head`` each): a tick that ran once for rows in one state, or
        took some rows' states from :class:`rnr_lens.model.prefix_states.PrefixStates`."""
        layer: Any = self.layers[slot]
        written = [(layer.keys, layer.values)] if layer.is_initialized else []
        stored = [(torch.stack(list(keys)), torch.stack(list(values)))] if keys else []
        parts = written + stored
        all_keys = torch.cat([k for k, _ in parts]) if len(parts) > 1 else parts[0][0]
        all_values = torch.cat([v for _, v in parts]) if len(parts) > 1 else parts[0][1]
        at = index.to(all_keys.device)
        if not layer.is_initialized:
            layer.lazy_initialization(all_keys, all_values)
        layer.keys, layer.values = all_keys.index_select(0, at), all_values.index_select(0, at)

    def select_rows(self, rows: torch.Tensor) -> None:
        renumber = torch.full((self.n_rows,), -1, dtype=torch.long)
        renumber[rows.cpu()] = torch.arange(len(rows))
        for slot, held in enumerate(self.rows):
            mapped = renumber[held]
            local = (mapped >= 0).nonzero()[:, 0]
            layer: Any = self.layers[slot] if slot < len(self.layers) else None
            if layer is not None and layer.is_initialized:
                on_device = local.to(layer.keys.device)
                layer.keys, layer.values = layer.keys[on_device], layer.values[on_device]
            self.rows[slot] = mapped[local]
        self.n_rows = len(rows)

    def batch_repeat_interleave(self, repeats: int) -> None:
        super().batch_repeat_interleave(repeats)
        self.rows = [(held[:, None] * repeats + torch.arange(repeats)).flatten() for held in self.rows]
        self.n_rows *= repeats

    def _live(self, layer_idx: int) -> int:
        if layer_idx >= len(self.rows) or len(self.rows[layer_idx]) or layer_idx >= len(self.layers):
            return layer_idx
        layers: list[Any] = list(self.layers)  # HF's cache layers (attention kinds)
        sliding = layers[layer_idx].is_sliding
        for slot, held in enumerate(self.rows):
            if len(held) and slot < len(layers) and layers[slot].is_sliding == sliding:
                return slot
        return layer_idx

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return super().get_seq_length(self._live(layer_idx))

    def get_mask_sizes(self, query_length: int, layer_idx: int) -> tuple[int, int]:
        return super().get_mask_sizes(query_length, self._live(layer_idx))


@functools.cache
def _architecture_supported(name: str) -> bool:
    from transformer_lens.factories.architecture_adapter_factory import SUPPORTED_ARCHITECTURES

    return name in SUPPORTED_ARCHITECTURES


def supported_architectures() -> list[str]:
    from transformer_lens.factories.architecture_adapter_factory import SUPPORTED_ARCHITECTURES

    return sorted(SUPPORTED_ARCHITECTURES)
