"""Fault points: a named kill switch for the fault campaign that changes nothing when off.

Guards against a kill point that fires at the wrong arrival (the campaign would then test
another moment than it names) or one that costs or changes anything without its variable.
"""

from __future__ import annotations

import subprocess
import sys

from rnr_lens.core import faults


def test_a_point_without_the_variables_does_nothing():
    assert not faults._ACTIVE
    faults.point("decode")


def test_the_nth_arrival_kills_and_the_log_names_every_point(tmp_path):
    log = tmp_path / "points"
    code = "from rnr_lens.core.faults import point\nfor name in ['a', 'b', 'a', 'b', 'a']:\n    point(name)\n    print(name, flush=True)"
    env = {faults.KILL_AT_ENV: "a:2", faults.POINT_LOG_ENV: str(log)}
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**_env(), **env})
    assert ran.returncode == -9
    assert ran.stdout.split() == ["a", "b"], "killed on arriving at a the second time, before its work"
    assert log.read_text().split() == ["a", "b", "a"]


def _env():
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("RNR_LENS_")}
