"""Where the time goes: wall time per named phase of the work, while a profile is on.

The library marks its phases with :func:`phase` (the prompt prefill, each decoding step's
forward, teacher-forced scoring, store writes, and the outer stages: each probe of an audit,
the miner's screen, confirmation, exhaustive sweep and null). Marking costs one list check when
no profile is on. Inside :func:`profiling` every marked phase adds its wall time to the
profile; phases nest, so an outer stage's time includes its inner phases', and
:meth:`Profile.rows` reports each stage with the share of it spent in each inner phase and the
rest, the Python between forwards.

A long run's profile outlives the run: ``profiling(path=...)`` writes the profile to ``path``
after every top-level stage, and a later ``profiling(path=...)`` on the same file continues it
(its stages' seconds add up, and its wall time is the sum over the runs, each kept in
``runs_s``), so a grid resumed after a crash is profiled whole.

The state is two module-level lists (as :mod:`torch.profiler` keeps its own): ``_OPEN``, the
open profiles, written only by :func:`profiling`, and ``_STACK``, the names of the phases now
open, written only by :func:`phase`.

Example:
    >>> with profiling() as p:  # doctest: +SKIP
    ...     audit(model, task, ["sampling:k=8"])
    >>> print(p.text())  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rnr_lens.core.faults import point
from rnr_lens.core.files import read_json, write_atomic

FORWARD_PHASES = ("prefill", "decode", "teacher-forced")
"""The phases that run model forwards; the rest of a stage is Python, the store and sampling."""
STORE_PHASE = "store"
INNER_PHASES = (*FORWARD_PHASES, STORE_PHASE)
"""The inner phases a stage's seconds are split into (the rest is its ``other``)."""

_OPEN: list[Profile] = []


@dataclass(frozen=True)
class PhaseRow:
    """One stage of a profile: its wall time and calls, and the seconds of each inner phase
    (forwards and store writes) spent inside it."""

    stage: str
    seconds: float
    calls: int
    inner: dict[str, float]

    @property
    def other(self) -> float:
        """What the stage spent outside forwards and store writes: Python between forwards,
        sampling, tokenizing and decoding text."""
        return max(0.0, self.seconds - sum(self.inner.values()))

    @property
    def shares(self) -> tuple[float, ...] | None:
        """The share of the stage's seconds in each of :data:`INNER_PHASES`, then the rest
        (None for a stage that took no time)."""
        if not self.seconds:
            return None
        return tuple(v / self.seconds for v in (*(self.inner[n] for n in INNER_PHASES), self.other))


@dataclass
class Profile:
    """Wall time per phase and per (stage, inner phase) while this profile is open."""

    sync: bool = False
    started: float = field(default_factory=time.perf_counter)
    ended: float | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)
    nested: dict[tuple[str, str], float] = field(default_factory=dict)
    earlier: tuple[float, ...] = ()
    """Wall times of the earlier runs this profile continues (see :meth:`from_dict`)."""
    path: Path | None = None
    """Where the profile writes itself after each top-level stage (None: nowhere)."""
    notes: dict[str, str] = field(default_factory=dict)
    """Facts about how the run computed, by name (:func:`note`: each reuse of computed
    states, on or off and why); the last word on a name stands."""

    @property
    def own_wall(self) -> float:
        """Wall time of this run alone (until now while it is open)."""
        return (self.ended or time.perf_counter()) - self.started

    @property
    def wall(self) -> float:
        """Wall time of this run plus the earlier runs it continues."""
        return sum(self.earlier) + self.own_wall

    def _add(self, name: str, seconds: float, outer: list[str]) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds
        self.calls[name] = self.calls.get(name, 0) + 1
        for stage in dict.fromkeys(outer):
            self.nested[(stage, name)] = self.nested.get((stage, name), 0.0) + seconds
        if not outer:
            self._autosave()

    def _autosave(self) -> None:
        if self.path is not None and self.path.parent.is_dir():  # no folder yet: the run made nothing to profile
            self.save(self.path)

    def save(self, path: str | Path) -> None:
        """Write :meth:`to_dict` to ``path`` whole (a crash mid-write leaves the last one)."""
        write_atomic(path, json.dumps(self.to_dict(), indent=2))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], **kwargs: Any) -> Profile:
        """A profile that continues the one ``d`` was written from: its phases' seconds and
        calls, the stages' inner seconds, and its runs' wall times as ``earlier``."""
        nested = {(r["stage"], i): float(r[f"{i}_s"]) for r in d["stages"] for i in INNER_PHASES if r.get(f"{i}_s")}
        return cls(
            seconds={n: float(v["seconds"]) for n, v in d["phases"].items()},
            calls={n: int(v["calls"]) for n, v in d["phases"].items()},
            nested=nested,
            earlier=tuple(float(w) for w in d.get("runs_s", [d["wall_s"]])),
            notes={str(k): str(v) for k, v in notes.items()} if isinstance(notes := d.get("notes"), dict) else {},
            **kwargs,
        )

    def rows(self) -> list[PhaseRow]:
        """Each stage (a phase that holds others, or any phase marked at the top), slowest first."""
        stages = [n for n in self.seconds if n not in INNER_PHASES]
        out = [PhaseRow(s, self.seconds[s], self.calls[s], {i: self.nested.get((s, i), 0.0) for i in INNER_PHASES}) for s in stages]
        return sorted(out, key=lambda r: -r.seconds)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: wall time, every phase's seconds and calls, and the stages' breakdown."""
        return {
            "wall_s": self.wall,
            "runs_s": [*self.earlier, self.own_wall],
            "phases": {n: {"seconds": s, "calls": self.calls[n]} for n, s in sorted(self.seconds.items(), key=lambda x: -x[1])},
            "stages": [
                {"stage": r.stage, "seconds": r.seconds, "calls": r.calls, **{f"{k}_s": v for k, v in r.inner.items()}, "other_s": r.other}
                for r in self.rows()
            ],
            "notes": dict(sorted(self.notes.items())),
        }

    def text(self) -> str:
        """The profile as a table that fits 100 columns."""
        runs = f" over {len(self.earlier) + 1} runs (resumed)" if self.earlier else ""
        lines = [f"wall time {self.wall:.1f} s{runs}; per stage (seconds, and its share in each inner phase):"]
        head = f"{'stage':<26}{'seconds':>9}{'calls':>7}" + "".join(f"{n:>15}" for n in (*INNER_PHASES, "other"))
        lines.append(head)
        for r in self.rows():
            cells = [f"{share:>15.0%}" for share in r.shares] if r.shares else [f"{'-':>15}"] * (len(INNER_PHASES) + 1)
            lines.append(f"{r.stage[:25]:<26}{r.seconds:>9.1f}{r.calls:>7}" + "".join(cells))
        forwards = sum(self.seconds.get(n, 0.0) for n in FORWARD_PHASES)
        lines.append(f"forwards in all: {forwards:.1f} s ({forwards / self.wall:.0%} of wall time)" if self.wall else "")
        lines.extend(f"{name}: {value}" for name, value in sorted(self.notes.items()))
        return "\n".join(lines)


@contextlib.contextmanager
def profiling(sync: bool = False, path: str | Path | None = None) -> Iterator[Profile]:
    """Profile the phases run inside the block (``sync``: wait for the GPU at each phase's
    end, so asynchronous kernels count where they were launched). With ``path``, continue the
    profile saved there (if any) and save it there after each top-level stage and at the end.

    Example:
        >>> import tempfile
        >>> saved = Path(tempfile.mkdtemp()) / "profile.json"
        >>> for run in range(2):
        ...     with profiling(path=saved) as p, phase("audit:default"):
        ...         pass
        >>> p.calls["audit:default"], len(json.loads(saved.read_text())["runs_s"])
        (2, 2)
    """
    path = Path(path) if path is not None else None
    if path is not None and path.is_file():
        profile = Profile.from_dict(read_json(path, "profile"), sync=sync, path=path)
    else:
        profile = Profile(sync=sync, path=path)
    _OPEN.append(profile)
    try:
        yield profile
    finally:
        _OPEN.remove(profile)
        profile.ended = time.perf_counter()
        profile._autosave()


_STACK: list[str] = []


def note(name: str, value: str) -> None:
    """Record ``name: value`` in every open profile (free when none is open).

    Example:
        >>> with profiling() as p:
        ...     note("reuse prefix-store", "off (forced)")
        >>> p.notes
        {'reuse prefix-store': 'off (forced)'}
    """
    for p in _OPEN:
        p.notes[name] = value


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    """Mark the block as phase ``name`` (free when no profile is open); a fault point too."""
    point(name)
    if not _OPEN:
        yield
        return
    outer = list(_STACK)
    _STACK.append(name)
    start = time.perf_counter()
    try:
        yield
    finally:
        if any(p.sync for p in _OPEN):
            _synchronize()
        seconds = time.perf_counter() - start
        _STACK.pop()
        for p in _OPEN:
            p._add(name, seconds, outer)


def _loaded_torch() -> Any:
    """torch where this process has loaded it, else None: a process that never loaded torch has
    queued no work on a GPU, so there is nothing to wait for (and this floor loads no torch)."""
    return sys.modules.get("torch")


def _synchronize() -> None:
    torch = _loaded_torch()
    if torch is not None and torch.cuda.is_available():
        torch.cuda.synchronize()


def synchronize(device: Any) -> None:
    """Wait for ``device``'s queued work (a no-op on the CPU), so a wall time covers it."""
    torch = _loaded_torch()
    if torch is not None and torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def timed_rounds(cases: Mapping[str, Callable[[], object]], repeats: int, device: Any = "cpu") -> dict[str, list[float]]:
    """Wall times of each case over ``repeats`` rounds after one warm-up each; every round runs
    all cases in turn, so drift in the machine's speed hits every case of a round alike (the
    benchmarks' ratios against a baseline measured in the same run rest on this).

    Example:
        >>> times = timed_rounds({"baseline": lambda: sum(range(1000)), "ours": lambda: sum(range(999))}, repeats=3)
        >>> sorted(times), len(times["ours"])
        (['baseline', 'ours'], 3)
    """
    for fn in cases.values():
        fn()  # warm-up
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(repeats):
        for name, fn in cases.items():
            synchronize(device)
            start = time.perf_counter()
            fn()
            synchronize(device)
            times[name].append(time.perf_counter() - start)
    return times
