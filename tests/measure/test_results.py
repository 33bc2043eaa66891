"""An audit read back from its store: the summary's rows agree with the tries, and each row is
one typed :class:`~rnr_lens.measure.results.ProbeSummary` from the store to the JSON edge."""

import json

import numpy as np
import pytest

import rnr_lens as R
from rnr_lens.core.stats import pass_at_k
from rnr_lens.measure.audits import audit
from rnr_lens.measure.results import SELECTOR_COLUMN, ProbeSummary
from rnr_lens.questions import tasks


def test_aggregates_agree_with_the_tries(tiny_audit):
    q, tries = tiny_audit.questions, tiny_audit.tries
    default = tries[tries.probe == "default"].set_index("question_id")["correct"]
    assert q.set_index("question_id")["realized"].equals(default.reindex(q["question_id"]).rename("realized"))
    summary = tiny_audit.summary().set_index("probe")
    for probe in tiny_audit.probes:
        hits = tries[tries.probe == probe].groupby("question_id")["correct"].any()
        probe_row = summary.loc[tiny_audit.labels[probe]]
        assert probe_row["reachable"].value == pytest.approx(hits.mean())
        assert probe_row["select:oracle"].value == pytest.approx(hits.mean())
        assert probe_row["realized"].value == pytest.approx(default.mean())
        curve = tiny_audit.pass_at_k(probe)
        assert curve["pass_at_k"].iloc[-1] == pytest.approx(hits.mean())
        assert (np.diff(curve["pass_at_k"]) >= -1e-12).all()
        per_q = tries[tries.probe == probe].groupby("question_id")["correct"].agg(["size", "sum"])
        assert curve["pass_at_k"].iloc[0] == pytest.approx(np.mean([pass_at_k(n, c, 1) for n, c in per_q.values]))
        rnr = set(tiny_audit.reachable_not_realized(probe))
        assert rnr == set(hits[hits].index) - set(default[default].index)


def test_format_misses_are_counted_in_the_summary(tiny):
    """Answers like "2 + 8, which is 10." were scored wrong with nobody able to see why."""
    from rnr_lens.questions.answers import holds_gold

    result = audit(tiny, tasks.get("add-small", n=12), ["sampling:k=4,t=1.5"], progress=False)
    gold = result.questions.set_index("question_id")["gold"]
    for probe, name in ((None, "default"), (result.probes[0], result.probes[0])):
        wrong = result.tries[(result.tries.probe == name) & ~result.tries.correct]
        expected = sorted((t.question_id, t.try_index) for t in wrong.itertuples() if holds_gold(t.text, gold[t.question_id], "number"))
        got = sorted(zip(result.format_misses(probe).question_id, result.format_misses(probe).try_index))
        assert got == expected
    assert result.summary_records()[0]["format_misses"] == len(result.format_misses(result.probes[0]))
    assert "default_extracted" in result.questions


def test_chance_level_exposes_a_constant_guesser(tmp_path):
    """A route that answered "12" to 22 of 50 questions made random routes look four times better
    than sampling: any-try-correct rewards constant guessing unless shown beside chance."""
    from rnr_lens.core.records import Try
    from rnr_lens.measure.store import RunStore
    from tests.conftest import stored_record

    golds = ["12"] * 5 + ["3", "4", "5", "6", "7"]
    store = RunStore(tmp_path / "run.db")
    record = stored_record("guess", ("routes:k=2",), 10, config_json=R.DeploymentConfig().to_json())
    store.create_audit(record, [(i, f"q{i}", f"What is {i}?", g) for i, g in enumerate(golds)])
    store.add_tries("guess", [Try(f"q{i}", "default", 0, "0", "0", False, 1) for i in range(10)])
    store.add_tries("guess", [Try(f"q{i}", "routes:k=2", j, "12", "12", g == "12", 1, route="4:0-3") for i, g in enumerate(golds) for j in range(2)])
    store.set_status("guess", "complete")
    (row,) = R.AuditResult.load(store, "guess").summary_records()
    assert row["reachable"]["value"] == 0.5
    assert row["chance"]["value"] == pytest.approx(0.5, abs=0.03), "half of the other golds are 12 too"
    assert abs(row["above_chance"]["value"]) < 0.05 and row["above_chance"]["low"] < 0 < row["above_chance"]["high"]


def test_a_probe_summary_round_trips_through_json(tiny_audit):
    """Guards the JSON edge: the CLI's --json, the report and claims read back what was written."""
    for summary in tiny_audit.probe_summaries():
        again = ProbeSummary.from_dict(json.loads(json.dumps(summary.to_dict())))
        assert again.to_dict() == summary.to_dict()
        assert set(again.selectors) == set(R.selectors.names_for(summary.probe))


def test_the_table_and_the_records_are_the_same_rows(tiny_audit):
    """One owner of a probe's row: the DataFrame, the JSON records and the typed summaries agree."""
    table = tiny_audit.summary().set_index("probe")
    for summary, record in zip(tiny_audit.probe_summaries(), tiny_audit.summary_records()):
        row = table.loc[tiny_audit.labels[summary.probe]]
        assert row["reachable"] == summary.reachable and record["reachable"] == summary.reachable.to_dict()
        for name, estimate in summary.selectors.items():
            assert row[SELECTOR_COLUMN + name] == estimate
            assert record["selectors"][name] == estimate.to_dict()


def test_an_audit_without_probes_summarizes_realized_only(tiny):
    result = audit(tiny, tasks.get("add-small", n=6), [], progress=False)
    (summary,) = result.probe_summaries()
    assert summary.probe == "(none)" and summary.reachable is None and not summary.selectors
    assert summary.realized.value == pytest.approx(result.questions["realized"].mean())
    assert set(summary.to_dict()) == {"probe", "budget", "questions", "prompts", "realized"}


def test_a_probe_is_found_by_its_parsed_name_never_by_a_text_prefix(tiny, tmp_path):
    """Guards against the prefix lookup the grid once used: "sampling:k=1,t=0.7" is a text
    prefix of the t=0.75 probe's name, so an audit holding both answered for the wrong one."""
    result = audit(tiny, tasks.get("add-small", n=2), ["sampling:k=1,t=0.75", "sampling:k=1,t=0.7"], store=tmp_path / "a.db", progress=False)
    assert result.probe_name("sampling:k=1,t=0.7") == "sampling:k=1,t=0.7,top_p=1.0,draw=multinomial"
    assert result.probe_name("sampling:t=0.75,k=1") == "sampling:k=1,t=0.75,top_p=1.0,draw=multinomial"
    with pytest.raises(R.RnrLensError, match="ran 2 sampling probes; name one by its label sampling-1 "):
        result.probe_name("sampling")
    with pytest.raises(R.RnrLensError, match="has no probe 'sampling:k=2'"):
        result.probe_name("sampling:k=2")
    one = audit(tiny, tasks.get("add-small", n=2), ["routes:k=1"], store=tmp_path / "b.db", progress=False)
    assert one.probe_name("routes") == one.probes[0]
    assert result.probe_name("sampling-2") == "sampling:k=1,t=0.7,top_p=1.0,draw=multinomial"  # its short label
    assert result.column("sampling:t=0.7,k=1") == "reachable[sampling-2]"


def test_tables_name_each_probe_by_its_short_label_and_keep_the_spec_once(tiny_audit):
    """The questions table and the summary carry short labels (a full spec squeezed the text
    column); ``labels`` maps each full spec to its label, and every label names a column."""
    labels = tiny_audit.labels
    assert list(labels) == tiny_audit.probes and list(labels.values()) == ["sampling", "routes", "search"]
    assert tiny_audit.summary()["probe"].tolist() == ["sampling", "routes", "search"]
    assert not any(":" in c for c in tiny_audit.questions.columns)
    tries = tiny_audit.tries
    for spec, label in labels.items():
        hit = tries[(tries.probe == spec) & tries.correct].groupby("question_id")["try_index"].min()
        q = tiny_audit.questions.set_index("question_id")
        assert q[f"reachable[{label}]"].tolist() == [i in hit.index for i in q.index]
        assert q[tiny_audit.column(label, "first_hit")].dropna().astype(int).to_dict() == hit.to_dict()
        assert tiny_audit.probe_name(label) == spec
