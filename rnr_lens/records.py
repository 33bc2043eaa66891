"""Records: the typed rows an audit writes and reads back, shared by every layer above the store.

A :class:`Try` is one model evaluation of one question under one probe; an
:class:`AuditRecord` identifies one audit (model and task fingerprints, deployment config,
probes, seed); an :class:`Outcome` is one question's greedy answer with or without an
ablation (what the miner compares before and after). All are plain values with no behaviour beyond conversion, so probes, selectors
and the store can all use them without importing each other. The question table's per-probe
column names are built here too (:func:`reachable_column`, :func:`first_hit_column`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from typing import Any

#: The probe name under which the realized (default deployment) answer is stored.
DEFAULT_PROBE = "default"


@dataclass
class Try:
    """One model evaluation of one question under one probe."""

    question_id: str
    probe: str
    try_index: int
    text: str
    extracted: str | None
    correct: bool
    n_tokens: int
    seed: int | None = None
    route: str | None = None
    ablation: str | None = None
    mean_logprob: float | None = None
    mean_entropy: float | None = None
    reward: float | None = None


#: The try table's columns, in :class:`Try` field order.
TRY_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(Try))


def try_from_row(row: dict[str, Any]) -> Try:
    """A Try from a DataFrame row (pandas' NaN for a missing value becomes None)."""
    values: dict[str, Any] = {c: (None if isinstance(row[c], float) and row[c] != row[c] else row[c]) for c in TRY_COLUMNS}
    values["correct"] = bool(values["correct"])
    return Try(**values)


@dataclass(frozen=True)
class AuditRecord:
    """What identifies one audit in a run store (and how far it got).

    ``status`` is ``running``, ``complete`` or ``partial (k/n shards)``; ``created`` is a Unix
    time, set by the store.
    """

    id: str
    model: str
    model_fingerprint: str
    task: str
    task_fingerprint: str
    answer_type: str
    config_hash: str
    config_json: str
    probes: tuple[str, ...]
    seed: int
    n_questions: int
    label: str | None = None
    created: float | None = None
    status: str = "running"

    def __post_init__(self) -> None:
        object.__setattr__(self, "probes", tuple(self.probes))

    def identity(self) -> tuple[str, str, tuple[str, ...], int]:
        """Model, task, probes and seed: two audits that share these differ only in config."""
        return (self.model_fingerprint, self.task_fingerprint, self.probes, self.seed)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (``probes`` as a list)."""
        out = asdict(self)
        out["probes"] = list(self.probes)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AuditRecord:
        data = dict(data)
        if "probes_json" in data:
            data["probes"] = json.loads(data.pop("probes_json"))
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})


@dataclass(frozen=True)
class Outcome:
    """One question's greedy default-deployment answer, with or without an ablation.

    ``set`` says which part of a failure set the question belongs to (``discovery``,
    ``heldout`` or ``control``); it is empty for the audit's own default answers.
    """

    question_id: str
    text: str
    answer: str | None
    correct: bool
    set: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Outcome:
        return cls(str(data["question_id"]), data["text"], data["answer"], bool(data["correct"]), data.get("set", ""))


def reachable_column(probe: str) -> str:
    """The question table's column: whether any try of ``probe`` was correct."""
    return f"reachable[{probe}]"


def first_hit_column(probe: str) -> str:
    """The question table's column: the index of ``probe``'s first correct try (or NA)."""
    return f"first_hit[{probe}]"
