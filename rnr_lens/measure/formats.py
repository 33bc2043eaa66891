"""How a deployment's answers read: extraction, accuracy, and every extractor's reading.

``check_format`` generates the default deployment's greedy answers once and reads them with
each extractor of the task's answer type (:func:`rnr_lens.questions.answers.extractors_for`), or each
filter of an lm-eval task (:meth:`rnr_lens.questions.deploy.DeploymentConfig.readers`), so that
choosing an extractor is a measurement: how many answers each reads, how many it scores
correct, and where it reads another number than the configured one. Nothing is stored; the
deployment config (and so every audit's identity) is untouched.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rnr_lens.core.stats import Estimate, wilson
from rnr_lens.measure.probes import ProbeContext
from rnr_lens.model.lens import LensModel
from rnr_lens.questions.deploy import DeploymentConfig, deployment_for_task
from rnr_lens.questions.tasks.core import Task

N_EXAMPLES = 5


@dataclass(frozen=True)
class ExtractorReading:
    """One extractor's reading of the same greedy answers.

    Attributes:
        extractor: Its name.
        read: Answers it reads a value from.
        correct: Answers it scores correct.
        differs: Answers it reads differently from the configured extractor.
    """

    extractor: str
    read: int
    correct: int
    differs: int


@dataclass(frozen=True)
class FormatCheck:
    """What ``check_format`` measured (``to_dict`` for ``--json``): ``shots`` names the
    deployment's worked examples, ``prompt`` is the first question's prompt as the model sees it."""

    n: int
    distinct_prompts: int
    config_hash: str
    extractor: str
    extractable: Estimate
    accuracy: Estimate
    readings: tuple[ExtractorReading, ...]
    unextractable_examples: tuple[str, ...]
    disagreements: tuple[dict[str, Any], ...]
    shots: str = "zero-shot"
    prompt: str = ""
    """Answers some extractor reads differently: ``text``, ``gold`` and each reading."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "distinct_prompts": self.distinct_prompts,
            "config_hash": self.config_hash,
            "extractor": self.extractor,
            "extractable": self.extractable.to_dict(),
            "accuracy": self.accuracy.to_dict(),
            "readings": [vars(r) for r in self.readings],
            "unextractable_examples": list(self.unextractable_examples),
            "disagreements": list(self.disagreements),
            "shots": self.shots,
            "prompt": self.prompt,
        }


def check_format(model: LensModel, task: Task, config: DeploymentConfig | None = None, *, batch_size: int | None = None) -> FormatCheck:
    """Read the deployment's greedy answers on ``task`` with each extractor of its answer type.

    Args:
        model: The model.
        task: The questions.
        config: The deployment (default: :func:`~rnr_lens.questions.deploy.deployment_for_task` the model).
        batch_size: Rows per forward.

    Returns:
        Extraction and accuracy under the configured extractor (Wilson 95% intervals), every
        extractor's counts on the same answers, and a few answers they read differently.

    Example:
        >>> check = check_format(load_model(), tasks.get("add-small", n=20))  # doctest: +SKIP
        >>> [(r.extractor, r.correct) for r in check.readings]  # doctest: +SKIP
    """
    config = deployment_for_task(model, task, config)
    ctx = ProbeContext(model, config, task.answer_type, batch_size=batch_size)
    generated = [g.text for g in ctx.generate(list(task))]
    texts = [config.assistant_prefix + g for g in generated]
    names = config.readers(task.answer_type)
    graded = {name: [config.read_with(name, g, q, task.answer_type) for g, q in zip(generated, task)] for name in names}
    read = {name: [v for v, _ in graded[name]] for name in names}
    right = {name: [ok for _, ok in graded[name]] for name in names}
    mine = read[config.extractor]
    readings = tuple(
        ExtractorReading(name, sum(v is not None for v in read[name]), sum(right[name]), sum(v != m for v, m in zip(read[name], mine)))
        for name in names
    )
    contested = [i for i in range(len(texts)) if len({read[name][i] for name in names}) > 1]
    return FormatCheck(
        n=len(task),
        distinct_prompts=len({q.prompt for q in task}),
        config_hash=config.hash(),
        extractor=config.extractor,
        extractable=wilson(sum(v is not None for v in mine), len(task)),
        accuracy=wilson(sum(right[config.extractor]), len(task)),
        readings=readings,
        unextractable_examples=tuple(t for t, v in zip(texts, mine) if v is None)[:N_EXAMPLES],
        disagreements=tuple({"text": texts[i], "gold": task[i].answer, **{n: read[n][i] for n in names}} for i in contested[:N_EXAMPLES]),
        shots=config.shots.label if config.shots else "zero-shot",
        prompt=model.render(config.prompt(task[0]))[0],
    )
