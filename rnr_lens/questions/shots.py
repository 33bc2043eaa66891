"""Few-shot contexts: N worked examples before each question, as the field deploys a base model.

A :class:`Shots` names its source, N and the seed, and holds the examples it drew (its
*pool*). The source is a built-in task's ``train`` split (``train``), the audited task itself
with each question left out of its own context (``self``, as lm-eval does where its few-shot
and test splits coincide), or a file the user named (``file:NAME``). The pool is part of the
deployment config, hence of every audit id: two audits with different examples never share a
table, and a config read back from a store or from evidence renders the same prompts with no
task at hand.

Invariants:

- the pool is drawn by one seeded rule (:func:`draw`) and never redrawn once resolved;
- no example is a test question: a built-in ``train`` split is disjoint from ``test`` by
  construction, and a named file is checked by normalized question text (:func:`normalize`);
- ``train`` and ``self`` draw N + 1 examples and each question sees the first N that are not
  itself: a question of the source (a training question under DAPO, a question of a task that
  is its own source) never sees itself, and every other question sees the same N, so the
  audit of a task's test split and training on its train split share one context.

Example:
    >>> s = Shots(n=1, source="train", pool=(Example("What is 2 + 3?", "5"), Example("What is 1 + 1?", "2")))
    >>> s.examples_for("What is 8 + 6?")
    (Example(question='What is 2 + 3?', answer='5'),)
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any

from rnr_lens.errors import RnrLensError, arg
from rnr_lens.questions.tasks import Task, train_split

SOURCES = ("train", "self")
"""The named sources; a file the user names is ``file:NAME``."""
MAX_SHOTS = 64
"""Most examples a context may hold (each is a question and its answer; a model's context is checked per audit)."""


def normalize(text: str) -> str:
    """A question's text as the test-overlap check compares it: case-folded, without
    whitespace (``2+2`` is ``2 + 2``), surrounding punctuation stripped."""
    return re.sub(r"\s+", "", text.casefold()).strip(".?!:;,")


@dataclass(frozen=True)
class Example:
    """One worked example: a question's text and its gold answer."""

    question: str
    answer: str


@dataclass(frozen=True)
class Shots:
    """``n`` worked examples from ``source``, drawn with ``seed``; ``pool`` holds the drawn
    examples (empty until resolved against a task by :func:`resolve`).

    Attributes:
        n: Examples before each question (1 to :data:`MAX_SHOTS`).
        source: ``train``, ``self`` or ``file:NAME``.
        seed: The draw's seed.
        pool: The examples drawn, in draw order (``n + 1``; ``n`` for a file).
    """

    n: int
    source: str = "train"
    seed: int = 0
    pool: tuple[Example, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.n, int) or isinstance(self.n, bool) or not 1 <= self.n <= MAX_SHOTS:
            raise RnrLensError(f"shots n must be an integer from 1 to {MAX_SHOTS} (leave shots out for none), got {self.n!r}")
        if not isinstance(self.source, str) or not (self.source in SOURCES or (self.source.startswith("file:") and len(self.source) > 5)):
            raise RnrLensError(f"shots source must be one of {', '.join(SOURCES)} or file:NAME, got {self.source!r}")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            raise RnrLensError(f"shots seed must be an integer, got {self.seed!r}")
        pool = tuple(e if isinstance(e, Example) else Example(*e) for e in self.pool)
        if not all(isinstance(e.question, str) and isinstance(e.answer, str) for e in pool):
            raise RnrLensError("shots pool must hold [question, answer] pairs of text")
        if pool and len(pool) != self.pool_size:
            raise RnrLensError(f"shots pool holds {len(pool)} examples; {self.source} with n={self.n} draws {self.pool_size}")
        object.__setattr__(self, "pool", pool)

    @property
    def pool_size(self) -> int:
        """How many examples the source's draw holds: one more than ``n`` for a source whose
        own questions may be asked (``train``, ``self``), ``n`` for a file."""
        return self.n if self.source.startswith("file:") else self.n + 1

    def examples_for(self, question: str) -> tuple[Example, ...]:
        """The ``n`` examples placed before ``question``: the pool's first ``n`` that are not
        the question itself."""
        if not self.pool:
            raise RnrLensError(f"these shots ({self.label}) are not drawn yet; resolve them against the task (rnr_lens.questions.shots.resolve)")
        own = normalize(question)
        return tuple(e for e in self.pool if normalize(e.question) != own)[: self.n]

    @property
    def label(self) -> str:
        """``5-shot from train (seed 0)``: how the audit header and ``rnr-lens show`` name it."""
        return f"{self.n}-shot from {self.source} (seed {self.seed})"

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "source": self.source, "seed": self.seed, "pool": [[e.question, e.answer] for e in self.pool]}

    @classmethod
    def from_dict(cls, data: Any) -> Shots:
        if not isinstance(data, dict):
            raise RnrLensError(f"deployment config field shots must be a mapping with n, source and seed, got {data!r}")
        unknown = sorted(set(data) - {"n", "source", "seed", "pool"})
        if unknown:
            raise RnrLensError(f"unknown shots field {unknown[0]!r}; known fields: n, pool, seed, source")
        if "n" not in data:
            raise RnrLensError("shots needs n, the number of worked examples before each question")
        pool = data.get("pool", [])
        if not isinstance(pool, list) or not all(isinstance(p, list) and len(p) == 2 for p in pool):
            raise RnrLensError("shots pool must be a list of [question, answer] pairs")
        return cls(n=data["n"], source=data.get("source", "train"), seed=data.get("seed", 0), pool=tuple(Example(*p) for p in pool))


def _questions(task: Task) -> set[str]:
    """The task's questions as the overlap checks compare them (:func:`normalize`)."""
    return {normalize(q.prompt) for q in task}


def draw(shots: Shots, source: Task, test: Task) -> Shots:
    """``shots`` with its pool drawn from ``source`` for an audit of ``test``: a seeded sample
    of :attr:`Shots.pool_size` of the source's distinct questions (by :func:`normalize`), in
    draw order. Refuses, in one line, a source of another answer type, one too small, and a
    file holding a test question (``train`` is disjoint by construction; under ``train`` and
    ``self`` each question is left out of its own context)."""
    if source.answer_type != test.answer_type:
        raise RnrLensError(
            f"the shots source {source.name} holds {source.answer_type} answers, task {test.name} {test.answer_type}; "
            "name a source of the same answer type"
        )
    if shots.source == "self" and len(test) <= shots.n:
        raise RnrLensError(
            f"task {test.name} has {len(test)} questions, too few to be its own source of {shots.n} shots "
            f"(each question is left out of its own context); name a shots file, ask for fewer shots, or deploy zero-shot (a deployment config without shots: {arg('config')})"
        )
    distinct: dict[str, Any] = {}
    for q in source:  # a repeated question would leave a question that repeats it short of n examples
        distinct.setdefault(normalize(q.prompt), q)
    questions = list(distinct.values())
    if len(questions) < shots.pool_size:
        raise RnrLensError(
            f"{shots.n} shots need {shots.pool_size} distinct questions; the source {source.name} holds {len(questions)}; ask for fewer"
        )
    if shots.source.startswith("file:"):
        tested = _questions(test)
        overlap = [q for q in source if normalize(q.prompt) in tested]
        if overlap:
            raise RnrLensError(
                f"the shots source {source.name} holds {len(overlap)} question(s) of task {test.name} (e.g. {overlap[0].prompt[:60]!r}); "
                "a worked example must not be a test question: remove them from the shots file"
            )
    chosen = random.Random(shots.seed).sample(range(len(questions)), shots.pool_size)
    return Shots(shots.n, shots.source, shots.seed, tuple(Example(questions[i].prompt, questions[i].answer) for i in chosen))


def resolve(shots: Shots, test: Task, file: Task | None = None) -> Shots:
    """``shots`` drawn for an audit of ``test`` (already drawn: checked against ``test``
    again). ``file``: the task a ``file:NAME`` source names, loaded by the caller from the
    user's own path (a config's names never become paths)."""
    if shots.pool:  # drawn before (a config from a store, evidence or another task): checked against this task
        pooled = {normalize(e.question) for e in shots.pool}
        if shots.source.startswith("file:"):
            if pooled & _questions(test):
                raise RnrLensError(f"the deployment's worked examples include a question of task {test.name}; draw them from a source without it")
        else:
            source = test if shots.source == "self" else train_split(test)
            if source is None or not pooled <= _questions(source):
                raise RnrLensError(
                    f"the deployment's worked examples were drawn from another task's {shots.source} than task {test.name}'s; "
                    "leave the pool out of the config to draw them for this task"
                )
        return shots
    if shots.source == "train":
        source = train_split(test)
        if source is None:
            raise RnrLensError(
                f"task {test.name} has no train split to draw shots from; use shots source self (the task, each question left out) or a shots file"
            )
    elif shots.source == "self":
        source = test
    else:
        if file is None:
            raise RnrLensError(f"the deployment's shots come from {shots.source}; pass that file ({arg('shots_file')})")
        source = file
    return draw(shots, source, test)
