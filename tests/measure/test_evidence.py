"""The evidence file: a store's audits and a report's manifest, written deterministically and
read back into a store that holds the same rows (the report-level guarantee, that claims
re-derive byte for byte, is tested on a real report in tests/grids/test_reports.py)."""

import gzip
import json

import pytest

from rnr_lens import RnrLensError
from rnr_lens.core.provenance import Provenance, RunSpan
from rnr_lens.core.records import AuditRecord, Try, audit_key, short_hash
from rnr_lens.measure import evidence as E
from rnr_lens.measure.store import Artifact, RunStore


def _record(name: str) -> AuditRecord:
    """A record with the identity an audit of its own would have (evidence checks it), named ``name``."""
    config = json.dumps({"name": name})
    fields = dict(
        model_fingerprint=short_hash(name), task_fingerprint=short_hash("t"), config_hash=short_hash(config), probes=("sampling:k=2",), seed=0
    )
    return AuditRecord(id=audit_key(**fields), model="m", task="t", answer_type="number", config_json=config, n_questions=2, **fields)


ID = {name: _record(name).id for name in ("a1", "a2", "a3", "other", "running")}


def _store(path, audits=("a1", "a2")):
    store = RunStore(path)
    for name in audits:
        aid = ID[name]
        store.create_audit(_record(name), [(0, "q1", "p1", "1"), (1, "q2", "p2", "2")])
        store.add_tries(aid, [Try("q2", "default", 0, "2.", "2", True, 2), Try("q1", "default", 0, "no", None, False, 1)])
        store.put_artifact(aid, Artifact.FAILURE_SET, "report", {"discovery": ["q1"]})
    return store


def _manifest(audits=("a1", "a2")):
    records = tuple(E.SettingRecord("m", f"t{i}", ID[a]) for i, a in enumerate(audits))
    return E.Manifest({"models": ["m"], "tasks": ["t0", "t1"]}, records, Provenance().with_run(RunSpan.begin()))


def test_evidence_round_trips_a_store_and_its_manifest(tmp_path):
    store = _store(tmp_path / "a.db")
    manifest = _manifest()
    path = E.write(store, manifest, tmp_path / E.EVIDENCE_FILE)
    restored = E.restore(path, tmp_path / "b.db")
    assert restored == manifest
    again = RunStore(tmp_path / "b.db", mode="read")
    assert E.Manifest.load(again) == manifest, "the manifest is kept in the rebuilt store"
    for aid in (ID["a1"], ID["a2"]):
        assert again.export_audit(aid) == store.export_audit(aid), "every row of every audit, as it was"


def test_evidence_holds_only_the_manifests_audits_and_is_deterministic(tmp_path):
    store = _store(tmp_path / "a.db", audits=("a1", "a2", "other"))
    first = E.write(store, _manifest(), tmp_path / "one.json.gz").read_bytes()
    document = json.loads(gzip.decompress(first))
    assert [a["audit"]["id"] for a in document["audits"]] == [ID["a1"], ID["a2"]], "an audit no setting names stays out"
    assert [t[0] for t in document["audits"][0]["tries"]] == ["q1", "q2"], "rows in key order"
    # the same rows write the same bytes, whatever order they were stored in
    m = _manifest()
    other = RunStore(tmp_path / "b.db")
    for name in ("a2", "a1"):
        aid = ID[name]
        other.create_audit(_record(name), [(1, "q2", "p2", "2"), (0, "q1", "p1", "1")])
        other.put_artifact(aid, Artifact.FAILURE_SET, "report", {"discovery": ["q1"]})
        other.add_tries(aid, [Try("q1", "default", 0, "no", None, False, 1)])
        other.add_tries(aid, [Try("q2", "default", 0, "2.", "2", True, 2)])
    for table in ("audits", "artifacts"):  # the store's own timestamps are the only other difference
        for c in (store.conn, other.conn):
            c.execute(f"UPDATE {table} SET created=0")
    assert E.write(store, m, tmp_path / "x.gz").read_bytes() == E.write(other, m, tmp_path / "y.gz").read_bytes()


def test_a_setting_record_replaces_in_place(tmp_path):
    m = _manifest()
    later = m.with_setting(E.SettingRecord("m", "t0", ID["a1"], (E.AUDITED, E.MINED)))
    assert [s.task for s in later.settings] == ["t0", "t1"] and later.setting("m", "t0").done(mined=True)
    assert not m.setting("m", "t0").done(mined=True) and m.setting("m", "t0").done(mined=False)
    assert later.with_setting(E.SettingRecord("m", "t9", ID["a3"])).audits == [ID["a1"], ID["a2"], ID["a3"]]
    assert E.Manifest.from_dict(json.loads(json.dumps(later.to_dict()))) == later


@pytest.mark.parametrize(
    "content, message",
    [
        (b"not gzip", "not gzip-compressed"),
        (gzip.compress(b"[1, 2]"), "no format"),
        (gzip.compress(json.dumps({"format": E.FORMAT, "version": 99}).encode()), "evidence version 99"),
        (gzip.compress(json.dumps({"format": E.FORMAT, "version": E.VERSION, "audits": []}).encode()), "incomplete evidence"),
    ],
    ids=["not-gzip", "not-evidence", "newer-version", "no-manifest"],
)
def test_a_file_that_is_not_evidence_is_a_one_line_error(tmp_path, content, message):
    path = tmp_path / "bad.json.gz"
    path.write_bytes(content)
    with pytest.raises(RnrLensError, match=message) as err:
        E.restore(path, tmp_path / "x.db")
    assert "\n" not in str(err.value) and not (tmp_path / "x.db").exists()


def test_restore_never_overwrites_a_store_and_leaves_nothing_when_it_fails(tmp_path):
    path = E.write(_store(tmp_path / "a.db"), _manifest(), tmp_path / E.EVIDENCE_FILE)
    with pytest.raises(RnrLensError, match="already exists"):
        E.restore(path, tmp_path / "a.db")
    with pytest.raises(RnrLensError, match="does not exist"):
        E.restore(tmp_path / "missing.json.gz", tmp_path / "c.db")
    # evidence whose rows contradict each other (one try, two answers) stops the rebuild whole
    document = json.loads(gzip.decompress(path.read_bytes()))
    document["audits"].append(json.loads(json.dumps(document["audits"][0])))
    document["audits"][-1]["tries"][0][3] = "another answer"
    path.write_bytes(gzip.compress(json.dumps(document).encode()))
    with pytest.raises(RnrLensError, match="disagree"):
        E.restore(path, tmp_path / "d.db")
    left = [p.name for p in tmp_path.iterdir() if p.name.startswith((".d", "d."))]
    assert left == [".d.db.lock"], "no store, no partial store: only the writer lock's file (rnr_lens.core.files)"


def test_a_snapshot_of_a_running_report_holds_its_running_audits_too(tmp_path):
    store = _store(tmp_path / "a.db", audits=("a1", "a2", "running"))
    _manifest().save(store)
    path = E.snapshot(tmp_path / "a.db", tmp_path / "snap.json.gz")
    assert [a["audit"]["id"] for a in E.read(path)["audits"]] == [ID["a1"], ID["a2"], ID["running"]]
    with pytest.raises(RnrLensError, match="holds no report yet"):
        E.snapshot(_store(tmp_path / "b.db").path, tmp_path / "x.json.gz")


def _altered(tmp_path, change):
    path = E.write(_store(tmp_path / "a.db"), _manifest(), tmp_path / E.EVIDENCE_FILE)
    document = json.loads(gzip.decompress(path.read_bytes()))
    change(document)
    path.write_bytes(gzip.compress(json.dumps(document).encode()))
    return path


def _set_id(value):
    def change(document):
        document["audits"][0]["audit"]["id"] = value
        document["manifest"]["settings"][0]["audit"] = value

    return change


@pytest.mark.parametrize(
    "change, message",
    [
        (_set_id("../../../x"), "not an id rnr_lens makes"),
        (_set_id("/etc/passwd"), "not an id rnr_lens makes"),
        (_set_id("0" * 16), "not the one its model, task, config, probes and seed give"),
        (lambda d: d["audits"][0]["audit"].update(config_hash="<script>x</script>"), "is not the hash of its config_json"),
        (lambda d: d["audits"][0]["audit"].update(config_json='{"a": 1}'), "is not the hash of its config_json"),
        (lambda d: d.update(version=True), "evidence version True"),
        (lambda d: d["audits"][0]["tries"][0].pop(), "not 13 columns"),
        (lambda d: d["audits"][0]["tries"][0].__setitem__(2, -1), "negative index"),
        (lambda d: d["audits"][0]["tries"][0].__setitem__(1, "routes:k=9"), "unknown question or probe"),
        (lambda d: d["audits"][0]["questions"][0].__setitem__(0, "q\x1b[2J"), "control characters"),
        (lambda d: d["audits"][0]["artifacts"][0].__setitem__(0, "script"), "of a known kind"),
        (lambda d: d["manifest"]["settings"][0].update(stages=["audit", "rm -rf"]), "are not a list of 'audit' and 'mined'"),
        (lambda d: d["manifest"].update(provenance=[1]), "provenance is not a mapping"),
        (
            lambda d: d["manifest"]["settings"].extend([{**d["manifest"]["settings"][0], "task": f"x{i}"} for i in range(2000)]),
            "which another setting does too",
        ),
        (lambda d: d["manifest"]["settings"].append(dict(d["manifest"]["settings"][0])), "repeats the setting"),
        (
            lambda d: [t.__setitem__(8, f"{n}:0-{n - 1}") for t, n in zip(d["audits"][0]["tries"], (4, 100000))],
            "routes of models of 4 and 100000 blocks",
        ),
        (lambda d: d["audits"][0]["audit"].update(n_questions=3, status="complete"), "complete with 2 questions, but says it has 3"),
        (lambda d: d["audits"][0]["questions"][1].__setitem__(1, 0), "repeated questions, or positions outside"),
    ],
    ids=[
        "traversal",
        "absolute",
        "forged-id",
        "script-hash",
        "config-edited",
        "version-true",
        "short-row",
        "negative-index",
        "unknown-probe",
        "control-chars",
        "unknown-kind",
        "unknown-stage",
        "provenance-list",
        "settings-sharing-an-audit",
        "repeated-setting",
        "routes-of-two-depths",
        "a-count-not-recomputed",
        "a-repeated-position",
    ],  # fmt: skip
)
def test_evidence_is_checked_field_by_field_before_anything_is_built(tmp_path, change, message):
    path = _altered(tmp_path, change)
    with pytest.raises(RnrLensError, match=message) as err:
        E.restore(path, tmp_path / "x.db")
    assert "\n" not in str(err.value) and not (tmp_path / "x.db").exists()
    assert not (tmp_path / ".x.db.lock").exists(), "refused before the rebuild began"


def test_a_store_absorbs_only_audits_whose_id_is_their_own(tmp_path):
    store = RunStore(tmp_path / "a.db")
    payload = _store(tmp_path / "b.db").export_audit(ID["a1"])
    for forged in ("../x", ID["a2"]):
        with pytest.raises(RnrLensError, match="not an id rnr_lens makes|is not the one its model"):
            store.absorb({**payload, "audit": {**payload["audit"], "id": forged}})
    assert store.audits() == []
    assert store.absorb(payload) == 2


def test_a_manifest_kept_in_a_store_from_outside_is_checked_as_evidences_is(tmp_path, capsys):
    """Issue 73: a stranger's runs.db held a manifest that was not a report's (2,000 settings
    naming one audit, or one naming an audit the store lacks): re-deriving from it did the
    work 2,000 times, or failed in a traceback. It is checked by evidence's own rule, in one line."""
    store = _store(tmp_path / "a.db")
    store.put_record(E.MANIFEST_KEY, {**_manifest().to_dict(), "settings": [{"model": "m", "task": f"t{i}", "audit": ID["a1"]} for i in range(2000)]})
    with pytest.raises(RnrLensError, match="not a run store rnr_lens made .*which another setting does too") as refused:
        E.Manifest.load(store)
    assert "\n" not in str(refused.value)
    store.put_record(E.MANIFEST_KEY, {**_manifest().to_dict(), "settings": [{"model": "m", "task": "t", "audit": "0" * 16}]})
    with pytest.raises(RnrLensError, match="which the evidence does not hold"):
        E.Manifest.load(store)
    kept = _manifest()
    kept.save(store)
    assert E.Manifest.load(store) == kept
