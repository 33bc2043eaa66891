"""Records: the typed rows round-trip through the dicts the store keeps."""

from rnr_lens.records import AuditRecord, Outcome, Try, try_from_row


def test_outcome_round_trips_and_reads_rows_without_a_set():
    o = Outcome("q7", "The answer is 8.", "8", True, "heldout")
    assert Outcome.from_dict(o.to_dict()) == o
    # an audit's default answers carry no failure-set part
    assert Outcome.from_dict({"question_id": "q7", "text": "t", "answer": None, "correct": 0}) == Outcome("q7", "t", None, False, "")


def test_audit_record_reads_the_store_row_form():
    record = AuditRecord("a" * 64, "m", "f" * 64, "add-small", "t" * 64, "number", "c" * 16, "{}", ("sample:k=2",), 0, 12)
    assert AuditRecord.from_dict(record.to_dict()) == record
    row = {**record.to_dict(), "probes_json": '["sample:k=2"]'}
    del row["probes"]
    assert AuditRecord.from_dict(row).probes == ("sample:k=2",)


def test_try_from_a_dataframe_row_turns_nan_into_none():
    row = {**Try("q1", "default", 0, "x", "3", True, 4).__dict__, "seed": float("nan"), "correct": 1}
    t = try_from_row(row)
    assert t.seed is None and t.correct is True
