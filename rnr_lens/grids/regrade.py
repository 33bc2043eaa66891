"""Re-grading: a report's evidence read again under another answer reader, with no model.

A try's text depends on how the model was deployed and on its probe, never on the reader that
graded it, with two exceptions: a probe that steers by answers (a search with
``reward=oracle`` picks its next route by whether earlier ones were correct), and claim 2's
mined stage, whose failure set is chosen by which answers were read as correct and whose sweeps
ran on that set. So :func:`regrade` takes an evidence document (:func:`rnr_lens.measure.evidence.read`)
and a deployment config that differs from each audit's only in its reader
(:meth:`~rnr_lens.questions.deploy.DeploymentConfig.generation`), and returns the document as if the
runs had used that config:

- every try, and every sweep evaluation kept, is read again (``extracted``, ``correct``);
- each audit carries the new config and hash, and the id they give
  (:func:`rnr_lens.core.records.audit_key`); the manifest names the new ids;
- a setting's mined stage is kept only where nothing it read moved: each failure set is frozen
  again from the re-read tries by its own definition (:func:`rnr_lens.bottleneck.failures.freeze`, the
  one owner of that rule) and must hold the same questions, no set may appear where there was
  none, and no sweep evaluation may be read otherwise. Where a set moved, the whole stage is
  dropped; where only evaluations were read otherwise, the set and its (re-read) evaluations
  are kept and the sweeps' tables and the null dropped. Either way the setting is no longer
  mined, with its reason, and :func:`rnr_lens.grids.reports.mine_again` (``rnr-lens report
  --mine-again --out DIR``) mines it with only that setting's model, reusing every kept
  evaluation;
- an answer-steered probe's tries cannot be re-graded: such evidence is refused.

Invariant: re-grading under the config the evidence already holds changes nothing; the tries'
texts, seeds, routes and scores are never touched.

Example:
    >>> from rnr_lens.questions.deploy import DeploymentConfig
    >>> doc = {"manifest": {"grid": {}, "settings": []}, "audits": []}
    >>> regrade(doc, DeploymentConfig()).document["audits"]
    []
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from rnr_lens.bottleneck.failures import freeze
from rnr_lens.bottleneck.sweep_results import SweepKey
from rnr_lens.core.records import TRY_COLUMNS, AuditRecord, Outcome
from rnr_lens.core.stats import rate
from rnr_lens.core.untrusted import quoted
from rnr_lens.errors import RnrLensError
from rnr_lens.judge.sweeps import rates
from rnr_lens.measure.evidence import MINED, SettingRecord
from rnr_lens.measure.probes import parse_probe
from rnr_lens.measure.results import AuditResult
from rnr_lens.measure.store import Artifact, RunStore
from rnr_lens.questions.deploy import DeploymentConfig
from rnr_lens.questions.tasks.core import Question, Task

REGRADING_FILE = "regrading.json"
"""What a re-graded report folder says moved (:meth:`Regrading.to_dict`)."""
_TEXT, _EXTRACTED, _CORRECT, _PROBE, _INDEX = (TRY_COLUMNS.index(c) for c in ("text", "extracted", "correct", "probe", "try_index"))
_MINED_KINDS = frozenset({str(Artifact.FAILURE_SET), str(Artifact.SWEEP), str(Artifact.SWEEP_EVAL), str(Artifact.NULL)})
"""The artifacts of claim 2's mined stage."""
_DERIVED_KINDS = frozenset({str(Artifact.SWEEP), str(Artifact.NULL)})
"""Those computed from a failure set's evaluations (a sweep's table, the null): mining again
with the set and its evaluations kept recomputes them, generating only what is not stored."""


@dataclass(frozen=True)
class AuditRegrade:
    """What re-grading did to one audit: its old and new id, how many tries it read again, how
    many readings and correctness flags moved, and its mined stage (``kept``, ``dropped`` with
    ``reason``, or ``none`` where it had none)."""

    old_id: str
    new_id: str
    model: str
    task: str
    tries: int
    readings_changed: int
    correct_changed: int
    mined: str = "none"
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Regrading:
    """A re-graded evidence document and what moved, audit by audit."""

    document: dict[str, Any]
    audits: tuple[AuditRegrade, ...]

    @property
    def dropped(self) -> tuple[AuditRegrade, ...]:
        """The audits whose mined stage must be mined again."""
        return tuple(a for a in self.audits if a.mined == "dropped")

    def lines(self) -> list[str]:
        """One line per audit, then what could not be re-graded and how to finish it."""
        out = [
            f"{a.model} on {a.task}: {a.tries} tries read again, {a.readings_changed} readings and {a.correct_changed} correctness flags changed"
            + ("" if a.mined == "none" else f"; mined stage {a.mined}" + (f" ({a.reason})" if a.reason else ""))
            for a in self.audits
        ]
        if self.dropped:
            out.append(
                f"{len(self.dropped)} mined stage(s) were not re-graded (a failure set is chosen by what was read, a sweep's table by its evaluations); "
                "run `rnr-lens report --mine-again --out` on this folder to mine them again (it loads only their models)"
            )
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"audits": [a.to_dict() for a in self.audits]}


def regrade(document: Mapping[str, Any], config: DeploymentConfig | None = None, *, mined_probe: str | None = None) -> Regrading:
    """``document`` (evidence, already :func:`~rnr_lens.measure.evidence.read`) re-graded under
    ``config`` (None: each audit's task default under this rnr_lens's config version, as a run
    today would deploy it). ``mined_probe``: the probe a report chooses its failure sets under
    (its grid's sampling probe), so that a mined setting that had too few failures for a set is
    mined again where the new reader gives it enough. Refuses, in one line, a config that would
    have generated other texts, a harness's task (its reader is the harness's own filter) and
    answer-steered probes."""
    audits, renamed, moved = [], {}, []
    mined = {s["audit"] for s in document["manifest"].get("settings", []) if MINED in s.get("stages", ())}
    for payload in document["audits"]:
        record = AuditRecord.from_dict(payload["audit"])
        old = DeploymentConfig.from_json(record.config_json)
        new = config if config is not None else DeploymentConfig.default_for(record.answer_type, chat=old.chat).with_(shots=old.shots)
        _check(record, old, new)
        was_mined = record.id in mined or any(a[0] == str(Artifact.FAILURE_SET) for a in payload["artifacts"])
        new_payload, summary = _regrade_audit(payload, record, new, mined_probe if was_mined else None, was_mined)
        audits.append(new_payload)
        renamed[record.id] = summary.new_id
        moved.append(summary)
    manifest = dict(document["manifest"])
    dropped = {a.new_id for a in moved if a.mined == "dropped"}
    settings = []
    for s in manifest.get("settings", []):
        r = SettingRecord.from_dict(s)
        r = replace(r, audit=renamed[r.audit], ceiling=None if r.ceiling is None else renamed[r.ceiling])
        if r.audit in dropped:
            r = replace(r, stages=tuple(x for x in r.stages if x != MINED))
        settings.append(r.to_dict())
    manifest["settings"] = settings
    return Regrading({**document, "manifest": manifest, "audits": audits}, tuple(moved))


def _check(record: AuditRecord, old: DeploymentConfig, new: DeploymentConfig) -> None:
    where = f"audit {record.id} ({record.model} on {record.task})"
    if old.harness or new.harness:
        raise RnrLensError(f"{where} is graded by a harness's filter; re-grade it by re-running its task (`rnr-lens report GRID`)")
    if old.generation() != new.generation():
        differ = sorted(k for k in old.generation() if old.generation()[k] != new.generation().get(k))
        raise RnrLensError(
            f"{where} was generated under another deployment ({', '.join(differ)} differ); re-grading changes only the reader "
            "(extractor, version): give a config that matches the run's in every other field"
        )
    for probe in record.probes:
        if getattr(parse_probe(probe), "reward", None) == "oracle":
            raise RnrLensError(
                f"{where}'s probe {probe} chose its routes by reading answers, so its tries depend on the reader; "
                "re-run the audit under the new config instead"
            )


def _regrade_audit(
    payload: Mapping[str, Any], record: AuditRecord, config: DeploymentConfig, mined_probe: str | None, mined: bool
) -> tuple[dict[str, Any], AuditRegrade]:
    """One exported audit re-read under ``config`` (``mined``: it has claim 2's stage)."""
    questions = {row[0]: Question(row[0], row[2], row[3]) for row in payload["questions"]}
    tries, readings, correct_changed = [], 0, 0
    for row in payload["tries"]:
        extracted, correct = config.read_with(config.extractor, row[_TEXT], questions[row[0]], record.answer_type)
        readings += extracted != row[_EXTRACTED]
        correct_changed += int(correct) != row[_CORRECT]
        tries.append([*row[:_EXTRACTED], extracted, int(correct), *row[_CORRECT + 1 :]])
    artifacts, evaluations_moved = _regrade_artifacts(payload, record, config, questions)
    regraded = replace(record, config_hash=config.hash(), config_json=config.to_json())
    new_id = regraded.expected_id()
    audit = {**payload["audit"], "id": new_id, "config_hash": regraded.config_hash, "config_json": regraded.config_json}
    out = {**payload, "audit": audit, "tries": tries, "artifacts": artifacts}
    state, reason = ("kept", "") if mined else ("none", "")
    moved_set = _failure_sets_moved(out, mined_probe) if mined else ""
    if moved_set:  # another failure set: nothing mined on this one stands
        state, reason = "dropped", moved_set
        out["artifacts"] = [a for a in artifacts if a[0] not in _MINED_KINDS]
    elif mined and evaluations_moved:  # the same set, its evaluations re-read: only what was computed from them goes
        state, reason = "dropped", f"{evaluations_moved} sweep evaluation answer(s) read otherwise; its failure set and evaluations are kept"
        out["artifacts"] = [a for a in artifacts if a[0] not in _DERIVED_KINDS]
    summary = AuditRegrade(record.id, new_id, record.model, record.task, len(tries), readings, correct_changed, state, reason)
    return out, summary


def _failure_sets_moved(payload: Mapping[str, Any], mined_probe: str | None) -> str:
    """Why a re-graded audit's failure sets no longer stand ("" where each is what
    :func:`rnr_lens.bottleneck.failures.freeze` freezes from the re-read tries, and no set appears where
    there was none): each set is frozen again, by its own definition, in a scratch store."""
    store = RunStore(":memory:")
    store.absorb({**payload, "artifacts": [a for a in payload["artifacts"] if a[0] not in _MINED_KINDS]}, source="the re-graded evidence")
    result = AuditResult.load(store, payload["audit"]["id"])
    stored = [(name, json.loads(body)) for kind, name, body, _ in payload["artifacts"] if kind == str(Artifact.FAILURE_SET)]
    for name, body in stored:
        d = body["definition"]
        try:
            again = freeze(
                result,
                store,
                selection=d.get("selection", d.get("kind")),
                probe=d["probe"],
                ids=d["ids"],
                name=name,
                seed=d["seed"],
                control_size=d["control_size"],
            )
        except RnrLensError:
            return f"its failure set {name!r} no longer has enough questions"
        if [[q.id for q in t.questions] for t in (again.discovery, again.heldout)] != [body["discovery"], body["heldout"]] or (
            [q.id for q in again.control.questions] if again.control is not None else []
        ) != body["control"]:
            return f"its failure set {name!r} holds other questions under the new reader"
    if not stored and mined_probe is not None:
        try:
            freeze(result, store, probe=mined_probe, name="re-graded")
        except RnrLensError:
            return ""
        return "a failure set can now be frozen where there were too few failures for one"
    return ""


def _regrade_artifacts(
    payload: Mapping[str, Any], record: AuditRecord, config: DeploymentConfig, questions: Mapping[str, Question]
) -> tuple[list[list[Any]], int]:
    """The audit's artifacts with every sweep evaluation read again and renamed to the new
    config's key; and how many answers in them are read otherwise (their text or correctness:
    a sweep's table shows both)."""
    out, flips = [], 0
    for kind, name, body, created in payload["artifacts"]:
        if kind == str(Artifact.SWEEP_EVAL):
            outcomes = [Outcome.from_dict(r) for r in json.loads(body)]
            read = [config.read_with(config.extractor, o.text, questions[o.question_id], record.answer_type) for o in outcomes]
            changed = sum((extracted, correct) != (o.extracted, o.correct) for o, (extracted, correct) in zip(outcomes, read))
            flips += changed
            if changed:
                body = json.dumps([replace(o, extracted=e, correct=c).to_dict() for o, (e, c) in zip(outcomes, read)])
            name = str(replace(SweepKey.parse(name), config=config.hash()))
        out.append([kind, name, body, created])
    return out, flips


def check_readings(document: Mapping[str, Any], harness_tasks: Sequence[Task] = ()) -> tuple[str, ...]:
    """Every derived field of ``document`` (evidence, already read) that a referee can
    recompute, recomputed and compared, before anything is built from it (issue 73: a file
    whose correctness flags were all set to true re-derived, and said nothing): each try's
    reading and correctness, from its text, its audit's recorded reader and its question's
    gold; and each task's fingerprint, from its questions in order (where the audit holds all
    of them and the task has no choices, which the file does not keep). Refuses in one line at
    the first that differs. A harness's audits are read by the harness's own filter, which
    needs the task: one is read again where ``harness_tasks`` (tasks the user named, never a
    path the file names) holds every one of its questions as the audit holds them; the others'
    ids are returned, so the re-derivation can say their flags are as the file records them."""
    unread = []
    for payload in document["audits"]:
        record = AuditRecord.from_dict(payload["audit"])
        config = DeploymentConfig.from_json(record.config_json)
        where = f"audit {record.id[:12]} ({quoted(record.model)} on {quoted(record.task)})"
        questions = {row[0]: Question(row[0], row[2], row[3]) for row in payload["questions"]}
        named = named_task(questions, harness_tasks) if config.harness else None
        if config.harness and named is None:
            unread.append(record.id)
        else:
            if named is not None:  # the harness grades from the task's own documents: its questions, with their metadata
                config, questions = replace(config, scoring=named.scoring), {q.id: q for q in named.questions if q.id in questions}
            for row in payload["tries"]:
                if row[0] not in questions:
                    raise RnrLensError(f"{where} holds a try of question {quoted(row[0])}, which it does not hold; the file was altered")
                extracted, correct = config.read_with(config.extractor, row[_TEXT], questions[row[0]], record.answer_type)
                if extracted != row[_EXTRACTED] or int(correct) != int(row[_CORRECT]):
                    raise RnrLensError(
                        f"{where}: try {row[_INDEX]} of {quoted(row[_PROBE])} for question {quoted(row[0])} reads {quoted(extracted)} "
                        f"({'correct' if correct else 'wrong'}) from its text under {config.extractor}, but the file says "
                        f"{quoted(row[_EXTRACTED])} ({'correct' if row[_CORRECT] else 'wrong'}); the file was altered, or read by another "
                        "reader (re-derive it with --regrade to read it again)"
                    )
            _check_evaluations(payload, record, config, questions, where)
            _check_sweeps(payload, record, config, questions, where)
        _check_nulls(payload, where)
        if record.answer_type != "choice" and len(questions) == record.n_questions:
            ordered = sorted(payload["questions"], key=lambda r: r[1])
            task = Task(record.task, tuple(Question(r[0], r[2], r[3]) for r in ordered), record.answer_type)
            if task.fingerprint() != record.task_fingerprint:
                raise RnrLensError(
                    f"{where}: its questions give the task fingerprint {task.fingerprint()}, but the file says {record.task_fingerprint}; "
                    "a question or gold was altered"
                )
    return tuple(unread)


def _check_evaluations(
    payload: Mapping[str, Any], record: AuditRecord, config: DeploymentConfig, questions: Mapping[str, Question], where: str
) -> None:
    """Each kept sweep evaluation's answers (an ablation's greedy answers on a failure set, from
    which claim 2's repair and break rates are counted) read again from their texts, as
    :func:`check_readings` reads the tries: the first that differs is refused."""
    for kind, name, body, _ in payload["artifacts"]:
        if kind != str(Artifact.SWEEP_EVAL):
            continue
        for o in (Outcome.from_dict(r) for r in json.loads(body)):
            if o.question_id not in questions:
                raise RnrLensError(
                    f"{where}'s sweep evaluation {quoted(name)} answers question {quoted(o.question_id)}, which it does not hold; the file was altered"
                )
            extracted, correct = config.read_with(config.extractor, o.text, questions[o.question_id], record.answer_type)
            if (extracted, correct) != (o.extracted, o.correct):
                raise RnrLensError(
                    f"{where}: sweep evaluation {quoted(name)} for question {quoted(o.question_id)} reads {quoted(extracted)} "
                    f"({'correct' if correct else 'wrong'}) from its text under {config.extractor}, but the file says "
                    f"{quoted(o.extracted)} ({'correct' if o.correct else 'wrong'}); the file was altered"
                )


def _check_sweeps(payload: Mapping[str, Any], record: AuditRecord, config: DeploymentConfig, questions: Mapping[str, Question], where: str) -> None:
    """Each kept sweep's rates and counts (claim 2's repair and break, per block) counted again
    from the sweep's own per-question rows, whose answers and flags are read again from their
    texts first: a rate or count that is not what its rows give is refused (issue 73)."""
    for kind, name, body, _ in payload["artifacts"]:
        if kind != str(Artifact.SWEEP):
            continue
        sweep = json.loads(body)
        groups: dict[tuple[Any, Any, Any], list[Mapping[str, Any]]] = {}
        for d in sweep.get("details", []):
            groups.setdefault((d["layer"], d["component"], d.get("method", d.get("kind"))), []).append(d)
        for row in sweep.get("table", []):
            if row.get("n_repaired") is None:
                continue  # a candidate the screen did not send to generation
            key = (row["layer"], row["component"], row.get("method", row.get("kind")))
            after, before = [], {}
            for d in groups.get(key, []):
                question = questions.get(d["question_id"])
                if question is None:
                    raise RnrLensError(
                        f"{where}: sweep {quoted(name)} holds question {quoted(d['question_id'])}, which the audit does not; the file was altered"
                    )
                for when in ("before", "after"):
                    read = config.read_with(config.extractor, d[f"{when}_text"], question, record.answer_type)
                    if read != (d[f"{when}_answer"], bool(d[f"{when}_correct"])):
                        raise RnrLensError(
                            f"{where}: sweep {quoted(name)}'s answer {when} silencing block {key[0]} for question {quoted(d['question_id'])} "
                            f"reads {quoted(read[0])} ({'correct' if read[1] else 'wrong'}) from its text, but the file says "
                            f"{quoted(d[f'{when}_answer'])} ({'correct' if d[f'{when}_correct'] else 'wrong'}); the file was altered"
                        )
                after.append(Outcome(d["question_id"], d["after_text"], d["after_answer"], bool(d["after_correct"]), d["set"]))
                before[d["question_id"]] = Outcome(d["question_id"], d["before_text"], d["before_answer"], bool(d["before_correct"]))
            heldout = frozenset(d["question_id"] for d in groups.get(key, []) if d["set"] == "control" and d.get("half") == "heldout")
            again = rates(int(key[0]), after, before, heldout).columns()
            for column, value in again.items():
                kept = row.get(column)
                if column in row and not _agrees(kept, value):
                    raise RnrLensError(
                        f"{where}: sweep {quoted(name)} gives block {key[0]} {column} {quoted(kept)}, but its rows give {quoted(value)}; the file was altered"
                    )


def _agrees(kept: Any, again: Any) -> bool:
    """A number a file keeps is the one computed again: both absent (None, or NaN, which
    compares unequal to everything, itself included), or both numbers within 1e-9 (never
    text: a rate kept as a string disagrees)."""
    absent = [x is None or (isinstance(x, float) and math.isnan(x)) for x in (kept, again)]
    if any(absent):
        return all(absent)
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (kept, again)):
        return False  # a rate kept as text, say
    return abs(kept - again) <= 1e-9


def named_task(questions: Mapping[str, Question], harness_tasks: Sequence[Task]) -> Task | None:
    """The first of ``harness_tasks`` (a harness's, with its scorer) holding every one of
    ``questions`` with the same prompt and gold, or None: the task a harness's audit was made
    on, as the user named it (its questions carry the documents the harness grades from)."""
    for task in harness_tasks:
        held = {q.id: q for q in task.questions}
        if task.scoring is not None and all(
            q.id in held and (held[q.id].prompt, held[q.id].answer) == (q.prompt, q.answer) for q in questions.values()
        ):
            return task
    return None


_NULL_ARMS = {"random_block": "random block", "rerun": "unablated re-run"}
"""A kept null's rates and the per-question arm each is the rate of."""


def _check_nulls(payload: Mapping[str, Any], where: str) -> None:
    """Each kept null's rates (an arbitrary block's held-out repair, an unablated re-run's)
    computed again from its per-question shares: one that is not what they give is refused."""
    for kind, name, body, _ in payload["artifacts"]:
        if kind != str(Artifact.NULL):
            continue
        null = json.loads(body)
        for field, arm in _NULL_ARMS.items():
            shares = (null.get("per_question") or {}).get(arm)
            if shares is None:
                continue  # a null kept without this arm's shares
            again, kept = rate(list(shares.values())).to_dict(), null[field]
            if not all(_agrees(kept.get(k), again[k]) for k in ("value", "low", "high", "n")):
                raise RnrLensError(f"{where}: null {quoted(name)} gives its {arm} a rate its per-question shares do not give; the file was altered")
