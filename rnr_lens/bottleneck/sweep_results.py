"""A sweep kept in the run store and read back, without a model: what it found
(:class:`SweepResult`, its table, bottleneck and per-question outcomes), where each of its
evaluations is kept (:class:`SweepKey`), and the null beside it (:func:`save_null`,
:func:`load_null`). :mod:`rnr_lens.bottleneck.miner` generates what these read; the claims, the report's
re-derivation, the pages and the widgets read them here, so none of them loads torch.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from rnr_lens.core.ablation_methods import ablation_label
from rnr_lens.core.display import html_table
from rnr_lens.core.shards import Shard
from rnr_lens.errors import RnrLensError
from rnr_lens.judge.sweeps import (
    BlockRates,
    Bottleneck,
    NullRepair,
    bottleneck_of,
    tied_best,
)
from rnr_lens.judge.verdicts import BREAK_BOUND, BlockCounts, BlockTrial, BottleneckVerdict, FailureSetChance, bottleneck_verdict
from rnr_lens.measure.store import Artifact, RunStore

if TYPE_CHECKING:  # for types only: a key is made from a model and a failure set, never loads them
    from rnr_lens.bottleneck.failures import FailureSet
    from rnr_lens.model.interventions import Ablation
    from rnr_lens.model.lens import LensModel


@dataclass
class SweepResult:
    """What a sweep found.

    Attributes:
        table: One row per (layer, component, method): screen scores, and for evaluated rows the
            repair and break rates with intervals, on all failures and per half.
        details: One row per evaluated candidate and question: set, before/after answers.
        bottleneck: The chosen candidate (layer, component, method, repair on each half,
            break rate), or None when no candidate repairs anything within the break bound.
        agreement: For each screen, Spearman rank correlation with the evaluated repair rates
            and whether its top candidate is the evaluated top, when all were evaluated.
    """

    table: pd.DataFrame
    details: pd.DataFrame
    bottleneck: Bottleneck | None
    agreement: dict[str, Any] = field(default_factory=dict)
    strategy: str = "screen+confirm"
    failure_set: str = ""
    timings: dict[str, float] = field(default_factory=dict)
    break_bound: float = BREAK_BOUND
    shard: Shard | None = None
    """The shard whose questions alone this sweep generated (None: the whole set); never kept."""

    def save(self, store: RunStore, audit_id: str, name: str | None = None) -> None:
        """Keep this sweep in ``store`` as the latest sweep of its failure set (``mine`` does
        this whenever it has a store), so :meth:`load` reads it back; under ``name`` instead,
        where one failure set keeps several sweeps (a report's screen and exhaustive sweep)."""
        body = {
            "failure_set": self.failure_set,
            "strategy": self.strategy,
            "break_bound": self.break_bound,
            "agreement": self.agreement,
            "timings": self.timings,
            "table": self.table.astype(object).where(self.table.notna(), None).to_dict("records"),
            "details": self.details.astype(object).where(self.details.notna(), None).to_dict("records"),
        }
        store.put_artifact(audit_id, Artifact.SWEEP, name or self.failure_set, body, overwrite=True)

    @classmethod
    def load(cls, store: RunStore | str | Path, name: str = "main", audit: str | None = None) -> SweepResult:
        """The latest sweep of failure set ``name`` kept in ``store`` (by ``rnr-lens mine`` or
        :func:`mine` with a store); ``audit`` (an id or prefix) where several audits have one.

        Example:
            >>> sweep = SweepResult.load("run.db")  # doctest: +SKIP
            >>> viz.save(viz.repair_break(sweep), "bottleneck.pdf", size="column")  # doctest: +SKIP
        """
        rs = store if isinstance(store, RunStore) else RunStore(store, mode="read")
        found = {
            a.id: body
            for a in rs.audits()
            if (audit is None or a.id.startswith(audit))
            for body in [rs.get_artifact(a.id, Artifact.SWEEP, name)]
            if body
        }
        if not found:
            where = f"audit {audit}" if audit else str(rs.path)
            raise RnrLensError(f"{where} holds no sweep of failure set {name!r}; run 'rnr-lens mine {rs.path} --name {name}' first")
        if len(found) > 1:
            raise RnrLensError(f"{len(found)} audits in {rs.path} have a sweep of {name!r}; pass audit= one of {', '.join(i[:12] for i in found)}")
        body = next(iter(found.values()))
        old = {"kind": "method"}  # sweeps kept before the ablation's kind was named method
        table = pd.DataFrame(body["table"]).rename(columns=old)
        for column in table.columns.difference(["component", "method"]):
            table[column] = pd.to_numeric(table[column])
        details = pd.DataFrame(body["details"]).rename(columns=old)
        bound = float(body["break_bound"])
        fs = str(body.get("failure_set", name))
        return cls(table, details, bottleneck_of(table, bound), body["agreement"], body["strategy"], fs, body["timings"], bound)

    def _repr_html_(self) -> str:
        """The generated rows in one compact table, and the bottleneck."""
        done = self.table.dropna(subset=["repair"]) if "repair" in self.table else self.table.iloc[0:0]
        rows = [
            [
                ablation_label(r["layer"], r["component"], r["method"]),
                f"{r['screen_logprob']:.3f}",
                got.repair_discovery.text(),
                got.repair_heldout.text(),
                got.break_all.text(),
            ]
            for r in done.to_dict("records")
            if (got := BlockRates.from_row(r)) is not None
        ]
        head = f"<b>sweep of {html.escape(self.failure_set)}</b> ({self.strategy}): {len(done)} of {len(self.table)} blocks generated; "
        head += f"bottleneck {self.bottleneck._repr_html_()}" if self.bottleneck else "no bottleneck within the break bound"
        return (
            f"<div class='rnr-sweep'>{head}"
            + html_table(rows, ["block", "screen Δ log p", "repair discovery", "repair held-out", "break"])
            + "</div>"
        )

    def repaired(self, layer: int, part: str = "heldout", component: str = "mlp") -> np.ndarray:
        """Per question of one half (``discovery`` or ``heldout``): did silencing ``layer``
        repair it? Empty where that block was not generated."""
        return self.repaired_by_question(layer, part, component).to_numpy(float)

    def repaired_by_question(self, layer: int, part: str = "heldout", component: str = "mlp") -> pd.Series:
        """:meth:`repaired`, indexed by question id."""
        d = self._details(layer, component, part)
        values = (d["after_correct"].astype(bool) & ~d["before_correct"].astype(bool)).astype(float)
        return pd.Series(values.to_numpy(), index=d["question_id"].to_numpy() if "question_id" in d else None, dtype=float)

    def broken(self, layer: int, component: str = "mlp", half: str | None = None) -> np.ndarray:
        """Per control question: did silencing ``layer`` break it? ``half``: only the
        ``discovery`` controls (which admit a block) or the ``heldout`` ones (which judge it);
        none where the sweep was kept before the control set was split (its break rate per half
        is unmeasured, never read off every control)."""
        d = self._details(layer, component, "control")
        if half is not None:  # a sweep kept before the controls were split has no halves: unmeasured, not every control
            d = d[d["half"] == half] if "half" in d else d.iloc[0:0]
        return (d["before_correct"].astype(bool) & ~d["after_correct"].astype(bool)).to_numpy(float)

    def _details(self, layer: int, component: str, part: str) -> pd.DataFrame:
        if self.details.empty:
            return self.details.reindex(columns=["question_id", "after_correct", "before_correct"])
        d = self.details
        return d[(d["layer"] == layer) & (d["component"] == component) & (d["set"] == part)]

    def verdict(
        self, null: NullRepair | None = None, *, break_bound: float | None = None, chance: FailureSetChance | None = None
    ) -> BottleneckVerdict:
        """Claim 2 on this sweep (:func:`rnr_lens.judge.verdicts.bottleneck_verdict`): the blocks
        tied on the best discovery repair within the bound (default: this sweep's own bound),
        each with its held-out repair and held-out-control break, beside ``null``'s arms on the
        same questions; with an exhaustive sweep, every block's counts on the whole set;
        ``chance``: the failure set against its chance expectation (the precondition)."""
        bound = self.break_bound if break_bound is None else break_bound
        rows = [(int(r["layer"]), str(r["component"])) for _, r in tied_best(self.table, bound).iterrows()]
        repaired = [self.repaired_by_question(layer, "heldout", component) for layer, component in rows]
        # one question order for every tied block and null arm: the held-out questions all of them hold
        held = [set(r.index) for r in repaired] + [set(per) for per in (null.per_question.values() if null is not None else ())]
        ids = sorted(set.intersection(*held)) if rows else []
        arms = {name: np.array([per[i] for i in ids], float) for name, per in null.per_question.items()} if null is not None else {}
        tie = [
            BlockTrial(layer, rep.reindex(ids).to_numpy(float), self.broken(layer, component, half="heldout"))
            for (layer, component), rep in zip(rows, repaired)
        ]
        generated_all = "repair_discovery" in self.table and bool(self.table["repair_discovery"].notna().all())
        counts = (
            [
                BlockCounts(got.layer, got.n_repaired, got.repair.n, got.n_broken, got.break_all.n)
                for _, r in self.table.iterrows()
                if (got := BlockRates.from_row(r)) is not None
            ]
            if self.strategy == "exhaustive" and generated_all
            else []
        )
        generated = int(self.table["repair_discovery"].notna().sum()) if "repair_discovery" in self.table else 0
        return bottleneck_verdict(tie, arms, sweep=counts, generated=(generated, len(self.table)), chance=chance, break_bound=bound)

    def to_json(self) -> dict[str, Any]:
        table = self.table.astype(object).where(self.table.notna(), None)
        return {
            "strategy": self.strategy,
            "failure_set": self.failure_set,
            "bottleneck": self.bottleneck.to_dict() if self.bottleneck else None,
            "agreement": self.agreement,
            "layers": table.to_dict("records"),
            "changes": self.changes(),
        }

    def changes(self) -> list[dict[str, Any]]:
        """Per generated candidate, the questions it repaired (failure set) and broke (control
        set), each with its answer and text before and after."""
        out: list[dict[str, Any]] = []
        if self.details.empty:
            return out
        for (layer, comp, method), d in self.details.groupby(["layer", "component", "method"], sort=True):

            def rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
                return [
                    {
                        "question_id": r.question_id,
                        "set": r.set,
                        "before_answer": r.before_answer,
                        "after_answer": r.after_answer,
                        "before_text": r.before_text,
                        "after_text": r.after_text,
                    }
                    for r in frame.itertuples()
                ]

            repaired = d[(d.set != "control") & d.after_correct & ~d.before_correct]
            broken = d[(d.set == "control") & ~d.after_correct & d.before_correct]
            out.append({"layer": int(layer), "component": comp, "method": method, "repaired": rows(repaired), "broken": rows(broken)})
        return out


@dataclass(frozen=True)
class SweepKey:
    """Where one ablation's evaluation of a failure set is kept in the run store: the failure
    set, the model's fingerprint, the deployment's hash, the reference prompts of a mean or
    resample ablation, the ablation (``clean`` for none) and the shard.

    ``str(key)`` is the artifact's name, ``sweep/{failure set}/{model}/{config}/{reference}/
    {ablation}`` and ``/shard i/n`` for a shard's part; stores written before this type hold
    the same names.
    """

    failure_set: str
    model: str
    config: str
    reference: str
    ablation: str = "clean"
    shard: Shard | None = None

    @classmethod
    def base(cls, model: LensModel, failure_set: FailureSet, reference: tuple[str, ...]) -> SweepKey:
        """The key of one failure set's clean run on ``model`` under its deployment."""
        return cls(failure_set.name, model.fingerprint(), failure_set.config.hash(), json.dumps(reference and reference[:1])[:32])

    def of(self, ablation: Ablation | None, shard: Shard | None = None) -> SweepKey:
        """The key of ``ablation`` (None: the clean run) on ``shard`` (None: every question)."""
        return replace(self, ablation=str(ablation or "clean"), shard=shard)

    def __str__(self) -> str:
        whole = f"sweep/{self.failure_set}/{self.model}/{self.config}/{self.reference}/{self.ablation}"
        return whole if self.shard is None else f"{whole}{_SHARD_SEP}{self.shard}"

    @property
    def shards_prefix(self) -> str:
        """The name prefix every shard of this key's evaluation shares."""
        return f"{replace(self, shard=None)}{_SHARD_SEP}"

    @classmethod
    def parse(cls, name: str) -> SweepKey:
        """The key ``str(key)`` printed (the inverse of ``str``). The model and config are
        hashes; the reference (quoted prompt text) may hold slashes, the ablation never does.

        Example:
            >>> k = SweepKey("report", "7de65c068feb8c71", "96c082f09104ef35", "[]", "mlp4:zero")
            >>> SweepKey.parse(str(k)) == k
            True
        """
        whole, sep, shard = name.rpartition(_SHARD_SEP) if _SHARD_SEP in name else (name, "", "")
        found = _KEY.fullmatch(whole)
        if found is None:
            raise RnrLensError(f"{name!r} is not a sweep evaluation's name (sweep/SET/MODEL/CONFIG/REFERENCE/ABLATION)")
        failure_set, model, config, reference, ablation = found.groups()
        return cls(failure_set, model, config, reference, ablation, Shard.parse(shard) if sep else None)

    @staticmethod
    def shard_of(name: str) -> Shard:
        """The shard a stored shard evaluation's name ends with."""
        return Shard.parse(name.rsplit(_SHARD_SEP, 1)[1])


_SHARD_SEP = "/shard "
_KEY = re.compile(r"sweep/(.+?)/([0-9a-f]{16})/([0-9a-f]{16})/(.*)/([^/]+)", re.DOTALL)


def save_null(null: NullRepair, store: RunStore, audit_id: str, name: str) -> None:
    """Keep ``null``, per question, in ``store`` under ``name`` (:func:`load_null` reads it back)."""
    store.put_artifact(audit_id, Artifact.NULL, name, {**null.to_dict(), "per_question": null.per_question}, overwrite=True)


def load_null(store: RunStore, audit_id: str, name: str) -> NullRepair | None:
    """The null kept under ``name`` for an audit (None: none kept)."""
    body = store.get_artifact(audit_id, Artifact.NULL, name)
    return None if body is None else NullRepair.from_dict(body)
