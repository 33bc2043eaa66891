"""Question sets: built-in generated tasks and loaders for real benchmark files.

    >>> from rnr_lens import tasks
    >>> tasks.list_builtins()[:2]
    ['add-small', 'add-two-digit']
    >>> tasks.get("add-small", n=5).questions[0].prompt  # doctest: +ELLIPSIS
    'What is ...'

``tasks.get`` takes a built-in name, a path to a file (format guessed from its content), or an
lm-evaluation-harness task, ``lm-eval:NAME`` (:mod:`rnr_lens.questions.tasks.lm_eval`).
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from rnr_lens.errors import RnrLensError, arg
from rnr_lens.questions.tasks import lm_eval
from rnr_lens.questions.tasks.builtin import BUILTINS, build, split_size, train_split
from rnr_lens.questions.tasks.core import ANSWER_TYPES, Question, Scoring, Task
from rnr_lens.questions.tasks.loaders import FORMATS, guess_format, load_file

DEFAULT_TASK = "add-small"

__all__ = [
    "ANSWER_TYPES",
    "BUILTINS",
    "DEFAULT_TASK",
    "FORMATS",
    "Question",
    "Scoring",
    "Task",
    "get",
    "guess_format",
    "list_builtins",
    "load_file",
    "split_size",
    "train_split",
]


def _check_params(name: str, params: dict[str, Any], fn: Any, what: str) -> None:
    known = [k for k in inspect.signature(fn).parameters if k not in ("name", "path", "trust_code")]
    unknown = sorted(set(params) - set(known))
    if unknown:
        hint = f"; to use only the first N questions of a file, use {arg('limit')}" if "n" in unknown else ""
        raise RnrLensError(f"{unknown[0]}= does not apply to {what} ({name}); it takes {', '.join(known) or 'none'}{hint}")


def list_builtins() -> list[str]:
    return list(BUILTINS)


def get(name: str, *, trust_code: bool = False, **params: Any) -> Task:
    """A built-in task by name (``n``, ``seed``, ``split``), a task file by path (``format``
    and field-mapping keywords as in :func:`load_file`), or an lm-eval task
    (``lm-eval:NAME[:FILTER]``, ``lm-eval:PATH.yaml``; :func:`rnr_lens.questions.tasks.lm_eval.load`).
    ``trust_code``: run a task YAML of the user's, which lm-eval runs as code."""
    if lm_eval.is_spec(name):
        _check_params(name, params, lm_eval.load, "an lm-eval task")
        return lm_eval.load(name, trust_code=trust_code)
    if name in BUILTINS:
        _check_params(name, params, build, "a built-in task")
        return build(name, **params)
    path = Path(name).expanduser()
    if path.suffix in (".jsonl", ".json", ".csv") or path.exists():
        _check_params(name, params, load_file, "a task file")
        return load_file(path, **params)
    raise RnrLensError(f"unknown task {name!r}; use a built-in ({', '.join(BUILTINS)}), a path to a .jsonl/.json/.csv file, or lm-eval:NAME")
