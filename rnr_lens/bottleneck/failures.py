"""Failure sets: frozen lists of questions that fail by default, with a held-out half and a
control set of realized questions.

A failure set is derived once from an audit and stored in the run store with its definition;
asking again for the same name returns the frozen set, and asking for the same name with a
different definition is an error: a failure set is never silently recomputed.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rnr_lens.core.records import Outcome
from rnr_lens.errors import RnrLensError, arg
from rnr_lens.measure.store import Artifact, RunStore
from rnr_lens.questions.deploy import DeploymentConfig
from rnr_lens.questions.tasks.core import Question, Task

if TYPE_CHECKING:  # read, never built here: the failure set loads without the model floor
    from rnr_lens.measure.results import AuditResult

SELECTIONS = ("reachable-not-realized", "not-realized", "ids")
"""How a failure set chooses its questions (its definition's ``selection``)."""
MIN_FAILURES = 2
"""The smallest failure set: one discovery and one held-out question."""


def mine_with_it() -> str:
    """What to do when a failure set meets other weights than its audit's (the default fix-it
    hint), spelled for the caller (``errors.arg``)."""
    return f"mine with that checkpoint ({arg('model')})"


def check_weights(model: Any, fingerprint: str, audit_id: str, fix: str | None = None) -> None:
    """Refuse ``model`` unless its weights are those audit ``audit_id`` recorded
    (``fingerprint``), in one line ending with the caller's ``fix``: the one owner of "mine with
    the audited checkpoint" (:meth:`FailureSet.check_model`, a report before it mines).

    Example:
        >>> check_weights(model, result.info.model_fingerprint, result.id)  # doctest: +SKIP
    """
    if model.fingerprint() != fingerprint:
        raise RnrLensError(
            f"model {model.name} is not the checkpoint audit {audit_id[:12]} was made with (weights {fingerprint}); {fix or mine_with_it()}"
        )


@dataclass(frozen=True)
class FailureSet:
    """A frozen failure set (discovery and held-out halves) and its control set."""

    name: str
    audit_id: str
    definition: dict[str, Any]
    discovery: Task
    heldout: Task
    control: Task | None
    """Realized questions for the break rate; None when the audit realized none (the break
    rate is then unmeasured, and said so, rather than the sweep refused)."""
    config: DeploymentConfig
    model_fingerprint: str
    """The weights fingerprint of the audited model: what ``before`` is the answer of."""
    before: dict[str, Outcome] = field(default_factory=dict, compare=False)
    """The audit's default (realized) answer to every question."""

    def check_model(self, model: Any, fix: str | None = None) -> None:
        """Refuse a model other than the audited checkpoint: its answers would be compared with
        the audited model's ``before`` (repairs and breaks of nothing it did). Every sweep and
        null calls this before it generates (:func:`check_weights`)."""
        check_weights(model, self.model_fingerprint, self.audit_id, fix)

    @property
    def failures(self) -> Task:
        return Task(f"{self.name}:failures", self.discovery.questions + self.heldout.questions, self.discovery.answer_type, self.discovery.source)

    @property
    def groups(self) -> list[tuple[str, Task]]:
        """``(set name, questions)`` for the discovery half, the held-out half and the control
        set (when there is one), in that order."""
        out = [("discovery", self.discovery), ("heldout", self.heldout)]
        return out + ([("control", self.control)] if self.control is not None else [])

    @property
    def heldout_controls(self) -> frozenset[str]:
        """The control questions of the held-out half: a seeded half of the control set (the
        set's seed), never used to admit a block, so a bottleneck's break rate is judged on
        controls that did not choose it. The other half admits blocks (the miner's break
        bound). Derived from the frozen lists, so every set frozen before splits the same way.
        """
        if self.control is None:
            return frozenset()
        ids = [q.id for q in self.control]
        random.Random(f"control-split:{self.definition.get('seed', 0)}").shuffle(ids)
        return frozenset(ids[(len(ids) + 1) // 2 :])

    def describe(self) -> str:
        d = self.definition
        what = d["selection"] + (f" under {d['probe']}" if d.get("probe") else "")
        control = (
            f"{len(self.control)} control (realized) questions"
            if self.control is not None
            else "no control set (the audit realized no question): break rates are unmeasured"
        )
        return f"failure set {self.name!r}: {what}; {len(self.discovery)} discovery + {len(self.heldout)} held-out failures, {control}"


def _questions(result: AuditResult, ids: Sequence[str], answer_type: str, name: str) -> Task:
    table = result.questions.set_index("question_id")
    qs = tuple(Question(i, table.loc[i, "prompt"], table.loc[i, "gold"]) for i in ids)
    return Task(name, qs, answer_type, f"audit:{result.id}")


def freeze(
    result: AuditResult,
    store: RunStore,
    *,
    selection: str = "reachable-not-realized",
    probe: str | None = None,
    ids: Sequence[str] | None = None,
    name: str = "main",
    seed: int = 0,
    control_size: int | None = None,
) -> FailureSet:
    """Freeze (or load the frozen) failure set ``name`` of an audit.

    Args:
        result: The audit.
        store: The run store the audit lives in (the set is stored beside it).
        selection: ``reachable-not-realized`` (under ``probe``, oracle selector),
            ``not-realized``, or ``ids`` (the explicit list ``ids``).
        probe: The probe for ``reachable-not-realized`` (may be left out when the audit has one).
        ids: Question ids for selection ``ids``.
        name: The set's name within the audit.
        seed: Seeds the discovery/held-out split and the control sample.
        control_size: Realized questions kept as the control set (default: all of them).
    """
    if selection not in SELECTIONS:
        raise RnrLensError(f"unknown failure-set selection {selection!r}; choose one of {', '.join(SELECTIONS)}")
    if selection == "reachable-not-realized":
        if probe is None:
            if len(result.probes) != 1:
                raise RnrLensError(
                    f"audit {result.id[:12]} has {len(result.probes)} probes; name one with {arg('probe')} for reachable-not-realized "
                    f"(one of {', '.join(result.probes)})"
                )
            probe = result.probes[0]
        probe = result.probe_name(probe)
        chosen = result.reachable_not_realized(probe)
    elif selection == "not-realized":
        chosen = result.questions.loc[~result.questions["realized"], "question_id"].tolist()
    else:
        if not ids:
            raise RnrLensError("a failure set of selection 'ids' needs the question ids")
        known = set(result.questions["question_id"])
        missing = [i for i in ids if i not in known]
        if missing:
            raise RnrLensError(f"question {missing[0]!r} is not in audit {result.id[:12]}")
        chosen = list(ids or ())
    definition = {
        "selection": selection,
        "probe": probe,
        "ids": list(ids or ()) if selection == "ids" else None,
        "seed": seed,
        "control_size": control_size,
    }
    frozen = _read(store.get_artifact(result.id, Artifact.FAILURE_SET, name))
    if frozen is not None:
        if frozen["definition"] != definition:
            raise RnrLensError(f"failure set {name!r} of audit {result.id[:12]} is frozen with another definition; choose a new {arg('name')}")
        return _build(result, name, frozen)
    if len(chosen) < MIN_FAILURES:
        raise RnrLensError(
            f"only {len(chosen)} question(s) are {selection} in audit {result.id[:12]}; a failure set needs at least {MIN_FAILURES} (audit more questions or a larger budget)"
        )
    rng = random.Random(f"failure-set:{seed}")
    shuffled = chosen[:]
    rng.shuffle(shuffled)
    half = (len(shuffled) + 1) // 2
    realized = result.realized_ids()
    control = realized if control_size is None or control_size >= len(realized) else sorted(rng.sample(realized, control_size), key=realized.index)
    body = {
        "definition": definition,
        "discovery": sorted(shuffled[:half], key=chosen.index),
        "heldout": sorted(shuffled[half:], key=chosen.index),
        "control": control,
    }
    store.put_artifact(result.id, Artifact.FAILURE_SET, name, body)
    return _build(result, name, body)


def load(result: AuditResult, store: RunStore, name: str = "main") -> FailureSet:
    body = _read(store.get_artifact(result.id, Artifact.FAILURE_SET, name))
    if body is None:
        raise RnrLensError(f"audit {result.id[:12]} has no failure set {name!r}; freeze one first")
    return _build(result, name, body)


def _read(body: dict[str, Any] | None) -> dict[str, Any] | None:
    """A stored failure set as this version writes it: sets frozen before the definition's
    ``kind`` was named ``selection`` read the same."""
    if body is None or "kind" not in body["definition"]:
        return body
    definition = {("selection" if k == "kind" else k): v for k, v in body["definition"].items()}
    return {**body, "definition": definition}


def _build(result: AuditResult, name: str, body: dict[str, Any]) -> FailureSet:
    answer_type = result.info.answer_type
    return FailureSet(
        name,
        result.id,
        body["definition"],
        _questions(result, body["discovery"], answer_type, f"{name}:discovery"),
        _questions(result, body["heldout"], answer_type, f"{name}:heldout"),
        _questions(result, body["control"], answer_type, f"{name}:control") if body["control"] else None,
        result.config,
        result.info.model_fingerprint,
        {r.question_id: Outcome(r.question_id, r.default_text, r.default_extracted, bool(r.realized)) for r in result.questions.itertuples()},
    )
