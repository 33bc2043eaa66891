"""A setting's claims, built from a real audit of the tiny model (or a sweep's own table):
what each builder reads, and that mining runs only on the weights that audited."""

import pytest

import rnr_lens as R
from rnr_lens.grids.grid import Grid
from rnr_lens.grids.setting_claims import claim_routes, mine_setting, screen_agreement


def _exhaustive(rows: list[tuple[int, float, float]], bound: float = 0.2):
    """An exhaustive sweep's table (layer, discovery repair, break) as the miner keeps it."""
    import pandas as pd

    from rnr_lens.bottleneck.miner import SweepResult
    from rnr_lens.judge.sweeps import bottleneck_of as _bottleneck

    table = pd.DataFrame(
        [
            {"layer": layer, "component": "mlp", "method": "zero", "repair_discovery": r, "repair_heldout": r, "repair": r, "break": b}
            for layer, r, b in rows
        ]
    )
    return SweepResult(table, pd.DataFrame(), _bottleneck(table, bound), {"screen_logprob": {"spearman": 0.5}}, "exhaustive", break_bound=bound)


@pytest.mark.parametrize(
    "picked, rows, best, same, regret",
    [
        # the top block breaks too much: the screen's pick within the bound is the same block
        (4, [(1, 1.0, 0.38), (4, 0.8, 0.14), (7, 0.2, 0.0)], 4, True, 0.0),
        (7, [(1, 1.0, 0.38), (4, 0.8, 0.14), (7, 0.2, 0.0)], 4, False, 0.6),
        # a pick outside the bound (the screen confirmed nothing within it) gives up all of the pick
        (1, [(1, 1.0, 0.38), (4, 0.8, 0.14), (7, 0.2, 0.0)], 4, False, 0.8),
        # nothing within the bound: both sides fall back to the best generated block
        (3, [(1, 1.0, 0.38), (3, 0.6, 0.5)], 1, False, 0.4),
    ],
)
def test_the_screen_is_judged_against_the_exhaustive_pick_under_the_same_rule(picked, rows, best, same, regret):
    """The deep grid's add-small once read "4 vs 1; regret 0.20": the exhaustive best ignored the
    break bound the screen's pick obeys (MLP 1 breaks 0.38 of the controls)."""
    a = screen_agreement(_exhaustive(rows), picked)
    assert (a.exhaustive_block, a.same_block, a.spearman) == (best, same, 0.5)
    assert a.regret == pytest.approx(regret)


def test_a_setting_says_when_format_misses_could_change_its_verdict(tiny, tmp_path):
    """Golds planted from the tiny model's own text: half are numbers it states but the
    extractor does not read. The setting's note counts them, and claim 1 read leniently uses
    a lenient chance level too (a lenient reach against a strict chance would be unmatched)."""
    from rnr_lens.measure.audits import audit
    from rnr_lens.questions.tasks.core import Question, Task
    from tests.conftest import format_miss_rows

    rows = format_miss_rows(tiny)
    task = Task("planted", tuple(Question(r["id"], r["question"], r["answer"]) for r in rows), "number")
    grid = Grid(models=("x",), tasks=("planted",), n=len(rows), k=2, edits=1, temperature=1.0)
    result = audit(tiny, task, [grid.random, grid.search], store=tmp_path / "fm.db", progress=False)
    claim = claim_routes(result, grid).format_misses
    assert claim.greedy == len(rows[::2]) and claim.answered == len(rows)
    assert claim.note and claim.note.startswith(f"format misses: {len(rows[::2])} of {len(rows)} greedy answers")
    strict, lenient = result.chance(grid.random), result.chance(grid.random, lenient=True)
    assert (lenient >= strict - 1e-12).all() and lenient.sum() > strict.sum(), "every stated number counts toward chance too"


def test_a_report_mines_only_with_the_weights_it_audited(tiny, tmp_path):
    """Guards against a report mining (on this process's model) an audit that Ray workers made
    with other weights (bfloat16 on GPUs): its sweep would compare two models' answers. A
    setting's mining asks the failure sets' own check first (one owner), with its own fix-it hint."""
    from rnr_lens.errors import cli_spelling
    from rnr_lens.measure.store import RunStore

    grid = Grid(models=("tiny",), tasks=("add-small",), k=2)
    result = R.audit(tiny, R.tasks.get("add-small", n=2), [grid.sampling], store=tmp_path / "a.db", progress=False)
    store = RunStore(tmp_path / "a.db")
    assert len(result.reachable_not_realized(grid.sampling)) < R.failures.MIN_FAILURES, "the premise: the check, then no set to mine"
    mine_setting(tiny, result, store, grid, progress=False)  # the audited weights: passed by the check
    with pytest.raises(R.RnrLensError, match=r"not the checkpoint audit .* executor='local'"):
        mine_setting(R.tiny_model(n_layers=4, seed=1), result, store, grid, progress=False)
    with cli_spelling(), pytest.raises(R.RnrLensError, match=r"not the checkpoint audit .* --executor local"):
        mine_setting(R.tiny_model(n_layers=4, seed=1), result, store, grid, progress=False)
    store.close()
