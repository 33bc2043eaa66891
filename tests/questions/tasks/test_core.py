import pytest

from rnr_lens import RnrLensError
from rnr_lens.questions import tasks
from rnr_lens.questions.tasks import Question, Task


def _task(n=10, answer_type="number"):
    answers = ["A", "B"] if answer_type == "choice" else None
    qs = [Question(f"q{i}", f"question {i}", answers[i % 2] if answers else str(i)) for i in range(n)]
    return Task("t", tuple(qs), answer_type)


def test_first_sample_subset():
    t = _task()
    assert t.first(3).ids == ["q0", "q1", "q2"]
    s = t.sample(4, seed=1)
    assert s == t.sample(4, seed=1) and len(s) == 4
    assert s.ids == [i for i in t.ids if i in s.ids], "sampled questions keep their order"
    assert t.subset(["q5", "q2"]).ids == ["q5", "q2"]


def test_split_is_disjoint_seeded_and_stratified():
    t = _task(20, "choice")
    a, b = t.split(seed=0)
    assert set(a.ids).isdisjoint(b.ids) and len(a) + len(b) == 20
    assert (a, b) == t.split(seed=0)
    assert a.ids != t.split(seed=1)[0].ids
    assert sum(q.answer == "A" for q in a) == sum(q.answer == "B" for q in a) == 5


def test_task_validation():
    with pytest.raises(RnrLensError, match="has no questions"):
        Task("empty", ())
    with pytest.raises(RnrLensError, match="two questions with id"):
        Task("dup", (Question("a", "x", "1"), Question("a", "y", "2")))
    with pytest.raises(RnrLensError, match="unknown answer type"):
        Task("t", (Question("a", "x", "1"),), "float")
    with pytest.raises(RnrLensError, match="cannot take 11"):
        _task().first(11)
    with pytest.raises(RnrLensError, match="too few to split"):
        _task(1).split()


def test_fingerprint_changes_with_content():
    assert _task().fingerprint() != _task(9).fingerprint()
    assert tasks.get("add-small").fingerprint() == tasks.get("add-small").fingerprint()
