"""The audit loop: realized versus reachable, question by question, under matched budgets.

``audit(model, task, probes)`` first runs the default deployment (the realized answer), then
each probe, committing every batch of finished tries to the run store as it completes. The
audit's id hashes the model weights, task, deployment config, probes and seed: running the
same audit again resumes it (nothing lost, nothing duplicated) and the same config and seed
give the same per-question results.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from rnr_lens import selectors as sel
from rnr_lens.deploy import DeploymentConfig
from rnr_lens.errors import RnrLensError
from rnr_lens.lens import LensModel
from rnr_lens.probes import Default, Probe, ProbeContext, parse_probe
from rnr_lens.shards import Shard
from rnr_lens.stats import Estimate, bootstrap, pass_at_k
from rnr_lens.store import DEFAULT_PROBE, RunStore, try_from_row
from rnr_lens.tasks.core import Task

ROWS_PER_UNIT = 64  # generation rows per commit unit of a probe (one full batch)


def audit_id(model_fingerprint: str, task: Task, config: DeploymentConfig, probes: Sequence[Probe], seed: int) -> str:
    key = json.dumps([model_fingerprint, task.fingerprint(), config.hash(), [p.name for p in probes], seed])
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def _open_store(store: RunStore | str | Path | None) -> RunStore:
    if isinstance(store, RunStore):
        return store
    return RunStore(":memory:" if store is None else store)


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
    resume: bool = True,
    shard: "str | Shard | None" = None,
) -> "AuditResult":
    """Audit ``model`` on ``task``: the realized answer and each probe's tries per question.

    Args:
        model: The model.
        task: The questions.
        probes: Probe objects or specs such as ``"sampling:k=8,t=0.7"``.
        config: The deployment (default: :meth:`DeploymentConfig.default_for` the task).
        store: A :class:`RunStore` or a path to one (default: in memory).
        seed: Seeds sampling, random routes and the search.
        batch_size: Rows per forward (default: chosen from free memory).
        progress: Show a tqdm progress bar.
        label: A free-text label stored with the audit.
        resume: Continue an unfinished audit with the same id (False: refuse to).
        shard: Run only shard ``"i/n"`` of the questions (see :mod:`rnr_lens.shards`); the
            shards' stores merge into the whole audit with :func:`rnr_lens.shards.merge`.

    Example:
        >>> result = audit(model, tasks.get("add-small", n=10), ["sampling:k=4,t=0.7"])  # doctest: +SKIP
        >>> result.summary()  # doctest: +SKIP
    """
    config = config or DeploymentConfig.default_for(task.answer_type)
    probe_objs = [p if isinstance(p, Probe) else parse_probe(p) for p in probes]
    names = [p.name for p in probe_objs]
    if len(set(names)) != len(names):
        raise RnrLensError("the same probe is given twice; give each probe once")
    rs = _open_store(store)
    fingerprint = model.fingerprint()
    aid = audit_id(fingerprint, task, config, probe_objs, seed)
    part = Shard.parse(shard) if shard is not None else None
    selected = [(i, q) for i, q in enumerate(task.questions) if part is None or part.contains(q.id)]
    existing = [a for a in rs.audits() if a["id"] == aid]
    if existing and existing[0]["status"] != "complete" and not resume:
        # another shard finishing is no reason to refuse; this run's own unfinished rows are
        started = {qid for qid, _ in rs.done_keys(aid, DEFAULT_PROBE)}
        if part is None or (str(part) not in rs.artifacts(aid, "shard") and any(q.id in started for _, q in selected)):
            raise RnrLensError(f"audit {aid} already exists in {rs.path} unfinished; pass --resume to continue it")
    rs.create_audit(
        {"id": aid, "model": model.name, "model_fingerprint": fingerprint, "task": task.name, "task_fingerprint": task.fingerprint(),
         "answer_type": task.answer_type, "config_hash": config.hash(), "config_json": config.to_json(), "probes": names,
         "seed": seed, "n_questions": len(task), "label": label},
        [(i, q.id, q.prompt, q.answer) for i, q in selected],
    )
    questions = [q for _, q in selected]
    ctx = ProbeContext(model, config, task.answer_type, seed=seed, batch_size=batch_size)
    units = []
    for probe in [Default(), *probe_objs]:
        size = max(1, ROWS_PER_UNIT // probe.rows_per_question)
        units.extend((probe, questions[i:i + size]) for i in range(0, len(questions), size))
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=sum(len(c) * max(1, p.budget if p.budget > 0 else model.n_layers) for p, c in units),
                   desc=f"audit {model.name} on {task.name}" + (f" [shard {part}]" if part else ""), unit="try")
    try:
        for probe, chunk in units:
            done = rs.done_keys(aid, probe.name)
            if not isinstance(probe, Default) and not ctx.defaults:
                ctx.defaults = {qid: t for (qid, _), t in rs.done_keys(aid, DEFAULT_PROBE).items()}
            budget = probe.budget if probe.budget > 0 else model.n_layers
            already = sum(1 for q in chunk for i in range(budget) if (q.id, i) in done)
            if bar is not None:
                bar.set_postfix_str(probe.name[:40])
                bar.update(already)
            for tries in probe.run(ctx, chunk, done):
                rs.add_tries(aid, tries)
                if bar is not None:
                    bar.update(len(tries))
        if part is None:
            rs.set_status(aid, "complete")
        else:
            rs.mark_shard_done(aid, str(part), len(questions))
    finally:
        if bar is not None:
            bar.close()
    return AuditResult.load(rs, aid)


# ---------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------


@dataclass
class AuditResult:
    """Everything an audit found, read back from the run store.

    Attributes:
        info: The audit's record (model, task, config hash, probes, seed...).
        tries: One row per try (probe ``default`` holds the realized answers).
        questions: One row per question: realized flag and default output, and per probe the
            reachable flag and the first try that hit.
    """

    info: dict[str, Any]
    tries: pd.DataFrame
    questions: pd.DataFrame
    seed: int = 0

    @classmethod
    def load(cls, store: RunStore | str | Path, audit_id: str | None = None) -> "AuditResult":
        rs = _open_store(store)
        if audit_id is None:
            audits = rs.audits()
            if len(audits) != 1:
                raise RnrLensError(f"{rs.path} holds {len(audits)} audits; name one with --audit ID (see 'rnr-lens show')")
            audit_id = audits[0]["id"]
        info = rs.audit(audit_id)
        tries = rs.tries(info["id"])
        qs = rs.questions(info["id"])
        return cls(info, tries, _question_table(qs, tries, info["probes"]), seed=info["seed"])

    @property
    def id(self) -> str:
        return self.info["id"]

    @property
    def probes(self) -> list[str]:
        return list(self.info["probes"])

    @property
    def config(self) -> DeploymentConfig:
        return DeploymentConfig.from_json(self.info["config_json"])

    def probe_tries(self, probe: str) -> pd.DataFrame:
        probe = self._probe_name(probe)
        return self.tries[self.tries["probe"] == probe]

    def _probe_name(self, probe: str) -> str:
        if probe in self.probes or probe == DEFAULT_PROBE:
            return probe
        matches = [p for p in self.probes if p.startswith(probe)]
        if len(matches) == 1:
            return matches[0]
        raise RnrLensError(f"audit {self.id[:12]} has no probe {probe!r}; it has {', '.join(self.probes) or 'none'}")

    def realized_ids(self) -> list[str]:
        return self.questions.loc[self.questions["realized"], "question_id"].tolist()

    def reachable_not_realized(self, probe: str) -> list[str]:
        probe = self._probe_name(probe)
        q = self.questions
        return q.loc[q[f"reachable[{probe}]"] & ~q["realized"], "question_id"].tolist()

    def selections(self, probe: str) -> pd.DataFrame:
        """Each selector's pick per question for ``probe`` (question, selector, try, correct)."""
        probe = self._probe_name(probe)
        names = list(sel.ANSWER_BLIND) + ["oracle"] + (["reward"] if probe.startswith("search") else [])
        rows = []
        for qid, group in self.probe_tries(probe).groupby("question_id", sort=False):
            tries = [try_from_row(r) for r in group.to_dict("records")]
            for s in names:
                pick = sel.get(s)(tries)
                rows.append({"question_id": qid, "selector": s, "try_index": pick.try_index,
                             "extracted": pick.extracted, "correct": bool(pick.correct)})
        return pd.DataFrame(rows)

    def pass_at_k(self, probe: str) -> pd.DataFrame:
        """Unbiased pass@k for k = 1..budget with 95% bootstrap intervals."""
        probe = self._probe_name(probe)
        counts = self.probe_tries(probe).groupby("question_id")["correct"].agg(["size", "sum"])
        budget = int(counts["size"].min()) if len(counts) else 0
        rows = []
        for k in range(1, budget + 1):
            values = [pass_at_k(int(n), int(c), k) for n, c in zip(counts["size"], counts["sum"])]
            est = bootstrap(values, seed=self.seed)
            rows.append({"k": k, "pass_at_k": est.value, "low": est.low, "high": est.high})
        return pd.DataFrame(rows)

    def summary(self) -> pd.DataFrame:
        """Per probe: realized accuracy, reachable ceiling and each selector's accuracy, with
        95% bootstrap intervals over questions."""
        realized = self.questions["realized"].to_numpy(float)
        rows = []
        for probe in self.probes:
            reach = self.questions[f"reachable[{probe}]"].to_numpy(float)
            row: dict[str, Any] = {
                "probe": probe,
                "budget": int(self.probe_tries(probe).groupby("question_id").size().max() or 0),
                "questions": len(realized),
                "realized": bootstrap(realized, seed=self.seed),
                "reachable": bootstrap(reach, seed=self.seed),
                "reachable_not_realized": int(((reach == 1) & (realized == 0)).sum()),
            }
            picks = self.selections(probe)
            for s, group in picks.groupby("selector", sort=False):
                row[f"select:{s}"] = bootstrap(group["correct"].to_numpy(float), seed=self.seed)
            rows.append(row)
        if not rows:
            rows.append({"probe": "(none)", "budget": 1, "questions": len(realized), "realized": bootstrap(realized, seed=self.seed)})
        return pd.DataFrame(rows)

    def summary_records(self) -> list[dict[str, Any]]:
        """The summary as plain JSON-ready dicts (estimates as value/low/high)."""
        out = []
        for row in self.summary().to_dict("records"):
            out.append({k: (v.as_dict() if isinstance(v, Estimate) else v) for k, v in row.items()
                        if not (isinstance(v, float) and np.isnan(v))})
        return out


def _question_table(questions: pd.DataFrame, tries: pd.DataFrame, probes: list[str]) -> pd.DataFrame:
    table = questions[["question_id", "prompt", "gold"]].copy()
    default = tries[tries["probe"] == DEFAULT_PROBE].set_index("question_id")
    table["realized"] = table["question_id"].map(default["correct"]).fillna(False).astype(bool)
    table["default_text"] = table["question_id"].map(default["text"])
    table["default_extracted"] = table["question_id"].map(default["extracted"])
    for probe in probes:
        t = tries[tries["probe"] == probe]
        hit = t[t["correct"]].groupby("question_id")["try_index"].min()
        table[f"reachable[{probe}]"] = table["question_id"].isin(hit.index)
        table[f"first_hit[{probe}]"] = table["question_id"].map(hit).astype("Int64")
    return table


def check_format(model: LensModel, task: Task, config: DeploymentConfig | None = None, *, batch_size: int | None = None) -> dict[str, Any]:
    """How often the default deployment's output holds an extractable answer, and how often
    it is correct (with Wilson 95% intervals), plus a few outputs with no answer."""
    from rnr_lens.stats import wilson

    config = config or DeploymentConfig.default_for(task.answer_type)
    ctx = ProbeContext(model, config, task.answer_type, batch_size=batch_size)
    gens = ctx.generate(list(task))
    graded = [config.grade(g.text, q, task.answer_type) for q, g in zip(task, gens)]
    extracted = sum(e is not None for e, _ in graded)
    correct = sum(c for _, c in graded)
    ex, acc = wilson(extracted, len(task)), wilson(correct, len(task))
    return {
        "n": len(task), "config_hash": config.hash(),
        "extractable": ex.value, "extractable_low": ex.low, "extractable_high": ex.high,
        "accuracy": acc.value, "accuracy_low": acc.low, "accuracy_high": acc.high,
        "unextractable_examples": [g.text for g, (e, _) in zip(gens, graded) if e is None][:5],
    }
