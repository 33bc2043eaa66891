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

SPELLINGS: dict[str, tuple[str, bool]] = {
    "probe": ("--probe", True),
    "audit_id": ("--audit", True),
    "resume": ("--resume", False),
}
"""Each argument a message may tell the user to pass: its Python keyword -> its CLI flag, and
whether the flag takes a value (a flag without one is ``True`` in Python)."""

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
    flag, takes_value = SPELLINGS[name]
    if _CLI.get():
        return f"{flag} {value}" if takes_value and value else flag
    if not takes_value:
        return f"{name}=True"
    return f"{name}={value!r}" if value else f"{name}="


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
