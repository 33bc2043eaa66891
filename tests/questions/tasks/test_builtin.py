import pytest

from rnr_lens import RnrLensError
from rnr_lens.questions import tasks
from rnr_lens.questions.tasks.builtin import BUILTINS


@pytest.mark.parametrize("name", list(BUILTINS))
def test_builtins_are_deterministic_and_splits_disjoint(name):
    a = tasks.get(name, n=20, seed=3)
    b = tasks.get(name, n=20, seed=3)
    assert a == b and a.fingerprint() == b.fingerprint()
    assert tasks.get(name, n=20, seed=4).ids != a.ids
    train = tasks.get(name, n=20, seed=3, split="train")
    assert not set(a.ids) & set(train.ids)


@pytest.mark.parametrize("name", list(BUILTINS))
def test_builtin_answers_are_right(name):
    for q in tasks.get(name, n=15, seed=1):
        item = q.metadata["item"]
        if name == "word-problems":
            kind, a, b = item[:3]
            expected = [a + b, a - b, a * b][kind]
        elif name == "two-step":
            expected = item[0] + item[1] - item[2]
        elif name == "sub":
            expected = item[0] - item[1]
        elif name == "mul":
            expected = item[0] * item[1]
        else:
            expected = item[0] + item[1]
        assert q.answer == str(expected)
        operand = item[1] if name == "word-problems" else item[0]
        assert str(operand) in q.prompt


def test_add_small_is_single_digit_addition():
    t = tasks.get("add-small")
    assert len(t) == 40
    assert all(q.prompt.startswith("What is ") and 0 <= int(q.answer) <= 18 for q in t)


def test_bad_builtin_requests():
    with pytest.raises(RnrLensError, match="unknown task"):
        tasks.get("add-huge")
    with pytest.raises(RnrLensError, match="ask for n between 1 and"):
        tasks.get("add-small", n=1000)
    with pytest.raises(RnrLensError, match="split must be"):
        tasks.get("add-small", split="dev")
    with pytest.raises(RnrLensError, match="split must be"):
        tasks.split_size("add-small", "dev")
    with pytest.raises(RnrLensError, match="unknown built-in task 'add-huge'"):
        tasks.split_size("add-huge")


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_split_sizes_count_each_split_and_add_up_to_the_item_space(name):
    test, train = tasks.split_size(name), tasks.split_size(name, "train")
    assert test == len(tasks.get(name, n="all").questions)
    assert test + train == len(list(BUILTINS[name].items()))
