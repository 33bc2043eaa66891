"""Named points where a crash would hurt most, and the switch that makes one happen there.

The library marks with :func:`point` the moments a crash is most likely to damage something: every
phase of the work (each probe of an audit, the miner's screen, confirmation, exhaustive sweep and
null, every prefill, decoding step and store write: ``rnr_lens.phases.phase`` calls
:func:`point`), a file written but not yet renamed into place, a checkpoint's weights written but
not its tokenizer, a model cache entry assembled but not yet moved into the cache.

The fault campaign (``scripts/fault-campaign``) uses two environment variables; without them a
point costs one check of a module-level flag:

- ``RNR_LENS_KILL_AT=NAME:N`` kills this process with SIGKILL on its Nth arrival at point
  ``NAME`` (no cleanup runs, as after a power cut or the OOM killer);
- ``RNR_LENS_POINT_LOG=FILE`` appends the name of every point reached, one per line, so the
  campaign draws its kill points from what a real run passes through.

A stop asked of the command line (Ctrl-C, SIGTERM) is **sticky**: the signal's handler raises
it where the run is and also files it with :func:`stop`, and every phase of the work that
starts later raises it again (:func:`raise_filed_stop`).
A library that swallows the first ``KeyboardInterrupt`` (a bare ``except:`` around an optional
import, a finalizer) cannot make the run finish as if never asked to stop; the command line
clears it with :func:`clear_stop` once it has answered the stop.

Invariant: a point never changes what the run computes; with neither variable set and no stop
filed it does nothing.
"""

from __future__ import annotations

import os
import signal

KILL_AT_ENV = "RNR_LENS_KILL_AT"
POINT_LOG_ENV = "RNR_LENS_POINT_LOG"

_kill_name, _, _kill_n = os.environ.get(KILL_AT_ENV, "").rpartition(":")
_KILL: tuple[str, int] | None = (_kill_name, int(_kill_n)) if _kill_name and _kill_n.isdigit() else None
_LOG: str | None = os.environ.get(POINT_LOG_ENV) or None
_ACTIVE = _KILL is not None or _LOG is not None
_arrivals: dict[str, int] = {}
_stop: type[BaseException] | None = None


def stop(exc: type[BaseException]) -> None:
    """File a stop the run was asked for: every later phase raises ``exc`` until
    :func:`clear_stop` (the command line's signal handlers call it)."""
    global _stop
    _stop = exc


def clear_stop() -> None:
    """Forget a filed stop (the command line has answered it)."""
    global _stop
    _stop = None


def raise_filed_stop() -> None:
    """Raise the stop filed with :func:`stop`, if any: every phase of the work starts here
    (``rnr_lens.phases.phase``), while the bare points of cleanup code (a file moved into place,
    a profile saved as the stop unwinds) do not, so that a stop never cuts its own cleanup short."""
    if _stop is not None:
        raise _stop


def point(name: str) -> None:
    """Mark a moment named ``name`` (see the module's docstring)."""
    if not _ACTIVE:
        return
    if _LOG is not None:
        with open(_LOG, "a") as f:
            f.write(name + "\n")
    if _KILL is not None and _KILL[0] == name:
        _arrivals[name] = _arrivals.get(name, 0) + 1
        if _arrivals[name] == _KILL[1]:
            os.kill(os.getpid(), signal.SIGKILL)
