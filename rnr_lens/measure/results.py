"""What an audit found, read back from its run store: one :class:`AuditResult` per audit.

An :class:`AuditResult` is a read-only view of the store: the realized answer and every
probe's tries per question, and the summary built from them. Each probe's summary row is one
:class:`ProbeSummary` (estimates stay :class:`~rnr_lens.core.stats.Estimate` until the JSON edge,
selectors stay a mapping until the table edge), so the notebook view, the CLI and the report
read the same record.
"""

from __future__ import annotations

import html
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
import pandas as pd

from rnr_lens.core.display import SELECTOR_COLUMN as SELECTOR_COLUMN  # re-exported: summary tables name their columns with it
from rnr_lens.core.display import estimate_text, html_table, selector_column
from rnr_lens.core.records import DEFAULT_PROBE, TRY_ANSWERS, TRY_KEYS, AuditRecord, first_hit_column, reachable_column, try_from_row
from rnr_lens.core.stats import Estimate, above_chance, derangement_chance, pass_at_k, rate
from rnr_lens.errors import RnrLensError, arg
from rnr_lens.measure import selectors as sel
from rnr_lens.measure.probe_specs import family_of, short_labels
from rnr_lens.measure.probes import parse_probe
from rnr_lens.measure.store import Artifact, RunStore, open_store
from rnr_lens.questions.answers import holds_gold, match_key, numbers_in
from rnr_lens.questions.deploy import DeploymentConfig

FORMAT_MISS_WARN = 0.1
"""Share of greedy answers that are format misses above which an audit warns that its
extractor, not the model, may be deciding the realized rate."""


def tries_difference(a: pd.DataFrame, b: pd.DataFrame, tolerance: float = 1e-4) -> str | None:
    """Why two try tables are not the same tries, in one line (None: they are): row for row the
    same keys and answers (``records.TRY_KEYS``, ``records.TRY_ANSWERS``), mean log-probabilities and
    entropies equal within ``tolerance`` (a shard batches its questions otherwise, which may move
    their last bits). The one comparison of "the same run" (shards, executors, the GPU check).

    Example:
        >>> tries_difference(one.tries, merged.tries)  # doctest: +SKIP
    """
    a = a.sort_values(list(TRY_KEYS)).reset_index(drop=True)
    b = b.sort_values(list(TRY_KEYS)).reset_index(drop=True)
    try:
        pd.testing.assert_frame_equal(a[[*TRY_KEYS, *TRY_ANSWERS]], b[[*TRY_KEYS, *TRY_ANSWERS]])
        for col in ("mean_logprob", "mean_entropy"):
            np.testing.assert_allclose(a[col].astype(float), b[col].astype(float), rtol=tolerance, atol=tolerance)
    except AssertionError as exc:
        return " ".join(str(exc).split())
    return None


@dataclass(frozen=True)
class ProbeSummary:
    """One probe's row of an audit's summary (every rate over the questions whose tries are all
    stored; questions sharing a prompt count as one).

    Attributes:
        probe: The probe's spec (``"(none)"`` for an audit without probes).
        budget: Tries per question (k).
        questions: Questions summarized.
        prompts: Distinct prompts among them.
        realized: The default deployment's accuracy.
        reachable: The oracle: one of the probe's own tries is correct.
        chance: The same tries scored against other questions' gold answers.
        above_chance: Reachable minus chance, paired per question.
        reachable_not_realized: Questions reached but not realized.
        format_misses: Questions where one of the probe's wrong tries states the gold elsewhere.
        selectors: Each selector's accuracy (its pick per question), by selector name.
    """

    probe: str
    budget: int
    questions: int
    prompts: int
    realized: Estimate
    reachable: Estimate | None = None
    chance: Estimate | None = None
    above_chance: Estimate | None = None
    reachable_not_realized: int | None = None
    format_misses: int | None = None
    selectors: Mapping[str, Estimate] = field(default_factory=dict)

    _ESTIMATES: ClassVar[tuple[str, ...]] = ("realized", "reachable", "chance", "above_chance")
    _COUNTS: ClassVar[tuple[str, ...]] = ("reachable_not_realized", "format_misses")

    def row(self, label: str | None = None) -> dict[str, Any]:
        """A table row: the probe by ``label`` (its short label), the estimates as
        :class:`Estimate`, one ``select:NAME`` column per selector (what
        :meth:`AuditResult.summary` shows)."""
        out: dict[str, Any] = {"probe": label or self.probe, "budget": self.budget, "questions": self.questions, "prompts": self.prompts}
        out.update({k: getattr(self, k) for k in self._ESTIMATES + self._COUNTS if getattr(self, k) is not None})
        out.update({selector_column(name): e for name, e in self.selectors.items()})
        return out

    def cells(self, label: str | None = None) -> dict[str, Any]:
        """The row every view shows (the CLI's table, the notebook's): the probe by ``label``
        (its short label), k, n and the estimates as compact text."""
        return {
            "probe": label or self.probe,
            "k": self.budget,
            "n": self.questions,
            "realized": estimate_text(self.realized),
            "reachable": estimate_text(self.reachable),
            "chance": estimate_text(self.chance),
            "above chance": estimate_text(self.above_chance),
        }

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: estimates as value/low/high (``null`` over no questions), selectors
        nested under ``"selectors"``; fields an audit without probes lacks are left out."""
        out: dict[str, Any] = {"probe": self.probe, "budget": self.budget, "questions": self.questions, "prompts": self.prompts}
        for k in self._ESTIMATES:
            e = getattr(self, k)
            if e is not None:
                out[k] = e.to_dict()
        out.update({k: getattr(self, k) for k in self._COUNTS if getattr(self, k) is not None})
        if self.selectors:
            out["selectors"] = {name: e.to_dict() for name, e in self.selectors.items()}
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ProbeSummary:
        """The inverse of :meth:`to_dict`."""

        def estimate(key: str) -> Estimate | None:
            return None if d.get(key) is None else Estimate.from_dict(d[key])

        def count(key: str) -> int | None:
            return None if d.get(key) is None else int(d[key])

        return cls(
            probe=str(d["probe"]),
            budget=int(d["budget"]),
            questions=int(d["questions"]),
            prompts=int(d["prompts"]),
            realized=Estimate.from_dict(d["realized"]),
            reachable=estimate("reachable"),
            chance=estimate("chance"),
            above_chance=estimate("above_chance"),
            reachable_not_realized=count("reachable_not_realized"),
            format_misses=count("format_misses"),
            selectors={name: Estimate.from_dict(e) for name, e in (d.get("selectors") or {}).items()},
        )


@dataclass
class AuditResult:
    """Everything an audit found, read back from the run store.

    Attributes:
        info: The audit's record (model, task, config hash, probes, seed...).
        tries: One row per try (probe ``default`` holds the realized answers).
        questions: One row per question: realized flag and default output, and per probe the
            reachable flag and the first try that hit, named by the probe's short label
            (``reachable[sampling]``; :attr:`labels` maps each full spec to it, and
            :meth:`column` names a probe's column).
        rendered_prompt: What the model really saw: the task's first question rendered
            (``question_id``, ``text``), as the audit stored it (None in a store made before).
    """

    info: AuditRecord
    tries: pd.DataFrame
    questions: pd.DataFrame
    seed: int = 0
    rendered_prompt: dict[str, Any] | None = field(default=None, repr=False)
    _chance: dict[tuple[str, bool], np.ndarray] = field(default_factory=dict, init=False, repr=False, compare=False)

    @classmethod
    def load(cls, store: RunStore | str | Path, audit_id: str | None = None) -> AuditResult:
        rs = open_store(store, mode="read")
        if audit_id is None:
            audits = rs.audits()
            if len(audits) != 1:
                raise RnrLensError(f"{rs.path} holds {len(audits)} audits; name one with {arg('audit_id', 'ID')} (see 'rnr-lens show')")
            audit_id = audits[0].id
        info = rs.audit(audit_id)
        tries = rs.tries(info.id)
        qs = rs.questions(info.id)
        rendered = rs.get_artifact(info.id, Artifact.DEPLOYMENT, "rendered")
        return cls(info, tries, _question_table(qs, tries, short_labels(info.probes)), seed=info.seed, rendered_prompt=rendered)

    @property
    def id(self) -> str:
        return self.info.id

    @property
    def probes(self) -> list[str]:
        return list(self.info.probes)

    @cached_property
    def labels(self) -> dict[str, str]:
        """Each probe's short label (its family, numbered where a family repeats), keyed by its
        full spec: the one name of a probe in tables, figures and widgets; the full spec stays
        in :attr:`probes` and in the store.

        Example:
            >>> result.labels  # doctest: +SKIP
            {'sampling:k=8,t=0.7,top_p=1.0,draw=multinomial': 'sampling', 'routes:k=8,edit_rate=0.25,max_segment=4,protect=1,shared=false': 'routes'}
        """
        return short_labels(self.probes)

    def column(self, probe: str, what: Literal["reachable", "first_hit"] = "reachable") -> str:
        """The name of ``probe``'s column in :attr:`questions` (``probe`` as :meth:`probe_name`
        accepts it): ``reachable[sampling]``, or its first correct try's index."""
        label = self.labels[self.probe_name(probe)]
        return reachable_column(label) if what == "reachable" else first_hit_column(label)

    @property
    def config(self) -> DeploymentConfig:
        return DeploymentConfig.from_json(self.info.config_json)

    def probe_tries(self, probe: str) -> pd.DataFrame:
        probe = self.probe_name(probe)
        return self.tries[self.tries["probe"] == probe]

    def probe_name(self, probe: str) -> str:
        """The stored name of ``probe`` in this audit: a stored name, any spec of the same probe
        (``"sampling:k=8,t=0.7"`` names ``sampling:k=8,t=0.7,top_p=1.0,draw=multinomial``:
        specs are compared by their parsed, canonical name, never as text prefixes), or its short
        label (:attr:`labels`: a bare family such as ``"routes"`` when the audit ran one probe of
        it, ``"sampling-2"`` where it ran several).

        Example:
            >>> result.probe_name("sampling:k=8,t=0.7")  # doctest: +SKIP
            'sampling:k=8,t=0.7,top_p=1.0,draw=multinomial'
        """
        if probe in self.probes or probe == DEFAULT_PROBE:
            return probe
        by_label = {label: spec for spec, label in self.labels.items()}
        if probe in by_label:
            return by_label[probe]
        if ":" not in probe:
            family = [p for p in self.probes if family_of(p) == probe]  # one of a family is named by its label, above
            if family:
                raise RnrLensError(
                    f"audit {self.id[:12]} ran {len(family)} {probe} probes; name one by its label "
                    + ", ".join(f"{self.labels[p]} ({p})" for p in family)
                )
        else:
            canonical = parse_probe(probe).name
            if canonical in self.probes:
                return canonical
            stored = {parse_probe(p).name: p for p in self.probes if p != DEFAULT_PROBE}  # a name stored before a setting's rename
            if canonical in stored:
                return stored[canonical]
        raise RnrLensError(f"audit {self.id[:12]} has no probe {probe!r}; it has {', '.join(self.probes) or 'none'}")

    def realized_ids(self) -> list[str]:
        return self.questions.loc[self.questions["realized"], "question_id"].tolist()

    def reachable_not_realized(self, probe: str) -> list[str]:
        probe = self.probe_name(probe)
        q = self.questions
        return q.loc[q[self.column(probe)] & ~q["realized"], "question_id"].tolist()

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
        return self.info.status.complete

    def probe_summaries(self) -> list[ProbeSummary]:
        """Per probe: realized accuracy, reachable ceiling, its chance level and each selector's
        accuracy (Wilson 95% intervals, over prompts where questions repeat one), and
        reachability above chance (paired per question, with the exact test against chance).

        An unfinished audit is summarized over the questions whose tries are all stored
        (``questions`` says how many); a probe with none yet has empty estimates. An audit
        without probes has one row, ``"(none)"``, with the realized rate only.
        """
        rows = [self._probe_summary(probe) for probe in self.probes]
        if not rows:
            done = self.questions[self.questions["has_default"]]
            prompts = done["prompt"].tolist()
            rows.append(ProbeSummary("(none)", 1, len(done), len(set(prompts)), rate(done["realized"].to_numpy(float), prompts)))
        return rows

    def _probe_summary(self, probe: str) -> ProbeSummary:
        mask = self.complete_mask(probe).to_numpy()
        q = self.questions[mask]
        realized = q["realized"].to_numpy(float)
        reach = q[self.column(probe)].to_numpy(float)
        prompts = q["prompt"].tolist()
        chance = self.chance(probe)[mask]
        # every complete question has each selector's pick: one column per selector, in q's order
        picks = self.selections(probe).pivot(index="question_id", columns="selector", values="correct").reindex(q["question_id"])
        return ProbeSummary(
            probe=probe,
            budget=self.budget(probe),
            questions=len(q),
            prompts=len(set(prompts)),
            realized=rate(realized, prompts),  # questions sharing a prompt count as one
            reachable=rate(reach, prompts),
            chance=rate(chance, prompts),
            above_chance=above_chance(reach, chance, prompts),
            reachable_not_realized=int(((reach == 1) & (realized == 0)).sum()),
            format_misses=int(self.format_misses(probe)["question_id"].isin(set(q["question_id"])).sum()),
            selectors={s: rate(picks[s].to_numpy(float) if s in picks else np.array([]), prompts) for s in sel.names_for(probe)},
        )

    def summary(self) -> pd.DataFrame:
        """:meth:`probe_summaries` as a table of estimates, each probe by its short label
        (:attr:`labels` gives its full spec), one ``select:NAME`` column per selector."""
        labels = self.labels
        return pd.DataFrame([s.row(labels.get(s.probe)) for s in self.probe_summaries()])

    def chance(self, probe: str, *, lenient: bool = False) -> np.ndarray:
        """Per question (aligned with :attr:`questions`), its chance of counting as reached:
        the probe's own tries scored against the other questions' gold answers, over
        a uniform derangement, in expectation (:func:`rnr_lens.core.stats.derangement_chance`). Its mean is
        the chance level beside the oracle reachability; reachable minus chance is what the
        probe found beyond answering the task's common answers. ``lenient`` scores every
        number a numeric try states, as a reach that counts format misses must be matched."""
        probe = self.probe_name(probe)
        key = (probe, lenient)
        if key in self._chance:  # the summary and the claims both read it: compute once
            return self._chance[key].copy()
        answer_type = self.info.answer_type
        ids = self.questions["question_id"].tolist()
        # matched by the rule that grades a try against its own gold (answers.match_key); read
        # leniently, every stated number by the tolerant rule that finds a format miss
        reader = "lenient" if lenient else self.config.extractor
        golds = [match_key(reader, str(g), answer_type, gold=True) for g in self.questions["gold"]]
        said: dict[str, set[Hashable]] = {qid: set() for qid in ids}
        for t in self.probe_tries(probe).itertuples():
            if isinstance(t.extracted, str):
                value = match_key(reader, t.extracted, answer_type)
                if value is not None:
                    said[t.question_id].add(value)
            if lenient and answer_type == "number":
                said[t.question_id].update(numbers_in(str(t.text)))
        self._chance[key] = derangement_chance([said[qid] for qid in ids], golds)
        return self._chance[key].copy()

    def format_misses(self, probe: str | None = None) -> pd.DataFrame:
        """Wrong tries whose text states the gold answer elsewhere (the extractor read another
        number): format misses rather than capability misses. ``probe`` None: the default
        deployment's (realized) answers; else that probe's tries."""
        name = DEFAULT_PROBE if probe is None else self.probe_name(probe)
        tries = self.tries[(self.tries["probe"] == name) & ~self.tries["correct"]]
        gold = self.questions.set_index("question_id")["gold"]
        answer_type = self.info.answer_type
        hit = [holds_gold(str(t.text), str(gold.get(t.question_id, "")), answer_type) for t in tries.itertuples()]
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
        summaries = self.probe_summaries()
        labels = {**self.labels, "(none)": "(none)"}
        blind = sorted({name for s in summaries for name in s.selectors if name in sel.ANSWER_BLIND or name == "reward"})  # the oracle is `reachable`
        shown = [{**x.cells(labels[x.probe]), "reach-not-real": x.reachable_not_realized, "format misses": x.format_misses} for x in summaries]
        rows = [[*row.values(), *(estimate_text(x.selectors.get(b)) for b in blind)] for row, x in zip(shown, summaries)]
        columns = [*shown[0], *(selector_column(b) for b in blind)]
        specs = "".join(f"<li><code>{html.escape(labels[s.probe])}</code> = <code>{html.escape(s.probe)}</code></li>" for s in summaries)
        status = "" if self.finished else " — unfinished: " + ", ".join(f"{d}/{e}" for d, e in self.progress().values()) + " tries"
        return (
            f"<div class='rnr-audit'><b>audit {self.id}</b> [{html.escape(str(i.status))}]{status}<br>"
            f"model <code>{html.escape(i.model)}</code>, task <code>{html.escape(i.task)}</code> ({i.n_questions} questions), "
            f"config {i.config_hash}, seed {i.seed}"
            + html_table(rows, columns)
            + "<p>reachable: one of the probe's own k tries is correct (the default answer is never counted); chance: the same tries "
            "scored against the other questions' gold answers.</p>" + f"<ul>{specs}</ul></div>"
        )

    def summary_records(self) -> list[dict[str, Any]]:
        """The summary at the JSON edge: :meth:`ProbeSummary.to_dict` per probe."""
        return [s.to_dict() for s in self.probe_summaries()]

    def to_json(self) -> dict[str, Any]:
        """The audit at the JSON edge, the one form ``audit --json`` prints and ``show --json``
        lists: its identity, config and what the model saw, progress per probe, the summary."""
        i = self.info
        return {
            "id": i.id,
            "model": i.model,
            "task": i.task,
            "questions": i.n_questions,
            "config_hash": i.config_hash,
            "config": self.config.to_dict(),
            "rendered_prompt": self.rendered_prompt,
            "seed": i.seed,
            "status": str(i.status),
            "progress": {p: {"stored": d, "expected": e} for p, (d, e) in self.progress().items()},
            "summary": self.summary_records(),
        }


def _question_table(questions: pd.DataFrame, tries: pd.DataFrame, labels: Mapping[str, str]) -> pd.DataFrame:
    table = questions[["question_id", "prompt", "gold"]].copy()
    default = tries[tries["probe"] == DEFAULT_PROBE].set_index("question_id")
    table["has_default"] = table["question_id"].isin(default.index)
    table["realized"] = table["question_id"].map(default["correct"]).fillna(False).astype(bool)
    table["default_text"] = table["question_id"].map(default["text"])
    table["default_extracted"] = table["question_id"].map(default["extracted"])
    for probe, label in labels.items():
        t = tries[tries["probe"] == probe]
        hit = t[t["correct"]].groupby("question_id")["try_index"].min()
        table[reachable_column(label)] = table["question_id"].isin(hit.index)
        table[first_hit_column(label)] = table["question_id"].map(hit).astype("Int64")
    return table
