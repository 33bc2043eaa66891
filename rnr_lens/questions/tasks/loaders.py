"""Loaders for real benchmark formats.

- GSM8K jsonl (``question``, ``answer`` with the gold after ``#### ``);
- SVAMP json (a list; question = ``Body`` + " " + ``Question``, gold ``Answer``);
- ARC-style multiple choice jsonl (``question.stem`` + ``question.choices`` + ``answerKey``,
  or the flat ``question`` + ``choices.text/label`` + ``answerKey`` layout);
- any jsonl or csv with a field mapping (``question=``, ``answer=``, optional ``id=``,
  ``choices=``).

The format is guessed from the first record and can be forced. Every error names the file
and the line (or record) and says how to fix it.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rnr_lens.core.files import read_text
from rnr_lens.core.untrusted import QUESTION_CHARS, TASK_BYTES, check_text, loads_json, quoted
from rnr_lens.errors import RnrLensError, arg
from rnr_lens.questions.answers import canonical_gold
from rnr_lens.questions.tasks.core import Question, Task

MAX_CHOICES = 26
"""The most choices a question may have: one letter each, A to Z (ARC has up to 5, MMLU 4)."""

FORMATS = ("gsm8k", "svamp", "arc", "jsonl", "csv")


def _records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line or record number, record) for a jsonl, json-list or csv file."""
    if path.stat().st_size > TASK_BYTES.value:
        raise TASK_BYTES.refusal(path)
    text = read_text(path)
    if path.suffix == ".csv":
        csv.field_size_limit(max(csv.field_size_limit(), 2 * QUESTION_CHARS.value))  # the question cap decides, not csv's own
        try:
            for i, row in enumerate(csv.DictReader(text.splitlines()), start=2):
                yield i, row
        except csv.Error as exc:
            raise RnrLensError(f"{path}: not a CSV file rnr_lens can read ({quoted(str(exc))}); fix it or give a jsonl file") from None
        return
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise RnrLensError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg}); fix the file or give a jsonl file") from None
        except (ValueError, RecursionError):  # nested too deep, a number too long: the bounded reader says which
            data = loads_json(text, path)
        if not isinstance(data, list):
            raise RnrLensError(f"{path} holds a JSON {type(data).__name__}, not a list of records")
        for i, record in enumerate(data, start=1):
            if not isinstance(record, dict):
                raise RnrLensError(f"{path}: record {i} is not a JSON object")
            yield i, record
        return
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise RnrLensError(f"{path}:{i}: not valid JSON ({exc.msg}); fix or delete that line") from None
        except (ValueError, RecursionError):
            record = loads_json(line, f"{path}:{i}")
        if not isinstance(record, dict):
            raise RnrLensError(f"{path}:{i}: each line must be a JSON object")
        yield i, record


def guess_format(path: Path) -> str:
    """Guess a file's format from its first record."""
    if path.suffix == ".csv":
        return "csv"
    for _, record in _records(path):
        if "Body" in record and "Question" in record and "Answer" in record:
            return "svamp"
        if "answerKey" in record:
            return "arc"
        if isinstance(record.get("answer"), str) and "####" in record["answer"]:
            return "gsm8k"
        return "jsonl"
    raise RnrLensError(f"{path} holds no records; a task needs at least one question")


def _field(path: Path, where: int, record: dict[str, Any], name: str, hint: str) -> Any:
    if name not in record or record[name] in (None, ""):
        raise RnrLensError(f"{path}:{where}: missing field {name!r}; {hint}")
    return record[name]


def load_file(
    path: str | Path,
    format: str | None = None,
    *,
    name: str | None = None,
    question: str = "question",
    answer: str = "answer",
    id: str | None = None,
    choices: str | None = None,
    answer_type: str | None = None,
) -> Task:
    """Load a task from a file (format guessed unless given).

    Args:
        path: A .jsonl, .json or .csv file.
        format: One of ``gsm8k``, ``svamp``, ``arc``, ``jsonl``, ``csv``.
        name: Task name (default: the file's stem).
        question, answer, id, choices: Field names for the generic jsonl/csv formats.
        answer_type: ``number``, ``choice`` or ``string`` for generic files (default: number,
            or choice when a choices field is given).
    """
    path = Path(path)
    if not path.is_file():
        raise RnrLensError(f"task file {path} does not exist; check the path")
    format = format or guess_format(path)
    if format not in FORMATS:
        raise RnrLensError(f"unknown task format {format!r}; use one of {', '.join(FORMATS)}")
    name = name or path.stem
    hint = f"pass the field names ({arg('question_field', 'NAME')}, {arg('answer_field', 'NAME')})"
    questions: list[Question] = []
    answer_type = answer_type or ("choice" if format == "arc" or choices else "number")
    options: tuple[str, ...]
    for where, rec in _records(path):
        meta = {"source": str(path), "line": where}
        if format == "gsm8k":
            text = _field(path, where, rec, "question", "GSM8K lines need 'question' and 'answer'")
            raw = str(_field(path, where, rec, "answer", "GSM8K lines need 'question' and 'answer'"))
            if "####" not in raw:
                raise RnrLensError(f"{path}:{where}: the GSM8K answer has no '#### N' gold marker")
            gold, qid, options = raw.rsplit("####", 1)[1].strip(), f"{name}-{where}", ()
        elif format == "svamp":
            body = _field(path, where, rec, "Body", "SVAMP records need Body, Question and Answer")
            ask = _field(path, where, rec, "Question", "SVAMP records need Body, Question and Answer")
            text = f"{str(body).strip()} {str(ask).strip()}"
            gold = str(_field(path, where, rec, "Answer", "SVAMP records need Body, Question and Answer"))
            qid, options = str(rec.get("ID") or f"{name}-{where}"), ()
        elif format == "arc":
            q = _field(path, where, rec, "question", "ARC records need question and answerKey")
            try:
                if isinstance(q, dict):
                    text, raw_choices = q.get("stem", ""), q.get("choices", [])
                    labels = [str(c["label"]) for c in raw_choices]
                    texts = [str(c["text"]) for c in raw_choices]
                else:
                    text = q
                    c = _field(path, where, rec, "choices", "flat ARC records need a choices field with text and label")
                    labels, texts = [str(x) for x in c["label"]], [str(x) for x in c["text"]]
            except (KeyError, TypeError, AttributeError):
                raise RnrLensError(
                    f"{path}:{where}: ARC choices must be a list of {{label, text}} objects, or {{label: [...], text: [...]}}; fix the record"
                ) from None
            if len(labels) != len(texts) or not 1 <= len(labels) <= MAX_CHOICES:
                raise RnrLensError(f"{path}:{where}: ARC choices need as many labels as texts, from 1 to {MAX_CHOICES} (A to Z)")
            gold = str(_field(path, where, rec, "answerKey", "ARC records need an answerKey"))
            # number-labelled sets (1-4) become letters
            letters = [chr(ord("A") + i) for i in range(len(labels))]
            if gold in labels:
                gold = letters[labels.index(gold)]
            options = tuple(texts)
            text = text.strip() + "\n" + "\n".join(f"{letter}. {t}" for letter, t in zip(letters, texts))
            qid = str(rec.get("id") or f"{name}-{where}")
        else:
            text = _field(path, where, rec, question, hint)
            gold = str(_field(path, where, rec, answer, hint))
            qid = str(rec[id]) if id and rec.get(id) not in (None, "") else f"{name}-{where}"
            options = ()
            if choices:
                raw = _field(path, where, rec, choices, hint)
                listed = loads_json(raw, f"{path}:{where}: the {choices} field") if isinstance(raw, str) else raw
                if not isinstance(listed, list):
                    raise RnrLensError(f"{path}:{where}: the {choices} field must be a list of choices, got {quoted(listed)}")
                if not 1 <= len(listed) <= MAX_CHOICES:
                    raise RnrLensError(
                        f"{path}:{where}: the {choices} field holds {len(listed):,} choices; a question has 1 to {MAX_CHOICES} (A to Z)"
                    )
                options = tuple(str(o) for o in listed)
                text = str(text).strip() + "\n" + "\n".join(f"{chr(65 + i)}. {t}" for i, t in enumerate(options))
        if len(str(text)) > QUESTION_CHARS.value or len(gold) > QUESTION_CHARS.value:
            raise QUESTION_CHARS.refusal(f"{path}:{where}")
        for value, what in ((str(text), "question"), (gold, "gold answer"), (qid, "question id")):
            check_text(value, f"{path}:{where}: its {what}")  # a lone surrogate is not text (issue 73: a traceback in the tokenizer)
        try:
            readable = canonical_gold(gold, answer_type) is not None
        except ValueError:  # a number too long for Python to read
            readable = False
        if not readable:
            raise RnrLensError(
                f"{path}:{where}: gold answer {quoted(gold)} cannot be read as a {answer_type} answer; fix it or load the file with answer_type='string'"
            )
        questions.append(Question(qid, str(text), gold, options, meta))
    if not questions:
        raise RnrLensError(f"{path} holds no questions")
    return Task(name, tuple(questions), answer_type, str(path))
