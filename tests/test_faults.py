"""Fault points: a named kill switch for the fault campaign that changes nothing when off.

Guards against a kill point that fires at the wrong arrival (the campaign would then test
another moment than it names) or one that costs or changes anything without its variable.
"""

from __future__ import annotations

import subprocess
import sys

from rnr_lens import faults


def test_a_point_without_the_variables_does_nothing():
    assert not faults._ACTIVE
    faults.point("decode")


def test_the_nth_arrival_kills_and_the_log_names_every_point(tmp_path):
    log = tmp_path / "points"
    code = "from rnr_lens.faults import point\nfor name in ['a', 'b', 'a', 'b', 'a']:\n    point(name)\n    print(name, flush=True)"
    env = {faults.KILL_AT_ENV: "a:2", faults.POINT_LOG_ENV: str(log)}
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**_env(), **env})
    assert ran.returncode == -9
    assert ran.stdout.split() == ["a", "b"], "killed on arriving at a the second time, before its work"
    assert log.read_text().split() == ["a", "b", "a"]


def _env():
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("RNR_LENS_")}


def test_a_stop_a_library_swallows_comes_back_at_the_next_phase_not_in_cleanup():
    """Ctrl-C under the command line's own handler, swallowed where it lands (a library's bare
    ``except:``), is raised again by the next phase of the work, but not by a bare point that
    cleanup passes (guards against a run that finishes as if never stopped: the fault campaign
    once saw a report interrupted at audit:sampling run on and exit 0)."""
    import signal

    import pytest

    from rnr_lens.cli import _on_signal
    from rnr_lens.phases import phase

    previous = signal.signal(signal.SIGINT, _on_signal)
    try:
        try:
            signal.raise_signal(signal.SIGINT)
        except BaseException:  # what a swallowing library does
            pass
        faults.point("file:written")  # a file moved into place as the stop unwinds: no raise
        with pytest.raises(KeyboardInterrupt), phase("decode"):
            pytest.fail("the phase must not start")
    finally:
        faults.clear_stop()
        signal.signal(signal.SIGINT, previous)


def test_the_command_line_answers_a_swallowed_stop_and_then_forgets_it(monkeypatch, capsys):
    """A command whose Ctrl-C was swallowed still ends as an interrupted one (exit 130, one
    line), and the stop is cleared for whatever runs next in the process."""
    import signal

    from rnr_lens import cli
    from rnr_lens.phases import phase

    def swallowing(args):
        try:
            signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt:
            pass
        with phase("audit:sampling"):
            return 0

    monkeypatch.setitem(cli.COMMANDS, "models", swallowing)
    assert cli.main(["models"]) == 130
    assert capsys.readouterr().err.startswith("interrupted; rerun")
    with phase("decode"):  # nothing filed any more
        pass
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler, "the handler is put back"
