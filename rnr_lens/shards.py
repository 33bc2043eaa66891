"""Deterministic shards of an audit or sweep, and merging their run stores into one.

A shard ``i/n`` holds the questions whose id hashes to ``i`` modulo ``n``: the assignment
depends on nothing but the question id, so it is the same on every machine, in every order,
and across resumes. Every per-question result in rnr_lens depends only on the question and the
seed (sample ``j`` uses ``seed + j``, route ``j`` is drawn from ``(seed, j)``, the search is
seeded by the question id), so shards of one audit give the rows the whole audit gives.

Shards of one audit share its id (the id hashes model, task, config, probes and seed, never
the shard); :func:`merge` unions their run stores, keeps one copy of rows found twice, and
refuses rows that disagree or results made under different deployment configs.

    >>> Shard.parse("1/4")
    Shard(index=1, count=4)
    >>> Shard(0, 1).contains("any-question")
    True
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from rnr_lens.errors import RnrLensError
from rnr_lens.store import RunStore


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count`` (0-based: ``0/4`` ... ``3/4``)."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if self.count < 1 or not 0 <= self.index < self.count:
            raise RnrLensError(f"shard {self.index}/{self.count} does not exist; write i/n with 0 <= i < n, e.g. 0/4 ... 3/4")

    @classmethod
    def parse(cls, text: "str | Shard | tuple[int, int]") -> "Shard":
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


def covered(shards: Sequence[str]) -> bool:
    """Whether some ``n`` has all of its shards ``0/n ... n-1/n`` among ``shards``."""
    by_count: dict[int, set[int]] = {}
    for text in shards:
        s = Shard.parse(text)
        by_count.setdefault(s.count, set()).add(s.index)
    return any(len(indices) == count for count, indices in by_count.items())


def merge(inputs: Sequence[str | Path], out: str | Path) -> RunStore:
    """Merge run stores into a new one at ``out`` (written beside it, renamed when complete).

    Rows present in several inputs are kept once; rows that disagree, or audits of the same
    model, task, probes and seed made under different deployment configs, stop the merge
    with an error and leave nothing at ``out``.
    """
    out = Path(out)
    if not inputs:
        raise RnrLensError("merge needs at least one run store")
    for path in inputs:
        if not Path(path).is_file():
            raise RnrLensError(f"run store {path} does not exist")
        if Path(path).resolve() == out.resolve():
            raise RnrLensError(f"{out} is also an input; merge into a new file")
    if out.exists():
        raise RnrLensError(f"{out} already exists; merge into a new file (or delete it first)")
    if not out.parent.exists():
        raise RnrLensError(f"folder {out.parent} does not exist; create it or choose another --out path")
    partial = out.with_name(f".{out.name}.partial")
    for leftover in (partial, Path(f"{partial}-wal"), Path(f"{partial}-shm")):
        leftover.unlink(missing_ok=True)
    merged = RunStore(partial)
    try:
        for path in inputs:
            source = RunStore(path)
            try:
                for info in source.audits():
                    merged.absorb(source.export_audit(info["id"]), source=str(path))
            finally:
                source.close()
        merged.checkpoint()
        merged.close()
        os.replace(partial, out)
    except BaseException:
        merged.close()
        for leftover in (partial, Path(f"{partial}-wal"), Path(f"{partial}-shm")):
            leftover.unlink(missing_ok=True)
        raise
    return RunStore(out)
