"""The audit loop: realized versus reachable, question by question, under matched budgets.

``audit(model, task, probes)`` first runs the default deployment (the realized answer), then
each probe, committing every batch of finished tries to the run store as it completes. The
audit's id hashes the model weights, task, deployment config, probes and seed: running the
same audit again resumes it (nothing lost, nothing duplicated) and the same config and seed
give the same per-question results.
"""

from __future__ import annotations

import contextlib
import json
import os
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rnr_lens.core.display import progress_bar, short_text
from rnr_lens.core.files import NoSpace, acquire_writer_lock
from rnr_lens.core.phases import phase
from rnr_lens.core.records import COMPLETE, DEFAULT_PROBE, AuditRecord, audit_key, check_seed
from rnr_lens.core.shards import Shard
from rnr_lens.errors import RnrLensError, arg
from rnr_lens.measure.probe_specs import check_readable, short_labels
from rnr_lens.measure.probes import Default, Probe, ProbeContext, legacy_name_note, parse_probe
from rnr_lens.measure.results import AuditResult
from rnr_lens.measure.store import MEMORY, Artifact, RunStore, open_store, refuse_links
from rnr_lens.model.lens import LensModel
from rnr_lens.questions.deploy import DeploymentConfig, deployment_for_task
from rnr_lens.questions.shots import Shots
from rnr_lens.questions.tasks.core import Question, Task

ROWS_PER_UNIT = 64  # generation rows per commit unit of a probe (one full batch)

RESUME = (True, False, "only")
"""An audit's resume policy for an audit of the same id in the store: continue an unfinished one
or start one (``True``), refuse to continue one (``False``), continue only (``"only"``)."""


def audit_id(model_fingerprint: str, task: Task, config: DeploymentConfig, probes: Sequence[Probe], seed: int) -> str:
    return audit_key(model_fingerprint, task.fingerprint(), config.hash(), [p.name for p in probes], seed)


def check_context(model: LensModel, config: DeploymentConfig, questions: Sequence[Question]) -> None:
    """Refuse a question whose prompt plus ``max_new_tokens`` does not fit the model's context."""
    limit = model.context_length
    if limit is None:
        return
    for q in questions:
        n = len(model.encode(config.prompt(q)))
        if n + config.max_new_tokens > limit:
            raise RnrLensError(
                f"question {q.id}: its prompt is {n} tokens, plus max_new_tokens {config.max_new_tokens} that exceeds {model.name}'s context "
                f"of {limit} positions; shorten or drop that question, or lower max_new_tokens"
            )


@dataclass(frozen=True)
class AuditPlan:
    """What identifies an audit, checked before any work is done: the task, the probes, the
    seed, the shard and (once the model or its tokenizer has chosen it) the deployment config.

    :func:`plan` builds one; :func:`audit`, :func:`rnr_lens.measure.executors.run_audit` and the CLI all
    go through it, so the identity and the pre-flight checks have one owner.

    Example:
        >>> p = plan(tasks.get("add-small", n=4), ["sampling:k=2"], seed=1)  # doctest: +SKIP
        >>> p.settings()["probes"]  # doctest: +SKIP
        ['sampling:k=2,t=0.7,top_p=1.0']
    """

    task: Task
    probes: tuple[Probe, ...]
    seed: int = 0
    config: DeploymentConfig | None = None
    shard: Shard | None = None

    def with_config(self, config: DeploymentConfig) -> AuditPlan:
        return replace(self, config=config)

    def deployed(self, model: Any) -> AuditPlan:
        """This plan with its config: the one given, else the default for ``model`` (a model or
        a tokenizer; :func:`~rnr_lens.questions.deploy.deployment_for_task`), checked to fit the task."""
        return self.with_config(deployment_for_task(model, self.task, self.config))

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.probes]

    def id(self, model_fingerprint: str) -> str:
        """The audit's id for a model with these weights (the plan needs its config)."""
        return audit_id(model_fingerprint, self.task, self.deployment, self.probes, self.seed)

    @property
    def deployment(self) -> DeploymentConfig:
        """The config (raises where the plan has none yet)."""
        if self.config is None:
            raise RnrLensError("this audit plan has no deployment config yet; give one, or call .deployed(model)")
        return self.config

    def record(self, model: str, model_fingerprint: str, label: str | None = None) -> AuditRecord:
        """The audit's record for a model of this name and these weights (the plan needs its
        config)."""
        config = self.deployment
        return AuditRecord(
            id=self.id(model_fingerprint),
            model=model,
            model_fingerprint=model_fingerprint,
            task=self.task.name,
            task_fingerprint=self.task.fingerprint(),
            answer_type=self.task.answer_type,
            config_hash=config.hash(),
            config_json=config.to_json(),
            probes=tuple(self.names),
            seed=self.seed,
            n_questions=len(self.task),
            label=label,
        )

    def settings(self) -> dict[str, Any]:
        """The :class:`~rnr_lens.core.records.AuditRecord` fields known without the model's weights
        (what a ``--resume`` compares before loading them)."""
        out: dict[str, Any] = {
            "task": self.task.name,
            "task_fingerprint": self.task.fingerprint(),
            "n_questions": len(self.task),
            "probes": self.names,
            "seed": self.seed,
        }
        if self.config is not None:
            out |= {"config_hash": self.config.hash(), "config_json": self.config.to_json()}
        return out

    def selected(self) -> list[tuple[int, Question]]:
        """The questions this plan audits (this shard's, or all of them), with their positions
        in the task."""
        return [(i, q) for i, q in enumerate(self.task.questions) if self.shard is None or self.shard.contains(q.id)]

    def questions(self) -> list[Question]:
        return [q for _, q in self.selected()]

    def check_model(self, model: LensModel) -> None:
        """Refuse a probe that names a block the model lacks, or a prompt that does not fit."""
        for probe in self.probes:
            probe.check(model.n_layers)
        check_context(model, self.deployment, self.questions())

    def resume_mismatch(self, store: RunStore) -> str | None:
        """Why no audit in ``store`` matches this plan, or None when one does."""
        return resume_mismatch(store, self.settings())


def plan(
    task: Task,
    probes: Sequence[Probe | str] = (),
    *,
    seed: int = 0,
    config: DeploymentConfig | None = None,
    shard: str | Shard | None = None,
) -> AuditPlan:
    """Parse and check an audit's settings before any model is loaded or store touched: probe
    specs, no probe twice, the seed, the shard."""
    if isinstance(probes, (str, Probe)):  # one probe, not a list of letters
        probes = (probes,)
    probe_objs = tuple(p if isinstance(p, Probe) else parse_probe(p) for p in probes)
    names = [p.name for p in probe_objs]
    for name in names:
        check_readable(name)
    if len(set(names)) != len(names):
        twice = next(n for n in names if names.count(n) > 1)
        raise RnrLensError(f"the same probe is given twice ({twice}); give each probe once")
    check_seed(seed)
    return AuditPlan(task, probe_objs, seed, config, Shard.parse(shard) if isinstance(shard, str) else shard)


_IDENTITY_FIELDS = (
    ("model", "model"),
    ("model_fingerprint", "model weights"),
    ("task", "task"),
    ("task_fingerprint", "task questions"),
    ("n_questions", "number of questions"),
    ("config_hash", "deployment config"),
    ("probes", "probes"),
    ("seed", "seed"),
)


def _field_change(name: str, there: Any, now: Any) -> str:
    """One config field that differs, as a resume refusal names it (worked examples by their
    label, not their text)."""
    if name == "shots":
        said = [Shots.from_dict(v).label if isinstance(v, dict) else "none" for v in (there, now)]
        return f"shots {said[0]} there, {said[1]} now" if said[0] != said[1] else f"shots {said[0]}, other examples drawn"
    return f"{name} {there!r} there, {now!r} now"


def resume_mismatch(store: RunStore, settings: dict[str, Any]) -> str | None:
    """Why no audit in ``store`` matches ``settings`` (:class:`AuditRecord` fields of a
    ``--resume`` run), or None when one does. Compares only the fields ``settings`` holds, so it
    can run before the model is loaded (without ``model_fingerprint``)."""
    record = {k: tuple(v) if isinstance(v, list) else v for k, v in settings.items()}
    audits = store.audits()
    if not audits:
        return f"nothing to resume: {store.path} holds no audit; leave out {arg('resume_only')} to start one"
    diffs = []
    for a in audits:
        differ = [(key, label) for key, label in _IDENTITY_FIELDS if key in record and getattr(a, key) != record[key]]
        if not differ:
            return None
        diffs.append((a, differ))
    closest, differ = min(diffs, key=lambda d: len(d[1]))

    def said(key: str, label: str) -> str:
        if key.endswith("fingerprint"):
            return f"{label} differ"
        if key == "config_hash" and "config_json" in record:  # name the fields, not two hashes
            there, now = DeploymentConfig.from_json(closest.config_json).to_dict(), json.loads(str(record["config_json"]))
            fields = [_field_change(f, there.get(f), now.get(f)) for f in sorted(set(there) | set(now)) if there.get(f) != now.get(f)]
            return f"{label} ({', '.join(fields)})"
        return f"{label} {getattr(closest, key)!r} there, {record[key]!r} now"

    what = "; ".join(said(key, label) for key, label in differ)
    hint = (
        " (other weights, or an audit made before rnr_lens fingerprinted every weight: those read, but do not resume)"
        if [key for key, _ in differ] == ["model_fingerprint"]
        else ""
    )
    legacy = [note for name in closest.probes if (note := legacy_name_note(name))] if "probes" in dict(differ) else []
    if legacy:
        hint += f" ({legacy[0]})"
    return (
        f"{arg('resume_only')} found no audit with these settings in {store.path} ({len(audits)} there); the closest, {closest.id[:12]}, differs in: {what}{hint}; "
        f"rerun with its settings to continue it, or leave out {arg('resume_only')} to start a new audit"
    )


@contextlib.contextmanager
def prepared(
    planned: AuditPlan,
    store: RunStore | str | Path | None,
    *,
    resume: bool | str = True,
    deploy: Callable[[AuditPlan], AuditPlan] | None = None,
) -> Iterator[AuditPlan]:
    """Every check an audit into ``store`` passes before work starts, cheapest first, then the
    store's writer lock, held while the block runs. :func:`audit`,
    :func:`rnr_lens.measure.executors.run_audit` and the CLI's ``audit`` all go through it, so a Python
    caller is refused exactly where the command is:

    1. ``resume`` is one of :data:`RESUME`;
    2. a path's folder exists, it is not a symbolic link (nor its WAL or shared memory, even
       dangling: :func:`~rnr_lens.measure.store.refuse_links`), a resume (``"only"``) finds a file
       there, and a file there is a run store (a file that is not is refused untouched);
    3. a resume finds an audit with the plan's settings, compared on what the plan knows;
    4. ``deploy`` gives the plan its config (the CLI reads the model's tokenizer, as
       ``run_audit`` does for a model it has not loaded yet; :func:`audit` the loaded model)
       and step 3 runs again, naming the config's fields that differ;
    5. the writer lock of a path: a second writer is refused before any model work (one
       process may take it again; it is released when the block ends).

    Yields the plan, with its config where ``deploy`` gave one. Nothing but the lock file is
    written before the block starts, so bad input leaves no store behind. A path to an empty
    file is a store to make there, as :class:`~rnr_lens.measure.store.RunStore` makes one; ``":memory:"``
    is a store in memory, which takes no lock.

    Example:
        >>> with prepared(plan(task, ["sampling:k=8"]), "run.db", resume="only", deploy=lambda p: p.deployed(model)) as planned:  # doctest: +SKIP
        ...     planned.deployment.hash()
    """
    if resume not in RESUME:
        raise RnrLensError(f"resume must be one of {', '.join(map(repr, RESUME))}, got {resume!r}")
    path = None if store is None or isinstance(store, RunStore) or str(store) == MEMORY else Path(store)
    if path is not None:
        if not path.parent.exists():
            raise RnrLensError(f"folder {path.parent} does not exist; create it or choose another {arg('store')} path")
        if resume == "only" and not path.is_file():
            raise RnrLensError(f"nothing to resume: {path} does not exist; leave out {arg('resume_only')} to start an audit")
        refuse_links(path)  # a planted link, even a dangling one, before any model loads
        if path.exists() and not (path.is_file() and path.stat().st_size == 0):  # an empty file becomes the store
            RunStore(path, mode="read").close()  # refuses a file that is not a run store, untouched
    _refuse_mismatch(planned, store, resume)
    if deploy is not None:
        planned = deploy(planned)
        _refuse_mismatch(planned, store, resume)
    release = acquire_writer_lock(path, f"the run store {path}") if path is not None else (lambda: None)
    try:
        yield planned
    finally:
        release()


def _refuse_mismatch(planned: AuditPlan, store: RunStore | str | Path | None, resume: bool | str) -> None:
    """Stop a resume (``"only"``) whose settings match no audit in an existing ``store``,
    naming what differs (a store in memory or not yet made is the audit's own to refuse)."""
    if resume != "only" or store is None or not (isinstance(store, RunStore) or Path(store).is_file()):
        return
    rs = store if isinstance(store, RunStore) else RunStore(store, mode="read")
    mismatch = planned.resume_mismatch(rs)
    if rs is not store:
        rs.close()
    if mismatch:
        raise RnrLensError(mismatch)


def audit(
    model: LensModel,
    task: Task,
    probes: Sequence[Probe | str] = (),
    config: DeploymentConfig | None = None,
    *,
    store: RunStore | str | Path | None = None,
    seed: int = 0,
    batch_size: int | None = None,
    progress: bool = True,
    label: str | None = None,
    resume: bool | str = True,
    shard: str | Shard | None = None,
    shots_file: Task | str | os.PathLike[str] | None = None,
) -> AuditResult:
    """Audit ``model`` on ``task``: the realized answer and each probe's tries per question.

    Args:
        model: The model.
        task: The questions.
        probes: Probe objects or specs such as ``"sampling:k=8,t=0.7"``.
        config: The deployment (default: :func:`~rnr_lens.questions.deploy.deployment_for_task` the model and task).
        store: A :class:`RunStore` or a path to one (default: in memory).
        seed: Seeds sampling, random routes and the search.
        batch_size: Rows per forward (default: chosen from the machine's memory).
        progress: Show a tqdm progress bar.
        label: A free-text label stored with the audit.
        resume: What to do with an audit of the same id already in the store
            (:data:`RESUME`): ``True`` continues an unfinished one or starts one; ``False``
            refuses to continue an unfinished one; ``"only"`` (the CLI's ``--resume``) continues
            one and, where the store holds none with these settings, raises naming what
            differs instead of silently starting a second audit.
        shard: Run only shard ``"i/n"`` of the questions (see :mod:`rnr_lens.core.shards`); the
            shards' stores merge into the whole audit with :func:`rnr_lens.measure.store.merge`.
        shots_file: The file of worked examples a ``file:NAME`` shots source in ``config``
            names (the CLI's ``--shots-file``; :meth:`DeploymentConfig.for_task`).

    Every check runs before the store is touched (:func:`prepared`, as the CLI's).

    Example:
        >>> result = audit(model, tasks.get("add-small", n=10), ["sampling:k=4,t=0.7"])  # doctest: +SKIP
        >>> result.summary()  # doctest: +SKIP
    """
    if shots_file is not None:  # its examples drawn once; the plan checks them against the task again
        config = deployment_for_task(model, task, config, shots_file)
    planned = plan(task, probes, seed=seed, config=config, shard=shard)

    def deployed(p: AuditPlan) -> AuditPlan:  # the model's config, and its blocks and context checked, before the lock
        p = p.deployed(model)
        p.check_model(model)
        return p

    with prepared(planned, store, resume=resume, deploy=deployed) as planned:
        note = task.repeated_prompts()
        if note:
            warnings.warn(note, stacklevel=2)
        return _audit(model, planned, open_store(store), batch_size=batch_size, progress=progress, label=label, resume=resume)


def replay(model: LensModel, task: Task, probes: Sequence[Probe | str], config: DeploymentConfig, *, seed: int, progress: bool = True) -> AuditResult:
    """The tries of a recorded audit generated again, into a store in memory: ``config`` is the
    recorded deployment, used as it is (not deployed for ``task`` again: ``task`` may be a few
    of the audit's questions, whose worked examples were drawn for the whole task). A try
    depends on the question, the config, the probe's name and the seed alone, so these are the
    tries the audit stored (:mod:`rnr_lens.grids.spot_check`'s spot-check)."""
    planned = plan(task, probes, seed=seed, config=config)
    planned.check_model(model)
    return _audit(model, planned, open_store(None), batch_size=None, progress=progress, label=None, resume=True)


def check_resume(rs: RunStore, planned: AuditPlan, record: AuditRecord, resume: bool | str) -> None:
    """The resume policy (:data:`RESUME`) once the weights are known, against what ``rs`` holds
    of ``record``'s audit: ``"only"`` must find it (else the refusal names what differs, the
    weights too); ``False`` refuses to continue it unfinished, where this plan's own rows are
    (another shard finishing is no reason to refuse). :func:`audit` and
    :func:`rnr_lens.measure.executors.run_audit` both call it after :func:`prepared`'s checks."""
    existing = [a for a in rs.audits() if a.id == record.id]
    if resume == "only" and not existing:  # the weights, which the plan's settings do not hold
        raise RnrLensError(
            resume_mismatch(rs, record.to_dict()) or f"nothing to resume: {rs.path} holds no audit; leave out {arg('resume_only')} to start one"
        )
    if existing and not existing[0].status.complete and resume is False:
        part = planned.shard
        started = {qid for qid, _ in rs.done_keys(record.id, DEFAULT_PROBE)}
        if part is None or (str(part) not in rs.artifacts(record.id, Artifact.SHARD) and any(q.id in started for q in planned.questions())):
            raise RnrLensError(f"audit {record.id} already exists in {rs.path} unfinished; pass {arg('resume')} to continue it")


def _audit(
    model: LensModel, planned: AuditPlan, rs: RunStore, *, batch_size: int | None, progress: bool, label: str | None, resume: bool | str
) -> AuditResult:
    """:func:`audit` once every check has passed: record the audit, run its probes, mark it done."""
    task, config, part, selected, seed = planned.task, planned.deployment, planned.shard, planned.selected(), planned.seed
    record = planned.record(model.name, model.fingerprint(), label)
    aid = record.id
    check_resume(rs, planned, record, resume)
    probes = [Default(), *planned.probes]
    planned_tries = len(selected) * sum(p.budget_for(model.n_layers) for p in probes)
    try:
        rs.create_audit(record, [(i, q.id, q.prompt, q.answer) for i, q in selected])
        # what the model really sees (a null system_prompt means the chat template's own default):
        # the task's first question rendered, the same in every shard
        first = task.questions[0]
        rendered = {"question_id": first.id, "text": model.render(config.prompt(first))[0]}
        rs.put_artifact(aid, Artifact.DEPLOYMENT, "rendered", rendered, overwrite=True)
        questions = [q for _, q in selected]
        ctx = ProbeContext(model, config, task.answer_type, seed=seed, batch_size=batch_size)
        desc = f"{short_text(model.name, 28)} / {task.name}" + (f" [{part}]" if part else "")  # the task whole: it says what runs
        _run_probes(rs, aid, ctx, probes, questions, short_labels(planned.names), desc if progress else None, planned_tries)
        if part is None:
            rs.set_status(aid, COMPLETE)
        else:
            rs.mark_shard_done(aid, str(part), len(questions))
    except NoSpace as exc:  # say what the rest of the audit needs
        left = planned_tries - sum(rs.count_tries(aid).values())
        raise exc.needing(int(left * rs.bytes_per_try())) from None
    return AuditResult.load(rs, aid)


def _run_probes(
    rs: RunStore, aid: str, ctx: ProbeContext, probes: list[Probe], questions: list[Question], labels: dict[str, str], desc: str | None, total: int
) -> None:
    """Run every probe over ``questions`` in units of rows, skipping the tries ``rs`` holds, and
    commit each batch of tries as it comes (``desc``: show a progress bar with this label)."""
    units: list[tuple[Probe, list[Question]]] = []
    for probe in probes:
        size = max(1, ROWS_PER_UNIT // probe.rows_per_question)
        units.extend((probe, questions[i : i + size]) for i in range(0, len(questions), size))
    bar = progress_bar(desc is not None, total, desc or "", "try")
    try:
        for probe, chunk in units:
            done = rs.done_keys(aid, probe.name)
            if not isinstance(probe, Default) and not ctx.defaults:
                ctx.defaults = {qid: t for (qid, _), t in rs.done_keys(aid, DEFAULT_PROBE).items()}
            budget = probe.budget_for(ctx.model.n_layers)
            already = sum(1 for q in chunk for i in range(budget) if (q.id, i) in done)
            if bar is not None:
                bar.set_postfix_str(labels.get(probe.name, probe.name), refresh=False)  # one line: the short label
                bar.update(already)
            with phase(f"audit:{probe.family}"):
                for tries in probe.run(ctx, chunk, done):
                    rs.add_tries(aid, tries)
                    if bar is not None:
                        bar.update(len(tries))
    finally:
        if bar is not None:
            bar.close()
