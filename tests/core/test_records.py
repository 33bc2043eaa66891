"""Records: the typed rows round-trip through the dicts the store keeps."""

from rnr_lens.core.records import AuditRecord, Outcome, Try, try_from_row


def test_outcome_round_trips_and_reads_rows_without_a_set():
    o = Outcome("q7", "The answer is 8.", "8", True, "heldout")
    assert Outcome.from_dict(o.to_dict()) == o and o.to_dict()["extracted"] == "8"  # one name with Try.extracted
    # an audit's default answers carry no failure-set part; stores of before the rename say "answer"
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


def test_an_audit_status_is_one_type_that_round_trips_through_its_stored_string():
    """Guards against the free string it was: a status compared with a misspelled literal, or
    a partial status built by hand beside the completeness rule."""
    import pytest

    from rnr_lens.core.records import COMPLETE, RUNNING, AuditState, AuditStatus
    from rnr_lens.errors import RnrLensError

    for status in (RUNNING, COMPLETE, AuditStatus.of_shards(["0/3", "1/3", "1/2"])):
        assert AuditStatus.parse(str(status)) == status
    assert str(AuditStatus.of_shards(["0/3", "2/3", "1/2"])) == "partial (1/2, 2/3 shards)"
    assert AuditStatus.of_shards(["1/3", "0/1"]) == COMPLETE and COMPLETE.complete and not RUNNING.complete
    record = AuditRecord(
        "a" * 64, "m", "f" * 64, "add-small", "t" * 64, "number", "c" * 16, "{}", ("sample:k=2",), 0, 12, status="partial (1/3 shards)"
    )
    assert record.status.state is AuditState.PARTIAL and record.to_dict()["status"] == "partial (1/3 shards)"
    with pytest.raises(RnrLensError, match="is not running, complete or 'partial"):
        AuditStatus.parse("done")
