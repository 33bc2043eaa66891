"""Built-in arithmetic tasks, generated deterministically from a seed.

Each task enumerates its whole item space, assigns every item to ``test`` or ``train`` by a
stable hash of the item (so the two splits are disjoint for every seed and size), then takes
a seeded random ``n`` from the requested split.

- ``add-small``: single-digit addition (the embedded default).
- ``add-two-digit``: two-digit addition.
- ``sub``: subtraction with a non-negative result, operands up to 20.
- ``mul``: multiplication of 2..12 by 2..12.
- ``two-step``: ``a + b - c`` with operands up to 20.
- ``word-problems``: templated one-step word problems (add, take away, groups of).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from rnr_lens.errors import RnrLensError
from rnr_lens.questions.tasks.core import Question, Task

Item = tuple  # the operands (and template index) that define one question


@dataclass(frozen=True)
class BuiltinTask:
    name: str
    description: str
    items: Callable[[], Iterable[Item]]
    render: Callable[[Item], tuple[str, int]]  # -> (question text, answer)
    default_n: int


def _in_train(name: str, item: Item) -> bool:
    digest = hashlib.sha256(f"{name}:{item}".encode()).digest()
    return digest[0] % 2 == 1


_NAMES = ["Tom", "Ana", "Liu", "Sara", "Omar", "Mia", "Ravi", "Lena"]
_THINGS = ["apple", "book", "marble", "pencil", "stamp", "cookie", "shell", "card"]


def _word(item: Item) -> tuple[str, int]:
    template, a, b, who, what = item
    name, thing = _NAMES[who], _THINGS[what]
    if template == 0:
        return f"{name} has {a} {thing}s and gets {b} more. How many {thing}s does {name} have now?", a + b
    if template == 1:
        return f"{name} has {a} {thing}s and gives away {b}. How many {thing}s does {name} have left?", a - b
    return f"{name} has {a} boxes with {b} {thing}s in each box. How many {thing}s does {name} have in all?", a * b


def _word_items() -> Iterable[Item]:
    for who in range(len(_NAMES)):
        for what in range(len(_THINGS)):
            for a in range(2, 13):
                for b in range(2, 10):
                    yield (0, a, b, who, what)
                    if b < a:
                        yield (1, a, b, who, what)
                    if a <= 9:
                        yield (2, a, b, who, what)


BUILTINS: dict[str, BuiltinTask] = {
    t.name: t
    for t in (
        BuiltinTask(
            "add-small",
            "single-digit addition: What is a + b?",
            lambda: ((a, b) for a in range(10) for b in range(10)),
            lambda it: (f"What is {it[0]} + {it[1]}?", it[0] + it[1]),
            40,
        ),
        BuiltinTask(
            "add-two-digit",
            "two-digit addition: What is a + b? (10..99)",
            lambda: ((a, b) for a in range(10, 100) for b in range(10, 100)),
            lambda it: (f"What is {it[0]} + {it[1]}?", it[0] + it[1]),
            100,
        ),
        BuiltinTask(
            "sub",
            "subtraction with a non-negative result: What is a - b? (a <= 20)",
            lambda: ((a, b) for a in range(21) for b in range(a + 1)),
            lambda it: (f"What is {it[0]} - {it[1]}?", it[0] - it[1]),
            100,
        ),
        BuiltinTask(
            "mul",
            "multiplication: What is a * b? (2..12)",
            lambda: ((a, b) for a in range(2, 13) for b in range(2, 13)),
            lambda it: (f"What is {it[0]} * {it[1]}?", it[0] * it[1]),
            50,
        ),
        BuiltinTask(
            "two-step",
            "two steps: What is a + b - c? (operands 1..20, result >= 0)",
            lambda: ((a, b, c) for a in range(1, 21) for b in range(1, 21) for c in range(1, 21) if c <= a + b),
            lambda it: (f"What is {it[0]} + {it[1]} - {it[2]}?", it[0] + it[1] - it[2]),
            100,
        ),
        BuiltinTask("word-problems", "templated one-step word problems (add, take away, groups of)", _word_items, _word, 100),
    )
}


def _pool(name: str, split: str) -> list[Item]:
    """The items of built-in ``name`` in ``split``, in their enumeration order."""
    if name not in BUILTINS:
        raise RnrLensError(f"unknown built-in task {name!r}; choose one of {', '.join(BUILTINS)} or pass a file path")
    if split not in ("test", "train"):
        raise RnrLensError(f"split must be 'test' or 'train', not {split!r}")
    return [it for it in BUILTINS[name].items() if _in_train(name, it) == (split == "train")]


def split_size(name: str, split: str = "test") -> int:
    """How many questions built-in task ``name`` holds in ``split``.

    Example:
        >>> split_size("add-small")
        50
    """
    return len(_pool(name, split))


def build(name: str, n: int | str | None = None, seed: int = 0, split: str = "test") -> Task:
    """Build built-in task ``name`` with ``n`` questions (``"all"``: the whole split) of
    ``split`` ("test" or "train")."""
    pool = _pool(name, split)
    spec = BUILTINS[name]
    n = spec.default_n if n is None else len(pool) if n == "all" else n
    if not isinstance(n, int):
        raise RnrLensError(f"n must be a number of questions or 'all', not {n!r}")
    if not 1 <= n <= len(pool):
        raise RnrLensError(f"task {name} has {len(pool)} {split} questions; ask for n between 1 and {len(pool)}")
    random.Random(seed).shuffle(pool)
    questions = []
    for item in pool[:n]:
        text, answer = spec.render(item)
        qid = f"{name}-" + "-".join(str(x) for x in item)
        questions.append(Question(qid, text, str(answer), metadata={"item": list(item), "split": split}))
    return Task(name if split == "test" else f"{name}-train", tuple(questions), "number", f"builtin:{name}?n={n}&seed={seed}&split={split}")


def train_split(task: Task) -> Task | None:
    """The whole ``train`` split of the built-in task ``task`` was drawn from (either split, or
    any subset of one), the source of its worked examples; None for any other task. Reads the
    ``source`` that :func:`build` writes, its one owner."""
    head, _, _ = task.source.partition("?")
    if not head.startswith("builtin:"):
        return None
    return build(head.removeprefix("builtin:"), "all", split="train")
