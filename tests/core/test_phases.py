"""The profile of real work: each stage's time splits into its forwards, store writes and the
rest, and marking a phase costs nothing when no profile is open."""

import json

import pytest

from rnr_lens.core import phases
from rnr_lens.measure.audits import audit
from rnr_lens.questions import tasks


def test_an_audit_profile_splits_each_probe_into_its_phases(tiny):
    with phases.profiling() as profile:
        audit(tiny, tasks.get("add-small", n=6), ["sampling:k=2,t=1.0", "routes:k=2"], progress=False)
    rows = {r.stage: r for r in profile.rows()}
    assert {"audit:default", "audit:sampling", "audit:routes"} <= set(rows)
    for row in rows.values():
        assert row.calls >= 1 and row.seconds > 0
        assert row.inner["prefill"] > 0 and row.inner["decode"] >= 0 and row.inner["store"] > 0
        assert sum(row.inner.values()) <= row.seconds + 1e-9 and row.other >= 0
    total = sum(r.seconds for r in rows.values())
    assert total <= profile.wall, "stages of one audit do not overlap"
    assert profile.calls["prefill"] >= 3, "a prefill per probe's batch"
    assert set(profile.to_dict()["phases"]) >= {"prefill", "decode", "store"}
    assert "audit:sampling" in profile.text()


def test_phases_outside_a_profile_leave_no_trace():
    with phases.phase("nothing"):
        pass
    assert not phases._OPEN and not phases._STACK
    with phases.profiling() as profile, pytest.raises(ValueError), phases.phase("failed"):
        raise ValueError("a phase that raises is still timed")
    assert profile.calls["failed"] == 1 and not phases._STACK


def test_a_profile_saved_to_a_file_survives_a_crash_and_continues_on_resume(tiny, tmp_path):
    """A grid stopped midway once lost its whole profile (it was written only at the end), so a
    resumed run's profile covered only the resumed part."""
    saved = tmp_path / "profile.json"
    with pytest.raises(KeyboardInterrupt), phases.profiling(path=saved) as first:
        audit(tiny, tasks.get("add-small", n=4), ["sampling:k=2,t=1.0"], progress=False)
        written = json.loads(saved.read_text())  # saved after each top-level stage, before the end
        assert written["phases"]["audit:sampling"]["calls"] == 1
        raise KeyboardInterrupt
    with phases.profiling(path=saved) as second:
        audit(tiny, tasks.get("add-small", n=4), ["routes:k=2"], progress=False)
    whole = json.loads(saved.read_text())
    assert len(whole["runs_s"]) == 2 and whole["wall_s"] == pytest.approx(sum(whole["runs_s"]))
    assert whole["runs_s"][0] == pytest.approx(first.wall)
    assert second.calls["audit:default"] == 2 and second.calls["audit:sampling"] == 1 and second.calls["audit:routes"] == 1
    rows = {r.stage: r for r in second.rows()}
    assert rows["audit:sampling"].inner["prefill"] > 0, "the first run's inner phases carried over"
    assert second.seconds["prefill"] > first.seconds["prefill"]
    assert "over 2 runs (resumed)" in second.text()


def test_a_profile_writes_nothing_where_the_run_made_no_folder(tmp_path):
    with phases.profiling(path=tmp_path / "never" / "profile.json"), phases.phase("load model"):
        pass
    assert not (tmp_path / "never").exists()
