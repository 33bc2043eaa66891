"""The one exception type rnr_lens raises for bad input.

Every message is a single line that says what was wrong and how to fix it; the CLI prints
it as ``error: <message>`` and exits with status 2.
"""

from __future__ import annotations


class RnrLensError(Exception):
    """Bad input or an environment problem the user can fix (one-line message)."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))
