"""Prefix states: a prompt's states along the routes it has run, kept across forwards.

Two routes that agree on their first ``j`` blocks compute the same thing for a prompt there:
the same output of each of those blocks on the residual stream, and the same keys and values
in their attention. Every route of a question runs the identity's blocks up to its first
edit, and the route search's candidates of a question differ from earlier candidates by an
edit or two, so most of what a candidate's prompt computes was computed for an earlier one.
The search evaluates those candidates one per step, in separate forwards; :class:`PrefixStates`
keeps the states between the forwards, keyed by the prompt's tokens and the route's prefix,
and :meth:`rnr_lens.model.engine.Engine.routed_rows` takes each block's state for a row from the
store where it holds the row's prompt and route up to that block, instead of running it again.

Invariant: a stored state holds the bits the block computes for that prompt's real tokens
(positions count real tokens only, padding is masked), and the engine takes one from the store
only where the reuse ``prefix-store`` is on (:class:`~rnr_lens.model.reuse.Reuses`: its check found the
machine's kernels giving a row the same bits in the batches and paddings the store moves it
between; where they do not, as issue 58 saw on an Intel Xeon with AVX-512, the store stays
off); a state is used
only under the weights and interventions it was computed under: any change empties the store.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import torch
from jaxtyping import Float

Tensor = torch.Tensor

DEFAULT_MAX_BYTES = 2 * 2**30
"""The store's default budget, 2 GiB: ``search:k=8`` on 100 ``add-two-digit`` questions on
SmolLM2-135M-Instruct holds 9,148 states, 1.44 GiB (``benchmarks/bench_prefix_store.py``), so a
search of that size keeps every state."""

#: A prompt (its token ids) and the blocks its route has run, the last one included.
PrefixKey = tuple[tuple[int, ...], tuple[int, ...]]


@dataclass(frozen=True)
class PrefixState:
    """The last block of a route prefix, on one prompt's real tokens: its output on the
    residual stream and its attention's keys and values."""

    output: Float[Tensor, "pos d_model"]
    keys: Float[Tensor, "kv_heads pos d_head"]
    values: Float[Tensor, "kv_heads pos d_head"]

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.output, self.keys, self.values))


class PrefixStates:
    """The store: :data:`PrefixKey` -> :class:`PrefixState`, within a memory budget.

    Args:
        max_bytes: Most bytes held; once full, new states are not kept (a state not held is
            computed again). Default :data:`DEFAULT_MAX_BYTES`: a fixed number, not a share of
            the memory free, so which states a run holds is fixed by its inputs alone (where
            a kernel rounds a row differently in another batch, on a GPU or at toy shapes, a
            held state's bits could then differ from a computed one's, and a run's tries
            would otherwise depend on the memory free when it ran).

    Example:
        >>> with model.engine.prefix_states() as store:  # doctest: +SKIP
        ...     model.generate(prompts, route=first_candidates)
        ...     model.generate(prompts, route=next_candidates)  # each row starts where it parts
        >>> store.hits  # doctest: +SKIP
        812
    """

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._states: dict[PrefixKey, PrefixState] = {}
        self._bytes = 0
        self._validity: Hashable = None
        self.hits = 0
        """Block runs spared: states taken from the store."""

    def __len__(self) -> int:
        return len(self._states)

    def __contains__(self, key: PrefixKey) -> bool:
        return key in self._states

    @property
    def nbytes(self) -> int:
        return self._bytes

    def validate(self, validity: Hashable) -> None:
        """Keep the held states only if ``validity`` (the weights' versions and the attached
        interventions) is what they were computed under; else empty the store."""
        if validity != self._validity:
            self._states.clear()
            self._bytes = 0
            self._validity = validity

    def get(self, key: PrefixKey) -> PrefixState | None:
        state = self._states.get(key)
        self.hits += state is not None
        return state

    def wants(self, key: PrefixKey, nbytes: int) -> bool:
        """Whether :meth:`put` would keep a state of ``nbytes`` under ``key`` (asked before
        copying one out of a batch)."""
        return key not in self._states and self._bytes + nbytes <= self.max_bytes

    def put(self, key: PrefixKey, state: PrefixState) -> None:
        if self.wants(key, state.nbytes):
            self._states[key] = state
            self._bytes += state.nbytes
