"""The profile of real work: each stage's time splits into its forwards, store writes and the
rest, and marking a phase costs nothing when no profile is open."""

import pytest

from rnr_lens import phases, tasks
from rnr_lens.audits import audit


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
