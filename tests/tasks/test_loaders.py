"""Loaders read the real benchmark files in ../shared/data and a user's own files."""

import json

import pytest

from rnr_lens import RnrLensError, tasks
from rnr_lens.answers import canonical_number


def test_gsm8k_real_file(shared_data):
    t = tasks.get(str(shared_data / "gsm8k_test.jsonl"))
    assert len(t) == 1319 and t.answer_type == "number"
    first = json.loads((shared_data / "gsm8k_test.jsonl").read_text().splitlines()[0])
    assert t[0].prompt == first["question"]
    assert t[0].answer == first["answer"].split("####")[-1].strip() == "18"
    assert all(canonical_number(q.answer) is not None for q in t)
    assert tasks.guess_format(shared_data / "gsm8k_test.jsonl") == "gsm8k"


def test_svamp_real_file(shared_data):
    t = tasks.get(str(shared_data / "svamp.json"))
    raw = json.loads((shared_data / "svamp.json").read_text())
    assert len(t) == len(raw) == 1000
    assert t[0].prompt == raw[0]["Body"].strip() + " " + raw[0]["Question"].strip()
    assert canonical_number(t[0].answer) == "51"
    assert t[0].id == raw[0]["ID"]


def test_generic_jsonl_with_field_mapping(tmp_path):
    f = tmp_path / "mine.jsonl"
    f.write_text("\n".join(json.dumps({"uid": f"u{i}", "q": f"What is {i} + 1?", "a": i + 1}) for i in range(3)))
    t = tasks.get(str(f), question="q", answer="a", id="uid")
    assert t.ids == ["u0", "u1", "u2"] and t[2].answer == "3"


def test_csv_with_field_mapping(tmp_path):
    f = tmp_path / "mine.csv"
    f.write_text("text,gold\nWhat is 2 + 2?,4\nWhat is 3 + 3?,\"1,006\"\n")
    t = tasks.get(str(f), question="text", answer="gold")
    assert [q.answer for q in t] == ["4", "1,006"]


def test_arc_style_multiple_choice(tmp_path):
    f = tmp_path / "arc.jsonl"
    nested = {"id": "n1", "question": {"stem": "Which is a metal?", "choices": [{"label": "A", "text": "wood"}, {"label": "B", "text": "iron"}]}, "answerKey": "B"}
    flat = {"id": "f1", "question": "Pick two.", "choices": {"text": ["1", "2", "3"], "label": ["1", "2", "3"]}, "answerKey": "2"}
    f.write_text(json.dumps(nested) + "\n" + json.dumps(flat) + "\n")
    t = tasks.get(str(f))
    assert t.answer_type == "choice"
    assert t[0].answer == "B" and t[0].choices == ("wood", "iron") and "B. iron" in t[0].prompt
    assert t[1].answer == "B", "numeric labels become letters"


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"question": "x", "answer": "#### 3"}\n{not json\n', r"bad\.jsonl:2: not valid JSON"),
        ('{"question": "x", "answer": "1 #### 3"}\n{"answer": "#### 4"}\n', r"bad\.jsonl:2: missing field 'question'"),
        ('{"question": "x", "answer": "#### three"}\n', r"bad\.jsonl:1: gold answer 'three' cannot be read as a number"),
        ('{"q": "x"}\n', r"bad\.jsonl:1: missing field 'question'.*--field"),
        ("\n\n", "holds no records"),
    ],
)
def test_bad_files_name_the_file_and_line(tmp_path, content, message):
    f = tmp_path / "bad.jsonl"
    f.write_text(content)
    with pytest.raises(RnrLensError, match=message) as info:
        tasks.get(str(f))
    assert "\n" not in str(info.value)


def test_missing_file_and_unknown_format(tmp_path):
    with pytest.raises(RnrLensError, match="does not exist"):
        tasks.get(str(tmp_path / "nope.jsonl"))
    f = tmp_path / "x.jsonl"
    f.write_text('{"question": "a", "answer": "1"}\n')
    with pytest.raises(RnrLensError, match="unknown task format"):
        tasks.load_file(f, format="xml")
