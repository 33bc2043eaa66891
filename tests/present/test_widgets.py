"""Widgets on real results: controls drive what is shown."""

import html

import pandas as pd
import pytest

from rnr_lens.bottleneck import failures
from rnr_lens.bottleneck.miner import mine
from rnr_lens.measure.audits import audit
from rnr_lens.present import widgets
from rnr_lens.questions import tasks
from tests.planted import PLANTED, build_planted


@pytest.fixture(scope="module")
def sweep(tiny, tmp_path_factory):
    result, store = build_planted(tiny, tmp_path_factory.mktemp("w") / "w.db")
    return mine(tiny, failures.freeze(result, store, probe="ablation"), strategy="exhaustive", break_bound=1.0, progress=False)


def test_layer_explorer_follows_the_slider(sweep):
    box = widgets.layer_explorer(sweep)
    slider, figure, info = box.children
    assert slider.value == PLANTED.layer and f"data-layer='{PLANTED.layer}'" in info.value
    assert "repair 1.00" in info.value
    blocks = sorted({int(x) for t in figure.data if t.name == "screen" for x in t.x})
    assert "the bottleneck: held-out repair" in info.value, "why the bottleneck was chosen, and its n"
    assert list(slider.options) == blocks, "the slider and the chart cover the same blocks"
    selected = [s for s in figure.layout.shapes if s.name == "rnr-selected"]
    assert selected and {s.x0 for s in selected} == {PLANTED.layer - 0.5}
    slider.value = 0
    assert "data-layer='0'" in info.value and "repair 0.00" in info.value
    assert {s.x0 for s in figure.layout.shapes if s.name == "rnr-selected"} == {-0.5}, "the highlight follows"


def test_layer_explorer_shows_texts_beside_answers(sweep):
    info = widgets.layer_summary_html(sweep, PLANTED.layer)
    row = sweep.details[(sweep.details.layer == PLANTED.layer) & (sweep.details.set != "control")].iloc[0]
    assert "before: text -&gt; answer" in info
    assert html.escape(repr(str(row.before_text).strip())) in info, "the text the answer was extracted from"


@pytest.fixture(scope="module")
def small(tiny):
    return audit(tiny, tasks.get("add-small", n=5), ["sampling:k=3,t=1.0", "routes:k=2"], progress=False)


def test_audit_explorer_updates_with_k(small):
    box = widgets.audit_explorer(small)
    probe, selector, k = box.children[0].children
    search, sort = box.children[1].children
    figure, table = box.children[2], box.children[-1]
    assert k.max == 3 and "reached within k=1" in table.value
    assert [s.x0 for s in figure.layout.shapes if s.x0 == s.x1] == [1], "the figure marks k"
    k.value = 3
    assert "reached within k=3" in table.value
    assert [s.x0 for s in figure.layout.shapes if s.x0 == s.x1] == [3]
    selector.value = "majority"
    assert "<th" in table.value and "pick correct" in table.value
    for column in sort.options:  # every column sorts, whatever its values
        sort.value = column
        assert "<tr>" in table.value
    qid = small.questions.question_id.iloc[2]
    search.value = qid
    assert "(1 questions shown)" in table.value and qid in table.value
    search.value = ""
    unread = small.selections(probe.value, k=k.value)
    unread = unread[(unread.selector == selector.value) & unread.extracted.isna()]
    assert ("no answer" in table.value) == (not unread.empty) and "nan" not in table.value, "a pick the reader read nothing from says so"


def test_audit_explorer_picks_only_among_the_first_k_tries(small):
    """At k=1 a question not reached within one try showed the gold as its oracle pick."""
    at_1 = small.selections(small.probes[0], k=1)
    first = small.probe_tries(small.probes[0])
    first = first[first.try_index == 0].set_index("question_id")
    oracle = at_1[at_1.selector == "oracle"].set_index("question_id")
    for qid, pick in oracle.iterrows():
        want = first.loc[qid, "extracted"]
        assert (pick.extracted == want or (pd.isna(pick.extracted) and pd.isna(want))) and pick.correct == first.loc[qid, "correct"]


def test_question_explorer_drills_into_every_try(small):
    box = widgets.question_explorer(small)
    question, probe = box.children[0].children
    view = box.children[1]
    first = view.value
    question.value = small.questions.question_id.iloc[3]
    assert view.value != first and f"data-question='{question.value}'" in view.value
    tries = small.tries[small.tries.question_id == question.value]
    assert view.value.count("<tr>") == 1 + len(tries), "the default answer and every try of every probe"
    for t in tries.itertuples():
        assert html.escape(str(t.text).strip()) in view.value
    probe.value = small.probes[1]
    assert view.value.count("<tr>") == 1 + 1 + 2, "one probe: the default and its two routes"
    assert "4:" in view.value, "each route is shown"


def test_result_views_are_compact(small, sweep):
    view = small._repr_html_()
    assert "sampling" in view and "white-space:nowrap" in view and "sampling:k=3,t=1.0,top_p=1.0" in view
    assert "0.6666666666666666" not in repr(sweep.bottleneck) and repr(sweep.bottleneck).startswith("Bottleneck(mlp")
    assert "bottleneck" in sweep._repr_html_()


def test_a_try_with_no_answer_reads_no_answer(tiny):
    """The question explorer once showed "nan" where the extractor read nothing."""
    result = audit(tiny, tasks.get("add-small", n=12), ["sampling:k=2,t=1.0"], progress=False)
    unread = result.tries[result.tries["extracted"].isna()]
    assert len(unread), "the tiny model's text holds no number on some tries"
    page = widgets.question_html(result, unread["question_id"].iloc[0])
    assert "no answer" in page and ">nan<" not in page and "-> nan" not in page
