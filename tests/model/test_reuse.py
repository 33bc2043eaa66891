"""Which reuses run: off until checked, each decided once per setting, forced only inside a
block, and every answer recorded in an open profile (issue 58: a reuse ran on a CPU whose
kernels move its bits)."""

from __future__ import annotations

import pytest

import rnr_lens as R
from rnr_lens.core.phases import profiling
from rnr_lens.model.reuse import REUSES, Reuses, ReuseVerdict


def test_a_reuse_is_off_until_its_check_says_otherwise():
    setting = ["cpu"]
    asked: list[str] = []

    def check(name: str) -> ReuseVerdict:
        asked.append(name)
        return ReuseVerdict(name, name != "prefix-store", "a test's verdict")

    reuses = Reuses(lambda: setting[0])
    assert not any(reuses.on(name) for name in REUSES), "no check wired: every reuse off"
    reuses.check = check
    assert reuses.verdict("shared-prefix").why == "not checked yet"
    reuses.decide(["shared-prefix"])
    assert asked == ["shared-prefix"] and reuses.on("shared-prefix") and not reuses.on("shared-identity")
    reuses.decide()
    reuses.decide()
    assert asked == list(REUSES), "each reuse is checked once per setting"
    assert not reuses.on("prefix-store")
    setting[0] = "cpu, one thread"
    assert reuses.verdict("shared-prefix").why == "not checked yet", "a new setting (device, dtype, threads) decides again"


def test_forcing_a_reuse_lasts_for_the_block_only():
    reuses = Reuses(lambda: None, lambda name: ReuseVerdict(name, False, "moves bits"))
    reuses.decide()
    with reuses.forced("prefix-store", True):
        assert reuses.on("prefix-store") and str(reuses.verdict("prefix-store")) == "prefix-store on (forced)"
        with reuses.forced("prefix-store", False):
            assert not reuses.on("prefix-store")
        assert reuses.on("prefix-store")
    assert not reuses.on("prefix-store")


def test_an_unknown_reuse_is_refused_in_one_line():
    with pytest.raises(R.RnrLensError, match="unknown reuse 'kv-share'; choose one of shared-prefix, shared-identity, prefix-store"):
        Reuses(lambda: None).on("kv-share")


def test_the_profile_records_whether_each_reuse_ran(tiny):
    """Guards the profile's record (issue 58): a run's profile must say whether each reuse it
    asked for was on, and why."""
    routes = [R.Route.identity(tiny.n_layers), R.Route.skip(tiny.n_layers, 2)]
    with profiling() as p:
        tiny.generate(["What is 2 + 3?"] * 2, route=routes, max_new_tokens=2)
    assert (
        p.notes["reuse shared-identity"]
        == f"{'on' if tiny.engine.reuses.on('shared-identity') else 'off'} ({tiny.engine.reuses.verdict('shared-identity').why})"
    )
    assert "reuse shared-identity: " in p.text() and p.to_dict()["notes"] == p.notes
