"""Prefix states: a prompt's states along the routes it has run, kept across forwards.

Two routes that agree on their first ``j`` blocks compute the same thing for a prompt there:
the same output of each of those blocks on the residual stream, and the same keys and values
in their attention. Every route of a question runs the identity's blocks up to its first
edit, and the route search's candidates of a question differ from earlier candidates by an
edit or two, so most of what a candidate's prompt computes was computed for an earlier one.
The search evaluates those candidates one per step, in separate forwards; :class:`PrefixStates`
keeps the states between the forwards, keyed by the prompt's tokens and the route's prefix,
and :meth:`rnr_lens.engine.Engine.routed_rows` starts each row from the longest prefix the
store holds instead of running those blocks again.

Invariant: a stored state holds the bits the block computes for that prompt's real tokens
(positions count real tokens only, padding is masked, and at a real model's shapes the CPU's
matrix kernels give a row the same bits in a batch of any size: ``tests/test_probes.py`` holds
SmolLM2's search with the store to the bit of the search without it; at 64-wide toy shapes
they may not, a last-bit difference that ``tests/test_adapters.py`` bounds), and it is used
only under the weights and interventions it was computed under: any change empties the
store.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import psutil
import torch
from jaxtyping import Float

Tensor = torch.Tensor

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
            computed again, so the budget moves time, never a result). Default: an eighth of
            the memory free where the first state lies (the GPU's, or the host's) when it
            comes.

    Example:
        >>> with model.engine.prefix_states() as store:  # doctest: +SKIP
        ...     model.generate(prompts, route=first_candidates)
        ...     model.generate(prompts, route=next_candidates)  # each row starts where it parts
        >>> store.hits  # doctest: +SKIP
        812
    """

    def __init__(self, max_bytes: int | None = None) -> None:
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

    def put(self, key: PrefixKey, state: PrefixState) -> None:
        if self.max_bytes is None:
            self.max_bytes = _free_bytes(state.output.device) // 8
        if key in self._states or self._bytes + state.nbytes > self.max_bytes:
            return
        self._states[key] = state
        self._bytes += state.nbytes


def _free_bytes(device: torch.device) -> int:
    """Memory free now on ``device``: the GPU's own where the states lie on one."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    return int(psutil.virtual_memory().available)
