"""Questions and tasks: named, ordered, immutable question lists with an answer type."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from rnr_lens.core.records import task_fingerprint
from rnr_lens.errors import RnrLensError
from rnr_lens.questions.answers import ANSWER_TYPES as ANSWER_TYPES  # re-exported: tasks name their answer type by it


@dataclass(frozen=True)
class Question:
    """One question.

    Attributes:
        id: Stable identifier, unique within its task.
        prompt: The question text (the deployment config wraps it into a prompt).
        answer: The gold answer as text (``"72"``, ``"B"``, ``"Paris"``).
        choices: Choice texts for multiple-choice questions, in letter order.
        metadata: Anything else (source line, template, operands).
    """

    id: str
    prompt: str
    answer: str
    choices: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)


class Scoring(Protocol):
    """How another harness (lm-eval, :mod:`rnr_lens.questions.tasks.lm_eval`) deploys and scores a task
    whose prompts it built: the deployment of such a task uses each question's prompt verbatim
    and grades with it."""

    @property
    def identity(self) -> str:
        """What the harness's deployment is (its version and the task's resolved config, hashed)."""

    @property
    def readers(self) -> tuple[str, ...]:
        """Its answer readers (filters), the one that decides *realized* first."""

    @property
    def stop(self) -> tuple[str, ...]: ...

    @property
    def max_new_tokens(self) -> int: ...

    def continuation(self, question: Question) -> str:
        """The reference answer as the harness's shots write it after the prompt (teacher forcing)."""

    def grade(self, text: str, question: Question, reader: str) -> tuple[str | None, bool]:
        """``(what reader reads in text, or None; whether the harness scores that right)``."""


@dataclass(frozen=True)
class Task:
    """A named, ordered, immutable list of questions.

    Example:
        >>> from rnr_lens import tasks
        >>> t = tasks.get("add-small", n=10, seed=0)
        >>> len(t), t.answer_type
        (10, 'number')
        >>> a, b = t.split(seed=0)
        >>> len(a) + len(b)
        10
    """

    name: str
    questions: tuple[Question, ...]
    answer_type: str = "number"
    source: str = ""
    scoring: Scoring | None = field(default=None, compare=False)
    """Set where another harness prompts and scores the task (an ``lm-eval:`` task)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "questions", tuple(self.questions))
        if self.answer_type not in ANSWER_TYPES:
            raise RnrLensError(f"unknown answer type {self.answer_type!r} for task {self.name}; use one of {', '.join(ANSWER_TYPES)}")
        if not self.questions:
            raise RnrLensError(f"task {self.name} has no questions; check its source {self.source or '(none)'}")
        seen: set[str] = set()
        for q in self.questions:
            if q.id in seen:
                raise RnrLensError(f"task {self.name} has two questions with id {q.id!r}; ids must be unique")
            seen.add(q.id)

    def __len__(self) -> int:
        return len(self.questions)

    def __iter__(self) -> Iterator[Question]:
        return iter(self.questions)

    def __getitem__(self, index: int) -> Question:
        return self.questions[index]

    @property
    def ids(self) -> list[str]:
        return [q.id for q in self.questions]

    def repeated_prompts(self) -> str | None:
        """A one-line note when questions repeat a prompt (such repeats are not independent
        draws: audits resample distinct prompts for their intervals), else None."""
        distinct = len({q.prompt for q in self.questions})
        if distinct == len(self.questions):
            return None
        return (
            f"task {self.name}: {len(self.questions)} questions hold {distinct} distinct prompts; samples are drawn per question, "
            "and intervals resample distinct prompts (questions sharing a prompt are not independent)"
        )

    def by_id(self, question_id: str) -> Question:
        for q in self.questions:
            if q.id == question_id:
                return q
        raise RnrLensError(f"task {self.name} has no question {question_id!r}")

    def fingerprint(self) -> str:
        """A hash of the questions' ids, prompts, answers and choices."""
        return task_fingerprint(self.answer_type, ((q.id, q.prompt, q.answer, q.choices) for q in self.questions))

    # -- subsets ------------------------------------------------------------------------
    def _derive(self, questions: Sequence[Question], suffix: str) -> Task:
        return Task(f"{self.name}{suffix}", tuple(questions), self.answer_type, self.source, self.scoring)

    def first(self, n: int) -> Task:
        """The first ``n`` questions."""
        self._check_n(n)
        return self._derive(self.questions[:n], f"[:{n}]")

    def sample(self, n: int, seed: int = 0) -> Task:
        """``n`` questions drawn at random (seeded), kept in their original order."""
        self._check_n(n)
        chosen = sorted(random.Random(seed).sample(range(len(self)), n))
        return self._derive([self.questions[i] for i in chosen], f"[random {n}, seed {seed}]")

    def subset(self, ids: Sequence[str], suffix: str = "[subset]") -> Task:
        """The questions with the given ids, in the given order."""
        return self._derive([self.by_id(i) for i in ids], suffix)

    def split(self, seed: int = 0, fraction: float = 0.5, stratify: Callable[[Question], Any] | None = None) -> tuple[Task, Task]:
        """Two disjoint halves (seeded), stratified by ``stratify(question)`` when given
        (by default: by the gold answer for choice tasks)."""
        if not 0 < fraction < 1:
            raise RnrLensError(f"split fraction must be between 0 and 1, got {fraction}")
        if stratify is None and self.answer_type == "choice":
            stratify = lambda q: q.answer  # noqa: E731
        groups: dict[Any, list[int]] = {}
        for i, q in enumerate(self.questions):
            groups.setdefault(stratify(q) if stratify else None, []).append(i)
        rng = random.Random(seed)
        first: list[int] = []
        for key in sorted(groups, key=repr):
            members = groups[key][:]
            rng.shuffle(members)
            first.extend(members[: round(len(members) * fraction)])
        chosen = set(first)
        a = [q for i, q in enumerate(self.questions) if i in chosen]
        b = [q for i, q in enumerate(self.questions) if i not in chosen]
        if not a or not b:
            raise RnrLensError(f"task {self.name} has {len(self)} questions, too few to split into two non-empty halves")
        return self._derive(a, f"[split {seed} A]"), self._derive(b, f"[split {seed} B]")

    def _check_n(self, n: int) -> None:
        if not 1 <= n <= len(self):
            raise RnrLensError(f"cannot take {n} questions from task {self.name}, which has {len(self)}")
