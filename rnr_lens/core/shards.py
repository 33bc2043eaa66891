"""Deterministic shards of an audit or sweep: which questions a shard ``i/n`` holds.

A shard ``i/n`` holds the questions whose id hashes to ``i`` modulo ``n``: the assignment
depends on nothing but the question id, so it is the same on every machine, in every order,
and across resumes. Every per-question result in rnr_lens depends only on the question and the
seed (sample ``j`` and route ``j`` of a question are drawn from ``(seed, question id, j)``, the
search is seeded by the question id), so shards of one audit give the rows the whole audit gives.

Shards of one audit share its id (the id hashes model, task, config, probes and seed, never
the shard); :func:`rnr_lens.measure.store.merge` unions their run stores, keeps one copy of rows found twice, and
refuses rows that disagree or results made under different deployment configs.

    >>> Shard.parse("1/4")
    Shard(index=1, count=4)
    >>> Shard(0, 1).contains("any-question")
    True
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from rnr_lens.errors import RnrLensError

EXECUTORS = ("local", "ray")
"""Where :func:`rnr_lens.measure.executors.run_audit` runs an audit's shards: here, one after another,
or on Ray workers."""


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count`` (0-based: ``0/4`` ... ``3/4``)."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if self.count < 1 or not 0 <= self.index < self.count:
            raise RnrLensError(f"shard {self.index}/{self.count} does not exist; write i/n with 0 <= i < n, e.g. 0/4 ... 3/4")

    @classmethod
    def parse(cls, text: str | Shard | tuple[int, int]) -> Shard:
        if isinstance(text, Shard):
            return text
        if isinstance(text, tuple):
            return cls(*text)
        head, slash, tail = str(text).partition("/")
        try:
            if not slash:
                raise ValueError
            return cls(int(head), int(tail))
        except ValueError:
            raise RnrLensError(f"cannot parse shard {text!r}; write i/n such as 0/4") from None

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def contains(self, question_id: str) -> bool:
        digest = hashlib.sha256(question_id.encode()).digest()
        return int.from_bytes(digest[:8], "big") % self.count == self.index


def complete_split(shards: Iterable[Shard | str]) -> int | None:
    """The smallest ``n`` with all of its shards ``0/n ... n-1/n`` among ``shards`` (None: no
    split is whole). The one completeness rule: an audit's status and a sweep assembled from
    merged shards both read it.

    Example:
        >>> complete_split(["0/2", "1/4", "1/2"]), complete_split(["0/3"])
        (2, None)
    """
    by_count: dict[int, set[int]] = {}
    for item in shards:
        s = item if isinstance(item, Shard) else Shard.parse(item)
        by_count.setdefault(s.count, set()).add(s.index)
    return min((count for count, indices in by_count.items() if len(indices) == count), default=None)
