"""Matched comparison of two audits: did training expand reachability, or only realize what
was already reachable?

``compare(a, b)`` refuses unless both audits share the deployment config hash, the task and
the probes (with their budgets); then, per probe, it reports the change in realized accuracy
and in the reachable ceiling with paired score intervals and exact McNemar tests over
questions (:func:`rnr_lens.core.stats.paired_difference`), their contrast (half the realized rise
minus the ceiling's, per question: :func:`rnr_lens.judge.verdicts.ceiling_contrast`), and each question's transition between three states:
*realized*, *reachable only* (reachable by the probe but not realized) and *unreachable*.

Only questions complete in both audits are compared (their realized answer and all of the
probe's tries stored): an unfinished audit is compared over the questions it finished, and
:attr:`Comparison.excluded` says how many were left out, so a missing question never counts
as wrong on one side.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from rnr_lens.core.stats import Estimate, paired_difference
from rnr_lens.errors import RnrLensError, arg
from rnr_lens.judge.ceiling import NAMED_K, Ceiling, ceiling_of
from rnr_lens.judge.verdicts import MARGIN, TrainingVerdict, ceiling_contrast, training_verdict
from rnr_lens.measure.probes import probe_class
from rnr_lens.measure.results import AuditResult
from rnr_lens.questions.answers import match_key

STATES = ("realized", "reachable only", "unreachable")


@dataclass(frozen=True, eq=False)
class Paired:
    """One probe's per-question outcomes in both audits, over the questions complete in both
    (what every paired estimate and verdict of a comparison is computed from)."""

    realized_a: np.ndarray
    realized_b: np.ndarray
    reach_a: np.ndarray
    reach_b: np.ndarray
    prompts: tuple[str, ...]
    chance_a: np.ndarray
    chance_b: np.ndarray
    """Each question's chance of counting as reached under each audit's own tries
    (:meth:`rnr_lens.measure.results.AuditResult.chance`): claim 3's precondition (rules 3)."""


@dataclass
class Comparison:
    """Deltas per probe (``b - a``) and per-question transitions."""

    a: AuditResult
    b: AuditResult
    deltas: pd.DataFrame  # probe, n, realized_a/b, delta_realized, reachable_a/b, delta_reachable, contrast (delta realized / 2 - delta reachable)
    transitions: pd.DataFrame  # probe, question_id, before, after
    excluded: dict[str, int] = field(default_factory=dict)  # per probe: questions not complete in both
    paired: dict[str, Paired] = field(default_factory=dict, repr=False)  # per probe: the compared questions' outcomes

    def transition_counts(self, probe: str) -> pd.DataFrame:
        """Counts of questions moving from each state (rows, audit a) to each state (columns, b).
        ``probe`` may be a unique prefix of a probe name (``"sampling"``)."""
        probe = self.a.probe_name(probe)
        t = self.transitions[self.transitions.probe == probe]
        return pd.crosstab(pd.Categorical(t.before, STATES), pd.Categorical(t.after, STATES), dropna=False, rownames=["before"], colnames=["after"])

    def questions(self, probe: str, before: str, after: str) -> list[str]:
        """The questions that moved from state ``before`` to ``after`` under ``probe``."""
        for state in (before, after):
            if state not in STATES:
                raise RnrLensError(f"unknown state {state!r}; choose one of {', '.join(STATES)}")
        probe = self.a.probe_name(probe)
        t = self.transitions
        return t[(t.probe == probe) & (t.before == before) & (t.after == after)].question_id.tolist()

    def verdict(self, probe: str, margin: float = MARGIN) -> TrainingVerdict:
        """Claim 3 under ``probe``: did training raise realized accuracy while the ceiling did
        not keep up (rose by less than ``margin`` and less than half the realized rise, or fell;
        :func:`rnr_lens.judge.verdicts.training_verdict`)?"""
        c = self.paired[self.a.probe_name(probe)]
        return training_verdict(c.realized_a, c.realized_b, c.reach_a, c.reach_b, c.prompts, margin=margin, chance_a=c.chance_a, chance_b=c.chance_b)

    def to_json(self) -> dict[str, Any]:
        deltas = [{k: (v.to_dict() if isinstance(v, Estimate) else v) for k, v in row.items()} for row in self.deltas.to_dict("records")]
        named = {
            "newly realized, already reachable": ("reachable only", "realized"),
            "newly reached": ("unreachable", "reachable only"),
            "newly reached and realized": ("unreachable", "realized"),
            "lost realization, still reachable": ("realized", "reachable only"),
            "lost reach": ("reachable only", "unreachable"),
            "lost realization and reach": ("realized", "unreachable"),
        }
        return {
            "a": self.a.id,
            "b": self.b.id,
            "deltas": deltas,
            "excluded": self.excluded,
            "verdicts": {p: self.verdict(p).verdict.to_dict() for p in self.a.probes},
            "transitions": {p: {name: self.questions(p, *pair) for name, pair in named.items()} for p in self.a.probes},
        }


def _state(realized: bool, reachable: bool) -> str:
    return "realized" if realized else "reachable only" if reachable else "unreachable"


def compare(a: AuditResult, b: AuditResult) -> Comparison:
    """Compare audit ``b`` against audit ``a`` under identical conditions, over the questions
    complete in both."""
    for key, what in (("config_hash", "deployment config"), ("task_fingerprint", "task"), ("answer_type", "answer type")):
        if getattr(a.info, key) != getattr(b.info, key):
            raise RnrLensError(f"audits {a.id[:12]} and {b.id[:12]} differ in their {what}; compare only audits made under identical conditions")
    if a.probes != b.probes:
        raise RnrLensError(
            f"audits {a.id[:12]} and {b.id[:12]} ran different probes or budgets ({a.probes} vs {b.probes}); rerun one with the other's probes"
        )
    qa_all = a.questions.set_index("question_id")
    qb_all = b.questions.set_index("question_id").reindex(qa_all.index)
    rows, transitions, excluded, paired = [], [], {}, {}
    for probe in a.probes:
        ids = complete_in_both(a, b, probe)
        excluded[probe] = len(qa_all) - len(ids)
        qa, qb = qa_all.loc[ids], qb_all.loc[ids]
        col = a.column(probe)  # the same probes, so the same labels, in both
        realized = np.c_[qa["realized"].to_numpy(float), qb["realized"].to_numpy(float)]
        reach = np.c_[qa[col].to_numpy(float), qb[col].to_numpy(float)]
        prompts = qa["prompt"].tolist()  # questions that share a prompt count together
        dr = paired_difference(realized[:, 1], realized[:, 0], prompts)
        dk = paired_difference(reach[:, 1], reach[:, 0], prompts)
        per_r, per_k = realized[:, 1] - realized[:, 0], reach[:, 1] - reach[:, 0]
        order_a = a.questions["question_id"].tolist()
        order_b = b.questions["question_id"].tolist()
        chance_a = pd.Series(a.chance(probe), index=order_a).loc[ids].to_numpy(float)
        chance_b = pd.Series(b.chance(probe), index=order_b).loc[ids].to_numpy(float)
        paired[probe] = Paired(realized[:, 0], realized[:, 1], reach[:, 0], reach[:, 1], tuple(prompts), chance_a, chance_b)
        rows.append(
            {
                "probe": probe,
                "n": len(ids),
                "realized_a": float(realized[:, 0].mean()) if ids else float("nan"),
                "realized_b": float(realized[:, 1].mean()) if ids else float("nan"),
                "delta_realized": dr,
                "reachable_a": float(reach[:, 0].mean()) if ids else float("nan"),
                "reachable_b": float(reach[:, 1].mean()) if ids else float("nan"),
                "delta_reachable": dk,
                "contrast": ceiling_contrast(per_r, per_k, prompts),
            }
        )
        for qid in ids:
            transitions.append(
                {
                    "probe": probe,
                    "question_id": qid,
                    "before": _state(bool(qa.loc[qid, "realized"]), bool(qa.loc[qid, col])),
                    "after": _state(bool(qb.loc[qid, "realized"]), bool(qb.loc[qid, col])),
                }
            )
    return Comparison(a, b, pd.DataFrame(rows), pd.DataFrame(transitions, columns=["probe", "question_id", "before", "after"]), excluded, paired)


def complete_in_both(a: AuditResult, b: AuditResult, probe: str) -> list[str]:
    """The questions (in ``a``'s order) whose realized answer and every try of ``probe`` are
    stored in both audits: the only ones a paired comparison reads."""
    both = _complete(a, probe) & _complete(b, probe)
    return [i for i in a.questions["question_id"] if i in both]


def _complete(result: AuditResult, probe: str) -> set[str]:
    """The questions whose realized answer and every try of ``probe`` are stored."""
    mask = result.complete_mask(probe).to_numpy()
    return set(result.questions.loc[mask, "question_id"])


def _draws(result: AuditResult, probe: str, ids: Sequence[str]) -> np.ndarray:
    """Each question's draws in ``ids`` order, correct (1) or not (0), in try order: a
    ``(questions, K)`` array, K the probe's budget."""
    tries = result.probe_tries(probe)
    budget = result.budget(probe)
    table = tries.pivot_table(index="question_id", columns="try_index", values="correct", aggfunc="first")
    out = table.reindex(index=list(ids), columns=range(budget)).to_numpy(float)
    if np.isnan(out).any():
        raise RnrLensError(
            f"audit {result.id[:12]} lacks some of {probe}'s {budget} draws on the compared questions; finish it by running its audit again ({arg('resume')})"
        )
    return out


def compare_ceiling(
    base: AuditResult, trained: AuditResult, probe: str, *, named: Sequence[int] = NAMED_K, margin: float = MARGIN, seed: int = 0
) -> Ceiling:
    """Claim 3 at large k for ``trained`` against ``base`` under the sampling ``probe`` both ran
    (:mod:`rnr_lens.judge.ceiling`): over the questions complete in both, under :func:`compare`'s
    checks.

    Args:
        base, trained: Audits under identical conditions.
        probe: A sampling probe both ran (its budget K is the largest k).
        named: The k's besides K at which claim 3's verdict is evaluated (those above K are left out).
        margin: Claim 3's margin (:data:`rnr_lens.judge.verdicts.MARGIN`).
        seed: Seeds the crossing's bootstrap.

    Example:
        >>> c = compare_ceiling(base, trained, "sampling:k=128,t=0.7,draw=inverse-cdf")  # doctest: +SKIP
        >>> c.crossing.text(), c.verdict(128).verdict.status  # doctest: +SKIP
    """
    compare(base, trained)  # identical conditions, or a one-line refusal naming what differs
    name = base.probe_name(probe)
    if not probe_class(name).independent_draws:
        raise RnrLensError(
            f"the ceiling estimates pass@k from k independent draws per question, which {name} does not make; "
            "audit with a probe that draws them, such as sampling:k=128,t=0.7"
        )
    ids = complete_in_both(base, trained, name)
    if not ids:
        raise RnrLensError(f"no question is complete in both audits under {name}; finish them by running their audits again ({arg('resume')})")
    qa, qb = base.questions.set_index("question_id").loc[ids], trained.questions.set_index("question_id").loc[ids]
    reader = base.config.extractor  # the same config in both (compare's check)
    golds = [match_key(reader, str(g), base.info.answer_type, gold=True) for g in qa["gold"]]
    ceiling = ceiling_of(
        (base.info.model, trained.info.model, base.info.task, name),
        _draws(base, name, ids),
        _draws(trained, name, ids),
        qa["realized"].to_numpy(float),
        qb["realized"].to_numpy(float),
        qa["prompt"].tolist(),
        excluded=len(base.questions) - len(ids),
        named=named,
        margin=margin,
        seed=seed,
        answers=(_answers(base, name, ids), _answers(trained, name, ids), golds),
    )
    return replace(ceiling, audits=(base.id, trained.id))


def _answers(result: AuditResult, probe: str, ids: Sequence[str]) -> list[list[Hashable | None]]:
    """Each question's draws in ``ids`` order as the keys its reader grades by
    (:func:`rnr_lens.questions.answers.match_key`; None where none was read), in try order: what the
    chance curves score against the other questions' golds."""
    kind, reader = result.info.answer_type, result.config.extractor
    tries = result.probe_tries(probe)
    read = {
        (t.question_id, int(t.try_index)): match_key(reader, t.extracted, kind) if isinstance(t.extracted, str) else None for t in tries.itertuples()
    }
    return [[read.get((q, i)) for i in range(result.budget(probe))] for q in ids]
