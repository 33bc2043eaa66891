"""The engine: which graph a forward runs, and where routes and ablations attach to it.

One set of weights, two graphs that compute the same numbers:

- the **bridge**: TransformerLens' ``TransformerBridge`` has swapped its components into the
  Hugging Face model, so every hook point fires (users' hooks, ``run_with_cache``);
- the **twin**: a plain Hugging Face model of the same class sharing every parameter tensor
  (no copy, see :func:`rnr_lens.model.adapters.build_twin`), so a hook-free forward costs what plain
  Hugging Face costs.

Invariants: the twin runs only when no TransformerLens hook is attached to the bridge (counted
through its public ``hook_points()`` / ``has_hooks()``; rnr_lens' own interventions are plain
PyTorch hooks and do not count), and a route or ablation applied through :class:`Engine` acts
on both graphs, so switching graphs never changes a result. No other module knows which graph
runs: callers ask for :meth:`Engine.module`, :meth:`Engine.blocks` and
:meth:`Engine.component`. When the twin cannot be built the engine logs why, once, and runs
every forward on the bridge (slower, same numbers).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from rnr_lens.errors import RnrLensError
from rnr_lens.model import adapters
from rnr_lens.model.prefix_states import DEFAULT_MAX_BYTES, PrefixKey, PrefixState, PrefixStates
from rnr_lens.model.reuse import Reuses
from rnr_lens.model.routes import Tick, schedule

logger = logging.getLogger(__name__)

Graph = Literal["bridge", "twin"]
Tensor = torch.Tensor
#: ``replace(output, block_input)`` -> the new output; ``block_input`` is None except for "block".
Replace = Callable[[Tensor, "Tensor | None"], Tensor]


@dataclass(frozen=True)
class EnginePath:
    """Which graph the next forward runs, and why."""

    graph: Graph
    reason: str

    def __str__(self) -> str:
        return f"{self.graph} ({self.reason})"


@dataclass(frozen=True)
class Site:
    """A module where one component's tensor can be read or replaced.

    ``port="output"``: the module's forward output is the component's output (a bridge hook
    point, or the HF submodule itself, whose output may be a tuple led by the tensor).
    ``port="input"``: the module's first input is the tensor (a twin decoder layer's input).
    """

    module: nn.Module
    port: Literal["output", "input"] = "output"

    def read(self, fn: Callable[[Tensor], None]) -> RemovableHandle:
        """Call ``fn`` with the tensor on every forward (for capture and gradients)."""
        return self.replace(fn)

    def replace(self, fn: Callable[[Tensor], Tensor | None]) -> RemovableHandle:
        """Replace the tensor by ``fn(tensor)`` (``None`` leaves it as it is)."""
        if self.port == "input":

            def on_input(mod: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict] | None:
                if "hidden_states" in kwargs:
                    new = fn(kwargs["hidden_states"])
                    return None if new is None else (args, {**kwargs, "hidden_states": new})
                new = fn(args[0])
                return None if new is None else ((new, *args[1:]), kwargs)

            return self.module.register_forward_pre_hook(on_input, with_kwargs=True)

        def on_output(mod: nn.Module, args: tuple, out: Any) -> Any:
            if isinstance(out, tuple):
                new = fn(out[0])
                return None if new is None else (new, *out[1:])
            return fn(out)

        return self.module.register_forward_hook(on_output)


def _block_patch(replace: Replace) -> tuple[Callable[[Tensor], None], Callable[[Tensor], Tensor]]:
    """A reader of the block's input and a replacer of its output that share the input (a
    repeated block reads, then replaces, at each visit)."""
    stash: list[Tensor] = []

    def entry(x: Tensor) -> None:
        stash.append(x)

    def exit_(out: Tensor) -> Tensor:
        return replace(out, stash.pop())

    return entry, exit_


@dataclass
class _RowRouting:
    """Per-row routes in force: each tick's rows, and the cache of the batch being decoded.

    ``shared[slot]``, where some of a tick's rows enter it in the same state (the same input
    and the same blocks so far: a question's routes before their first edit), is the tick's
    distinct rows (positions in the tick's rows) and, for each of its rows, which of them it
    copies; None where every row is its own. ``prefixes[slot]`` is, for each of the tick's rows,
    its prompt and the blocks it has run with this tick's: the key of its state in ``store``."""

    rows: tuple[tuple[int, ...], ...]
    n_rows: int
    shared: tuple[tuple[Tensor, Tensor] | None, ...] = ()
    cache: adapters.RowRouteCache | None = None
    prefixes: tuple[tuple[PrefixKey, ...], ...] = ()
    store: PrefixStates | None = None


def _shared_states(
    routes: Sequence[tuple[int, ...]], inputs: Sequence[Hashable], rows: Sequence[tuple[int, ...]]
) -> tuple[tuple[Tensor, Tensor] | None, ...]:
    """Per tick of :func:`rnr_lens.model.routes.schedule`, the rows that enter it in a state another
    row of the tick also has: a row's state is its input and the blocks it has run, so two rows
    with equal inputs share every tick up to the first one where their routes part."""
    visited: list[tuple[int, ...]] = [() for _ in routes]
    out: list[tuple[Tensor, Tensor] | None] = []
    for tick_rows in rows:
        first: dict[tuple[Hashable, tuple[int, ...]], int] = {}
        copies = [first.setdefault((inputs[r], visited[r]), len(first)) for r in tick_rows]
        distinct = list(dict.fromkeys(copies))
        keep = [copies.index(d) for d in distinct]
        out.append((torch.tensor(keep, dtype=torch.long), torch.tensor(copies, dtype=torch.long)) if len(keep) < len(tick_rows) else None)
        for r in tick_rows:
            visited[r] = (*visited[r], len(out) - 1)
    return tuple(out)


def _prefix_keys(routes: Sequence[tuple[int, ...]], inputs: Sequence[tuple[int, ...]], ticks: Sequence[Tick]) -> tuple[tuple[PrefixKey, ...], ...]:
    """Per tick, each of its rows' prompt and the blocks its route has run with this tick's."""
    position = [0] * len(routes)
    out = []
    for tick in ticks:
        keys = []
        for r in tick.rows:
            position[r] += 1
            keys.append((inputs[r], routes[r][: position[r]]))
        out.append(tuple(keys))
    return tuple(out)


def _rows_of(value: Any, rows: Tensor, n_rows: int) -> Any:
    """``value`` restricted to batch rows ``rows``: tensors of two or more dimensions whose
    first is the batch (hidden states, masks, positions, rotary tables), also inside tuples;
    anything else (the cache, flags, 1-D cache positions) as it is."""
    if isinstance(value, Tensor) and value.dim() >= 2 and value.shape[0] == n_rows:
        return value.index_select(0, rows.to(value.device))
    if isinstance(value, tuple):
        return tuple(_rows_of(v, rows, n_rows) for v in value)
    return value


def _merged(hidden_states: Tensor, rows: Tensor, first: Tensor, out: Any) -> Any:
    """The batch's hidden states with the tick's rows replaced by ``first``, in the block's
    output form (a tensor, or a tuple led by it)."""
    merged = hidden_states.index_copy(0, rows.to(hidden_states.device), first)
    return (merged, *out[1:]) if isinstance(out, tuple) else merged


def _left_pad(t: Tensor, width: int, dim: int) -> Tensor:
    """``t`` with zeros before it along ``dim`` up to ``width`` (a stored prompt state placed
    into a batch's left-padded layout; padded positions are masked, so their values are never
    read)."""
    missing = width - t.shape[dim]
    if missing == 0:
        return t
    shape = list(t.shape)
    shape[dim] = missing
    return torch.cat([t.new_zeros(shape), t], dim=dim)


class _Tick(nn.Module):
    """One tick of :meth:`Engine.routed_rows`: ``block`` on the rows that visit it next; the
    other rows pass through unchanged.

    In the prompt's forward (the one that fills the tick's cache slot, every row present) a
    tick runs each distinct state once (``shared``) and takes the states the prefix store
    holds instead of running them, then writes every row's output and keys and values from
    those, and stores what it ran; later forwards (decoding) run the block on the tick's rows
    as they are."""

    def __init__(self, block: nn.Module, slot: int, state: _RowRouting) -> None:
        super().__init__()
        self.block = block
        self.slot = slot
        self.state = state

    def forward(self, hidden_states: Tensor, *args: Any, **kwargs: Any) -> Any:
        n_rows = hidden_states.shape[0]
        cache = self.state.cache
        if cache is not None:  # decoding: the cache's slot for this tick, and the rows it holds
            rows = cache.enter(self.slot)
            fresh = not cache.holds(self.slot)  # the prompt's forward (prefill) writes the slot first
        else:  # a forward without a cache (teacher forcing): the batch is the routes' rows
            rows = torch.tensor(self.state.rows[self.slot], dtype=torch.long)
            fresh = True
        if len(rows) == 0:
            return hidden_states
        prompt = fresh and n_rows == self.state.n_rows
        shared = self.state.shared[self.slot] if prompt and self.state.shared else None
        distinct = shared[0].tolist() if shared is not None else list(range(len(rows)))  # positions in the tick's rows
        store = self.state.store if prompt and cache is not None else None
        keys: tuple[PrefixKey, ...] = self.state.prefixes[self.slot] if store is not None else ()
        held = {i: found for i, p in enumerate(distinct) if store is not None and (found := store.get(keys[p])) is not None}
        computed = [i for i in range(len(distinct)) if i not in held]
        if shared is None and not held and len(rows) == n_rows:
            out = self.block(hidden_states, *args, **kwargs)
            self._store(keys, distinct, out, cache)
            return out
        out = self._run(hidden_states, rows[torch.tensor([distinct[i] for i in computed], dtype=torch.long)], args, kwargs) if computed else None
        self._store(keys, [distinct[i] for i in computed], out, cache)
        first: Tensor | None = out[0] if isinstance(out, tuple) else out
        if shared is None and not held:
            assert first is not None  # every row computed
            return _merged(hidden_states, rows, first, out)
        # each tick row's source among [the computed rows, then the held ones]
        source = torch.tensor(computed + list(held), dtype=torch.long).argsort()[shared[1] if shared is not None else torch.arange(len(rows))]
        width = hidden_states.shape[1]
        parts = [] if first is None else [first]
        if held:
            parts.append(torch.stack([_left_pad(h.output, width, 0) for h in held.values()]).to(hidden_states))
        every = torch.cat(parts) if len(parts) > 1 else parts[0]
        if cache is not None:
            cache.place_rows(
                self.slot, [_left_pad(h.keys, width, 1) for h in held.values()], [_left_pad(h.values, width, 1) for h in held.values()], source
            )
        return _merged(hidden_states, rows, every.index_select(0, source.to(every.device)), out)

    def _run(self, hidden_states: Tensor, run: Tensor, args: tuple, kwargs: dict) -> Any:
        """The block on batch rows ``run`` only."""
        n_rows = hidden_states.shape[0]
        return self.block(
            _rows_of(hidden_states, run, n_rows),
            *(_rows_of(a, run, n_rows) for a in args),
            **{k: _rows_of(v, run, n_rows) for k, v in kwargs.items()},
        )

    def _store(self, keys: Sequence[PrefixKey], positions: list[int], out: Any, cache: Any) -> None:
        """Keep the prompt states just computed (rows at ``positions`` of the tick, in the
        order they ran) in the prefix store."""
        store = self.state.store
        if not keys or store is None or not isinstance(out, Tensor):  # a tuple output could not be rebuilt for held rows
            return
        layer: Any = cache.layers[self.slot]
        per_token = (out.shape[-1] * out.element_size()) + 2 * layer.keys[0, :, 0].numel() * layer.keys.element_size()
        for i, p in enumerate(positions):
            key = keys[p]
            n = len(key[0])  # the prompt's real tokens: the last n positions of its row
            if store.wants(key, n * per_token):
                store.put(key, PrefixState(out[i, -n:].clone(), layer.keys[i, :, -n:].clone(), layer.values[i, :, -n:].clone()))


class Engine:
    """Owns the twin and the route state of one bridge; see the module docstring.

    Example:
        >>> engine = model.engine  # doctest: +SKIP
        >>> engine.path()  # doctest: +SKIP
        EnginePath(graph='twin', reason='no TransformerLens hook is attached to the bridge')
    """

    def __init__(self, bridge: Any) -> None:
        self.bridge = bridge
        self._twin: nn.Module | None = None
        self._twin_error: str | None = None
        self._disabled: str | None = None
        self._parameters = list(bridge.original_model.parameters())  # before any route edits the layer list
        # decoder layer lists in block order, per graph, while a route replaces the live ones
        self._canonical: dict[Graph, nn.ModuleList] = {}
        self._rows: _RowRouting | None = None  # per-row routes in force (routed_rows)
        self._prefixes: PrefixStates | None = None  # prompt states kept across forwards (prefix_states)
        self.reuses = Reuses(self._setting)
        """Which reuses of computed prompt states run (:class:`~rnr_lens.model.reuse.Reuses`): each only where its
        check passed for this model on this machine."""

    def _setting(self) -> tuple[str, str, int]:
        """What the kernels a forward runs depend on beyond the model: device, dtype, threads."""
        first = self._parameters[0]
        return str(first.device), str(first.dtype), torch.get_num_threads()

    # -- which graph runs ---------------------------------------------------------------------
    @property
    def twin(self) -> nn.Module | None:
        """The weight-sharing plain HF model, built on first use (None if it cannot be built)."""
        if self._twin is None and self._twin_error is None:
            try:
                self._twin = adapters.build_twin(self.bridge)
            except Exception as exc:  # an architecture the twin cannot mirror: the bridge is always correct
                self._twin_error = f"the plain twin cannot be built for this architecture ({type(exc).__name__}: {exc})"
                logger.warning("rnr_lens runs every forward on the TransformerLens bridge (slower, same numbers): %s", self._twin_error)
        return self._twin

    def disable_twin(self, reason: str) -> None:
        """Run every forward on the bridge from now on, for ``reason`` (shown by :meth:`path`)."""
        self._disabled = reason

    def enable_twin(self) -> None:
        """Undo :meth:`disable_twin`."""
        self._disabled = None

    def user_hooked(self) -> bool:
        """Whether any TransformerLens hook is attached to the bridge."""
        return any(point.has_hooks() for point in self.bridge.hook_points())

    def path(self) -> EnginePath:
        """The graph the next forward runs, and why."""
        if self._disabled is not None:
            return EnginePath("bridge", self._disabled)
        if self.user_hooked():
            return EnginePath("bridge", "TransformerLens hooks are attached to the bridge")
        if self.twin is None:
            return EnginePath("bridge", str(self._twin_error))
        return EnginePath("twin", "no TransformerLens hook is attached to the bridge")

    def module(self) -> nn.Module:
        """The HF-style model the next forward calls."""
        if self.path().graph == "twin":
            assert self._twin is not None
            return self._twin
        return self.bridge.original_model

    def graphs(self) -> list[Graph]:
        """Every graph a forward may run (routes and ablations attach to all of them)."""
        return ["bridge"] if self._disabled is not None or self.twin is None else ["bridge", "twin"]

    # -- where things are ---------------------------------------------------------------------
    def _root(self, graph: Graph) -> nn.Module:
        if graph == "twin":
            if self.twin is None:
                raise RnrLensError(f"this model has no twin graph: {self._twin_error}")
            return self.twin
        return self.bridge.original_model

    def _live_layers(self, graph: Graph) -> tuple[nn.Module, str]:
        return adapters.decoder_layers_owner(self.bridge, root=None if graph == "bridge" else self._root(graph))

    def blocks(self, graph: Graph | None = None) -> list[nn.Module]:
        """The decoder layers of ``graph`` (default: the one that runs) in block order, also
        while a route is in force."""
        graph = graph or self.path().graph
        if graph in self._canonical:
            return list(self._canonical[graph])
        if graph == "bridge":
            return list(self.bridge.blocks)
        parent, attr = self._live_layers(graph)
        return list(getattr(parent, attr))

    def component(self, layer: int, component: str, graph: Graph | None = None) -> Site:
        """Where ``component`` (``"mlp"``, ``"attn"`` or ``"block"``) of block ``layer`` writes
        its output, in ``graph`` (default: the one that runs). On the bridge this is the
        standard hook point (``blocks.{i}.hook_mlp_out``, ``hook_attn_out``,
        ``hook_resid_post``), so cached activations show what an intervention did."""
        graph = graph or self.path().graph
        if graph == "bridge":
            name = {"mlp": "hook_mlp_out", "attn": "hook_attn_out", "block": "hook_resid_post"}[component]
            return Site(self._hook_point(f"blocks.{layer}.{name}"))
        block = self.blocks("twin")[layer]
        if component == "block":
            return Site(block)
        return Site(getattr(block, adapters.component_output_names(self.bridge)[component]))

    def block_input(self, layer: int, graph: Graph | None = None) -> Site:
        """Where block ``layer`` reads the residual stream (``blocks.{i}.hook_resid_pre``)."""
        graph = graph or self.path().graph
        if graph == "bridge":
            return Site(self._hook_point(f"blocks.{layer}.hook_resid_pre"))
        return Site(self.blocks("twin")[layer], port="input")

    def _hook_point(self, name: str) -> nn.Module:
        point = self.bridge.get_hook_point(name)
        if point is None:
            raise RnrLensError(f"this model has no hook point {name}; rnr_lens cannot intervene on it")
        return point

    # -- interventions --------------------------------------------------------------------------
    def patch(self, layer: int, component: str, replace: Replace) -> list[RemovableHandle]:
        """Replace the output of ``component`` of block ``layer`` in every graph by
        ``replace(output, block_input)``; returns the handles to remove."""
        handles: list[RemovableHandle] = []
        for graph in self.graphs():
            if component != "block":
                handles.append(self.component(layer, component, graph).replace(lambda out: replace(out, None)))
                continue
            entry, exit_ = _block_patch(replace)
            handles.append(self.block_input(layer, graph).read(entry))
            handles.append(self.component(layer, "block", graph).replace(exit_))
        return handles

    @contextlib.contextmanager
    def routed(self, layers: tuple[int, ...]) -> Iterator[None]:
        """Run the blocks ``layers`` in that order (in every graph) inside the block."""
        with contextlib.ExitStack() as undo:
            for graph in self.graphs():
                canonical = self.blocks(graph)
                undo.enter_context(self._layer_list(graph, [canonical[i] for i in layers], layers))
            yield

    def can_route_rows(self) -> bool:
        """Whether rows of one batch can follow different routes (:meth:`routed_rows`): on the
        twin, yes; on the bridge, whose hook points users read whole batches from, no (callers
        then run one forward per distinct route)."""
        return self.path().graph == "twin"

    @contextlib.contextmanager
    def prefix_states(self, max_bytes: int = DEFAULT_MAX_BYTES, *, fresh: bool = False) -> Iterator[PrefixStates]:
        """Inside the block, prompts keep their states along the routes they ran across
        forwards of :meth:`routed_rows` (:class:`~rnr_lens.model.prefix_states.PrefixStates`): a row whose prompt ran
        its route's first blocks in an earlier forward takes their outputs and keys and values
        from the store and runs only the blocks after them (the route search's candidates of
        one question, one per step). Only where the reuse ``prefix-store`` is on
        (:attr:`reuses`: its check found every bit kept on this machine); a change of weights or
        interventions empties the store. A nested block shares the outer store, unless
        ``fresh`` (a store of its own for the block: the reuse check's).

        Example:
            >>> with model.engine.prefix_states() as store:  # doctest: +SKIP
            ...     for step in steps:
            ...         model.generate(prompts, route=candidates(step))
        """
        if self._prefixes is not None and not fresh:
            yield self._prefixes
            return
        outer, self._prefixes = self._prefixes, PrefixStates(max_bytes)
        try:
            yield self._prefixes
        finally:
            self._prefixes = outer

    def _intervention_state(self) -> tuple[Any, ...]:
        """What a prompt's states depend on beyond its tokens: the weights' versions and the
        hooks attached to the twin's modules (rnr_lens' ablations and a user's PyTorch hooks;
        each new handle has a new id)."""
        hooks = tuple(
            (name, tuple(m._forward_hooks), tuple(m._forward_pre_hooks))
            for name, m in self._root("twin").named_modules()
            if m._forward_hooks or m._forward_pre_hooks
        )
        return self.weights_version(), hooks

    @contextlib.contextmanager
    def routed_rows(self, routes: Sequence[tuple[int, ...]], inputs: Sequence[Hashable] | None = None) -> Iterator[None]:
        """Inside the block, row ``b`` of every forward runs the blocks ``routes[b]`` in that
        order, all rows in one batched forward; :meth:`new_cache` gives the matching KV cache.

        The twin's layer list becomes the ticks of :func:`rnr_lens.model.routes.schedule`: each runs
        one block on the rows that visit it next (all of them, mostly), so a row computes
        exactly what it computes alone under its route. Twin only (:meth:`can_route_rows`).

        With ``inputs`` (one per row, equal where two rows' input tokens are: a question's
        routes) and the reuse ``shared-identity`` on (:attr:`reuses`), a tick that several rows
        enter in the same state (the same input, the same blocks so far) runs it once on the
        first forward that fills the cache (the prompt's) and copies its output and keys and
        values to the others: a question's routes compute their common identity prefix once.
        Inside :meth:`prefix_states`, with ``inputs`` the rows' prompt token ids and the reuse
        ``prefix-store`` on, the prompt's forward also takes from the store the states of the
        route prefixes an earlier forward ran for the same prompt, and keeps what it runs.
        Either reuse is on only where its check found each row holding the bits it gets
        without it (:func:`rnr_lens.model.reuse_check.check`; ``tests/model/test_reuse_check.py``).
        """
        if not self.can_route_rows():
            raise RnrLensError(f"rows of one batch can follow different routes only on the twin graph, and this forward runs on {self.path()}")
        if inputs is not None and len(inputs) != len(routes):
            raise RnrLensError(f"routed_rows needs one input per route: {len(inputs)} inputs for {len(routes)} routes")
        ticks = schedule(routes)
        rows = tuple(t.rows for t in ticks)
        shared = _shared_states(routes, inputs, rows) if inputs is not None and self.reuses.on("shared-identity") else ()
        if any(s is not None for s in shared):
            self.reuses.ran("shared-identity")
        state = _RowRouting(rows, len(routes), shared)
        if self._prefixes is not None and inputs is not None and all(isinstance(i, tuple) for i in inputs) and self.reuses.on("prefix-store"):
            # not on a model with sliding layers (Gemma-2 and -3, a windowed Mistral): their masks,
            # built per layer kind, do not fit the store's rows, and the search crashed there
            # (Gemma-3-270M and a tiny Gemma-3, tests/model/test_prefix_states.py); it then computes more,
            # never other bits
            if adapters.attention_window(self.bridge) is None:
                self._prefixes.validate(self._intervention_state())
                state.prefixes = _prefix_keys(routes, inputs, ticks)  # type: ignore[arg-type]  # checked: token tuples
                state.store = self._prefixes
        canonical = self.blocks("twin")
        ticked = [_Tick(canonical[t.block], slot, state) for slot, t in enumerate(ticks)]
        self._rows = state
        hits = state.store.hits if state.store is not None else 0
        try:
            with self._layer_list("twin", ticked, tuple(t.block for t in ticks)):
                yield
        finally:
            self._rows = None
            if state.store is not None and state.store.hits > hits:
                self.reuses.ran("prefix-store")

    @contextlib.contextmanager
    def _layer_list(self, graph: Graph, modules: Sequence[nn.Module], blocks: tuple[int, ...]) -> Iterator[None]:
        """Make ``graph`` run ``modules`` as its decoder layers, with each position's per-layer
        config (attention kind, window) taken from block ``blocks[position]``.

        Hidden state, said here where both sides can see it: the Hugging Face config object is
        shared by the whole graph, so inside this block it describes the route's positions
        (:func:`rnr_lens.model.adapters.route_config_values`), not the model's blocks; both the layer
        list and the config are restored on exit, even on an error."""
        parent, attr = self._live_layers(graph)
        saved_list = getattr(parent, attr)
        saved_config: list[tuple[Any, str, Any]] = []
        added = graph not in self._canonical
        if added:
            self._canonical[graph] = nn.ModuleList(self.blocks(graph))
        try:
            setattr(parent, attr, nn.ModuleList(modules))
            config = adapters.text_config(self.bridge, None if graph == "bridge" else self._root(graph))
            for key, value in adapters.route_config_values(config, blocks, adapters.block_layout(self.bridge).per_layer_config).items():
                saved_config.append((config, key, getattr(config, key, None)))
                setattr(config, key, value)
            yield
        finally:
            setattr(parent, attr, saved_list)
            for config, key, value in reversed(saved_config):
                setattr(config, key, value)
            if added:
                del self._canonical[graph]

    def new_cache(self, n_slots: int) -> adapters.RouteCache:
        """An empty KV cache with ``n_slots`` slots (one per route position), or, inside
        :meth:`routed_rows`, one slot per tick holding only that tick's rows."""
        if self._rows is not None:
            self._rows.cache = adapters.RowRouteCache(self._rows.rows, self._rows.n_rows, config=self._root("twin").config)
            return self._rows.cache
        return adapters.RouteCache(n_slots, config=adapters.hf_config(self.bridge))

    def all_parameters(self) -> list[nn.Parameter]:
        """Every parameter once (the twin shares the bridge's tensors)."""
        return list(self._parameters)

    def weights_version(self) -> tuple[int, ...]:
        """Changes whenever a weight is updated in place (an optimizer step, a checkpoint load):
        the tensors' version counters. Microseconds, so it can key per-checkpoint caches."""
        return tuple(p._version for p in self._parameters)
