"""Records: the typed rows an audit writes and reads back, and the identities they carry.

A :class:`Try` is one model evaluation of one question under one probe; an
:class:`AuditRecord` identifies one audit (model and task fingerprints, deployment config,
probes, seed); an :class:`Outcome` is one question's greedy answer with or without an
ablation (what the miner compares before and after). Beside the rows, this module owns what
identifies and bounds them, each in one place, below torch so that every floor reads them
alike: an audit's id (:func:`audit_key`, checked by :func:`check_audit_id`), a task's
fingerprint, a seed's range (:func:`check_seed`), the names of the sampler's draws
(:data:`DRAWS`, part of a sampling probe's name) and the question table's per-probe column
names (:func:`reachable_column`, :func:`first_hit_column`). Nothing here runs a model.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, fields
from enum import Enum
from typing import Any

from rnr_lens.core.shards import Shard, complete_split
from rnr_lens.core.untrusted import loads_json, quoted
from rnr_lens.errors import RnrLensError

#: The probe name under which the realized (default deployment) answer is stored.
DEFAULT_PROBE = "default"

_HASH = re.compile(r"[0-9a-f]{16}")


def short_hash(text: str) -> str:
    """The 16-hex-digit content hash every identity in a store uses (a config's, an audit's)."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def audit_key(model_fingerprint: str, task_fingerprint: str, config_hash: str, probes: Iterable[str], seed: int) -> str:
    """An audit's id: the hash of everything that determines its results (the one place it is computed).

    Example:
        >>> audit_key("7de65c068feb8c71", "b6a5144fd2e085c5", "96c082f09104ef35", ["sampling:k=2"], 0)
        '0d63af4d90454ec2'
    """
    return short_hash(json.dumps([model_fingerprint, task_fingerprint, config_hash, list(probes), seed]))


def is_hash(text: object) -> bool:
    """Is ``text`` a 16-hex-digit hash, as :func:`short_hash` makes them (an audit id, a config hash)?"""
    return isinstance(text, str) and _HASH.fullmatch(text) is not None


def check_audit_id(text: object, where: str) -> str:
    """``text`` as an audit id the tool could have made (16 hex digits), or one line refusing it:
    an id from outside becomes part of file names (``rnr-lens export``), so nothing else passes."""
    if not is_hash(text):
        raise RnrLensError(
            f"{where} names audit {quoted(text)}, which is not an id rnr_lens makes (16 hex digits); the file was altered or not written by rnr_lens"
        )
    return str(text)


DRAWS = ("multinomial", "inverse-cdf")
"""How a sampled token is drawn from a row's distribution, each from the row's own generator:
``multinomial`` (``torch.multinomial``, row by row: a pass over the vocabulary per row and step)
or ``inverse-cdf`` (one uniform per row and step against the distribution's cumulative sum in
float64, every row in one batched search). Both draw exactly from the (top-p filtered)
distribution; they give different tokens for one seed, so the name of the draw is part of a
sampling probe's name."""

MAX_SEED = 2**32 - 1
"""The largest seed an audit takes (seeds are 32-bit: every generator seeds from them)."""


def check_seed(seed: object) -> None:
    """Refuse a seed that is not an integer in ``0..2**32-1`` (before any work is done)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise RnrLensError(f"seed must be an integer from 0 to {MAX_SEED}, got {seed!r}")


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
TRY_KEYS = ("question_id", "probe", "try_index")
"""What identifies a try within an audit."""
TRY_ANSWERS = ("text", "extracted", "correct", "n_tokens", "seed", "route", "ablation")
"""What a deterministic run reproduces exactly (its log-probabilities and entropies: to float
tolerance): two stores that disagree on these did not come from one run."""


def try_from_row(row: dict[str, Any]) -> Try:
    """A Try from a DataFrame row (pandas' NaN for a missing value becomes None)."""
    values: dict[str, Any] = {c: (None if isinstance(row[c], float) and row[c] != row[c] else row[c]) for c in TRY_COLUMNS}
    values["correct"] = bool(values["correct"])
    return Try(**values)


class AuditState(str, Enum):
    """How far an audit got: every question's tries stored (``complete``), some shards of it
    stored but no whole split (``partial``), or neither yet (``running``, also an audit killed
    midway: it resumes)."""

    RUNNING = "running"
    COMPLETE = "complete"
    PARTIAL = "partial"


_PARTIAL = re.compile(r"partial \((\d+/\d+(?:, \d+/\d+)*) shards\)")


@dataclass(frozen=True)
class AuditStatus:
    """An audit's :class:`AuditState` and, when ``partial``, its finished shards per split
    (``((1, 3),)``: 1 of the 3 shards of a 3-way split). Stored as its string
    (``running``, ``complete``, ``partial (1/3 shards)``); :meth:`parse` reads it back.

    Example:
        >>> AuditStatus.of_shards(["0/3", "2/3", "1/2"]), AuditStatus.parse("partial (2/3, 1/2 shards)").complete
        (AuditStatus.parse('partial (1/2, 2/3 shards)'), False)
    """

    state: AuditState = AuditState.RUNNING
    shards: tuple[tuple[int, int], ...] = ()

    @property
    def complete(self) -> bool:
        return self.state is AuditState.COMPLETE

    def __str__(self) -> str:
        if self.state is AuditState.PARTIAL:
            return "partial (" + ", ".join(f"{done}/{n}" for done, n in self.shards) + " shards)"
        return self.state.value

    def __repr__(self) -> str:
        return f"AuditStatus.parse({str(self)!r})"

    @classmethod
    def parse(cls, text: str) -> AuditStatus:
        """The inverse of ``str()``."""
        if text in (AuditState.RUNNING.value, AuditState.COMPLETE.value):
            return cls(AuditState(text))
        match = _PARTIAL.fullmatch(text)
        if match is None:
            raise RnrLensError(
                f"audit status {text!r} is not running, complete or 'partial (k/n shards)'; the store was edited by hand or by another tool"
            )
        return cls(AuditState.PARTIAL, tuple((int(d), int(n)) for d, _, n in (part.partition("/") for part in match.group(1).split(", "))))

    @classmethod
    def of_shards(cls, shards: Iterable[Shard | str]) -> AuditStatus:
        """The status that finished shards give an audit: ``complete`` once every shard of some
        split is among them (:func:`rnr_lens.core.shards.complete_split`, the one completeness rule),
        else ``partial`` with how many of each split's shards finished."""
        parsed = [s if isinstance(s, Shard) else Shard.parse(s) for s in shards]
        if complete_split(parsed) is not None:
            return cls(AuditState.COMPLETE)
        counts = sorted({s.count for s in parsed})
        return cls(AuditState.PARTIAL, tuple((len({s.index for s in parsed if s.count == n}), n) for n in counts))


RUNNING = AuditStatus(AuditState.RUNNING)
COMPLETE = AuditStatus(AuditState.COMPLETE)


def task_fingerprint(answer_type: str, questions: Iterable[tuple[str, str, str, Sequence[str]]]) -> str:
    """The hash of a task's questions in order, each ``(id, prompt, answer, choices)``, under its
    answer type: :meth:`rnr_lens.questions.tasks.Task.fingerprint`'s one owner, which a merge recomputes
    from a store's rows too (issue 73)."""
    digest = hashlib.sha256(answer_type.encode())
    for qid, prompt, answer, choices in questions:
        digest.update(json.dumps([qid, prompt, answer, list(choices)]).encode())
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class AuditRecord:
    """What identifies one audit in a run store (and how far it got).

    ``status`` says how far it got (:class:`AuditStatus`, stored as its string); ``created``
    is a Unix time, set by the store.
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
    status: AuditStatus = RUNNING

    def __post_init__(self) -> None:
        object.__setattr__(self, "probes", tuple(self.probes))
        if isinstance(self.status, str):  # the store's column and the evidence hold the string
            object.__setattr__(self, "status", AuditStatus.parse(self.status))

    def expected_id(self) -> str:
        """The id this record's fields give (:func:`audit_key`): what a store's own audits carry."""
        return audit_key(self.model_fingerprint, self.task_fingerprint, self.config_hash, self.probes, self.seed)

    def identity(self) -> tuple[str, str, tuple[str, ...], int]:
        """Model, task, probes and seed: two audits that share these differ only in config."""
        return (self.model_fingerprint, self.task_fingerprint, self.probes, self.seed)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (``probes`` as a list)."""
        out = asdict(self)
        out["probes"] = list(self.probes)
        out["status"] = str(self.status)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AuditRecord:
        data = dict(data)
        if "probes_json" in data:
            data["probes"] = loads_json(data.pop("probes_json"), f"audit {quoted(data.get('id'))}'s probes")
            if not isinstance(data["probes"], list) or not all(isinstance(p, str) for p in data["probes"]):
                raise RnrLensError(f"audit {quoted(data.get('id'))}'s probes are not a list of names")
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})


@dataclass(frozen=True)
class Outcome:
    """One question's greedy default-deployment answer, with or without an ablation.

    ``set`` says which part of a failure set the question belongs to (``discovery``,
    ``heldout`` or ``control``); it is empty for the audit's own default answers.
    """

    question_id: str
    text: str
    extracted: str | None
    """The answer read from ``text`` (None: none could be read), as :attr:`Try.extracted`."""
    correct: bool
    set: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Outcome:
        """The inverse of :meth:`to_dict` (stores written before the field was named
        ``extracted`` call it ``answer``)."""
        extracted = data["extracted"] if "extracted" in data else data["answer"]
        return cls(str(data["question_id"]), data["text"], extracted, bool(data["correct"]), data.get("set", ""))


def reachable_column(label: str) -> str:
    """The question table's column: whether any try of the probe with short label ``label``
    (:attr:`rnr_lens.measure.results.AuditResult.labels`) was correct."""
    return f"reachable[{label}]"


def first_hit_column(label: str) -> str:
    """The question table's column: the index of the probe's first correct try (or NA)."""
    return f"first_hit[{label}]"
