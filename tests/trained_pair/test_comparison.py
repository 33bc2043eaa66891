import pytest

import rnr_lens as R
from rnr_lens.trained_pair.comparison import STATES, compare

PROBES = ["sampling:k=3,t=1.0", "routes:k=2,edit_rate=0.6"]


@pytest.fixture(scope="module")
def pair(tiny):
    task = R.tasks.get("add-small", n=10)
    a = R.audit(tiny, task, PROBES, progress=False)
    b = R.audit(R.tiny_model(seed=1), task, PROBES, progress=False)
    return a, b


def test_deltas_are_paired_differences(pair):
    a, b = pair
    c = compare(a, b)
    for row in c.deltas.itertuples():
        assert row.delta_realized.value == pytest.approx(row.realized_b - row.realized_a)
        assert row.delta_reachable.value == pytest.approx(row.reachable_b - row.reachable_a)
        assert row.delta_reachable.low <= row.delta_reachable.value <= row.delta_reachable.high


def test_transitions_cover_every_question(pair):
    a, b = pair
    c = compare(a, b)
    counts = c.transition_counts(a.probes[0])
    assert counts.values.sum() == len(a.questions)
    assert list(counts.index) == list(STATES) == list(counts.columns)
    same = compare(a, a)
    for probe in a.probes:
        t = same.transition_counts(probe)
        assert (t.values.diagonal().sum()) == len(a.questions), "an audit compared with itself never moves"
    assert set(c.to_json()["transitions"][a.probes[0]]) >= {"newly reached", "lost reach"}
    # a short probe name resolves to the full one; an unknown one is an error, never an empty table
    assert c.transition_counts("sampling").equals(counts)
    assert c.questions("sampling", "unreachable", "realized") == c.questions(a.probes[0], "unreachable", "realized")
    with pytest.raises(R.RnrLensError, match="has no probe 'search'"):
        c.transition_counts("search")


def test_refuses_mismatched_audits(tiny, pair):
    a, _ = pair
    other = R.audit(tiny, R.tasks.get("add-small", n=10), ["sampling:k=2,t=1.0", "routes:k=2,edit_rate=0.6"], progress=False)
    with pytest.raises(R.RnrLensError, match="different probes or budgets"):
        compare(a, other)
    cfg = R.audit(tiny, R.tasks.get("add-small", n=10), PROBES, R.DeploymentConfig(max_new_tokens=5), progress=False)
    with pytest.raises(R.RnrLensError, match="deployment config"):
        compare(a, cfg)
    with pytest.raises(R.RnrLensError, match="task"):
        compare(a, R.audit(tiny, R.tasks.get("sub", n=10), PROBES, progress=False))


def test_cli_and_figure(tiny, tmp_path, capsys):
    from rnr_lens.cli import main
    from rnr_lens.present import viz

    db = tmp_path / "c.db"
    task = R.tasks.get("add-small", n=6)
    a = R.audit(tiny, task, PROBES, store=db, progress=False)
    b = R.audit(R.tiny_model(seed=1), task, PROBES, store=db, progress=False)
    assert main(["compare", str(db), "--a", a.id[:8], "--b", b.id[:8], "--json"]) == 0
    out = __import__("json").loads(capsys.readouterr().out)
    assert out["a"] == a.id and len(out["deltas"]) == 2
    assert main(["compare", str(db), "--a", a.id, "--b", b.id]) == 0
    assert "transitions under" in capsys.readouterr().out
    fig = viz.comparison(compare(a, b))
    assert [t.type for t in fig.data] == ["bar", "bar", "heatmap"]
    assert sum(map(sum, fig.data[2].z)) == len(task)


def test_an_unfinished_audit_is_compared_over_the_questions_complete_in_both(tmp_path, capsys):
    """A question an unfinished audit had not reached counted as wrong on its side."""
    from rnr_lens.cli import main
    from rnr_lens.core.records import Try
    from rnr_lens.measure.store import RunStore
    from tests.conftest import stored_record

    probe = "sampling:k=2,t=1.0,top_p=1.0"
    store = RunStore(tmp_path / "run.db")
    questions = [(i, f"q{i}", f"What is {i} + 1?", str(i + 1)) for i in range(10)]
    for aid, right in (("base", False), ("tuned", True)):
        store.create_audit(stored_record(aid, (probe,), 10), questions)
        store.add_tries(aid, [Try(f"q{i}", "default", 0, "x", str(i + 1) if right else "0", right, 1) for i in range(10)])
        done = range(10) if aid == "base" else range(9)  # the tuned audit stopped before q9's samples
        store.add_tries(aid, [Try(f"q{i}", probe, j, "x", str(i + 1), True, 1) for i in done for j in range(2)])
    store.set_status("base", "complete")
    a, b = R.AuditResult.load(store, "base"), R.AuditResult.load(store, "tuned")
    c = compare(a, b)
    (row,) = c.deltas.to_dict("records")
    assert row["n"] == 9 and c.excluded == {probe: 1}
    assert row["delta_reachable"].value == 0.0, "q9 is left out, not counted unreachable in the tuned audit"
    assert row["delta_realized"].value == 1.0 and row["delta_realized"].resolved == "above"
    assert c.transition_counts(probe).values.sum() == 9
    verdict = c.verdict(probe).verdict
    assert verdict.status == R.verdicts.UNRESOLVED, "realized rose, but 9 questions cannot show the ceiling flat within 0.05"
    assert main(["compare", str(tmp_path / "run.db"), "--a", "base", "--b", "tuned"]) == 0
    out = capsys.readouterr().out
    assert "1 question(s) not complete in both audits are left out" in out and "unresolved:" in out
