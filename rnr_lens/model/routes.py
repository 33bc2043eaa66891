"""Routes: the sequence of blocks the residual stream passes through.

The identity route of an ``n``-layer model is ``0, 1, ..., n-1``. A route may skip blocks,
repeat them, or revisit a segment, as in test-time depth adaptation (CoLa). Routes have a
compact, stable string form used in tables, plots and the run store::

    >>> r = Route.skip(30, 3, 4).then_repeat(10)
    >>> str(r)
    '30:0-2,5-10,10-29'
    >>> Route.parse(str(r)) == r
    True

The string is ``n_layers:`` followed by comma-separated runs; ``a-b`` is the ascending run
``a, a+1, ..., b`` and a bare ``a`` is a single block.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from rnr_lens.errors import RnrLensError

DEFAULT_MAX_FACTOR = 2
"""By default a route may be at most this many times as long as the model is deep."""

MAX_BLOCKS = 100_000
"""No model this package loads has more blocks; a route string claiming more is malformed."""


@dataclass(frozen=True)
class Route:
    """An immutable sequence of block indices of an ``n_layers``-block model.

    Args:
        layers: Block indices in the order the residual stream visits them.
        n_layers: Number of blocks in the model.
        max_length: Longest allowed route; defaults to ``2 * n_layers``.

    Example:
        >>> Route([0, 1, 1, 3], n_layers=4).describe()
        'skip 2; repeat 1x2'
    """

    layers: tuple[int, ...]
    n_layers: int
    max_length: int | None = field(default=None, compare=False, repr=False)

    def __init__(self, layers: Iterable[int], n_layers: int, max_length: int | None = None) -> None:
        layers = tuple(int(i) for i in layers)
        if n_layers < 1:
            raise RnrLensError(f"n_layers must be at least 1, got {n_layers}")
        limit = max_length if max_length is not None else DEFAULT_MAX_FACTOR * n_layers
        if not layers:
            raise RnrLensError("a route needs at least one block; use Route.identity(n) for the default order")
        bad = [i for i in layers if not 0 <= i < n_layers]
        if bad:
            raise RnrLensError(f"route block index {bad[0]} is out of range for a {n_layers}-block model (valid: 0..{n_layers - 1})")
        if len(layers) > limit:
            raise RnrLensError(f"route has {len(layers)} blocks, more than the maximum {limit}; pass max_length= to allow longer routes")
        object.__setattr__(self, "layers", layers)
        object.__setattr__(self, "n_layers", int(n_layers))
        object.__setattr__(self, "max_length", max_length)

    # -- constructors -------------------------------------------------------------------
    @classmethod
    def identity(cls, n_layers: int) -> Route:
        """The default order ``0..n_layers-1``."""
        return cls(range(n_layers), n_layers)

    @classmethod
    def skip(cls, n_layers: int, *layers: int) -> Route:
        """The identity route without the given blocks."""
        for i in layers:
            if not 0 <= i < n_layers:
                raise RnrLensError(f"cannot skip block {i}: a {n_layers}-block model has blocks 0..{n_layers - 1}")
        gone = set(layers)
        return cls([i for i in range(n_layers) if i not in gone], n_layers)

    @classmethod
    def repeat(cls, n_layers: int, layer: int, times: int = 2) -> Route:
        """The identity route with block ``layer`` run ``times`` times in a row."""
        return cls.identity(n_layers).then_repeat(layer, times)

    @classmethod
    def parse(cls, text: str, n_layers: int | None = None, max_length: int | None = None) -> Route:
        """Parse the compact form ``"30:0-2,5-29"`` (the ``30:`` prefix may be given as n_layers).

        The same limits as the constructor hold (at most ``max_length``, by default
        ``2 * n_layers``, blocks), checked run by run, so a huge route is refused before it is
        built.
        """
        n_layers, runs = cls._runs(text, n_layers, max_length)
        return cls([i for a, b in runs for i in range(a, b + 1)], n_layers, max_length=max_length)

    @classmethod
    def _runs(cls, text: str, n_layers: int | None, max_length: int | None) -> tuple[int, list[tuple[int, int]]]:
        """The compact form's depth and ascending runs, checked as :meth:`parse` checks them,
        in time linear in the text (a run is never expanded here)."""
        body = text.strip()
        if ":" in body:
            head, body = body.split(":", 1)
            try:
                parsed_n = int(head)
            except ValueError:
                raise RnrLensError(f"cannot parse route {text[:80]!r}: expected 'N:runs' such as '30:0-2,4-29'") from None
            if n_layers is not None and n_layers != parsed_n:
                raise RnrLensError(f"route {text[:80]!r} is for a {parsed_n}-block model, not {n_layers}")
            n_layers = parsed_n
        if n_layers is None:
            raise RnrLensError(f"route {text[:80]!r} does not say how many blocks the model has; write it as 'N:{body[:40]}'")
        if not 1 <= n_layers <= MAX_BLOCKS:
            raise RnrLensError(f"route {text[:80]!r}: a model has 1 to {MAX_BLOCKS} blocks, not {n_layers}")
        limit = max_length if max_length is not None else DEFAULT_MAX_FACTOR * n_layers
        runs: list[tuple[int, int]] = []
        length = 0
        for run in filter(None, (part.strip() for part in body.split(","))):
            try:
                if "-" in run:
                    a, b = (int(x) for x in run.split("-", 1))
                    if b < a:
                        raise ValueError
                else:
                    a = b = int(run)
            except ValueError:
                raise RnrLensError(
                    f"cannot parse run {run[:40]!r} in route {text[:80]!r}: write ascending runs like '4-9' or single blocks like '7'"
                ) from None
            if not (0 <= a and b < n_layers):
                bad = a if a < 0 else b
                raise RnrLensError(f"route block index {bad} is out of range for a {n_layers}-block model (valid: 0..{n_layers - 1})")
            length += b - a + 1
            if length > limit:
                raise RnrLensError(f"route {text[:80]!r} has more than the maximum {limit} blocks; pass max_length= to allow longer routes")
            runs.append((a, b))
        if not runs:
            raise RnrLensError("a route needs at least one block; use Route.identity(n) for the default order")
        return n_layers, runs

    @classmethod
    def depth_of(cls, text: str) -> int:
        """How many blocks the model of the route ``text`` has, the text checked as
        :meth:`parse` checks it, in time linear in the text."""
        return cls._runs(text, None, None)[0]

    @classmethod
    def edits_of(cls, text: str) -> int:
        """:attr:`n_edits` of the route ``text`` names, in time linear in the text, whatever
        depth it claims (a stranger's ``"100000:0-99999,0-99999"`` is 200,000 blocks: issue 73).

        Example:
            >>> Route.edits_of("6:0-2,2,4-5"), Route.parse("6:0-2,2,4-5").n_edits
            (2, 2)
        """
        n_layers, runs = cls._runs(text, None, None)
        events: dict[int, int] = {}
        for a, b in runs:  # how many runs cover each block, as a sweep over the runs' ends
            events[a] = events.get(a, 0) + 1
            events[b + 1] = events.get(b + 1, 0) - 1
        edits, covering, at = 0, 0, 0
        for position in sorted(events) + [n_layers]:
            span = min(position, n_layers) - at
            if span > 0:
                edits += span * (1 if covering == 0 else covering - 1)
            at = max(at, min(position, n_layers))
            covering += events.get(position, 0) if position < n_layers else 0
        return edits

    # -- edits --------------------------------------------------------------------------
    def then_repeat(self, layer: int, times: int = 2) -> Route:
        """This route with every visit of ``layer`` run ``times`` times in a row."""
        if times < 1:
            raise RnrLensError(f"times must be at least 1, got {times}")
        if layer not in self.layers:
            raise RnrLensError(f"cannot repeat block {layer}: it is not on route {self}")
        out: list[int] = []
        for i in self.layers:
            out.extend([i] * (times if i == layer else 1))
        return Route(out, self.n_layers, self.max_length)

    # -- views --------------------------------------------------------------------------
    @property
    def is_identity(self) -> bool:
        return self.layers == tuple(range(self.n_layers))

    @property
    def skipped(self) -> tuple[int, ...]:
        """Blocks never visited."""
        seen = set(self.layers)
        return tuple(i for i in range(self.n_layers) if i not in seen)

    @property
    def repeated(self) -> dict[int, int]:
        """Blocks visited more than once, with their visit counts."""
        return {i: c for i, c in sorted(Counter(self.layers).items()) if c > 1}

    @property
    def n_edits(self) -> int:
        """Single-block edits away from the identity: one per skipped block and one per extra
        visit (``Route.parse("6:0,1,2,2,4,5").n_edits == 2``: skip 3, repeat 2)."""
        return len(self.skipped) + sum(c - 1 for c in self.repeated.values())

    @classmethod
    def from_edits(cls, edits: Sequence[int]) -> Route:
        """The route of one move per block from the identity (:data:`KEEP`, :data:`SKIP` or
        :data:`REPEAT`): the edit vector the route search walks (``len(edits)`` blocks).

        Example:
            >>> str(Route.from_edits((KEEP, SKIP, REPEAT, KEEP)))
            '4:0,2,2-3'
        """
        layers: list[int] = []
        for layer, edit in enumerate(edits):
            layers.extend([] if edit == SKIP else [layer, layer] if edit == REPEAT else [layer])
        return cls(layers, len(edits))

    def describe(self) -> str:
        """A short human description: ``'identity'`` or ``'skip 3,4; repeat 10x2'``."""
        if self.is_identity:
            return "identity"
        parts = []
        if self.skipped:
            parts.append("skip " + ",".join(map(str, self.skipped)))
        if self.repeated:
            parts.append("repeat " + ",".join(f"{i}x{c}" for i, c in self.repeated.items()))
        ordered = sorted(self.layers) == list(self.layers)
        if not ordered:
            parts.append("reordered")
        return "; ".join(parts)

    def runs(self) -> list[tuple[int, int]]:
        """The route as maximal ascending runs ``(first, last)``."""
        runs: list[tuple[int, int]] = []
        for i in self.layers:
            if runs and i == runs[-1][1] + 1:
                runs[-1] = (runs[-1][0], i)
            else:
                runs.append((i, i))
        return runs

    def __str__(self) -> str:
        body = ",".join(f"{a}-{b}" if b > a else str(a) for a, b in self.runs())
        return f"{self.n_layers}:{body}"

    def __len__(self) -> int:
        return len(self.layers)

    def __iter__(self) -> Iterator[int]:
        return iter(self.layers)

    def __getitem__(self, index: int) -> int:
        return self.layers[index]


def as_route(route: Route | str | Sequence[int] | None, n_layers: int) -> Route | None:
    """Coerce user input (a Route, its string form, or a list of indices) to a Route."""
    if route is None or isinstance(route, Route):
        if route is not None and route.n_layers != n_layers:
            raise RnrLensError(f"route {route} is for a {route.n_layers}-block model, but this model has {n_layers} blocks")
        return route
    if isinstance(route, str):
        return Route.parse(route, n_layers)
    return Route(route, n_layers)


@dataclass(frozen=True)
class Tick:
    """One step of a batch in which rows follow different routes: block ``block`` runs on the
    batch rows ``rows`` (ascending), each of which visits that block next on its own route."""

    block: int
    rows: tuple[int, ...]


def schedule(routes: Sequence[Sequence[int]]) -> list[Tick]:
    """Interleave per-row routes into ticks, so that rows which visit the same block next share
    one forward of it.

    At each tick the lowest block index that some row visits next runs, on every row that
    visits it next. Each row therefore meets exactly its own route's blocks, in its order (the
    invariant a batched forward needs), and routes that are the identity up to a few skips and
    repeats share almost every tick: a skipped block simply leaves the row out of a tick, a
    repeated one adds one tick.

    Example:
        >>> [(t.block, t.rows) for t in schedule([[0, 1, 2], [0, 2], [0, 1, 1, 2]])]
        [(0, (0, 1, 2)), (1, (0, 2)), (1, (2,)), (2, (0, 1, 2))]
    """
    position = [0] * len(routes)
    ticks: list[Tick] = []
    while True:
        nexts = {row: route[position[row]] for row, route in enumerate(routes) if position[row] < len(route)}
        if not nexts:
            return ticks
        block = min(nexts.values())
        rows = tuple(row for row, b in nexts.items() if b == block)
        for row in rows:
            position[row] += 1
        ticks.append(Tick(block, rows))


# ---------------------------------------------------------------------------------------------
# Random routes and single-block edits (the move set of the route search)
# ---------------------------------------------------------------------------------------------

KEEP, SKIP, REPEAT = 0, 1, 2
"""One block's move in an edit vector (:meth:`Route.from_edits`)."""


def distinct_edit_routes(n_layers: int, edits: int, protect: int) -> int:
    """How many distinct routes are exactly ``edits`` single-block skips or repeats away from
    the identity (``C(m, edits) * 2**edits`` over the ``m`` unprotected blocks)."""
    return math.comb(max(n_layers - 2 * protect, 0), edits) * 2**edits


def draw_route(
    n_layers: int, rng: random.Random, *, edit_rate: float = 0.25, max_segment: int = 4, protect: int = 1, max_length: int | None = None
) -> Route:
    """Draw a random route: cut the identity into segments of 1..max_segment blocks; each
    segment is kept with probability ``1 - edit_rate``, else skipped or repeated (even odds).
    The first and last ``protect`` blocks are always kept. Routes longer than ``max_length``
    (default ``2 * n_layers``) and the identity route (the default deployment's, which no
    probe's try may repeat) are redrawn.

    Example:
        >>> str(draw_route(8, random.Random(0)))  # doctest: +SKIP
        '8:0-3,2-7'
    """
    limit = max_length or 2 * n_layers
    for _ in range(1000):
        layers = list(range(protect))
        i = protect
        end = n_layers - protect
        while i < end:
            size = min(rng.randint(1, max_segment), end - i)
            segment = list(range(i, i + size))
            if rng.random() < edit_rate:
                if rng.random() < 0.5:
                    segment = []
                else:
                    segment = segment * 2
            layers.extend(segment)
            i += size
        layers.extend(range(end, n_layers))
        if 0 < len(layers) <= limit and layers != list(range(n_layers)):  # the identity is the default, never a try
            return Route(layers, n_layers, max_length=limit)
    raise RnrLensError("could not draw a non-identity route within the length limit; raise max_length or edit_rate")


def draw_edits(n_layers: int, rng: random.Random, edits: int, *, protect: int = 1) -> Route:
    """A route ``edits`` single-block moves from the identity: distinct unprotected blocks drawn
    uniformly, each skipped or repeated with even odds (the move set of :class:`RouteSearch`).

    Example:
        >>> len(draw_edits(30, random.Random(0), 2).describe().split(";")) in (1, 2)
        True
    """
    blocks = rng.sample(range(protect, n_layers - protect), edits)
    moves = [KEEP] * n_layers
    for block in blocks:
        moves[block] = rng.choice((SKIP, REPEAT))
    return Route.from_edits(tuple(moves))
