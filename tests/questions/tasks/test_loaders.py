"""Loaders read the real benchmark files in ../shared/data and a user's own files."""

import json

import pytest

from rnr_lens import RnrLensError
from rnr_lens.questions import tasks
from rnr_lens.questions.answers import canonical_number


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
    f.write_text('text,gold\nWhat is 2 + 2?,4\nWhat is 3 + 3?,"1,006"\n')
    t = tasks.get(str(f), question="text", answer="gold")
    assert [q.answer for q in t] == ["4", "1,006"]


def test_arc_style_multiple_choice(tmp_path):
    f = tmp_path / "arc.jsonl"
    nested = {
        "id": "n1",
        "question": {"stem": "Which is a metal?", "choices": [{"label": "A", "text": "wood"}, {"label": "B", "text": "iron"}]},
        "answerKey": "B",
    }
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
        ('{"q": "x"}\n', r"bad\.jsonl:1: missing field 'question'.*question='NAME'"),
        ("\n\n", "holds no records"),
        (
            '{"question": "What is \\ud800 1 + 1?", "answer": 2}\n',
            r"bad\.jsonl:1: its question holds a lone UTF-16 surrogate",
        ),  # issue 73: a traceback in the tokenizer
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


# -- the same loaders on small files in each real format, written here (a bare clone has no
# ../shared/data): layout and quirks copied from the real GSM8K test split and SVAMP.


def test_gsm8k_format_file(tmp_path):
    f = tmp_path / "gsm8k_sample.jsonl"
    records = [
        {
            "question": "Janet\u2019s ducks lay 16 eggs per day. She eats three. How many are left?",
            "answer": "She has 16 - 3 = <<16-3=13>>13 eggs.\n#### 13",
        },
        {
            "question": "A robe takes 2 bolts of blue fiber and half that much white fiber. How many bolts in total?",
            "answer": "It takes 2/2=<<2/2=1>>1 bolt of white fiber\nSo the total is 2+1=<<2+1=3>>3 bolts\n#### 3",
        },
        {"question": "Josh makes a profit of how much?", "answer": "He made 1,000 - 300 = <<1000-300=700>>700\n#### 1,700"},
    ]
    f.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    assert tasks.guess_format(f) == "gsm8k"
    t = tasks.get(str(f))
    assert len(t) == 3 and t.answer_type == "number" and t.name == "gsm8k_sample"
    assert t[0].prompt == records[0]["question"], "the question text is kept as is (curly quotes included)"
    assert [q.answer for q in t] == ["13", "3", "1,700"], "the gold is what follows the last '####'"
    assert canonical_number(t[2].answer) == "1700"
    assert t.ids == ["gsm8k_sample-1", "gsm8k_sample-2", "gsm8k_sample-3"], "ids name the file and line"


def test_svamp_format_file(tmp_path):
    f = tmp_path / "svamp_sample.json"
    records = [
        {
            "ID": "chal-1",
            "Body": "Each pack of dvds costs 76 dollars. If there is a discount of 25 dollars on each pack",
            "Question": "How much do you have to pay to buy each pack?",
            "Equation": "( 76.0 - 25.0 )",
            "Answer": 51.0,
            "Type": "Subtraction",
        },
        {
            "ID": "chal-2",
            "Body": " Dan had $ 3 left with him after he bought a candy bar. If he had $ 4 at the start ",
            "Question": "How much did the candy bar cost? ",
            "Equation": "( 4.0 - 3.0 )",
            "Answer": 1.0,
            "Type": "Subtraction",
        },
    ]
    f.write_text(json.dumps(records, indent=4))
    assert tasks.guess_format(f) == "svamp"
    t = tasks.get(str(f))
    assert t.ids == ["chal-1", "chal-2"]
    assert t[1].prompt == "Dan had $ 3 left with him after he bought a candy bar. If he had $ 4 at the start How much did the candy bar cost?"
    assert [canonical_number(q.answer) for q in t] == ["51", "1"], "float golds (51.0) compare as numbers"


def test_utf8_with_bom_and_latin1(tmp_path):
    f = tmp_path / "bom.jsonl"
    f.write_bytes("\ufeff".encode() + json.dumps({"question": "Caf\u00e9: 2 + 2?", "answer": "4"}).encode() + b"\n")
    assert tasks.get(str(f))[0].prompt == "Caf\u00e9: 2 + 2?", "a UTF-8 byte-order mark is not part of the first record"
    bad = tmp_path / "latin.jsonl"
    bad.write_bytes(b'{"question": "2 + 2?", "answer": "4"}\n' + '{"question": "Caf\u00e9?", "answer": "1"}\n'.encode("latin-1"))
    with pytest.raises(RnrLensError, match=r"latin\.jsonl:2: not UTF-8 text \(byte 0xe9\)"):
        tasks.get(str(bad))


def test_a_question_has_at_most_26_choices(tmp_path):
    """Issue 73: 1.2 million ARC choices ran past the letters (chr(65 + i)) into a traceback."""
    f = tmp_path / "arc.jsonl"
    f.write_text(json.dumps({"question": "q?", "choices": {"text": ["x"] * 27, "label": ["A"] * 27}, "answerKey": "A"}) + "\n")
    with pytest.raises(RnrLensError, match=r"arc\.jsonl:1: ARC choices need as many labels as texts, from 1 to 26"):
        tasks.get(str(f), format="arc")
    g = tmp_path / "mc.jsonl"
    g.write_text(json.dumps({"question": "q?", "answer": "A", "opts": ["x"] * 1_200_000}) + "\n")
    with pytest.raises(RnrLensError, match="holds 1,200,000 choices; a question has 1 to 26"):
        tasks.get(str(g), question="question", answer="answer", choices="opts", answer_type="choice")
