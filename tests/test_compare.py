import pytest

import rnr_lens as R
from rnr_lens.compare import STATES, compare

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
    from rnr_lens import viz
    from rnr_lens.cli import main

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
