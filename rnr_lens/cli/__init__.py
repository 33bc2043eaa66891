"""The ``rnr-lens`` command line: a thin shell over the library.

One module per command (``cli/audit.py`` is ``rnr-lens audit``), each with its flags
(``add_arguments``) beside its handler (``run``); :mod:`rnr_lens.cli.shell` holds what commands
share. A handler parses, calls the library, and prints a table (or JSON with ``--json``): every
rule a Python user also needs is the library's. Bad input prints ``error: <one line>`` and exits
with 2.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import io
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from typing import TextIO

from rnr_lens.cli import audit, check_format, compare, export, merge, mine, models, report, show, train
from rnr_lens.cli.shell import Parser, UsageError
from rnr_lens.core.files import refusal, release_all
from rnr_lens.core.untrusted import MESSAGE_CHARS, one_line, printable, quoted
from rnr_lens.errors import RnrLensError, cli_spelling

_MODULES = (models, audit, show, export, mine, compare, train, merge, report, check_format)
"""The commands, in the order ``rnr-lens --help`` lists them."""
COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {m.NAME: m.run for m in _MODULES}
"""Each command's handler by name (what :func:`main` calls)."""


def build_parser() -> argparse.ArgumentParser:
    """The whole command line: each command's parser built by its own module."""
    parser = Parser(prog="rnr-lens", description="Realized versus reachable: audit a model question by question.")
    sub = parser.add_subparsers(dest="command", required=True)
    for module in _MODULES:
        module.add_arguments(sub.add_parser(module.NAME, help=module.HELP))
    return parser


class _Printable(io.TextIOBase):
    """A text stream that escapes terminal control characters (newlines and tabs kept; with
    ``returns``, carriage returns too) before they reach ``stream``: what every command prints,
    on stdout and stderr, passes through it."""

    def __init__(self, stream: TextIO, *, returns: bool = False) -> None:
        self._stream = stream
        self._returns = returns

    def write(self, text: str) -> int:
        self._stream.write(printable(text, returns=self._returns))
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        """The wrapped stream's answer; False once it is closed (colorama, which Ray loads, asks
        at interpreter exit about the stdout it saw while a command ran)."""
        return not self._stream.closed and self._stream.isatty()


class _Terminated(KeyboardInterrupt):
    """SIGTERM (a scheduler's or ``kill``'s stop), handled as Ctrl-C is: what finished is kept."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise _Terminated


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = None
    previous = signal.signal(signal.SIGTERM, _on_sigterm) if threading.current_thread() is threading.main_thread() else None
    try:
        args = parser.parse_args(argv)
        for given in sys.argv[1:] if argv is None else argv:  # a name of bytes that are not UTF-8 (issue 73) is refused at the edge
            if any("\udc80" <= c <= "\udcff" for c in given):
                raise UsageError(
                    f"{quoted(given)} holds bytes that are not UTF-8 (a file name from another system?); rename the file and pass it again"
                )
        # names from a store or a file may hold terminal control sequences, on stdout and on
        # stderr (progress bars, notes, warnings: issue 73, where a bar keeps its carriage
        # returns); fixes name the CLI's flags
        with contextlib.redirect_stdout(_Printable(sys.stdout)), contextlib.redirect_stderr(_Printable(sys.stderr, returns=True)), cli_spelling():
            return COMMANDS[args.command](args)
    except (RnrLensError, UsageError) as exc:
        print(f"error: {one_line(str(exc), MESSAGE_CHARS)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        # audit resumes only when asked (--resume); train, mine and report resume by themselves
        how = "with --resume" if args is not None and args.command == "audit" else "the same command"
        what = "stopped (SIGTERM)" if isinstance(exc, _Terminated) else "interrupted"
        print(f"{what}; rerun {how} to continue where it stopped", file=sys.stderr)
        return 143 if isinstance(exc, _Terminated) else 130
    except OSError as exc:  # a write the machine refused outside the store (the store says its own)
        if exc.errno == errno.ENAMETOOLONG:
            print(f"error: a name given is too long to be a file path ({quoted(exc.filename or '')}); give a shorter name or path", file=sys.stderr)
            return 2
        error = refusal(exc, exc.filename or getattr(args, "out", None) or os.getcwd())
        if error is None:
            raise
        print(f"error: {one_line(str(error), MESSAGE_CHARS)}", file=sys.stderr)
        return 2
    finally:
        release_all()  # the command is over: its stores and folders are free for the next one
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
