"""Re-grading a report's evidence under another reader, with no model: on the committed
default grid (real tries of SmolLM2 and Gemma) and on hand-altered copies of it."""

import copy
import json
from pathlib import Path

import pytest

from rnr_lens.deploy import DeploymentConfig
from rnr_lens.errors import RnrLensError
from rnr_lens.evidence import MINED, read
from rnr_lens.miner import SweepKey
from rnr_lens.records import DEFAULT_PROBE, TRY_COLUMNS, AuditRecord, audit_key
from rnr_lens.regrade import regrade
from rnr_lens.shards import Shard
from rnr_lens.tasks.core import Question

EVIDENCE = Path(__file__).resolve().parents[1] / "assets" / "results" / "grid-default" / "evidence.json.gz"
TEXT, EXTRACTED, CORRECT, PROBE = (TRY_COLUMNS.index(c) for c in ("text", "extracted", "correct", "probe"))


@pytest.fixture(scope="module")
def document():
    return read(EVIDENCE)


def _config(payload) -> DeploymentConfig:
    return DeploymentConfig.from_json(payload["audit"]["config_json"])


def _only(document, config_hash):
    """The evidence cut to the audits (and settings) of one deployment config."""
    audits = [a for a in document["audits"] if a["audit"]["config_hash"] == config_hash]
    ids = {a["audit"]["id"] for a in audits}
    settings = [s for s in document["manifest"]["settings"] if s["audit"] in ids]
    return {**document, "audits": audits, "manifest": {**document["manifest"], "settings": settings}}


def test_regrading_under_the_recorded_config_changes_nothing(document):
    configs = {a["audit"]["config_hash"]: _config(a) for a in document["audits"]}
    assert len(configs) == 2, "SmolLM2 in its chat template, Gemma (a base model) in raw text"
    for config_hash, recorded in configs.items():
        part = _only(document, config_hash)
        again = regrade(part, recorded)
        assert again.document == part
        assert all(a.readings_changed == a.correct_changed == 0 and a.old_id == a.new_id for a in again.audits)
        assert not again.dropped and {a.mined for a in again.audits} <= {"kept", "none"}
    with pytest.raises(RnrLensError, match=r"generated under another deployment \(chat differ\)"):
        regrade(document, configs[document["audits"][0]["audit"]["config_hash"]])  # SmolLM2's chat config cannot read Gemma's raw runs


def test_every_try_is_read_again_and_a_mined_stage_stays_only_where_nothing_it_read_moved(document):
    regraded = regrade(document, None)
    assert len(regraded.audits) == len(document["audits"]) and sum(a.correct_changed for a in regraded.audits) > 0
    renamed = {a.old_id: a.new_id for a in regraded.audits}
    for before, after, summary in zip(document["audits"], regraded.document["audits"], regraded.audits):
        record = AuditRecord.from_dict(after["audit"])
        old = _config(before)  # today's default for the run's answer type and template: another reader, the same generation
        new = DeploymentConfig.default_for(record.answer_type, chat=old.chat)
        assert new.extractor != old.extractor and new.generation() == old.generation()
        assert record.config_hash == new.hash() and record.config_json == new.to_json()
        assert record.id == audit_key(record.model_fingerprint, record.task_fingerprint, new.hash(), record.probes, record.seed) == summary.new_id
        gold = {q[0]: Question(q[0], q[2], q[3]) for q in after["questions"]}
        moved = set()
        for old_row, row in zip(before["tries"], after["tries"]):
            assert [v for i, v in enumerate(row) if i not in (EXTRACTED, CORRECT)] == [
                v for i, v in enumerate(old_row) if i not in (EXTRACTED, CORRECT)
            ], "a try's text, seed, route and scores never move"
            extracted, correct = new.read_with(new.extractor, row[TEXT], gold[row[0]], record.answer_type)
            assert (row[EXTRACTED], row[CORRECT]) == (extracted, int(correct))
            if row[CORRECT] != old_row[CORRECT]:
                moved.add(row[PROBE])
        assert summary.correct_changed == sum(a[CORRECT] != b[CORRECT] for a, b in zip(before["tries"], after["tries"]))
        kinds = {a[0] for a in after["artifacts"]}
        sets = [json.loads(a[2]) for a in before["artifacts"] if a[0] == "failure_set"]
        if not sets:
            assert summary.mined == "none"
            continue
        chooses = {DEFAULT_PROBE, sets[0]["definition"]["probe"]}
        if moved & chooses:
            assert summary.mined == "dropped" and not kinds & {"failure_set", "sweep", "sweep_eval", "null"}
        else:  # the same failure set: its evaluations kept, read again and under the new config's key
            assert "failure_set" in kinds and summary.mined in ("kept", "dropped")
            for kind, name, body, _ in after["artifacts"]:
                if kind == "sweep_eval":
                    assert SweepKey.parse(name).config == new.hash()
                    for row in json.loads(body):
                        text = row["text"]
                        assert row["correct"] == new.read_with(new.extractor, text, gold[row["question_id"]], record.answer_type)[1]
            assert (summary.mined == "kept") == ({"sweep", "null"} <= kinds)
    dropped = {a.new_id for a in regraded.dropped}
    assert dropped, "the default grid has a failure set the new reader moves (SmolLM2 on sub)"
    for s_before, s_after in zip(document["manifest"]["settings"], regraded.document["manifest"]["settings"]):
        assert s_after["audit"] == renamed[s_before["audit"]]
        assert (MINED in s_after["stages"]) == (MINED in s_before["stages"] and s_after["audit"] not in dropped)


def test_a_config_that_generates_otherwise_or_a_probe_that_reads_answers_is_refused(document):
    with pytest.raises(RnrLensError, match=r"generated under another deployment \(max_new_tokens differ\).*extractor, version"):
        regrade(document, DeploymentConfig(max_new_tokens=8))
    steered = copy.deepcopy(document)
    steered["audits"][0]["audit"]["probes"].append("search:k=8,reward=oracle")
    with pytest.raises(RnrLensError, match=r"chose its routes by reading answers.*re-run the audit"):
        regrade(steered, None)


@pytest.mark.parametrize("reference", ["[]", '["What is 6/3? The answer is', ""])
def test_a_sweep_key_reads_back_from_its_name(reference):
    key = SweepKey("report", "7de65c068feb8c71", "96c082f09104ef35", reference, "mlp4:zero")
    assert SweepKey.parse(str(key)) == key
    sharded = key.of(None, Shard(1, 3))
    assert SweepKey.parse(str(sharded)) == sharded
    with pytest.raises(RnrLensError, match="is not a sweep evaluation's name"):
        SweepKey.parse("sweep/report/not-a-hash/96c082f09104ef35/[]/clean")
