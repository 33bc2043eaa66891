"""Where the shards of an audit run: one after another in this process, or on a Ray cluster.

:func:`run_audit` cuts an audit into ``shards`` deterministic shards (:mod:`rnr_lens.core.shards`).
With ``executor="ray"`` each worker is a Ray actor that loads the model once (on a GPU when the
cluster has one) and audits shard after shard into memory; the driver writes each finished
shard into its run store as it arrives. A worker that dies is restarted and its shard run
again; since the driver stores a shard only once it is whole, and keeps rows found twice once,
no row is lost or duplicated. Rerunning the same command skips the shards already stored.

    >>> run_audit("smollm2-135m-instruct", tasks.get("add-small"), ["sampling:k=8,t=0.7"],  # doctest: +SKIP
    ...           store="run.db", shards=8, executor="ray", address="auto")
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rnr_lens.core.display import progress_bar
from rnr_lens.core.shards import EXECUTORS as EXECUTORS  # re-exported: where run_audit's callers look
from rnr_lens.core.shards import Shard
from rnr_lens.errors import RnrLensError, arg
from rnr_lens.measure.audits import AuditPlan, audit, check_resume, plan, prepared
from rnr_lens.measure.probes import Probe
from rnr_lens.measure.results import AuditResult
from rnr_lens.measure.store import Artifact, RunStore, open_store
from rnr_lens.model.lens import LensModel
from rnr_lens.questions.deploy import DeploymentConfig
from rnr_lens.questions.tasks.core import Task

CRASH_ONCE_ENV = "RNR_LENS_CRASH_ONCE"
"""Fault injection for tests: a worker that finds this variable naming a file that does not
exist yet creates the file and exits abruptly in its next shard (exactly once per cluster)."""


class ShardWorker:
    """One model instance that audits shards; a Ray actor under ``executor="ray"``."""

    def __init__(self, model: str, load: dict[str, Any], threads: int | None = None, crash_once: str | None = None) -> None:
        import torch

        from rnr_lens.model.models import load_model

        if threads:
            torch.set_num_threads(threads)
        self.model = load_model(model, **load)
        self.crash_once = crash_once

    def identity(self) -> tuple[str, str]:
        """The model's name and weights' fingerprint, as an audit records them."""
        return self.model.name, self.model.fingerprint()

    def run(
        self, task: Task, probes: list[Probe], config: DeploymentConfig, seed: int, shard: str, batch_size: int | None, label: str | None = None
    ) -> dict[str, Any]:
        """Audit one shard into memory; return its rows (see :meth:`RunStore.export_audit`)."""
        if self.crash_once and not Path(self.crash_once).exists():
            Path(self.crash_once).write_text(shard)
            os._exit(1)
        store = RunStore(":memory:")
        result = audit(self.model, task, probes, config, store=store, seed=seed, shard=shard, batch_size=batch_size, progress=False, label=label)
        return store.export_audit(result.id)


def run_audit(
    model: str | Path | LensModel,
    task: Task,
    probes: Sequence[Probe | str] = (),
    config: DeploymentConfig | None = None,
    *,
    store: RunStore | str | Path,
    seed: int = 0,
    shards: int = 1,
    executor: str = "local",
    address: str | None = None,
    num_cpus: int | None = None,
    batch_size: int | None = None,
    load: dict[str, Any] | None = None,
    progress: bool = True,
    max_retries: int = 3,
    label: str | None = None,
    resume: bool | str = True,
) -> AuditResult:
    """Audit ``model`` on ``task`` in ``shards`` shards on ``executor``.

    Args:
        model: What :func:`rnr_lens.model.models.load_model` takes (every worker loads its own copy);
            under ``executor="local"`` also a loaded model, which is then used as it is.
        task, probes, config, seed, batch_size: As for :func:`rnr_lens.measure.audits.audit`.
        store: The driver's run store; finished shards are written to it as they arrive.
        shards: How many shards to cut the questions into (more shards than workers keeps
            every worker busy and makes resuming finer-grained).
        executor: ``"local"`` (this process, shard after shard) or ``"ray"``.
        address: Ray cluster address (``"auto"``: the running cluster); None starts a local one.
        num_cpus: CPUs of a local Ray cluster (default: all).
        load: Keyword arguments for ``load_model`` on each worker (``dtype``, ``device``,
            ``device_map``); on GPU workers the default is ``device="cuda"``, ``dtype="bfloat16"``.
        progress: Show a tqdm bar over shards.
        max_retries: Restarts of a dead Ray worker (its shard runs again).
        label: A free-text label stored with the audit, as :func:`~rnr_lens.measure.audits.audit` stores it.
        resume: The resume policy for an audit of the same id in ``store``, as
            :func:`~rnr_lens.measure.audits.audit` takes it (``True``, ``False`` or ``"only"``).

    Every check :func:`~rnr_lens.measure.audits.audit` makes runs first, the store's folder and writer
    lock too (:func:`~rnr_lens.measure.audits.prepared`), and a local model loads only after the cheap
    ones.

    Returns:
        The whole audit, read back from ``store``.
    """
    check_executor(executor, shards)
    if not isinstance(model, (str, os.PathLike)) and not (isinstance(model, LensModel) and executor == "local"):
        raise RnrLensError("run_audit on Ray needs the model as a name or path (each worker loads its own copy), not a loaded model")
    lens, spec = (model, None) if isinstance(model, LensModel) else (None, os.fspath(model))

    def deployed(p: AuditPlan) -> AuditPlan:
        """The plan with its config, before the store's lock: from a loaded model, else from
        the model's tokenizer (a worker's model deploys as its tokenizer says; a given config is
        fitted to the task here, its shots drawn), so no model loads before every check."""
        if lens is not None:
            p = p.deployed(lens)
            p.check_model(lens)
            return p
        if p.config is not None:
            return p.deployed(None)
        from rnr_lens.model.models import load_tokenizer

        return p.deployed(load_tokenizer(str(spec), trust_remote_code=bool((load or {}).get("trust_remote_code"))))

    parts = [str(Shard(i, shards)) for i in range(shards)]
    with prepared(plan(task, probes, seed=seed, config=config), store, resume=resume, deploy=deployed) as planned:
        rs = open_store(store)
        try:
            if executor != "local":
                return _run_on_ray(
                    str(spec), planned, rs, parts, address, num_cpus, batch_size, dict(load or {}), progress, max_retries, label, resume
                )
            if lens is None:
                lens = ShardWorker(str(spec), dict(load or {})).model
                planned.check_model(lens)
            return _run_here(lens, planned, rs, parts, batch_size, progress, label, resume)
        finally:
            if rs is not store:
                rs.close()


def _run_here(
    lens: LensModel, planned: AuditPlan, rs: RunStore, parts: list[str], batch_size: int | None, progress: bool, label: str | None, resume: bool | str
) -> AuditResult:
    """The local executor: this process audits the shards ``rs`` lacks, one after another."""
    record = planned.record(lens.name, lens.fingerprint(), label)
    check_resume(rs, planned, record, resume)
    pending = _pending(rs, record.id, parts)
    # one shard: the audit's own bars (per probe) say more than a bar over one shard
    bar = progress_bar(progress and len(parts) > 1, len(pending), f"audit {lens.name} on {planned.task.name} ({len(parts)} shards)", "shard")
    try:
        for part in pending:
            audit(
                lens,
                planned.task,
                list(planned.probes),
                planned.deployment,
                store=rs,
                seed=planned.seed,
                shard=part,
                batch_size=batch_size,
                progress=progress and len(parts) == 1,
                label=label,
            )
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return AuditResult.load(rs, record.id)


def check_executor(executor: str, shards: int) -> None:
    """Refuse an unknown executor or fewer than one shard (before any work)."""
    if executor not in EXECUTORS:
        raise RnrLensError(f"unknown executor {executor!r}; choose one of {', '.join(EXECUTORS)}")
    if shards < 1:
        raise RnrLensError(f"shards must be at least 1, got {shards}")


def _pending(rs: RunStore, aid: str, parts: list[str]) -> list[str]:
    if not any(a.id == aid for a in rs.audits()):
        return parts
    done = set(rs.artifacts(aid, Artifact.SHARD))
    return [p for p in parts if p not in done]


def init_ray(address: str | None = None, num_cpus: int | None = None) -> Any:
    """Connect to a Ray cluster (``address``), or start a quiet local one; return ``ray``."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    try:
        import ray
    except ImportError:
        raise RnrLensError("the Ray executor needs ray; install it with pip install 'rnr-lens[ray]'") from None
    if not ray.is_initialized():
        try:
            if address:
                ray.init(address=address, include_dashboard=False, log_to_driver=False)
            else:
                ray.init(num_cpus=num_cpus or os.cpu_count(), include_dashboard=False, log_to_driver=False)
        except ConnectionError as exc:
            raise RnrLensError(
                f"cannot reach a Ray cluster at {address!r} ({exc}); start one with 'ray start --head' or leave out {arg('address')} for a local one"
            ) from None
    return ray


def _run_on_ray(
    model: str,
    planned: AuditPlan,
    rs: RunStore,
    parts: list[str],
    address: str | None,
    num_cpus: int | None,
    batch_size: int | None,
    load: dict[str, Any],
    progress: bool,
    max_retries: int,
    label: str | None,
    resume: bool | str,
) -> AuditResult:
    ray = init_ray(address, num_cpus)
    resources = ray.cluster_resources()
    gpus, cpus = int(resources.get("GPU", 0)), int(resources.get("CPU", 1))
    if gpus:
        load = {"device": "cuda", "dtype": "bfloat16", **load}
        n_workers, options = gpus, {"num_gpus": 1, "num_cpus": 1}
        threads = None
    else:
        n_workers, options = max(1, cpus), {"num_cpus": 1}
        threads = 1
    n_workers = min(n_workers, len(parts))
    actor = ray.remote(ShardWorker).options(max_restarts=max_retries, max_task_retries=max_retries, **options)
    workers = [actor.remote(model, load, threads, os.environ.get(CRASH_ONCE_ENV)) for _ in range(n_workers)]
    bar = None
    try:  # every way out kills the workers
        try:
            name, fingerprint = ray.get(workers[0].identity.remote())
        except Exception as exc:  # the worker could not even load the model
            lines = str(exc).strip().splitlines()
            marker = "rnr_lens.errors.RnrLensError: "
            detail = next((line.split(marker, 1)[1] for line in lines if marker in line), lines[-1] if lines else type(exc).__name__)
            raise RnrLensError(f"Ray workers could not load {model!r}: {detail.strip()[:300]}") from None
        task, probes, config, seed = planned.task, list(planned.probes), planned.deployment, planned.seed
        check_resume(rs, planned, planned.record(name, fingerprint, label), resume)
        aid = planned.id(fingerprint)
        pending = _pending(rs, aid, parts)
        bar = progress_bar(progress, len(pending), f"audit {Path(model).name} on {task.name} ({len(parts)} shards, {n_workers} Ray workers)", "shard")
        task_ref, probes_ref, config_ref = ray.put(task), ray.put(probes), ray.put(config)
        queue = list(pending)
        running: dict[Any, tuple[Any, str]] = {}

        def submit(worker: Any) -> None:
            """Give ``worker`` the next queued shard, if any."""
            if queue:
                part = queue.pop(0)
                running[worker.run.remote(task_ref, probes_ref, config_ref, seed, part, batch_size, label)] = (worker, part)

        for w in workers:
            submit(w)
        while running:
            ready, _ = ray.wait(list(running), num_returns=1)
            worker, part = running.pop(ready[0])
            try:
                payload = ray.get(ready[0])
            except Exception as exc:
                raise RnrLensError(
                    f"shard {part} failed on Ray after {max_retries} retries ({type(exc).__name__}: {str(exc).splitlines()[0][:200]}); rerun to resume"
                ) from None
            rs.absorb(payload, source=f"Ray shard {part}")
            if bar is not None:
                bar.update(1)
            submit(worker)
    finally:
        if bar is not None:
            bar.close()
        for w in workers:
            ray.kill(w)
    return AuditResult.load(rs, aid)
