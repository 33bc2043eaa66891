"""Claims read together: two models side by side, one grid before and after."""

import dataclasses
import json
from pathlib import Path

import pytest

from rnr_lens.judge.claims import Claims
from rnr_lens.judge.verdicts import STATUSES
from rnr_lens.present import claims_compared as compared

RESULTS = Path(__file__).resolve().parents[2] / "assets" / "results"


def committed(grid: str) -> Claims:
    return Claims.from_dict(json.loads((RESULTS / grid / "claims.json").read_text()))


def test_the_change_table_compares_claim_2s_estimates_not_only_its_sizes():
    """ "The numbers it reads" once compared only claim 2's failure-set sizes, so a verdict whose
    bottleneck's held-out repair had moved read "same" (found by an independent read)."""
    claims = committed("grid-deep")
    c = next(c for c in claims.bottleneck if c.bottleneck is not None and not c.bottleneck.repair_heldout.is_empty)
    flipped = dataclasses.replace(c.verdict, status="unresolved" if c.verdict.status != "unresolved" else "against")
    held = c.bottleneck.repair_heldout
    moved = dataclasses.replace(c.bottleneck, repair_heldout=dataclasses.replace(held, value=held.value + 0.1))

    def changed(claim):
        other = dataclasses.replace(claims, bottleneck=tuple(claim if x is c else x for x in claims.bottleneck))
        rows = [r for r in compared.changes_table(claims, other).splitlines() if r.startswith("| 2 ")]
        assert len(rows) == 1, rows
        return rows[0].rstrip(" |").rsplit("| ", 1)[1]

    assert changed(dataclasses.replace(c, verdict=flipped)) == "same"
    assert changed(dataclasses.replace(c, verdict=flipped, bottleneck=moved)) == "changed"


def test_the_side_by_side_reading_counts_what_its_table_shows():
    """Issue 56's reading is rendered from the same cells as its table: a model beside itself
    agrees on every decided row and differs on none; a model with no grid yet is "not run"."""
    deep, seeds = committed("grid-deep"), committed("grid-seeds")
    table = compared.side_by_side({"A": (deep, seeds), "B": (deep, seeds)})
    rows = [r.strip("| ").split(" | ") for r in table.splitlines()[2:]]
    settings: dict[tuple[str, str], list[str]] = {}  # issue 72: a claim on a task counts once, however many rows it has
    for claim, task, cell, _ in rows:
        settings.setdefault((claim.split(",", 1)[0], task), []).append(cell)
    decided = sum(any("**support**" in c or "**against**" in c for c in cells) for cells in settings.values())
    mute = sum(all("**uninformative**" in c for c in cells) for cells in settings.values())
    reading = compared.side_by_side_reading({"A": (deep, seeds), "B": (deep, seeds)})
    assert len(settings) < len(rows), "claim 1's two rows and claim 3's three rows of a task are one setting each"
    assert reading.startswith(
        f"Side by side, of {len(settings)} settings (a claim on a task) run on both models, {decided} are decided the same way on both"
    )
    assert "; 0 opposite ways; 0 on one model only;" in reading and "not run yet" not in reading
    assert f"; {mute} {'is' if mute == 1 else 'are'} uninformative on both (the precondition absent)" in reading
    alone = compared.side_by_side({"A": (deep, seeds), "B": (None, None)})
    assert all(r.endswith("| not run |") for r in alone.splitlines()[2:])


def test_two_reports_holding_other_verdicts_are_refused():
    """A before-and-after sentence compares verdict by verdict; reports of other grids hold
    other verdicts, and comparing them would pair unrelated settings."""
    with pytest.raises(ValueError, match="hold other verdicts"):
        compared.rules_3_moved({"grid-deep": committed("grid-deep")}, {"grid-deep": committed("grid-default")})
    same = compared.rules_3_moved({"grid-deep": committed("grid-deep")}, {"grid-deep": committed("grid-deep")})
    assert same.startswith("Verdict rules version 3 moved `grid-deep` 0 of ")


def test_the_change_table_names_claim_2s_setting_not_claim_1s():
    """Each claim 2 row names its own setting and its own two verdicts (the claim 1 and claim 2
    loops share the table's rows, so a name carried from one loop to the next would misname
    every row)."""
    claims = committed("grid-default")
    flipped = tuple(
        dataclasses.replace(b, verdict=dataclasses.replace(b.verdict, status="against" if b.verdict.status != "against" else "unresolved"))
        for b in claims.bottleneck
    )
    rows = [r.strip("| ").split(" | ") for r in compared.changes_table(claims, dataclasses.replace(claims, bottleneck=flipped)).splitlines()[2:]]
    assert [(r[1], r[2], r[3], r[4]) for r in rows] == [
        (b.setting.model, Path(b.setting.task).name, b.verdict.status, f.verdict.status) for b, f in zip(claims.bottleneck, flipped)
    ]


def test_the_grids_table_counts_every_verdict_of_each_grid():
    """The README's summary: per grid and claim, each status's count of all its verdicts (the
    undecided ones too), and "not evaluated" where a grid has none of a claim."""
    grids = {g: committed(g) for g in ("grid-deep", "grid-deep-gemma")}
    rows = [r.strip("| ").split(" | ") for r in compared.grids_table(grids).splitlines()[2:]]
    for (name, claims), row in zip(grids.items(), rows):
        verdicts = (
            [c.verdict for c in claims.routes_vs_search],
            [c.verdict for c in claims.bottleneck],
            [p.verdict for t in claims.training for p in t.probes],
        )
        assert row[0] == f"`{name}`"
        for cell, judged in zip(row[3:6], verdicts):
            if not judged:
                assert cell == "not evaluated"
                continue
            said = dict(part.split(" ") for part in cell.rsplit(" of ", 1)[0].split(", "))
            assert {s: int(n) for s, n in said.items()} == {s: n for s in STATUSES if (n := sum(v.status == s for v in judged))}
            assert cell.endswith(f" of {len(judged)}")
    assert rows[1][5] == "not evaluated", "the Gemma deep grid trains no pair"
