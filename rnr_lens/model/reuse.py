"""Reuse of computed prompt states: which reuses are on, each only where its check passed.

Three speed-ups compute part of a prompt once and copy it where a batch would compute it again:

- ``shared-prefix``: a batch's common opening (a chat template's system prompt and tags) is
  prefilled once and its keys and values copied to every row (:mod:`rnr_lens.model.generation`);
- ``shared-identity``: a question's routes run the blocks before their first edit once in the
  prompt's forward, and the other rows copy them (:meth:`rnr_lens.model.engine.Engine.routed_rows`);
- ``prefix-store``: the route search keeps a question's prompt states from step to step and a
  later candidate runs only the blocks after those it shares (:mod:`rnr_lens.model.prefix_states`).

Each moves a computation into another shape: fewer rows, another batch, another padding. A
row keeps the bits it gets without the reuse only where the machine's kernels round a row the
same in every such shape (batch-invariant). That holds on one CPU at one model's shapes and
not on another: an AMD EPYC (AVX2) kept SmolLM2-135M's bits in every workload tried; an
Intel Xeon with AVX-512 and AMX rounds a row of a product otherwise with the product's number
of rows, at every model's shapes (issue 58), so there every reuse is off.

Invariant: a reuse runs only where its check (:mod:`rnr_lens.model.reuse_check`) passed in this
process, for this model, device, dtype and thread count: the reuse was tried in the shapes it
produces, beside the same generations without it, and every stored number (token, per-step
log-probability and entropy) was equal to the bit. A reuse not yet checked, or whose check
failed, is off, so a stored try never depends on whether a reuse ran. :class:`Reuses` owns
the decision; :meth:`Reuses.on` is asked wherever a reuse would run, and each answer is
recorded in an open profile (:func:`rnr_lens.core.phases.note`).

Example:
    >>> model.engine.reuses.decide()  # doctest: +SKIP
    >>> print(model.engine.reuses)  # doctest: +SKIP
    shared-prefix on (6 generations bit-identical with and without it, batches of 2 and 9 rows)
    ...
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass

from rnr_lens.core.phases import note
from rnr_lens.errors import RnrLensError

REUSES = ("shared-prefix", "shared-identity", "prefix-store")
"""Every reuse of a computed state, by name (module docstring)."""


@dataclass(frozen=True)
class ReuseVerdict:
    """Whether one reuse runs, and why: what its check compared, or what differed."""

    name: str
    on: bool
    why: str

    def __str__(self) -> str:
        return f"{self.name} {'on' if self.on else 'off'} ({self.why})"


#: ``check(name)``: try reuse ``name`` with and without, and say whether it keeps every bit.
Check = Callable[[str], ReuseVerdict]


def _check_name(name: str) -> None:
    if name not in REUSES:
        raise RnrLensError(f"unknown reuse {name!r}; choose one of {', '.join(REUSES)}")


class Reuses:
    """Which reuses are on for one model: each decided once per setting (device, dtype,
    threads) by ``check``, or forced by :meth:`forced` (the check's own two arms, and tests
    of a reuse's mechanics).

    Args:
        setting: What a verdict holds for (called at each question; a new value decides
            again): the kernels a forward runs depend on the device, dtype and thread count.
        check: Runs a reuse's check; None until the model above wires it
            (:class:`rnr_lens.model.lens.LensModel`): until then every reuse is off.
    """

    def __init__(self, setting: Callable[[], Hashable], check: Check | None = None) -> None:
        self.setting = setting
        self.check = check
        self._verdicts: dict[str, ReuseVerdict] = {}
        self._decided_for: Hashable = None
        self._forced: dict[str, bool] = {}
        self._checking = False
        self.used: dict[str, int] = dict.fromkeys(REUSES, 0)
        """How many times each reuse ran (a prefill, a routed forward, a forward with a store)."""

    def _current(self) -> dict[str, ReuseVerdict]:
        setting = self.setting()
        if setting != self._decided_for:
            self._verdicts = {}
            self._decided_for = setting
        return self._verdicts

    def decide(self, names: Sequence[str] = REUSES) -> None:
        """Run the check of each of ``names`` not yet decided for the current setting (a few
        generations on this model; call where no route or batch of the model's is open:
        :func:`rnr_lens.model.generation.generate` calls it first, for the reuses it may run)."""
        for name in names:
            _check_name(name)
        if self.check is None or self._checking:
            return
        verdicts = self._current()
        for name in names:
            if name not in verdicts and name not in self._forced:
                with self.checking():
                    verdicts[name] = self.check(name)

    @contextlib.contextmanager
    def checking(self) -> Iterator[None]:
        """Inside the block a check runs: :meth:`decide` starts no other (the check's own
        generations ask for it)."""
        saved, self._checking = self._checking, True
        try:
            yield
        finally:
            self._checking = saved

    def verdict(self, name: str) -> ReuseVerdict:
        """Reuse ``name``'s verdict now (forced, checked, or off until checked)."""
        _check_name(name)
        if name in self._forced:
            return ReuseVerdict(name, self._forced[name], "forced")
        found = self._current().get(name)
        return found if found is not None else ReuseVerdict(name, False, "not checked yet")

    def on(self, name: str) -> bool:
        """Whether reuse ``name`` may run now; the answer goes into an open profile."""
        verdict = self.verdict(name)
        note(f"reuse {name}", f"{'on' if verdict.on else 'off'} ({verdict.why})")
        return verdict.on

    def ran(self, name: str) -> None:
        """Count one run of reuse ``name`` (``used``)."""
        self.used[name] += 1

    @contextlib.contextmanager
    def forced(self, name: str, on: bool) -> Iterator[None]:
        """Inside the block, reuse ``name`` is ``on`` whatever its check says (its check's two
        arms; a test of the reuse's mechanics where the check fails)."""
        _check_name(name)
        saved = self._forced.get(name)
        self._forced[name] = on
        try:
            yield
        finally:
            if saved is None:
                del self._forced[name]
            else:
                self._forced[name] = saved

    def __str__(self) -> str:
        return "\n".join(str(self.verdict(name)) for name in REUSES)
