"""The audit loop: realized versus reachable, question by question, under matched budgets.

``audit(model, task, probes)`` first runs the default deployment (the realized answer), then
each probe, committing every batch of finished tries to the run store as it completes. The
audit's id hashes the model weights, task, deployment config, probes and seed: running the
same audit again resumes it (nothing lost, nothing duplicated) and the same config and seed
give the same per-question results.
"""

from __future__ import annotations

import hashlib
import html
import json
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rnr_lens import selectors as sel
from rnr_lens.deploy import DeploymentConfig, deployment_for
from rnr_lens.display import estimate_text, html_table, probe_labels, short_text
from rnr_lens.errors import RnrLensError
from rnr_lens.lens import LensModel
from rnr_lens.probes import Default, Probe, ProbeContext, parse_probe
from rnr_lens.records import DEFAULT_PROBE, AuditRecord, first_hit_column, reachable_column, try_from_row
from rnr_lens.shards import Shard
from rnr_lens.stats import Estimate, above_chance, pass_at_k, permutation_chance, rate
from rnr_lens.store import Artifact, RunStore
from rnr_lens.tasks.core import Question, Task

ROWS_PER_UNIT = 64  # generation rows per commit unit of a probe (one full batch)


FORMAT_MISS_WARN = 0.1
"""Share of greedy answers that are format misses above which an audit warns that its
extractor, not the model, may be deciding the realized rate."""


def audit_id(model_fingerprint: str, task: Task, config: DeploymentConfig, probes: Sequence[Probe], seed: int) -> str:
    key = json.dumps([model_fingerprint, task.fingerprint(), config.hash(), [p.name for p in probes], seed])
    return hashlib.sha256(key.encode()).hexdigest()[:16]


MAX_SEED = 2**32 - 1


def _open_store(store: RunStore | str | Path | None, mode: str = "create") -> RunStore:
    if isinstance(store, RunStore):
        return store
    return RunStore(":memory:" if store is None else store, mode=mode)


def check_seed(seed: object) -> None:
    """Refuse a seed that is not an integer in ``0..2**32-1`` (before any work is done)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise RnrLensError(f"seed must be an integer from 0 to {MAX_SEED}, got {seed!r}")


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


def resume_mismatch(store: RunStore, settings: dict[str, Any]) -> str | None:
    """Why no audit in ``store`` matches ``settings`` (:class:`AuditRecord` fields of a
    ``--resume`` run), or None when one does. Compares only the fields ``settings`` holds, so it
    can run before the model is loaded (without ``model_fingerprint``)."""
    record = {k: tuple(v) if isinstance(v, list) else v for k, v in settings.items()}
    audits = store.audits()
    if not audits:
        return f"nothing to resume: {store.path} holds no audit; leave out --resume to start one"
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
            fields = [f"{f} {there.get(f)!r} there, {now.get(f)!r} now" for f in sorted(set(there) | set(now)) if there.get(f) != now.get(f)]
            return f"{label} ({', '.join(fields)})"
        return f"{label} {getattr(closest, key)!r} there, {record[key]!r} now"

    what = "; ".join(said(key, label) for key, label in differ)
    hint = (
        " (other weights, or an audit made before rnr_lens fingerprinted every weight: those read, but do not resume)"
        if [key for key, _ in differ] == ["model_fingerprint"]
        else ""
    )
    return (
        f"--resume found no audit with these settings in {store.path} ({len(audits)} there); the closest, {closest.id[:12]}, differs in: {what}{hint}; "
        "rerun with its settings to continue it, or leave out --resume to start a new audit"
    )


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
    shard: str | Shard | None = None,
    require_existing: bool = False,
) -> AuditResult:
    """Audit ``model`` on ``task``: the realized answer and each probe's tries per question.

    Args:
        model: The model.
        task: The questions.
        probes: Probe objects or specs such as ``"sampling:k=8,t=0.7"``.
        config: The deployment (default: :func:`~rnr_lens.deploy.deployment_for` the model and task).
        store: A :class:`RunStore` or a path to one (default: in memory).
        seed: Seeds sampling, random routes and the search.
        batch_size: Rows per forward (default: chosen from free memory).
        progress: Show a tqdm progress bar.
        label: A free-text label stored with the audit.
        resume: Continue an unfinished audit with the same id (False: refuse to).
        require_existing: Only continue an audit already in the store (the CLI's ``--resume``):
            if the store holds none with these settings, raise naming what differs instead of
            silently starting a second audit.
        shard: Run only shard ``"i/n"`` of the questions (see :mod:`rnr_lens.shards`); the
            shards' stores merge into the whole audit with :func:`rnr_lens.store.merge`.

    Example:
        >>> result = audit(model, tasks.get("add-small", n=10), ["sampling:k=4,t=0.7"])  # doctest: +SKIP
        >>> result.summary()  # doctest: +SKIP
    """
    config = config or deployment_for(model, task.answer_type)
    probe_objs = [p if isinstance(p, Probe) else parse_probe(p) for p in probes]
    names = [p.name for p in probe_objs]
    if len(set(names)) != len(names):
        raise RnrLensError("the same probe is given twice; give each probe once")
    check_seed(seed)
    for probe in probe_objs:
        probe.check(model.n_layers)
    part = Shard.parse(shard) if shard is not None else None
    selected = [(i, q) for i, q in enumerate(task.questions) if part is None or part.contains(q.id)]
    check_context(model, config, [q for _, q in selected])
    note = task.repeated_prompts()
    if note:
        warnings.warn(note, stacklevel=2)
    # everything above is checked before the store is touched: bad input leaves nothing behind
    rs = _open_store(store)
    fingerprint = model.fingerprint()
    aid = audit_id(fingerprint, task, config, probe_objs, seed)
    record = AuditRecord(
        id=aid,
        model=model.name,
        model_fingerprint=fingerprint,
        task=task.name,
        task_fingerprint=task.fingerprint(),
        answer_type=task.answer_type,
        config_hash=config.hash(),
        config_json=config.to_json(),
        probes=tuple(names),
        seed=seed,
        n_questions=len(task),
        label=label,
    )
    existing = [a for a in rs.audits() if a.id == aid]
    if require_existing and not existing:
        raise RnrLensError(resume_mismatch(rs, record.to_dict()) or f"nothing to resume: {rs.path} holds no audit; leave out --resume to start one")
    if existing and existing[0].status != "complete" and not resume:
        # another shard finishing is no reason to refuse; this run's own unfinished rows are
        started = {qid for qid, _ in rs.done_keys(aid, DEFAULT_PROBE)}
        if part is None or (str(part) not in rs.artifacts(aid, Artifact.SHARD) and any(q.id in started for _, q in selected)):
            raise RnrLensError(f"audit {aid} already exists in {rs.path} unfinished; pass --resume to continue it")
    rs.create_audit(record, [(i, q.id, q.prompt, q.answer) for i, q in selected])
    # what the model really sees (a null system_prompt means the chat template's own default):
    # the task's first question rendered, the same in every shard
    first = task.questions[0]
    rs.put_artifact(aid, Artifact.DEPLOYMENT, "rendered", {"question_id": first.id, "text": model.render(config.prompt(first))[0]}, overwrite=True)
    questions = [q for _, q in selected]
    ctx = ProbeContext(model, config, task.answer_type, seed=seed, batch_size=batch_size)
    units: list[tuple[Probe, list[Question]]] = []
    for probe in [Default(), *probe_objs]:
        size = max(1, ROWS_PER_UNIT // probe.rows_per_question)
        units.extend((probe, questions[i : i + size]) for i in range(0, len(questions), size))
    bar = None
    labels = probe_labels(names)
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(
            total=sum(len(c) * p.budget_for(model.n_layers) for p, c in units),
            desc=short_text(f"{model.name} / {task.name}", 32) + (f" [{part}]" if part else ""),
            unit="try",
        )
    try:
        for probe, chunk in units:
            done = rs.done_keys(aid, probe.name)
            if not isinstance(probe, Default) and not ctx.defaults:
                ctx.defaults = {qid: t for (qid, _), t in rs.done_keys(aid, DEFAULT_PROBE).items()}
            budget = probe.budget_for(model.n_layers)
            already = sum(1 for q in chunk for i in range(budget) if (q.id, i) in done)
            if bar is not None:
                bar.set_postfix_str(labels.get(probe.name, probe.name), refresh=False)  # one line: the short label
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

    info: AuditRecord
    tries: pd.DataFrame
    questions: pd.DataFrame
    seed: int = 0
    _chance: dict[tuple[str, int, bool], np.ndarray] = field(default_factory=dict, init=False, repr=False, compare=False)

    @classmethod
    def load(cls, store: RunStore | str | Path, audit_id: str | None = None) -> AuditResult:
        rs = _open_store(store, mode="read")
        if audit_id is None:
            audits = rs.audits()
            if len(audits) != 1:
                raise RnrLensError(f"{rs.path} holds {len(audits)} audits; name one with --audit ID (see 'rnr-lens show')")
            audit_id = audits[0].id
        info = rs.audit(audit_id)
        tries = rs.tries(info.id)
        qs = rs.questions(info.id)
        return cls(info, tries, _question_table(qs, tries, info.probes), seed=info.seed)

    @property
    def id(self) -> str:
        return self.info.id

    @property
    def probes(self) -> list[str]:
        return list(self.info.probes)

    @property
    def config(self) -> DeploymentConfig:
        return DeploymentConfig.from_json(self.info.config_json)

    def probe_tries(self, probe: str) -> pd.DataFrame:
        probe = self.probe_name(probe)
        return self.tries[self.tries["probe"] == probe]

    def probe_name(self, probe: str) -> str:
        """The full name of ``probe`` in this audit (a unique prefix such as ``"routes"`` works)."""
        if probe in self.probes or probe == DEFAULT_PROBE:
            return probe
        matches = [p for p in self.probes if p.startswith(probe)]
        if len(matches) == 1:
            return matches[0]
        raise RnrLensError(f"audit {self.id[:12]} has no probe {probe!r}; it has {', '.join(self.probes) or 'none'}")

    def realized_ids(self) -> list[str]:
        return self.questions.loc[self.questions["realized"], "question_id"].tolist()

    def reachable_not_realized(self, probe: str) -> list[str]:
        probe = self.probe_name(probe)
        q = self.questions
        return q.loc[q[reachable_column(probe)] & ~q["realized"], "question_id"].tolist()

    def selections(self, probe: str, k: int | None = None) -> pd.DataFrame:
        """Each selector's pick per question for ``probe`` (question, selector, try, correct),
        among the first ``k`` tries (default: all of them); ``try_index`` -1 where a selector
        kept the default answer."""
        probe = self.probe_name(probe)
        names = sel.names_for(probe)
        tries = self.probe_tries(probe)
        if k is not None:
            tries = tries[tries["try_index"] < k]
        defaults = {r["question_id"]: try_from_row(r) for r in self.tries[self.tries["probe"] == DEFAULT_PROBE].to_dict("records")}
        rows = []
        for qid, group in tries.groupby("question_id", sort=False):
            tries = [try_from_row(r) for r in group.to_dict("records")]
            for s in names:
                pick = sel.pick(s, tries, defaults.get(qid))
                index = -1 if pick.probe == DEFAULT_PROBE else pick.try_index  # -1: the default answer kept
                rows.append({"question_id": qid, "selector": s, "try_index": index, "extracted": pick.extracted, "correct": bool(pick.correct)})
        return pd.DataFrame(rows, columns=["question_id", "selector", "try_index", "extracted", "correct"])

    def pass_at_k(self, probe: str) -> pd.DataFrame:
        """Unbiased pass@k for k = 1..budget with Wilson 95% intervals (conservative for a mean
        of fractional values; over prompts where questions repeat one)."""
        probe = self.probe_name(probe)
        counts = self.probe_tries(probe).groupby("question_id")["correct"].agg(["size", "sum"])
        budget = int(counts["size"].min()) if len(counts) else 0
        prompts = self.questions.set_index("question_id")["prompt"].reindex(counts.index).tolist()
        rows = []
        for k in range(1, budget + 1):
            values = [pass_at_k(int(n), int(c), k) for n, c in zip(counts["size"], counts["sum"])]
            est = rate(values, prompts)
            rows.append({"k": k, "pass_at_k": est.value, "low": est.low, "high": est.high})
        return pd.DataFrame(rows)

    def budget(self, probe: str) -> int:
        """Tries per question the probe's spec asks for (an ablation over every block: the
        most any question holds, since the spec does not name the model's depth)."""
        probe = self.probe_name(probe)
        if probe == DEFAULT_PROBE:
            return 1
        spec = parse_probe(probe).budget
        if spec is not None:
            return spec
        counts = self.probe_tries(probe).groupby("question_id").size()
        return int(counts.max()) if len(counts) else 0

    def complete_mask(self, probe: str) -> pd.Series:
        """Per question (aligned with :attr:`questions`): its realized answer and all of the
        probe's tries are stored. Every question of a finished audit is complete; an
        unfinished one (still running, or killed) is summarized over its complete questions."""
        probe = self.probe_name(probe)
        counts = self.probe_tries(probe).groupby("question_id").size()
        have = self.questions["question_id"].map(counts).fillna(0).to_numpy()
        budget = self.budget(probe)
        return pd.Series((have >= max(budget, 1)) & self.questions["has_default"].to_numpy(), index=self.questions.index)

    def progress(self) -> dict[str, tuple[int, int]]:
        """``(stored, expected)`` tries per probe, the realized answers (``default``) first."""
        n = len(self.questions)
        out = {DEFAULT_PROBE: (int(self.questions["has_default"].sum()), n)}
        for probe in self.probes:
            out[probe] = (int(len(self.probe_tries(probe))), n * self.budget(probe))
        return out

    @property
    def finished(self) -> bool:
        return self.info.status == "complete"

    def summary(self) -> pd.DataFrame:
        """Per probe: realized accuracy, reachable ceiling, its chance level and each selector's
        accuracy (Wilson 95% intervals, over prompts where questions repeat one), and
        reachability above chance (paired per question, with the exact test against chance).

        An unfinished audit is summarized over the questions whose tries are all stored
        (``questions`` says how many); a probe with none yet has empty estimates.
        """
        rows = []
        for probe in self.probes:
            mask = self.complete_mask(probe).to_numpy()
            q = self.questions[mask]
            realized = q["realized"].to_numpy(float)
            reach = q[reachable_column(probe)].to_numpy(float)
            prompts = q["prompt"].tolist()

            def est(values: np.ndarray, prompts: list[str] = prompts) -> Estimate:  # questions sharing a prompt count as one
                return rate(values, prompts)

            row: dict[str, Any] = {
                "probe": probe,
                "budget": self.budget(probe),
                "questions": len(q),
                "prompts": len(set(prompts)),
                "realized": est(realized),
                "reachable": est(reach),
                "reachable_not_realized": int(((reach == 1) & (realized == 0)).sum()),
                "format_misses": int(self.format_misses(probe)["question_id"].isin(set(q["question_id"])).sum()),
            }
            chance = self.chance(probe)[mask]
            row["chance"] = est(chance)
            row["above_chance"] = above_chance(reach, chance, prompts)
            # every complete question has each selector's pick: one column per selector, in q's order
            picks = self.selections(probe).pivot(index="question_id", columns="selector", values="correct").reindex(q["question_id"])
            for s in sel.names_for(probe):
                row[f"select:{s}"] = est(picks[s].to_numpy(float) if s in picks else np.array([]))
            rows.append(row)
        if not rows:
            done = self.questions[self.questions["has_default"]]
            rows.append(
                {
                    "probe": "(none)",
                    "budget": 1,
                    "questions": len(done),
                    "prompts": done["prompt"].nunique(),
                    "realized": rate(done["realized"].to_numpy(float), done["prompt"].tolist()),
                }
            )
        return pd.DataFrame(rows)

    def chance(self, probe: str, n_perm: int = 200, *, lenient: bool = False) -> np.ndarray:
        """Per question (aligned with :attr:`questions`), its chance of counting as reached:
        the probe's own tries scored against the other questions' gold answers, over
        ``n_perm`` seeded derangements (:func:`rnr_lens.stats.permutation_chance`). Its mean is
        the chance level beside the oracle reachability; reachable minus chance is what the
        probe found beyond answering the task's common answers. ``lenient`` scores every
        number a numeric try states, as a reach that counts format misses must be matched."""
        from rnr_lens.answers import canonical_gold, numbers_in

        probe = self.probe_name(probe)
        key = (probe, n_perm, lenient)
        if key in self._chance:  # the summary and the claims both read it: derange once
            return self._chance[key].copy()
        kind = self.info.answer_type
        ids = self.questions["question_id"].tolist()
        golds = [canonical_gold(str(g), kind) for g in self.questions["gold"]]
        said: dict[str, set[str]] = {qid: set() for qid in ids}
        for t in self.probe_tries(probe).itertuples():
            if isinstance(t.extracted, str):
                value = canonical_gold(t.extracted, kind)
                if value is not None:
                    said[t.question_id].add(value)
            if lenient and kind == "number":
                said[t.question_id].update(numbers_in(str(t.text)))
        match = np.array([[g is not None and g in said[qid] for g in golds] for qid in ids], dtype=bool)
        self._chance[key] = permutation_chance(match, n_perm=n_perm, seed=self.seed)
        return self._chance[key].copy()

    def format_misses(self, probe: str | None = None) -> pd.DataFrame:
        """Wrong tries whose text states the gold answer elsewhere (the extractor read another
        number): format misses rather than capability misses. ``probe`` None: the default
        deployment's (realized) answers; else that probe's tries."""
        from rnr_lens.answers import holds_gold

        name = DEFAULT_PROBE if probe is None else self.probe_name(probe)
        tries = self.tries[(self.tries["probe"] == name) & ~self.tries["correct"]]
        gold = self.questions.set_index("question_id")["gold"]
        kind = self.info.answer_type
        hit = [holds_gold(str(t.text), str(gold.get(t.question_id, "")), kind) for t in tries.itertuples()]
        out = tries[hit] if len(tries) else tries
        return out.assign(gold=out["question_id"].map(gold))[["question_id", "probe", "try_index", "text", "extracted", "gold"]]

    def format_miss_share(self) -> tuple[int, int]:
        """``(format misses, answered)`` among the default deployment's greedy answers: wrong
        answers whose text states the gold elsewhere, over the questions answered so far."""
        answered = int(self.questions["has_default"].sum())
        return len(self.format_misses()), answered

    def format_warning(self) -> str | None:
        """One line when format misses exceed :data:`FORMAT_MISS_WARN` of the greedy answers
        (the realized rate is then understated by up to that share), else None; numeric tasks
        only."""
        misses, answered = self.format_miss_share()
        if self.info.answer_type != "number" or not answered or misses / answered <= FORMAT_MISS_WARN:
            return None  # a choice letter alone in prose ("A cat ...") is no stated answer
        return (
            f"{misses} of {answered} greedy answers ({misses / answered:.0%}) state the gold answer but were read as another: "
            f"realized may be understated by up to {misses / answered:.2f} (extractor {self.config.extractor!r})"
        )

    def _repr_html_(self) -> str:
        """A compact summary for notebooks: short probe labels, intervals on one line."""
        i = self.info
        records = self.summary_records()
        labels = probe_labels([r["probe"] for r in records])
        cells = ["probe", "k", "n", "realized", "reachable", "chance", "above chance", "reach-not-real", "format misses"]
        rows = [
            [
                labels[r["probe"]],
                r.get("budget"),
                r.get("questions"),
                estimate_text(r.get("realized")),
                estimate_text(r.get("reachable")),
                estimate_text(r.get("chance")),
                estimate_text(r.get("above_chance")),
                r.get("reachable_not_realized"),
                r.get("format_misses"),
            ]
            for r in records
        ]
        blind = sorted({k[7:] for r in records for k in r if k.startswith("select:")})
        for row, r in zip(rows, records):
            row += [estimate_text(r.get(f"select:{b}")) for b in blind]
        specs = "".join(f"<li><code>{html.escape(labels[r['probe']])}</code> = <code>{html.escape(r['probe'])}</code></li>" for r in records)
        status = "" if self.finished else " — unfinished: " + ", ".join(f"{d}/{e}" for d, e in self.progress().values()) + " tries"
        return (
            f"<div class='rnr-audit'><b>audit {self.id}</b> [{html.escape(i.status)}]{status}<br>"
            f"model <code>{html.escape(i.model)}</code>, task <code>{html.escape(i.task)}</code> ({i.n_questions} questions), "
            f"config {i.config_hash}, seed {i.seed}"
            + html_table(rows, cells + [f"blind: {b}" for b in blind])
            + "<p>reachable: one of the probe's own k tries is correct (the default answer is never counted); chance: the same tries "
            "scored against the other questions' gold answers.</p>" + f"<ul>{specs}</ul></div>"
        )

    def summary_records(self) -> list[dict[str, Any]]:
        """The summary as plain JSON-ready dicts (estimates as value/low/high; an estimate
        over no questions has ``null`` values)."""
        out = []
        for row in self.summary().to_dict("records"):
            rec: dict[str, Any] = {}
            for k, v in row.items():
                if isinstance(v, Estimate):
                    rec[k] = v.to_dict()
                elif not (isinstance(v, float) and np.isnan(v)):
                    rec[k] = v
            out.append(rec)
        return out


def _question_table(questions: pd.DataFrame, tries: pd.DataFrame, probes: Sequence[str]) -> pd.DataFrame:
    table = questions[["question_id", "prompt", "gold"]].copy()
    default = tries[tries["probe"] == DEFAULT_PROBE].set_index("question_id")
    table["has_default"] = table["question_id"].isin(default.index)
    table["realized"] = table["question_id"].map(default["correct"]).fillna(False).astype(bool)
    table["default_text"] = table["question_id"].map(default["text"])
    table["default_extracted"] = table["question_id"].map(default["extracted"])
    for probe in probes:
        t = tries[tries["probe"] == probe]
        hit = t[t["correct"]].groupby("question_id")["try_index"].min()
        table[reachable_column(probe)] = table["question_id"].isin(hit.index)
        table[first_hit_column(probe)] = table["question_id"].map(hit).astype("Int64")
    return table
