"""The one exception type rnr_lens raises for bad input, and how its messages name arguments.

Every message is a single line that says what was wrong and how to fix it; the CLI prints
it as ``error: <message>`` and exits with status 2. A fix that names an argument names it as
the caller spells it: ``probe=`` from Python, ``--probe`` from the CLI (:func:`arg`, the one
owner of both spellings; the CLI runs its commands inside :func:`cli_spelling`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

SPELLINGS: dict[str, tuple[str, str, bool]] = {
    "probe": ("probe", "--probe", True),
    "audit_id": ("audit_id", "--audit", True),
    "resume": ("resume=True", "--resume", False),
    "resume_only": ("resume='only'", "--resume", False),
    "no_resume": ("resume=False", "--no-resume", False),
    "out": ("out", "--out", True),
    "store": ("store", "--out", True),
    "config": ("config", "--config", True),
    "name": ("name", "--name", True),
    "device": ("device", "--device", True),
    "address": ("address", "--address", True),
    "evidence": ("evidence", "--from-evidence", True),
    "keep_absent": ("keep_absent=True", "--keep-absent", False),
    "executor": ("executor", "--executor", True),
    "model": ("model=R.load_model(CHECKPOINT)", "--model CHECKPOINT", False),
    "trust_code": ("trust_code=True", "--trust-task-code", False),
    "shots_file": ("config.for_task(task, shots_file=PATH)", "--shots-file PATH", False),
    "question_field": ("question", "--field question=", True),
    "answer_field": ("answer", "--field answer=", True),
    "limit": ("task.first(N)", "--limit N", False),
    "verify": ("n", "--verify N", False),
}
"""Each argument a message may tell the user to pass, by what it does: its Python spelling (the
keyword of an argument with a value, or the whole assignment of a switch), its CLI flag, and
whether the flag takes a value (a flag ending in ``=`` takes it joined: ``--field answer=NAME``;
a spelling that shows its own placeholder, ``--limit N``, takes none from the message).
``resume`` continues an unfinished audit (Python's default, the CLI's ``--resume``);
``resume_only`` continues and never starts one; ``no_resume`` starts training afresh
(``train``'s ``--no-resume``)."""

_CLI: ContextVar[bool] = ContextVar("rnr_lens_cli_spelling", default=False)


def arg(name: str, value: str = "") -> str:
    """How a message names the argument ``name`` (a key of :data:`SPELLINGS`), with an example
    ``value``: ``--probe sampling:k=8`` inside the CLI, ``probe='sampling:k=8'`` from Python.

    Example:
        >>> arg("probe")
        'probe='
        >>> with cli_spelling():
        ...     arg("probe", "sampling:k=8")
        '--probe sampling:k=8'
    """
    python, flag, takes_value = SPELLINGS[name]
    if _CLI.get():
        return (flag + value if flag.endswith("=") else f"{flag} {value}") if takes_value and value else flag
    if not takes_value:
        return python
    return f"{python}={value!r}" if value else f"{python}="


@contextlib.contextmanager
def cli_spelling() -> Iterator[None]:
    """Inside the block, :func:`arg` spells arguments as the CLI's flags."""
    token = _CLI.set(True)
    try:
        yield
    finally:
        _CLI.reset(token)


class RnrLensError(Exception):
    """Bad input or an environment problem the user can fix (one-line message)."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))
