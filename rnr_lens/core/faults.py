"""Named points where a crash would hurt most, and the switch that makes one happen there.

The library marks with :func:`point` the moments a crash is most likely to damage something: every
phase of the work (each probe of an audit, the miner's screen, confirmation, exhaustive sweep and
null, every prefill, decoding step and store write: ``rnr_lens.core.phases.phase`` calls
:func:`point`), a file written but not yet renamed into place, a checkpoint's weights written but
not its tokenizer, a model cache entry assembled but not yet moved into the cache.

The fault campaign (``scripts/fault-campaign``) uses two environment variables; without them a
point costs one check of a module-level flag:

- ``RNR_LENS_KILL_AT=NAME:N`` kills this process with SIGKILL on its Nth arrival at point
  ``NAME`` (no cleanup runs, as after a power cut or the OOM killer);
- ``RNR_LENS_POINT_LOG=FILE`` appends the name of every point reached, one per line, so the
  campaign draws its kill points from what a real run passes through.

Invariant: a point never changes what the run computes; with neither variable set it does nothing.
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
