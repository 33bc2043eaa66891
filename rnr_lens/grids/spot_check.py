"""A referee's spot-check of evidence: a sample of its tries generated again from the weights.

Re-derivation (:func:`rnr_lens.grids.reports.rederive`) checks that evidence is consistent with
itself: every flag, reading, count and fingerprint is recomputed from what the file holds. It
cannot tell a fabricated text from a generated one. :func:`verify` can (issue 73): it draws
``n`` tries at random (seeded, and the seed stated), loads each audit's weights, checks their
fingerprint against the one the evidence records, runs the drawn tries' probes again on their
questions under the recorded deployment and seed, and says how many texts and answers agree.

Invariant: a try is a function of the weights, the question, the deployment config, the probe's
name and the seed, whatever else was audited beside it (``tests/test_golden_tries.py``), so a
question's tries generated again alone are the tries the audit stored. Across CPU classes the
last bits of a float sum can differ (docs/reproducibility.md); texts almost always agree, and
the report says so where the evidence names another CPU than this one.

Example:
    >>> checked = verify("assets/results/grid-default/evidence.json.gz", n=4, seed=0)  # doctest: +SKIP
    >>> print(checked.summary())  # doctest: +SKIP
    4 tries drawn at random (seed 0) from 2 audits: 4 of 4 texts agree, 4 of 4 answers agree.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rnr_lens.core.provenance import Machine, Provenance
from rnr_lens.core.records import TRY_COLUMNS, AuditRecord
from rnr_lens.core.untrusted import quoted
from rnr_lens.errors import RnrLensError, arg
from rnr_lens.measure.evidence import read as read_evidence
from rnr_lens.model.model_cache import KNOWN_MODELS

_QUESTION, _PROBE, _INDEX, _TEXT, _EXTRACTED = (TRY_COLUMNS.index(c) for c in ("question_id", "probe", "try_index", "text", "extracted"))


@dataclass(frozen=True)
class Drawn:
    """One try drawn from the evidence: where it is, what the file says, what was generated."""

    audit: str
    question_id: str
    probe: str
    try_index: int
    text: str
    extracted: str | None
    again_text: str | None = None
    again_extracted: str | None = None

    @property
    def text_agrees(self) -> bool:
        return self.again_text == self.text

    @property
    def answer_agrees(self) -> bool:
        return self.again_text is not None and self.again_extracted == self.extracted


@dataclass(frozen=True)
class Verification:
    """What :func:`verify` found: the drawn tries, each with its text generated again."""

    evidence: str
    seed: int
    drawn: tuple[Drawn, ...]
    other_cpus: tuple[str, ...] = field(default=())
    """The CPUs the evidence names that are not this machine's (bits may differ there)."""

    @property
    def texts_agree(self) -> int:
        return sum(d.text_agrees for d in self.drawn)

    @property
    def answers_agree(self) -> int:
        return sum(d.answer_agrees for d in self.drawn)

    def summary(self) -> str:
        """The result in a few lines: counts first, then each try whose text differs."""
        audits = len({d.audit for d in self.drawn})
        lines = [
            f"{len(self.drawn)} tries drawn at random (seed {self.seed}) from {audits} audit{'s' * (audits != 1)}: "
            f"{self.texts_agree} of {len(self.drawn)} texts agree, {self.answers_agree} of {len(self.drawn)} answers agree."
        ]
        for d in self.drawn:
            if not d.text_agrees:
                lines.append(
                    f"  differs: audit {d.audit[:12]}, question {quoted(d.question_id)}, try {d.try_index} of {d.probe}: "
                    f"the file says {quoted(d.text, 60)}, the weights give {quoted(d.again_text, 60)}"
                )
        if self.other_cpus:
            lines.append(
                f"The evidence was made on {', '.join(self.other_cpus)}, not this machine's CPU: float sums can differ in their last "
                "bits across CPU classes, so a text may rarely differ there without being fabricated; texts usually agree."
            )
        return "\n".join(lines)


def draw(document: Mapping[str, Any], n: int, seed: int) -> list[tuple[AuditRecord, list[Any]]]:
    """``n`` tries of ``document`` drawn uniformly without replacement (``random.Random(seed)``),
    in the file's order, each with its audit's record."""
    rows: list[tuple[AuditRecord, list[Any]]] = []
    for payload in document["audits"]:
        record = AuditRecord.from_dict(payload["audit"])  # once an audit, not once a try
        rows += [(record, row) for row in payload["tries"]]
    if not 1 <= n <= len(rows):
        raise RnrLensError(f"{arg('verify')} takes 1 to {len(rows)} tries for this evidence, not {n}")
    picked = sorted(random.Random(seed).sample(range(len(rows)), n))
    return [rows[i] for i in picked]


def verify(
    evidence: str | Path, n: int, *, seed: int = 0, model: Any = None, harness_tasks: Sequence[Any] = (), progress: bool = True
) -> Verification:
    """Generate ``n`` tries of the evidence at ``evidence`` again and compare them (see the module).

    Args:
        evidence: An ``evidence.json.gz``.
        n: How many tries to draw.
        seed: Seeds the draw (stated in the result).
        model: The weights to load (a spec, or a loaded model) where the evidence's audits name
            none this machine can load by name: a hub id or folder a file names is never fetched
            or opened unless the user names it.
        harness_tasks: The tasks (``lm-eval:...``) a harness's audits were made on, as the user
            names them: such an audit's tries are generated and graded by its task.
        progress: Show progress bars.
    """
    from rnr_lens.grids.regrade import check_readings, named_task
    from rnr_lens.measure.audits import replay
    from rnr_lens.model.models import load_model
    from rnr_lens.questions.deploy import DeploymentConfig
    from rnr_lens.questions.tasks import Question, Task

    document = read_evidence(evidence)
    check_readings(document, harness_tasks)  # consistency first: a file that fails it needs no weights
    picked = draw(document, n, seed)
    payloads = {p["audit"]["id"]: p for p in document["audits"]}
    loaded: dict[str | int, Any] = {}
    out: list[Drawn] = []
    for record in {r.id: r for r, _ in picked}.values():
        spec = model if model is not None else record.model
        if model is None and record.model not in KNOWN_MODELS:
            raise RnrLensError(
                f"audit {record.id[:12]} names the model {quoted(record.model)}, which this machine does not load by name; "
                f"pass the audited weights with {arg('model')}"
            )
        key = spec if isinstance(spec, str) else id(spec)
        lens = loaded.get(key) or loaded.setdefault(key, load_model(spec))
        if lens.fingerprint() != record.model_fingerprint:
            raise RnrLensError(
                f"the weights of {quoted(lens.name)} have fingerprint {lens.fingerprint()}, but audit {record.id[:12]} was made with "
                f"{record.model_fingerprint}; pass the audited weights with {arg('model')}"
            )
        config = DeploymentConfig.from_json(record.config_json)
        rows = [row for r, row in picked if r.id == record.id]
        stored = {row[0]: row for row in payloads[record.id]["questions"]}
        ids = sorted(dict.fromkeys(row[_QUESTION] for row in rows), key=lambda q: stored[q][1])
        task = Task(record.task, tuple(Question(q, stored[q][2], stored[q][3]) for q in ids), record.answer_type)
        if record.answer_type == "choice":
            raise RnrLensError(f"audit {record.id[:12]} is of a choice task, whose choices evidence does not keep; verify another audit")
        if config.harness:  # generated and graded by its task, as the user names it
            named = named_task({q: Question(q, row[2], row[3]) for q, row in stored.items()}, harness_tasks)
            if named is None:
                raise RnrLensError(f"audit {record.id[:12]} is a harness's ({quoted(record.task)}); name its task with --task to verify it")
            config, task = replace(config, scoring=named.scoring), named.subset(ids, suffix="")
        probes = sorted({row[_PROBE] for row in rows} - {"default"})
        result = replay(lens, task, probes, config, seed=record.seed, progress=progress)
        again = {(t.question_id, t.probe, t.try_index): t for t in result.tries.itertuples()}
        for row in rows:
            t = again.get((row[_QUESTION], row[_PROBE], row[_INDEX]))
            out.append(
                Drawn(
                    record.id,
                    row[_QUESTION],
                    row[_PROBE],
                    row[_INDEX],
                    row[_TEXT],
                    row[_EXTRACTED],
                    None if t is None else t.text,
                    None if t is None or not isinstance(t.extracted, str) else t.extracted,
                )
            )
    return Verification(str(evidence), seed, tuple(out), _other_cpus(document["manifest"].get("provenance", {})))


def _other_cpus(provenance: Mapping[str, Any]) -> tuple[str, ...]:
    here = Machine.here()
    named = {(run.machine.cpu, run.machine.cpu_capability) for run in Provenance.from_dict(provenance).runs}
    return tuple(
        sorted(
            f"{cpu} ({capability or 'vector unit not recorded'})" for cpu, capability in named if (cpu, capability) != (here.cpu, here.cpu_capability)
        )
    )


__all__: Sequence[str] = ("Drawn", "Verification", "draw", "verify")
