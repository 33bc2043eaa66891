"""A probe's name as a value: its family and its settings, read once.

A probe is named ``FAMILY:key=value,...`` (``sampling:k=8,t=0.7,top_p=1.0,draw=multinomial``):
the store's key, part of an audit's id, what a user types after ``--probe``. :class:`ProbeSpec`
is that name taken apart, and every reader of a name goes through it: a table's short label, a
figure's budget label, a test of a probe's family. What the settings mean (their types, their
defaults, their ranges) is declared on the probe classes (:func:`rnr_lens.measure.probes.parse_probe`),
which alone write canonical names; a spec here is only read.

Invariant: ``str(ProbeSpec.parse(name)) == name`` for every name a probe writes, and a spec
keeps its settings in the order they were written.

Example:
    >>> spec = ProbeSpec.parse("sampling:k=8,t=0.7,top_p=1.0,draw=multinomial")
    >>> spec.family, spec.get("t"), spec.budget_label
    ('sampling', '0.7', 'sampling:k=8')
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rnr_lens.errors import RnrLensError

BUDGET_KEY = "k"
"""The setting that holds a probe's budget, where it has one (an ablation probe spends one try
per block instead)."""


@dataclass(frozen=True)
class ProbeSpec:
    """A probe name's family and its settings, as written (values are text; a probe class gives
    them their types)."""

    family: str
    settings: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, text: str) -> ProbeSpec:
        """Read ``FAMILY[:key=value,...]``; refuse a setting without ``=`` or one given twice.

        Example:
            >>> ProbeSpec.parse("routes:k=8, edits=2")
            ProbeSpec(family='routes', settings=(('k', '8'), ('edits', '2')))
        """
        family, _, rest = text.partition(":")
        settings: list[tuple[str, str]] = []
        for part in filter(None, (p.strip() for p in rest.split(","))):
            key, eq, value = (s.strip() for s in part.partition("="))
            if not eq or not key:
                raise RnrLensError(f"probe {text!r}: malformed setting {part!r}; write each setting as key=value, e.g. sampling:k=8,t=0.7")
            if any(key == seen for seen, _ in settings):
                raise RnrLensError(f"probe {text!r}: {key} is given twice; give each setting once")
            settings.append((key, value))
        return cls(family.strip(), tuple(settings))

    def __str__(self) -> str:
        written = ",".join(f"{k}={v}" for k, v in self.settings)
        return f"{self.family}:{written}" if written else self.family

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(k for k, _ in self.settings)

    def get(self, key: str) -> str | None:
        """The value written for ``key``, or None where the name leaves it out."""
        return next((v for k, v in self.settings if k == key), None)

    @property
    def budget_label(self) -> str:
        """The family and its budget (``sampling:k=8``; the whole name for a probe without ``k``,
        whose settings then tell two such probes apart): the label of the report's tables and
        figures, where each row or curve also says its model and task.

        Example:
            >>> ProbeSpec.parse("routes:edits=2,k=8,protect=1").budget_label
            'routes:k=8'
        """
        k = self.get(BUDGET_KEY)
        return str(self) if k is None else f"{self.family}:{BUDGET_KEY}={k}"

    def subset(self, keys: Sequence[str]) -> ProbeSpec:
        """This spec with only the settings named in ``keys`` (in this spec's order)."""
        return ProbeSpec(self.family, tuple((k, v) for k, v in self.settings if k in keys))


def check_readable(name: str) -> None:
    """Refuse a probe name that does not read back as itself (a notebook's own probe whose
    ``params()`` hold a comma, an ``=``-less part or padded text), before an audit stores it:
    every table, label and resume reads the stored name through :class:`ProbeSpec`.

    Example:
        >>> check_readable("mine:layers=(1, 2)")
        Traceback (most recent call last):
        ...
        rnr_lens.errors.RnrLensError: probe name 'mine:layers=(1, 2)' does not read back as written; write each value of its params() without commas or surrounding spaces
    """
    try:
        same = str(ProbeSpec.parse(name)) == name
    except RnrLensError:
        same = False
    if not same:
        raise RnrLensError(
            f"probe name {name!r} does not read back as written; write each value of its params() without commas or surrounding spaces"
        )


def budget_label(name: str) -> str:
    """The budget label of probe ``name`` (:attr:`ProbeSpec.budget_label`)."""
    return ProbeSpec.parse(name).budget_label


def family_of(name: str) -> str:
    """The family of probe ``name`` (``sampling`` for ``sampling:k=8,t=0.7``)."""
    return ProbeSpec.parse(name).family


def short_labels(names: Sequence[str]) -> dict[str, str]:
    """Short labels for full probe names (tables, figures, widgets, progress bars): each
    probe's family, numbered where a family repeats.

    Example:
        >>> short_labels(["sampling:k=8,t=0.7,top_p=1.0", "routes:k=8", "sampling:k=8,t=1.0,top_p=1.0"])
        {'sampling:k=8,t=0.7,top_p=1.0': 'sampling-1', 'routes:k=8': 'routes', 'sampling:k=8,t=1.0,top_p=1.0': 'sampling-2'}
    """
    families = [family_of(n) for n in names]
    return {n: f if families.count(f) == 1 else f"{f}-{families[: i + 1].count(f)}" for i, (n, f) in enumerate(zip(names, families))}
