"""The claims report: the paper's three questions, answered over a grid of models and tasks.

A :class:`~rnr_lens.grids.grid.Grid` names models, tasks and one budget ``k``; :func:`report` runs
(or resumes) every setting into one run store and answers, per setting, with intervals (each
claim built from the store by :mod:`rnr_lens.grids.setting_claims`, as soon as its setting is done):

1. **Random routes against structured search at a matched budget.** Random routes drawn from
   the search's own move set (``routes:k,edits=d``) against the search (``search:k``, its
   answer-blind confidence reward), both greedy, ``k`` evaluations each, the default answer
   counted by neither; the paired difference in reachability (random - search) per question,
   and each answer-blind selector's retention of the gain, ``(blind - realized) / (oracle -
   realized)``.
2. **One MLP block.** Per model and task, the failure set (reachable-not-realized under
   sampling), its bottleneck MLP chosen on the discovery half, the held-out repair rate and the
   control break rate (Wilson intervals) beside the second-best block; with ``exhaustive:
   true``, also whether the screen's pick agrees with an exhaustive sweep of every block.
3. **Training.** Per trained pair (base, trained), delta realized and delta reachable per
   probe with paired intervals, and the per-question transitions.

Each setting's verdict on each claim is ``support``, ``against``, ``unresolved`` or
``uninformative`` (:mod:`rnr_lens.judge.verdicts`): an interval and its exact test agree at 5%, with
margins stated in the grid, beside the null (chance level; an arbitrary block's silencing), and
an unresolved verdict says what ``n`` would decide it. Nothing is tuned toward the paper's
answers: where a claim does not hold on a model, the report says so. ``claims.json`` holds every number;
``report.html`` renders them (self-contained, readable offline). Rerunning resumes: audits and
sweep evaluations already in the store are reused. The audits run through
:func:`rnr_lens.measure.executors.run_audit`: in shards here, or on Ray workers (``executor="ray"``),
while the driver keeps the store and mines the failure sets.

This module is the run loop (:func:`report`, :func:`mine_again`) and the re-derivation from
evidence (:func:`rederive`); both derive claims the one way, :class:`_Draft`, which also draws
the page's figures.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rnr_lens.bottleneck.sweep_results import SweepResult
from rnr_lens.core.files import lock_file, write_atomic
from rnr_lens.core.phases import phase
from rnr_lens.core.provenance import Provenance, RunSpan, Weights
from rnr_lens.core.untrusted import quoted
from rnr_lens.errors import RnrLensError, arg
from rnr_lens.grids.grid import Grid
from rnr_lens.grids.regrade import REGRADING_FILE, Regrading, check_readings
from rnr_lens.grids.regrade import regrade as regrade_document
from rnr_lens.grids.setting_claims import SCREEN_SWEEP, claim_bottleneck, claim_routes, claim_training, mine_setting
from rnr_lens.judge.ceiling import Ceiling
from rnr_lens.judge.claims import BottleneckClaim, Claims, Progress, RoutesClaim, TrainingClaim, summary_lines
from rnr_lens.measure import evidence as evidence_  # the module; `evidence` names a file in this one
from rnr_lens.measure.evidence import EVIDENCE_FILE, MINED, SettingRecord
from rnr_lens.measure.results import AuditResult
from rnr_lens.measure.store import RunStore
from rnr_lens.present import viz
from rnr_lens.present.report_page import render_html
from rnr_lens.questions.deploy import DeploymentConfig, deployment_for_task
from rnr_lens.questions.tasks import Task
from rnr_lens.trained_pair.comparison import compare_ceiling

STORE_FILE = "runs.db"
"""A report folder's run store: every audit of its grid (rerun into the folder to resume)."""


@dataclass
class Report:
    """What :func:`report` found: every claim's numbers (``claims``) and where they were written."""

    claims: Claims
    store: Path
    files: dict[str, Path] = field(default_factory=dict)
    regrading: Regrading | None = None
    """What a re-graded re-derivation moved (:func:`rederive` with ``regrade``)."""
    unread: tuple[str, ...] = ()
    """The audits a re-derivation could not read again (a harness's, graded by its filter, which
    needs the task): their correctness flags are as the evidence records them."""


def report(
    grid: Grid,
    out: str | Path,
    *,
    progress: bool = True,
    batch_size: int | None = None,
    executor: str = "local",
    shards: int = 1,
    address: str | None = None,
    num_cpus: int | None = None,
    evidence: str | Path | None = None,
    trust_code: bool = False,
    keep_absent: bool = False,
) -> Report:
    """Run (or resume) every setting of ``grid`` into ``out/runs.db`` and write
    ``out/claims.json``, ``out/report.html`` and ``out/evidence.json.gz``.

    Each setting runs in stages (its audit; for a grid model with ``mine``, claim 2's failure
    set, sweeps and null, :func:`mine_setting`), every result kept in the store and each stage
    recorded in the store's manifest; after each stage the evidence is brought up to date, and
    once a setting is done its claims are derived from the store (:class:`_Draft`), the same
    way :func:`rederive` derives them from the evidence alone.

    Args:
        grid: The settings.
        out: The report folder (rerun with the same folder to resume).
        progress: Show tqdm bars.
        batch_size: Rows per forward (default: from the machine's memory).
        executor, shards, address, num_cpus: Where each audit's shards run, as for
            :func:`rnr_lens.measure.executors.run_audit`. With ``"ray"`` the workers load the models;
            this process loads a model only to mine its failure sets (claim 2).
        evidence: Resume from this evidence file on a machine without the run's store: the
            store is rebuilt from it into ``out`` (which must hold no store yet), then the grid
            continues.
        trust_code: Run the grid's lm-eval task YAMLs of the user's, which are code
            (:func:`rnr_lens.questions.tasks.lm_eval.load`); off, such a task is refused before any model loads.
        keep_absent: A model whose weights are not on this machine (a trained checkpoint made
            on another) keeps its settings as the store or evidence records them, neither loaded
            nor audited again, where every one of them is finished; off, such a model is refused
            before any work. Its deployment is the recorded one: with no weights here, the
            default it would get today cannot be checked.

    Example:
        >>> r = report(Grid(models=("smollm2-135m-instruct",), tasks=("add-small",)), "report")  # doctest: +SKIP
        >>> r.claims.routes_vs_search[0].verdict  # doctest: +SKIP
    """
    from rnr_lens.measure.executors import check_executor, run_audit
    from rnr_lens.model.models import load_model, load_tokenizer

    check_executor(executor, shards)
    out = Path(out)
    document, configs, tasks_, model_specs, kept = _prepare(grid, out, evidence, trust_code, keep_absent)
    run = _ReportRun(grid, _open_store(out, document, evidence), _report_files(out), kept)
    run.stage_done()
    for spec in kept:  # said even under --json (stderr): what this run did not redo
        print(f"kept as recorded: every setting of {spec!r}, all finished (its weights are not here)", file=sys.stderr)

    def audited(model_or_spec: Any, task: Any, probes: list[str], cfg: DeploymentConfig) -> AuditResult:
        return run_audit(
            model_or_spec,
            task,
            probes,
            cfg,
            store=run.store,
            seed=grid.seed,
            shards=shards,
            executor=executor,
            address=address,
            num_cpus=num_cpus,
            batch_size=batch_size,
            progress=progress,
        )

    for spec in model_specs:
        # the driver needs the weights to audit here, or to mine; Ray workers load their own
        with phase("load model"):
            model = load_model(spec) if executor == "local" or grid.mines(spec) else None
        for task_spec, task in tasks_.items():
            cfg = configs[task_spec] if configs else deployment_for_task(model if model is not None else load_tokenizer(spec), task)
            result = audited(model if executor == "local" and model is not None else spec, task, grid.probes, cfg)
            run.finish_setting(spec, task_spec, model if executor == "local" else None, model, result, progress)
        del model
    for spec in (m for m in grid.ceiling_order() if m not in kept):  # claim 3 at large k, once every setting is done
        with phase("load model"):
            model = load_model(spec) if executor == "local" else None
        for task_spec, task in tasks_.items():
            record = run.manifest.setting(spec, task_spec)
            assert record is not None and grid.ceiling_probe is not None, "every setting is audited before the ceiling"
            cfg = AuditResult.load(run.store, record.audit).config  # the setting's own deployment
            result = audited(model if model is not None else spec, grid.ceiling_task(task), [grid.ceiling_probe], cfg)
            run.finish_ceiling(record, result)
        del model
    return Report(run.stage_done(), out / STORE_FILE, run.draft.files)


def profile_file(out: str | Path) -> Path:
    """Where a report run's profile is written (``out/profile.json``; ``report --profile``). A
    resumed run continues the profile there; one left by a run whose store is gone belongs to
    no run and is removed, so this run's profile starts afresh."""
    saved = Path(out) / "profile.json"
    if saved.exists() and not (Path(out) / STORE_FILE).exists():
        saved.unlink()
    return saved


def mine_again(out: str | Path, *, progress: bool = True) -> Report:
    """Mine every setting of the report in ``out`` that was audited but not mined: the stages
    :func:`rederive` with ``regrade`` dropped. Only those settings' models are loaded (each
    checked to be the audited weights), every kept evaluation is read back instead of
    generated, and the claims and evidence are written again, with this run in the provenance.

    Example:
        >>> r = mine_again("regraded/grid-default")  # doctest: +SKIP
    """
    from rnr_lens.model.models import load_model

    out = Path(out)
    if not (out / STORE_FILE).is_file():
        raise RnrLensError(f"{out} holds no report store ({STORE_FILE}); give the {arg('out')} folder of a report or a re-derivation")
    store = RunStore(out / STORE_FILE)
    try:
        manifest = evidence_.Manifest.load(store)
        if manifest is None:
            raise RnrLensError(f"{out / STORE_FILE} holds no report (no manifest); give the {arg('out')} folder of a report or a re-derivation")
        grid = Grid.from_dict(manifest.grid)
        run = _ReportRun(grid, store, _report_files(out))
        pending = [r for r in run.manifest.settings if not r.done(grid.mines(r.model))]
        for spec in dict.fromkeys(r.model for r in pending):
            with phase("load model"):
                model = load_model(spec)
            for record in (r for r in pending if r.model == spec):
                run.finish_setting(spec, record.task, model, model, AuditResult.load(store, record.audit), progress)
            del model
        return Report(run.stage_done(), out / STORE_FILE, run.draft.files)
    finally:
        store.close()


def _prepare(
    grid: Grid, out: Path, evidence: str | Path | None, trust_code: bool = False, keep_absent: bool = False
) -> tuple[Any, dict[str, DeploymentConfig] | None, dict[str, Any], list[str], list[str]]:
    """Everything a report checks before hours of work, in one pass: the evidence to resume
    from (read, and of this grid), the config, every task, every model and checkpoint, and
    that ``out`` holds no other grid's report. Returns the evidence document (or None), the
    grid's config fitted to each task by spec (None: each model's default), its tasks by spec,
    the models to run in run order, and the absent models kept as recorded (``keep_absent``)."""
    from rnr_lens.model.models import check_spec

    if evidence is not None and (out / STORE_FILE).exists():
        raise RnrLensError(
            f"{out / STORE_FILE} already exists, so the report resumes from it: drop {arg('evidence')} (or choose a new {arg('out')} folder)"
        )
    document = evidence_.read(evidence) if evidence is not None else None
    if document is not None:
        _check_same_grid(document["manifest"]["grid"], grid, f"{evidence} is the evidence of another grid", "resume it with the grid it ran")
    config = DeploymentConfig.load(grid.config) if grid.config else None
    tasks_ = {spec: grid.load_task(spec, trust_code) for spec in grid.tasks}
    # the grid's config fitted to each task before any store or model: bad shots are refused now
    configs = {spec: config.for_task(task) for spec, task in tasks_.items()} if config is not None else None
    stored = evidence_.Manifest.from_dict(document["manifest"]) if document is not None else None
    # each recorded audit's task fingerprint and config hash, to check a kept model's settings
    recorded = {a["audit"]["id"]: (a["audit"]["task_fingerprint"], a["audit"]["config_hash"]) for a in document["audits"]} if document else {}
    if (out / STORE_FILE).exists():
        here = RunStore(out / STORE_FILE, mode="read")
        stored = evidence_.Manifest.load(here)
        recorded = {a.id: (a.task_fingerprint, a.config_hash) for a in here.audits()}
        here.close()
        if stored is not None:
            _check_same_grid(stored.grid, grid, f"{out} holds the report of another grid", f"use a new {arg('out')} folder, or the grid it ran")
    model_specs, kept = [], []
    for spec in grid.run_order():  # before hours of work: a missing checkpoint fails now
        try:
            check_spec(spec)
        except RnrLensError as exc:
            if not keep_absent or Path(spec).exists():  # a folder with broken weights is not absent
                fix = (
                    f"; or pass {arg('keep_absent')} to keep its settings as recorded, where every one is finished" if not Path(spec).exists() else ""
                )
                raise RnrLensError(f"grid model {spec!r}: {exc} (a trained pair's checkpoint must exist before the report runs{fix})") from None
            why = _not_keepable(stored, recorded, grid, spec, tasks_, configs)
            if why is not None:
                raise RnrLensError(
                    f"grid model {spec!r} is not here and {arg('keep_absent')} cannot keep it: {why}; run it where its weights are"
                ) from None
            kept.append(spec)
            continue
        model_specs.append(spec)
    return document, configs, tasks_, model_specs, kept


def _not_keepable(
    manifest: Any,
    recorded: Mapping[str, tuple[str, str]],
    grid: Grid,
    spec: str,
    tasks_: Mapping[str, Any],
    configs: Mapping[str, DeploymentConfig] | None,
) -> str | None:
    """Why an absent model's recorded settings cannot stand for this grid (None: they can):
    a setting not finished (audited, mined where the grid mines it, its ceiling audited where
    the grid asks for one), or audited on other questions than the grid's task gives, or under
    another deployment than the grid's config. (Without the model's weights, the default
    deployment it would get today cannot be checked: the recorded one stands.)"""
    ceiling = spec in grid.ceiling_order()
    for task_spec, task in tasks_.items():
        r = manifest.setting(spec, task_spec) if manifest is not None else None
        if r is None:
            return f"its setting on {task_spec} is not in this report"
        if not r.done(grid.mines(spec)) or (ceiling and r.ceiling is None):
            return f"its setting on {task_spec} is not finished ({'not mined' if not r.done(grid.mines(spec)) else 'no ceiling audit'})"
        task_fingerprint, config_hash = recorded.get(r.audit, (None, None))
        if task_fingerprint != task.fingerprint():
            return f"its setting on {task_spec} was audited on other questions than this grid's task gives"
        if configs is not None and config_hash != configs[task_spec].hash():
            return f"its setting on {task_spec} ran under another deployment than the grid's config"
    return None


def _open_store(out: Path, document: Any, evidence: str | Path | None) -> RunStore:
    """The report's store in ``out``: rebuilt from the evidence ``document`` where the run
    resumes on a machine that never had it, else the one there (or a new one)."""

    out.mkdir(parents=True, exist_ok=True)
    if document is not None:
        evidence_.rebuild(document, out / STORE_FILE, source=str(evidence))
    return RunStore(out / STORE_FILE)


class _ReportRun:
    """One run of a report: its store and manifest, the claims derived so far (:class:`_Draft`)
    and this run's span in the provenance. After every stage :meth:`stage_done` keeps the
    manifest, derives a finished setting and writes the claims and the evidence."""

    def __init__(self, grid: Grid, store: RunStore, files: dict[str, Path], kept: Sequence[str] = ()) -> None:

        self.grid, self.store = grid, store
        # this run's grid: the recorded one, or one that adds to it (_check_same_grid)
        self.manifest = replace(evidence_.Manifest.load(store) or evidence_.Manifest(grid.to_dict()), grid=grid.to_dict())
        self.span = RunSpan.begin(kept)  # the provenance says which models this run kept without their weights
        self.draft = _derived(self.manifest, store, files)  # what earlier runs finished, as rederive derives it

    def stage_done(self, finished: SettingRecord | None = None) -> Claims:
        """Keep the manifest, derive a finished setting, write the claims and the evidence."""

        self.manifest = replace(self.manifest, provenance=self.manifest.provenance.with_run(self.span.touched()))
        self.manifest.save(self.store)
        if finished is not None:
            if self.manifest.settings[-1] == finished and (finished.model, finished.task) not in self.draft.derived:
                self.draft.derive(finished)
            else:  # a setting redone (its task file changed): derive again in the manifest's order
                self.draft = _derived(self.manifest, self.store, self.draft.files)
        claims = self.draft.write(self.manifest.provenance)
        evidence_.write(self.store, self.manifest, self.draft.files["evidence"])
        return claims

    def finish_setting(self, spec: str, task_spec: str, audited_here: Any, model: Any, result: AuditResult, progress: bool) -> None:
        """After a setting's audit: its weights into the provenance (``audited_here``: the
        model that audited it in this process, None where Ray workers did), its record into
        the manifest, claim 2's stage where the grid mines it, then its claims."""
        from rnr_lens.trained_pair.checkpoints import training_record

        mined = self.grid.mines(spec)
        record = self.manifest.setting(spec, task_spec)
        if record is not None and record.audit == result.id and record.done(mined):
            return  # finished by an earlier run and derived when this run began
        trained = training_record(spec) if Path(spec).is_dir() else None
        weights = (
            Weights.of(spec, audited_here, trained)
            if audited_here is not None
            else Weights(spec, result.info.model, result.info.model_fingerprint, "ray workers", "unrecorded", spec if trained else None, trained)
        )
        self.manifest = replace(self.manifest, provenance=self.manifest.provenance.with_model(weights))
        record = record if record is not None and record.audit == result.id else evidence_.SettingRecord(spec, task_spec, result.id)
        self.manifest = self.manifest.with_setting(record)
        if not record.done(mined):
            self.stage_done()  # the audit is in the evidence before claim 2's hours start
            mine_setting(model, result, self.store, self.grid, progress)
            record = replace(record, stages=(*record.stages, MINED))
            self.manifest = self.manifest.with_setting(record)
        self.stage_done(finished=record)

    def finish_ceiling(self, record: SettingRecord, result: AuditResult) -> None:
        """After a setting's ceiling audit: its id into the setting's record, then the pair's
        ceiling claim once both of its models' ceiling audits are here."""
        if record.ceiling == result.id:
            return  # finished by an earlier run and derived when this run began
        record = replace(record, ceiling=result.id)
        self.manifest = self.manifest.with_setting(record)
        self.draft.add_ceiling(record)
        self.stage_done()


def _check_same_grid(recorded: Mapping[str, Any], grid: Grid, what: str, fix: str) -> None:
    """Refuse to continue a report under another grid than the one it ran, or one that only
    adds to it (:meth:`Grid.cannot_continue`), in one line: the first field that differs."""
    why = grid.cannot_continue(recorded)
    if why is not None:
        raise RnrLensError(f"{what} ({why}); {fix}")


def rederive(evidence: str | Path, out: str | Path, *, regrade: bool | DeploymentConfig = False, harness_tasks: Sequence[Task] = ()) -> Report:
    """Re-derive a report from its evidence alone (no model, no task file): the store rebuilt
    into ``out/runs.db`` (``out`` must hold no store yet), then every finished setting's claims
    derived from it as the run derived them, and ``claims.json`` and ``report.html`` written
    (byte for byte the run's own under the same rules and code). The evidence is copied beside
    them, so ``out`` is a whole report folder; on any error nothing is left in ``out``.

    ``regrade``: read every try again first (:func:`rnr_lens.grids.regrade.regrade`), under this
    config or (True) each task's default today; the re-reading joins the provenance as a run
    (its code and machine), the re-graded evidence is written in place of the copy, and
    ``regrading.json`` says what moved and which mined stages must be mined again
    (:func:`mine_again`).

    ``harness_tasks``: the harness tasks (``lm-eval:...``) the caller names, with which a
    harness's audits are read again too (:func:`rnr_lens.grids.regrade.check_readings`); the audits
    of no named task are listed in :attr:`Report.unread`.

    Example:
        >>> r = rederive("assets/results/grid-default/evidence.json.gz", "rederived")  # doctest: +SKIP
        >>> r.claims.provenance.runs[0].code.commit  # doctest: +SKIP
    """

    out = Path(out)
    document = evidence_.read(evidence)
    unread: tuple[str, ...] = ()
    if regrade is False:  # every derived field recomputed before anything is built (a re-grade reads every try again anyway)
        try:
            unread = check_readings(document, harness_tasks)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            raise RnrLensError(
                f"{evidence} could not be re-derived ({type(exc).__name__}: {quoted(str(exc))}); it is damaged or was not written by rnr_lens"
            ) from None
    regrading = None
    if regrade is not False:
        try:
            grid = Grid.from_dict(document["manifest"]["grid"])  # its sampling probe chooses the failure sets
            regrading = regrade_document(document, None if regrade is True else regrade, mined_probe=grid.sampling)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            raise RnrLensError(
                f"{evidence} could not be re-graded ({type(exc).__name__}: {quoted(str(exc))}); it is damaged or was not written by rnr_lens"
            ) from None
        recorded = Provenance.from_dict(regrading.document["manifest"].get("provenance", {}))
        provenance = recorded.with_run(RunSpan.begin().touched()).to_dict()
        document = {
            **regrading.document,
            "manifest": {**regrading.document["manifest"], "provenance": provenance},
        }  # the re-reading is a run: its code and machine
    files = _report_files(out)
    same = regrading is None and files["evidence"].exists() and files["evidence"].resolve() == Path(evidence).resolve()
    store_files = (out / STORE_FILE, Path(f"{out / STORE_FILE}-wal"), Path(f"{out / STORE_FILE}-shm"), lock_file(out / STORE_FILE))
    written = (files["claims"], files["html"], *((files["evidence"], out / REGRADING_FILE) if regrading is not None else ()))
    for path in (*store_files, *files.values(), *written):
        if (path.exists() or path.is_symlink()) and not (path == files["evidence"] and same):
            raise RnrLensError(f"{path} already exists; re-derive into a new {arg('out')} folder")
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    made = [*store_files, *written]
    try:
        manifest = evidence_.rebuild(document, out / STORE_FILE, source=str(evidence))
        store = RunStore(out / STORE_FILE, mode="read")
        try:
            draft = _derived(manifest, store, files)
            if regrading is not None:
                evidence_.write(store, manifest, files["evidence"])
        finally:
            store.close()
        claims = draft.write(manifest.provenance)
        if regrading is not None:
            write_atomic(out / REGRADING_FILE, (json.dumps(regrading.to_dict(), indent=1) + "\n").encode())
        elif not same:
            write_atomic(files["evidence"], Path(evidence).read_bytes())
    except BaseException as exc:
        for path in made:
            path.unlink(missing_ok=True)
        if created:
            with contextlib.suppress(OSError):
                out.rmdir()  # only when empty: a folder this call made and nothing else wrote to
        if isinstance(exc, (KeyError, TypeError, ValueError, AttributeError, IndexError, OverflowError, RecursionError, UnicodeError, sqlite3.Error)):
            raise RnrLensError(
                f"{evidence} could not be re-derived ({type(exc).__name__}: {quoted(str(exc))}); it is damaged or was not written by rnr_lens"
            ) from None
        raise
    return Report(claims, out / STORE_FILE, files, regrading, unread)


def _derived(manifest: Any, store: RunStore, files: dict[str, Path]) -> _Draft:
    """The claims of every finished setting of ``manifest``, derived from ``store`` in the
    manifest's order: how a report starts (what earlier runs finished) and all :func:`rederive` does."""
    grid = Grid.from_dict(manifest.grid)
    draft = _Draft(grid, store, files)
    for record in manifest.settings:
        if record.done(grid.mines(record.model)):
            draft.derive(record)
    for record in manifest.settings:  # the ceiling's audits run after every setting
        if record.ceiling is not None:
            draft.add_ceiling(record)
    return draft


def _report_files(out: Path) -> dict[str, Path]:

    return {"claims": out / "claims.json", "html": out / "report.html", "evidence": out / EVIDENCE_FILE}


@dataclass
class _Draft:
    """The claims of a report in progress: each finished setting derived from the store alone
    (:meth:`derive`, in the order the settings finished), and written whole (``claims.json``
    and ``report.html``) after each stage, so a report stopped midway says what it has
    answered and that it is partial."""

    grid: Grid
    store: RunStore
    files: dict[str, Path]
    audits: dict[tuple[str, str], AuditResult] = field(default_factory=dict)
    configs: dict[str, dict[str, Any]] = field(default_factory=dict)
    routes: list[RoutesClaim] = field(default_factory=list)
    bottleneck: list[BottleneckClaim] = field(default_factory=list)
    training: dict[tuple[int, str], TrainingClaim] = field(default_factory=dict)
    ceiling_audits: dict[tuple[str, str], AuditResult] = field(default_factory=dict)
    ceilings: dict[tuple[int, str], Ceiling] = field(default_factory=dict)
    figures: dict[str, list[tuple[str, Any]]] = field(default_factory=lambda: {"routes": [], "bottleneck": []})

    @property
    def derived(self) -> set[tuple[str, str]]:
        """The ``(model spec, task)`` settings derived so far."""
        return set(self.audits)

    @property
    def total(self) -> int:
        return len(self.grid.run_order()) * len(self.grid.tasks)

    def derive(self, record: SettingRecord) -> None:
        """One finished setting's claims, from the store: its audit, claim 1 and claim 2 for a
        grid model, claim 3 once a trained pair's two audits are here, and a model's routes
        figure once all its tasks are."""
        grid = self.grid
        with phase("report:claims"):
            result = AuditResult.load(self.store, record.audit)
            self.add_audit(record.model, record.task, result)
            if record.model in grid.models:
                self.routes.append(claim_routes(result, grid))
                if grid.mines(record.model):
                    claim = claim_bottleneck(result, self.store, grid)
                    self.bottleneck.append(claim)
                    if claim.mined is not None:  # a failure set, mined: its screen's repair and break
                        sweep = SweepResult.load(self.store, SCREEN_SWEEP, audit=result.id)
                        self.figures["bottleneck"].append((f"{result.info.model} / {result.info.task}", viz.repair_break(sweep)))
                if all((record.model, t) in self.audits for t in grid.tasks):
                    self.add_routes_figure(record.model)

    def add_audit(self, spec: str, task_spec: str, result: AuditResult) -> None:
        """A finished audit; a trained pair's claim as soon as both of its audits are here."""
        self.audits[(spec, task_spec)] = result
        self.configs[result.info.config_hash] = result.config.to_dict()
        for i, pair in enumerate(self.grid.pairs):
            for t in self.grid.tasks:
                a, b = self.audits.get((pair["base"], t)), self.audits.get((pair["trained"], t))
                if a is not None and b is not None and (i, t) not in self.training:
                    self.training[(i, t)] = claim_training(a, b, self.grid)

    def add_ceiling(self, record: SettingRecord) -> None:
        """A setting's ceiling audit; a trained pair's ceiling as soon as both of its are here."""

        assert record.ceiling is not None
        with phase("report:claims"):
            self.ceiling_audits[(record.model, record.task)] = AuditResult.load(self.store, record.ceiling)
            for i, pair in enumerate(self.grid.pairs):
                for t in self.grid.tasks:
                    a, b = self.ceiling_audits.get((pair["base"], t)), self.ceiling_audits.get((pair["trained"], t))
                    if a is not None and b is not None and (i, t) not in self.ceilings:
                        probe = self.grid.ceiling_probe or a.probes[0]
                        self.ceilings[(i, t)] = compare_ceiling(a, b, probe, margin=self.grid.margin)

    def add_routes_figure(self, spec: str) -> None:

        results = [self.audits[(spec, t)] for t in self.grid.tasks]
        self.figures["routes"].append((str(results[0].info.model), viz.realized_vs_reachable(results)))

    def claims(self, provenance: Provenance | None = None) -> Claims:
        grid = self.grid
        training = tuple(self.training[(i, t)] for i in range(len(grid.pairs)) for t in grid.tasks if (i, t) in self.training)
        ceiling = tuple(self.ceilings[(i, t)] for i in range(len(grid.pairs)) for t in grid.tasks if (i, t) in self.ceilings)
        complete = len(self.audits) == self.total and len(training) == len(grid.pairs) * len(grid.tasks)
        if grid.ceiling_k is not None:
            complete = complete and len(ceiling) == len(grid.pairs) * len(grid.tasks)
        claims = Claims(
            grid=grid.to_dict(),
            probes=grid.probe_specs,
            routes_vs_search=tuple(self.routes),
            bottleneck=tuple(self.bottleneck),
            training=training,
            ceiling=ceiling,
            configs=dict(self.configs),
            progress=Progress(len(self.audits), self.total, complete),
            provenance=provenance,
        )
        return replace(claims, summary=summary_lines(claims))

    def write(self, provenance: Provenance | None = None) -> Claims:
        """Write what is answered so far (atomically) and return it."""

        claims = self.claims(provenance)
        write_atomic(self.files["claims"], claims_json(claims))
        write_atomic(self.files["html"], render_html(claims, self.figures))
        return claims


def claims_json(claims: Claims) -> str:
    """The text of ``claims.json`` (the one serialisation: the run and :func:`rederive` both write it)."""
    return json.dumps(claims.to_dict(), indent=2, default=str)
