"""Re-grading a report's evidence under another reader, with no model: on the committed
default grid (real tries of SmolLM2 and Gemma) and on hand-altered copies of it."""

import copy
import json
from pathlib import Path

import pytest

from rnr_lens.bottleneck.miner import SweepKey
from rnr_lens.core.records import TRY_COLUMNS, AuditRecord, Outcome, audit_key
from rnr_lens.core.shards import Shard
from rnr_lens.errors import RnrLensError
from rnr_lens.grids.regrade import regrade
from rnr_lens.measure.evidence import MINED, read
from rnr_lens.questions.deploy import DeploymentConfig
from rnr_lens.questions.tasks.core import Question

EVIDENCE = Path(__file__).resolve().parents[2] / "assets" / "results" / "grid-default" / "evidence.json.gz"
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
    chat, raw = [c for c in configs.values() if c.chat], [c for c in configs.values() if not c.chat]
    assert len(chat) == 1 and chat[0].shots is None and raw and all(c.shots is not None for c in raw), (
        "SmolLM2 zero-shot in its chat template; Gemma (a base model) few-shot in raw text, each task its own worked examples"
    )
    for config_hash, recorded in configs.items():
        part = _only(document, config_hash)
        again = regrade(part, recorded)
        assert again.document == part
        assert all(a.readings_changed == a.correct_changed == 0 and a.old_id == a.new_id for a in again.audits)
        assert not again.dropped and {a.mined for a in again.audits} <= {"kept", "none"}
    with pytest.raises(RnrLensError, match=r"generated under another deployment \(chat"):
        regrade(document, configs[document["audits"][0]["audit"]["config_hash"]])  # SmolLM2's chat config cannot read Gemma's raw runs


def _at_version_3(document):
    """The committed evidence read back under version 3's reader, config by config: evidence as
    the grids were first committed (a few-shot config keeps its worked examples and version 5,
    which shots need)."""
    parts = []
    for config_hash in dict.fromkeys(a["audit"]["config_hash"] for a in document["audits"]):
        part = _only(document, config_hash)
        recorded = _config(part["audits"][0])
        old = DeploymentConfig(chat=recorded.chat, extractor="concluding-token", version=3 if recorded.shots is None else 5, shots=recorded.shots)
        parts.append(regrade(part, old, mined_probe=SAMPLING).document)
    audits = [a for p in parts for a in p["audits"]]
    by_task = {(s["model"], s["task"]): s for p in parts for s in p["manifest"]["settings"]}
    settings = [by_task[(s["model"], s["task"])] for s in document["manifest"]["settings"]]
    return {**document, "audits": audits, "manifest": {**document["manifest"], "settings": settings}}


SAMPLING = "sampling:k=8,t=0.7,top_p=1.0,draw=multinomial"
"""The default grid's sampling probe, under which its failure sets are chosen."""


def test_every_try_is_read_again_and_a_mined_stage_stays_only_where_nothing_it_read_moved(document):
    before_doc = _at_version_3(document)
    regraded = regrade(before_doc, None, mined_probe=SAMPLING)
    assert len(regraded.audits) == len(document["audits"]) and sum(a.correct_changed for a in regraded.audits) > 0
    renamed = {a.old_id: a.new_id for a in regraded.audits}
    for before, after, summary in zip(before_doc["audits"], regraded.document["audits"], regraded.audits):
        record = AuditRecord.from_dict(after["audit"])
        old = _config(before)  # today's default for the run's answer type and template: another reader, the same generation
        new = DeploymentConfig.default_for(record.answer_type, chat=old.chat).with_(shots=old.shots)  # an audit keeps its shots
        assert new.extractor != old.extractor and new.generation() == old.generation()
        assert record.config_hash == new.hash() and record.config_json == new.to_json()
        assert record.id == audit_key(record.model_fingerprint, record.task_fingerprint, new.hash(), record.probes, record.seed) == summary.new_id
        gold = {q[0]: Question(q[0], q[2], q[3]) for q in after["questions"]}
        for old_row, row in zip(before["tries"], after["tries"]):
            assert [v for i, v in enumerate(row) if i not in (EXTRACTED, CORRECT)] == [
                v for i, v in enumerate(old_row) if i not in (EXTRACTED, CORRECT)
            ], "a try's text, seed, route and scores never move"
            extracted, correct = new.read_with(new.extractor, row[TEXT], gold[row[0]], record.answer_type)
            assert (row[EXTRACTED], row[CORRECT]) == (extracted, int(correct))
        assert summary.correct_changed == sum(a[CORRECT] != b[CORRECT] for a, b in zip(before["tries"], after["tries"]))
        kinds = {a[0] for a in after["artifacts"]}
        sets_before = [a for a in before["artifacts"] if a[0] == "failure_set"]
        if summary.mined == "kept":  # the same frozen sets, byte for byte, and every evaluation read as it was
            assert sets_before == [a for a in after["artifacts"] if a[0] == "failure_set"]
            assert [a[2] for a in before["artifacts"] if a[0] == "sweep_eval"] == [a[2] for a in after["artifacts"] if a[0] == "sweep_eval"]
        for kind, name, body, _ in after["artifacts"]:
            if kind == "sweep_eval":  # every kept evaluation read again, under the new config's key
                assert SweepKey.parse(name).config == new.hash()
                for o in (Outcome.from_dict(r) for r in json.loads(body)):
                    assert (o.extracted, o.correct) == new.read_with(new.extractor, o.text, gold[o.question_id], record.answer_type)
        if summary.mined == "dropped":
            assert summary.reason and not kinds & {"sweep", "null"}
    for s_before, s_after in zip(before_doc["manifest"]["settings"], regraded.document["manifest"]["settings"]):
        dropped = {a.new_id for a in regraded.dropped}
        assert s_after["audit"] == renamed[s_before["audit"]]
        assert (MINED in s_after["stages"]) == (MINED in s_before["stages"] and s_after["audit"] not in dropped)


def _sub(document):
    """SmolLM2 on `sub` alone (it has a failure set), as a one-setting evidence document."""
    (payload,) = [a for a in document["audits"] if a["audit"]["model"] == "smollm2-135m-instruct" and a["audit"]["task"] == "sub"]
    settings = [s for s in document["manifest"]["settings"] if s["audit"] == payload["audit"]["id"]]
    return {**document, "audits": [copy.deepcopy(payload)], "manifest": {**document["manifest"], "settings": settings}}


def test_a_failure_set_that_the_new_reader_moves_drops_its_whole_stage(document):
    """Hand-altered tries: a discovery failure no longer reached under sampling changes the set
    the same definition freezes, so nothing mined on the old set stands."""
    doc = _sub(document)
    payload = doc["audits"][0]
    body = json.loads(next(a[2] for a in payload["artifacts"] if a[0] == "failure_set"))
    lost = body["discovery"][0]
    for row in payload["tries"]:
        if row[0] == lost and row[PROBE] == body["definition"]["probe"]:
            row[TEXT] = "nothing."
    (summary,) = regrade(doc, _config(payload), mined_probe=SAMPLING).audits
    assert summary.mined == "dropped" and "holds other questions" in summary.reason
    after = regrade(doc, _config(payload), mined_probe=SAMPLING).document
    assert not {a[0] for a in after["audits"][0]["artifacts"]} & {"failure_set", "sweep", "sweep_eval", "null"}
    assert MINED not in after["manifest"]["settings"][0]["stages"]


def test_a_setting_mined_without_a_set_is_mined_again_where_the_new_reader_gives_it_one(document):
    """Gemma on add-two-digit had one reachable-not-realized question, too few for a set (its
    setting is mined, with no set). Reading a second one as reached makes a set freezable."""
    (payload,) = [a for a in document["audits"] if a["audit"]["model"] == "gemma3-270m" and a["audit"]["task"] == "add-two-digit"]
    settings = [s for s in document["manifest"]["settings"] if s["audit"] == payload["audit"]["id"]]
    doc = {**document, "audits": [copy.deepcopy(payload)], "manifest": {**document["manifest"], "settings": settings}}
    payload = doc["audits"][0]
    assert MINED in settings[0]["stages"] and not [a for a in payload["artifacts"] if a[0] == "failure_set"]
    unchanged = regrade(doc, _config(payload), mined_probe=SAMPLING)
    assert unchanged.audits[0].mined == "kept"
    gold = {q[0]: q[3] for q in payload["questions"]}
    reached = {r[0] for r in payload["tries"] if r[PROBE] == SAMPLING and r[CORRECT]}
    realized = {r[0] for r in payload["tries"] if r[PROBE] == "default" and r[CORRECT]}
    fresh = [q for q in gold if q not in reached | realized][:2]
    for row in payload["tries"]:
        if row[0] in fresh and row[PROBE] == SAMPLING and row[TRY_COLUMNS.index("try_index")] == 0:
            row[TEXT] = f"{gold[row[0]]}."
    (summary,) = regrade(doc, _config(payload), mined_probe=SAMPLING).audits
    assert summary.mined == "dropped" and "can now be frozen" in summary.reason


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


def test_evidence_whose_grid_was_altered_is_a_one_line_refusal_that_writes_nothing(document, tmp_path):
    """The grid in evidence is a stranger's mapping: re-grading reads its sampling probe, and a
    grid that is not one is refused like any damaged evidence, with nothing left in --out."""
    import gzip

    from rnr_lens.grids.reports import rederive

    altered = tmp_path / "evidence.json.gz"
    grid = {k: v for k, v in document["manifest"]["grid"].items() if k != "models"}
    altered.write_bytes(gzip.compress(json.dumps({**document, "manifest": {**document["manifest"], "grid": grid}}).encode()))
    with pytest.raises(RnrLensError, match=r"could not be re-graded \(KeyError: .*models.*\); it is damaged"):
        rederive(altered, tmp_path / "out", regrade=True)
    assert not (tmp_path / "out").exists()
