"""Files from outside: read within bounds, checked as data, quoted harmlessly.

A file someone else made (evidence, a task, a grid, a deployment config) is hostile until it is
checked. This module owns the bounds every such read obeys, so each reader calls it rather than
``yaml.safe_load`` or ``json.loads`` directly.

Invariants:

- YAML is read with :class:`NoAliasLoader`: no aliases (none of rnr_lens's formats needs one, and
  a few hundred bytes of nested aliases expand to gigabytes once printed) and no tags beyond
  plain YAML.
- JSON is nested at most :data:`MAX_DEPTH` deep and holds no integer longer than
  :data:`MAX_INT_DIGITS` digits; a gzip file is inflated as a stream and refused past its cap.
- Each size cap is a :class:`Limit` with a name, a default and the environment variable that
  raises it; its refusal is one line naming both.
- :func:`quoted` is how a message shows a value from outside: control characters escaped, at
  most :data:`QUOTE_CHARS` characters.

Example:
    >>> load_yaml("a: &x [1]\\nb: *x\\n", "grid.yaml")
    Traceback (most recent call last):
    ...
    rnr_lens.errors.RnrLensError: grid.yaml uses a YAML alias (*x) at line 2; write the value out (rnr_lens's files need no aliases)
    >>> quoted("\\x1b[31mred")
    "'\\\\x1b[31mred'"
"""

from __future__ import annotations

import gzip
import json
import os
import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from rnr_lens.core.files import read_text
from rnr_lens.errors import RnrLensError

MAX_DEPTH = 64
"""How deeply a JSON or YAML value from outside may nest (rnr_lens's own formats nest under 10)."""
MAX_INT_DIGITS = 20
"""The longest integer accepted (2**64 has 20 digits; SQLite stores 64-bit integers)."""
MAX_NAME_CHARS = 1024
"""The longest name or path a grid may give (a file name is at most 255 bytes, a path 4096)."""
QUOTE_CHARS = 120
"""The most characters of an outside value a message quotes."""
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_CONTROL_BUT_RETURN = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
"""The same less the carriage return: stderr's filter (a progress bar redraws its line with it)."""
_SURROGATE = re.compile(r"[\ud800-\udfff]")


class OverLimit(RnrLensError):
    """A file from outside refused for passing a :class:`Limit` (its message says how to raise it)."""


@dataclass(frozen=True)
class Limit:
    """A cap on what a file from outside may hold, raised only by the user's environment.

    Attributes:
        what: What it caps, as a refusal names it (``"inflated evidence"``).
        default: The cap in ``unit`` s.
        env: The environment variable that sets another cap.
        unit: ``"MB"`` (10**6 bytes) or ``"characters"``.
    """

    what: str
    default: int
    env: str
    unit: str = "MB"

    @property
    def value(self) -> int:
        """The cap in bytes (MB) or characters, as the environment sets it."""
        raw = os.environ.get(self.env, "").strip()
        n = self.default
        if raw:
            if not raw.isdigit() or int(raw) <= 0:
                raise RnrLensError(f"{self.env}={quoted(raw)} is not a positive whole number of {self.unit}; unset it or give one")
            n = int(raw)
        return n * 10**6 if self.unit == "MB" else n

    def refusal(self, where: str | Path) -> OverLimit:
        """The one line refusing ``where`` for passing this cap."""
        cap = self.value // 10**6 if self.unit == "MB" else self.value
        return OverLimit(
            f"{where}: {self.what} is over the cap of {cap:,} {self.unit}; if you trust the file, raise the cap with {self.env}=<{self.unit}>"
        )


EVIDENCE_BYTES = Limit("the inflated evidence", 32, "RNR_LENS_MAX_EVIDENCE_MB")
"""1.3 times the largest committed evidence (24.5 MB: 16 audits, 15,000 tries at about 1.6 kB
each). Parsed, JSON takes up to about ten times its size in memory (short floats; shorter
strings and empty lists are refused by :mod:`rnr_lens.measure.evidence`), so a crafted file stays
within a GB with the command's own 400 MB."""
TASK_BYTES = Limit("the task file", 16, "RNR_LENS_MAX_TASK_MB")
"""Twenty times GSM8K's test split; checked before the file is read (tiny records take up to
about 18 times their file's size in memory, so a crafted file stays within a GB)."""
QUESTION_CHARS = Limit("a question's text", 200_000, "RNR_LENS_MAX_QUESTION_CHARS", unit="characters")
"""Past every offline model's context (SmolLM2 reads 8,192 tokens); checked before a model loads."""
SMALL_FILE_BYTES = Limit("a grid or config file", 1, "RNR_LENS_MAX_CONFIG_MB")
STORE_VALUE_BYTES = Limit("a value in the run store", 64, "RNR_LENS_MAX_STORE_VALUE_MB")
"""The longest cell a run store may hold (SQLite's ``SQLITE_LIMIT_LENGTH``: a longer one is
refused, never loaded): over twice the largest committed evidence file, which holds every cell
of 16 audits, so no store rnr_lens writes comes near it."""


def quoted(value: object, limit: int = QUOTE_CHARS) -> str:
    """``repr`` of a value from outside, control characters escaped, cut to ``limit`` characters.

    Never calls ``str``/``repr`` on a container (a YAML alias bomb expands there): a container
    is named by its type and length.
    """
    if isinstance(value, (dict, list, tuple, set)):
        return f"<a {type(value).__name__} of {len(value)}>"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 256:
        return f"<an integer of about {int(value.bit_length() * 0.30103) + 1} digits>"
    if isinstance(value, (int, float, bool, type(None))):
        shown = repr(value)
        return shown if len(shown) <= limit else shown[:limit] + "..."
    text = value if isinstance(value, str) else type(value).__name__
    shown = _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode(), repr(text[:limit]))
    return shown + ("..." if len(text) > limit else "")


def printable(text: str, *, returns: bool = False) -> str:
    r"""``text`` with terminal control characters escaped (newlines and tabs kept; with
    ``returns``, carriage returns too, which a progress bar redraws its line with): what a
    terminal shows of a name from a store or an error.

    Example:
        >>> printable("model\x1b]0;owned\x07\r 3/10", returns=True)
        'model\\x1b]0;owned\\x07\r 3/10'
    """
    pattern = _CONTROL_BUT_RETURN if returns else _CONTROL
    return pattern.sub(lambda m: m.group().encode("unicode_escape").decode(), text)


MESSAGE_CHARS = 2000
"""The longest error line the command line prints (a value quoted in it is cut before this)."""


def one_line(text: str, limit: int | None = None) -> str:
    """``text`` as one printable line: :func:`printable`, with newlines escaped too (an error),
    cut to ``limit`` characters where given."""
    line = printable(text).replace("\n", "\\n").replace("\t", " ")
    return line if limit is None or len(line) <= limit else line[: limit - 3] + "..."


def check_text(value: object, what: str, *, name: bool = False) -> str:
    """``value`` as a string from outside: refuse a non-string, a lone surrogate, and (for a
    ``name``) any control character."""
    if not isinstance(value, str):
        raise RnrLensError(f"{what} is a {type(value).__name__}, not text")
    if _SURROGATE.search(value):
        raise RnrLensError(f"{what} holds a lone UTF-16 surrogate, which is not text")
    if name and (_CONTROL.search(value) or "\n" in value or "\t" in value):
        raise RnrLensError(f"{what} {quoted(value)} holds control characters; names are plain text")
    return value


def check_int(value: object, what: str, low: int = 0, high: int = 2**63 - 1) -> int:
    """``value`` as an integer from outside in ``low..high`` (a bool is not one)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise RnrLensError(f"{what} is {quoted(value)}, not a whole number")
    if not low <= value <= high:
        raise RnrLensError(f"{what} is {quoted(value)}, outside {low}..{high}")
    return value


# ---------------------------------------------------------------------------------------------
# JSON
# ---------------------------------------------------------------------------------------------


def _bounded_int(text: str) -> int:
    digits = text.lstrip("-")
    if len(digits) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(digits)} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"{text[:20]} overflows a float")
    return value


def _no_constant(text: str) -> float:
    raise ValueError(f"{text} (not JSON)")


def loads_json(text: str | bytes, where: str | Path) -> Any:
    """JSON from outside: at most :data:`MAX_DEPTH` deep, integers at most
    :data:`MAX_INT_DIGITS` digits, no ``NaN``/``Infinity``; one line naming ``where`` otherwise."""
    try:
        value = json.loads(text, parse_int=_bounded_int, parse_float=_finite, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise RnrLensError(f"{where} is not valid JSON ({exc.msg} at line {exc.lineno})") from None
    except RecursionError:
        raise RnrLensError(f"{where} nests JSON more than {MAX_DEPTH} deep; it is not a file rnr_lens reads") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise RnrLensError(f"{where} is not acceptable JSON ({quoted(str(exc))})") from None
    if _depth(value) > MAX_DEPTH:
        raise RnrLensError(f"{where} nests JSON more than {MAX_DEPTH} deep; it is not a file rnr_lens reads")
    return value


def _depth(value: Any) -> int:
    """How deeply ``value``'s lists and dicts nest (iteratively: a deep value cannot recurse here)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            v = v.values()
        elif not isinstance(v, list):
            continue
        deepest = max(deepest, d)
        if deepest > MAX_DEPTH:
            return deepest
        stack.extend((x, d + 1) for x in v if isinstance(x, (list, dict)))
    return deepest


def read_gzip(path: str | Path, limit: Limit, where: str | None = None) -> bytes:
    """The inflated bytes of the gzip file ``path``, read as a stream and refused once past
    ``limit`` (a deflate stream inflates up to about 1030:1, so a 1 MB file may hold a GB)."""
    cap = limit.value
    try:
        with gzip.open(path, "rb") as f:
            data = f.read(cap + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise RnrLensError(f"{where or path} is not gzip-compressed ({quoted(str(exc))})") from None
    if len(data) > cap:
        raise limit.refusal(path)
    return data


# ---------------------------------------------------------------------------------------------
# YAML
# ---------------------------------------------------------------------------------------------


class NoAliasLoader(yaml.SafeLoader):
    """YAML's safe loader without aliases, and without nesting past :data:`MAX_DEPTH`."""

    where = "the YAML file"

    def compose_node(self, parent: yaml.Node | None, index: object) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise RnrLensError(
                f"{self.where} uses a YAML alias (*{event.anchor}) at line {event.start_mark.line + 1}; write the value out (rnr_lens's files need no aliases)"
            )
        self._depth = getattr(self, "_depth", 0) + 1
        try:
            if self._depth > MAX_DEPTH:
                raise RnrLensError(f"{self.where} nests YAML more than {MAX_DEPTH} deep; rnr_lens's files need a few levels")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def load_yaml(text: str, where: str | Path) -> Any:
    """YAML (or JSON) from outside, read with :class:`NoAliasLoader`; one line naming ``where``
    for invalid YAML, an alias or too deep a nesting."""
    loader = NoAliasLoader(text)
    loader.where = str(where)
    try:
        return loader.get_single_data()
    except yaml.YAMLError as exc:
        raise RnrLensError(f"{where} is not valid YAML ({quoted(str(exc).splitlines()[0])})") from None
    except RecursionError:
        raise RnrLensError(f"{where} nests YAML too deeply; rnr_lens's files need a few levels") from None
    except (ValueError, OverflowError, TypeError) as exc:  # a value YAML recognised but cannot build (a 5000-digit number, 2001-13-45)
        raise RnrLensError(f"{where} holds a value that cannot be read ({quoted(str(exc))}); write it as plain text or a number") from None
    finally:
        loader.dispose()


def read_small(path: str | Path, what: str) -> str:
    """A grid or config file's text, refused past :data:`SMALL_FILE_BYTES` before it is read."""
    path = Path(path)
    if path.stat().st_size > SMALL_FILE_BYTES.value:
        raise SMALL_FILE_BYTES.refusal(f"{what} {path}")
    return read_text(path)


# ---------------------------------------------------------------------------------------------
# Text written for a spreadsheet
# ---------------------------------------------------------------------------------------------

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""What makes a spreadsheet read a CSV cell as a formula (OWASP's list)."""


def spreadsheet_safe(frame: Any) -> Any:
    """A copy of the pandas ``frame`` whose text cells a spreadsheet cannot run: a cell that
    begins with one of :data:`FORMULA_STARTS` gets a leading ``'`` (so ``-5`` reads ``'-5``), and
    so does every line inside a cell that begins with one (after a line break).
    For CSV only; parquet keeps every cell exact.

    Example:
        >>> import pandas as pd
        >>> spreadsheet_safe(pd.DataFrame({"text": ["=HYPERLINK(1)", "4"], "n": [-1, 2]})).to_dict("list")
        {'text': ["'=HYPERLINK(1)", '4'], 'n': [-1, 2]}
    """
    out = frame.copy()
    for column in out.columns:
        if out[column].dtype == object or str(out[column].dtype).startswith(("string", "str")):
            out[column] = out[column].map(_neutralised)
    return out


_AFTER_A_BREAK = re.compile(r"(?<=[\r\n])(?=[=+\-@\t])")
"""A formula's start right after a line break inside a cell: where a reader that splits rows at
every line break (quoted or not) would begin a cell (issue 73)."""


def _neutralised(v: Any) -> Any:
    """One cell, neutralised: a leading ``'`` before a formula's start, at the cell's start and
    after every line break inside it."""
    if not isinstance(v, str):
        return v
    v = _AFTER_A_BREAK.sub("'", v)
    return "'" + v if v.startswith(FORMULA_STARTS) else v


def safe_csv(frame: Any) -> bytes:
    """The pandas ``frame`` as CSV no spreadsheet can run: every cell neutralised
    (:func:`spreadsheet_safe`) and every text cell quoted, so a line break inside one (a bare
    carriage return, which Python's csv module leaves unquoted: issue 73) never starts a row
    whose first cell is a formula. The one CSV writer of every exported table
    (``tests/core/test_untrusted.py`` reads one back)."""
    import csv
    import io

    buffer = io.BytesIO()
    spreadsheet_safe(frame).to_csv(buffer, index=False, quoting=csv.QUOTE_NONNUMERIC)
    return buffer.getvalue()
