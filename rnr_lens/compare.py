"""Matched comparison of two audits: did training expand reachability, or only realize what
was already reachable?

``compare(a, b)`` refuses unless both audits share the deployment config hash, the task and
the probes (with their budgets); then, per probe, it reports the change in realized accuracy
and in the reachable ceiling with paired bootstrap intervals over questions, and each
question's transition between three states: *realized*, *reachable only* (reachable by the
probe but not realized) and *unreachable*.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from rnr_lens.audit import AuditResult
from rnr_lens.errors import RnrLensError
from rnr_lens.records import reachable_column
from rnr_lens.stats import Estimate, bootstrap

STATES = ("realized", "reachable only", "unreachable")


@dataclass
class Comparison:
    """Deltas per probe (``b - a``) and per-question transitions."""

    a: AuditResult
    b: AuditResult
    deltas: pd.DataFrame
    transitions: pd.DataFrame  # probe, question_id, before, after

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

    def to_json(self) -> dict[str, Any]:
        deltas = [{k: (v.as_dict() if isinstance(v, Estimate) else v) for k, v in row.items()} for row in self.deltas.to_dict("records")]
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
            "transitions": {p: {name: self.questions(p, *pair) for name, pair in named.items()} for p in self.a.probes},
        }


def _state(realized: bool, reachable: bool) -> str:
    return "realized" if realized else "reachable only" if reachable else "unreachable"


def compare(a: AuditResult, b: AuditResult, *, seed: int = 0) -> Comparison:
    """Compare audit ``b`` against audit ``a`` under identical conditions."""
    for key, what in (("config_hash", "deployment config"), ("task_fingerprint", "task"), ("answer_type", "answer type")):
        if getattr(a.info, key) != getattr(b.info, key):
            raise RnrLensError(f"audits {a.id[:12]} and {b.id[:12]} differ in their {what}; compare only audits made under identical conditions")
    if a.probes != b.probes:
        raise RnrLensError(
            f"audits {a.id[:12]} and {b.id[:12]} ran different probes or budgets ({a.probes} vs {b.probes}); rerun one with the other's probes"
        )
    qa = a.questions.set_index("question_id")
    qb = b.questions.set_index("question_id").reindex(qa.index)
    rows, transitions = [], []
    for probe in a.probes:
        col = reachable_column(probe)
        realized = np.c_[qa["realized"].to_numpy(float), qb["realized"].to_numpy(float)]
        reach = np.c_[qa[col].to_numpy(float), qb[col].to_numpy(float)]
        prompts = qa["prompt"].tolist()  # questions that share a prompt are resampled together
        rows.append(
            {
                "probe": probe,
                "realized_a": float(realized[:, 0].mean()),
                "realized_b": float(realized[:, 1].mean()),
                "delta_realized": bootstrap(realized[:, 1] - realized[:, 0], seed=seed, clusters=prompts),
                "reachable_a": float(reach[:, 0].mean()),
                "reachable_b": float(reach[:, 1].mean()),
                "delta_reachable": bootstrap(reach[:, 1] - reach[:, 0], seed=seed, clusters=prompts),
            }
        )
        for qid in qa.index:
            transitions.append(
                {
                    "probe": probe,
                    "question_id": qid,
                    "before": _state(bool(qa.loc[qid, "realized"]), bool(qa.loc[qid, col])),
                    "after": _state(bool(qb.loc[qid, "realized"]), bool(qb.loc[qid, col])),
                }
            )
    return Comparison(a, b, pd.DataFrame(rows), pd.DataFrame(transitions))
