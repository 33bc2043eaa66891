"""The records of a single-block ablation sweep that every layer reads, free of torch.

The miner (:mod:`rnr_lens.miner`) computes them with a model; the claims, the report page and
the widgets only read them, so they live here, below the model. Invariant: a record's
``to_dict`` is what ``claims.json`` and the run store hold, and ``from_dict`` reads it back
(one record per concept: the claim's null is this null, not a copy of its fields).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rnr_lens.stats import Estimate

NULL_BLOCKS = 3
"""Blocks drawn for the arbitrary-block null of a repair rate."""


@dataclass(frozen=True)
class NullRepair:
    """What silencing an arbitrary block, and re-running unablated, repair of the held-out
    failures: the null beside a bottleneck's held-out repair.

    Attributes:
        blocks: The blocks drawn uniformly (seeded by the failure set's name).
        random_block: Held-out repair of a block drawn from ``blocks`` (per question, the share
            of them that repair it), Wilson interval.
        rerun: Held-out repair of the unablated model re-run in the same batches (batch
            numerics can flip a greedy answer): what no intervention repairs.

    Example:
        >>> from rnr_lens.stats import rate
        >>> null = NullRepair((3, 7, 11), rate([0.0, 1 / 3, 0.0]), rate([0.0, 0.0, 0.0]))
        >>> NullRepair.from_dict(null.to_dict()) == null
        True
    """

    blocks: tuple[int, ...]
    random_block: Estimate
    rerun: Estimate
    per_question: dict[str, dict[str, float]] = field(default_factory=dict, compare=False)
    """Per arm (``random block``, ``unablated re-run``), each held-out question's repair (the
    share of the drawn blocks that repair it; 0/1 for the re-run), for paired tests. Kept in the
    run store; ``claims.json`` holds the rates alone."""

    def to_dict(self) -> dict[str, Any]:
        """The rates (what ``claims.json`` holds); the store adds ``per_question``."""
        return {"blocks": list(self.blocks), "random_block": self.random_block.to_dict(), "rerun": self.rerun.to_dict()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> NullRepair:
        """A null read back from ``to_dict`` (a claim's) or from the store (with ``per_question``)."""
        per_question = {arm: {q: float(v) for q, v in shares.items()} for arm, shares in (d.get("per_question") or {}).items()}
        return cls(tuple(int(b) for b in d["blocks"]), Estimate.from_dict(d["random_block"]), Estimate.from_dict(d["rerun"]), per_question)
