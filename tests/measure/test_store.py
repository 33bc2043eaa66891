import sqlite3

import pytest

from rnr_lens import RnrLensError
from rnr_lens.core.records import Try
from rnr_lens.measure.store import RunStore
from tests.conftest import stored_record


def _record(aid="a1"):
    return stored_record(aid, ("sampling:k=2",), 2)


def test_round_trip_and_primary_key(tmp_path):
    store = RunStore(tmp_path / "r.db")
    store.create_audit(_record(), [(0, "q1", "p1", "1"), (1, "q2", "p2", "2")])
    store.create_audit(_record(), [(0, "q1", "p1", "1"), (1, "q2", "p2", "2")])  # idempotent
    assert len(store.audits()) == 1 and store.audits()[0].probes == ("sampling:k=2",)
    assert store.add_tries("a1", [Try("q1", "default", 0, "1.", "1", True, 2)]) == 1
    # a row another writer of the audit already committed is kept, not duplicated
    assert store.add_tries("a1", [Try("q1", "default", 0, "1.", "1", True, 2), Try("q2", "default", 0, "2.", "2", True, 2)]) == 1
    assert sorted(store.done_keys("a1", "default")) == [("q1", 0), ("q2", 0)]
    assert store.tries("a1")["correct"].tolist() == [True, True]
    assert store.count_tries("a1") == {"default": 2}
    assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_failed_batch_commits_nothing(tmp_path):
    store = RunStore(tmp_path / "r.db")
    store.create_audit(_record(), [(0, "q1", "p1", "1")])
    with pytest.raises(sqlite3.IntegrityError):  # the second row breaks NOT NULL: the first is rolled back too
        store.add_tries("a1", [Try("q1", "default", 0, "a", None, False, 1), Try("q2", "default", 0, None, None, False, 1)])  # type: ignore[arg-type]
    assert store.tries("a1").empty


def test_artifacts_are_frozen(tmp_path):
    store = RunStore(tmp_path / "r.db")
    store.put_artifact("a1", "failure_set", "main", {"ids": [1]})
    with pytest.raises(RnrLensError, match="never recomputed silently"):
        store.put_artifact("a1", "failure_set", "main", {"ids": [2]})
    assert store.get_artifact("a1", "failure_set", "main") == {"ids": [1]}


def test_bad_store_paths(tmp_path):
    with pytest.raises(RnrLensError, match="does not exist"):
        RunStore(tmp_path / "missing" / "r.db")
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all" * 100)
    with pytest.raises(RnrLensError, match="not an rnr_lens run store"):
        RunStore(junk)


def test_audit_lookup_by_prefix(tmp_path):
    store = RunStore(tmp_path / "r.db")
    store.create_audit(_record("abcdef"), [(0, "q1", "p", "1")])
    assert store.audit("abc").id == "abcdef"
    with pytest.raises(RnrLensError, match="no audit 'zzz'"):
        store.audit("zzz")


@pytest.mark.parametrize("planted", ["", "-wal", "-shm"])
def test_a_store_is_never_written_through_a_planted_link(tmp_path, planted):
    """Issue 73 (critical): ``--out out/run.db`` where run.db (or its -wal or -shm) was a link
    into another folder created the store where the link pointed, or wrote into the file it
    named. A link in the store's place is refused in one line, and nothing is written."""
    from rnr_lens.errors import RnrLensError
    from rnr_lens.measure.store import RunStore

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    victim = elsewhere / "victim"
    out = tmp_path / "out"
    out.mkdir()
    store = out / "run.db"
    (out / f"run.db{planted}").symlink_to(victim)  # dangling: nothing there yet
    with pytest.raises(RnrLensError, match="symbolic link") as refused:
        RunStore(store)
    assert "\n" not in str(refused.value)
    assert not victim.exists() and not any(elsewhere.iterdir()), "nothing created where the link points"
    victim.write_bytes(b"")  # a link to an existing empty file: left as it is
    with pytest.raises(RnrLensError, match="symbolic link"):
        RunStore(store, mode="create")
    assert victim.read_bytes() == b""
    assert sorted(p.name for p in out.iterdir()) == [f"run.db{planted}"], "no store, lock or journal beside the link"


@pytest.mark.parametrize(
    ("sql", "said"),
    [
        (  # `show` and `merge` hung on it
            "DROP TABLE audits; CREATE VIEW audits AS WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT x AS id FROM r;",
            "holds a view",
        ),
        ("CREATE TRIGGER t AFTER INSERT ON tries BEGIN SELECT load_extension('evil'); END;", "holds a trigger"),
        ("CREATE TABLE extra (x);", "a table 'extra' that a run store does not"),
        ("ALTER TABLE tries ADD COLUMN payload BLOB;", "table 'tries' has other columns"),
    ],
)
def test_a_store_from_outside_holds_plain_tables_of_its_schema_or_is_refused(tmp_path, capsys, sql, said):
    """Issue 73: a run store is a stranger's file too: views (an endless recursive CTE, a
    zeroblob of a gigabyte), triggers calling load_extension(), tables of other shapes. It is
    opened with trusted_schema off and checked to hold only a run store's own tables before
    anything is read from it: one line, in every mode, for the CLI too."""
    import sqlite3

    from rnr_lens.cli import main

    db = tmp_path / "run.db"
    store = RunStore(db)
    store.close()
    with sqlite3.connect(db) as conn:
        conn.executescript(sql)
    for mode in ("read", "write"):
        with pytest.raises(RnrLensError, match=said):
            RunStore(db, mode=mode)
    assert main(["show", str(db)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and said.split(" ")[0] in err


@pytest.mark.parametrize(
    ("sql", "said"),
    [
        ("UPDATE audits SET seed = 'abc'", "audits holds a seed"),
        ("UPDATE audits SET probes_json = 'not json'", "audits holds a probes_json"),
        ("UPDATE audits SET config_json = '[1, 2]'", "audits holds a config_json"),
        ("UPDATE tries SET correct = 7", "tries holds a correct"),
        ("UPDATE tries SET text = x'00ff'", "tries holds a text"),
        ("UPDATE questions SET position = -1", "questions holds a position"),
        ("UPDATE artifacts SET body = '{'", "artifacts holds a body"),
        ("INSERT INTO meta VALUES ('report', 'not json')", "meta holds a value"),
        ("UPDATE tries SET text = printf('%.*c', 1100000, 'x')", "holds a value over the cap of 1 MB"),
    ],
)
def test_every_cell_of_a_store_from_outside_is_of_its_kind_and_within_the_cap(tmp_path, capsys, monkeypatch, sql, said):
    """Issue 73: SQLite keeps any value in any column, so a stranger's store held a seed 'abc',
    probes or a manifest that were not JSON, and each ended in a traceback; a cell of a gigabyte
    was loaded whole. Every cell is checked in SQL when a store that exists opens, and a cell over
    the cap is refused without being read (SQLite's length limit): one line, nothing changed."""
    from rnr_lens.cli import main

    db = tmp_path / "run.db"
    store = RunStore(db)
    store.create_audit(_record(), [(0, "q0", "p", "1")])
    store.add_tries("a1", [Try("q0", "default", 0, "The answer is 1.", "1", True, 5)])
    store.put_artifact("a1", "shard", "0/1", {"n": 1})
    store.close()
    monkeypatch.setenv("RNR_LENS_MAX_STORE_VALUE_MB", "1")
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA foreign_keys=OFF")
        conn.executescript(sql)
    before = db.read_bytes()
    for mode in ("read", "write", "create"):
        with pytest.raises(RnrLensError, match=said) as refused:
            RunStore(db, mode=mode)
        assert "\n" not in str(refused.value)
    assert main(["show", str(db)]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert db.read_bytes() == before


def test_merging_shards_into_a_whole_audit_checks_its_questions_against_the_task_its_id_names(tmp_path):
    """Issue 73: a stranger's shard under the user's audit id, one gold altered, merged with the
    user's other shard into a complete audit of another task. Once every question is held, the
    questions give the task fingerprint again; one that differs is refused, and nothing is written."""
    from rnr_lens.core.records import AuditRecord, short_hash, task_fingerprint
    from rnr_lens.measure.store import merge

    questions = [("q0", "What is 1 + 1?", "2"), ("q1", "What is 2 + 2?", "4")]
    fingerprint = task_fingerprint("number", ((*q, ()) for q in questions))
    fields = dict(
        model="m", model_fingerprint="f", task="t", task_fingerprint=fingerprint, answer_type="number", config_hash=short_hash("{}"), config_json="{}"
    )
    record = AuditRecord(id="", probes=(), seed=0, n_questions=2, **fields)
    record = AuditRecord(id=record.expected_id(), probes=(), seed=0, n_questions=2, **fields)
    for name, (position, (qid, prompt, gold)) in (("mine.db", (0, questions[0])), ("theirs.db", (1, (questions[1][0], questions[1][1], "5")))):
        store = RunStore(tmp_path / name)
        store.create_audit(record, [(position, qid, prompt, gold)])
        store.close()
    with pytest.raises(RnrLensError, match=f"make the task fingerprint [0-9a-f]+, but its id names {fingerprint}") as refused:
        merge([tmp_path / "mine.db", tmp_path / "theirs.db"], tmp_path / "merged.db")
    assert "\n" not in str(refused.value) and not (tmp_path / "merged.db").exists()
    honest = RunStore(tmp_path / "honest.db")
    honest.create_audit(record, [(1, *questions[1])])
    honest.close()
    assert len(merge([tmp_path / "mine.db", tmp_path / "honest.db"], tmp_path / "merged.db").questions(record.id)) == 2


def test_a_merged_audit_whose_config_is_not_the_one_its_hash_names_is_refused(tmp_path):
    """Issue 73: a store's config_json is what reads every try (its reader); the id hashes the
    config's hash, so a config edited under an unchanged hash kept the id. Merge recomputes it."""
    from rnr_lens.core.records import AuditRecord, short_hash
    from rnr_lens.measure.store import merge

    config = '{"extractor": "last-number"}'
    fields = dict(model="m", model_fingerprint="f", task="t", task_fingerprint="tf", answer_type="number", config_hash=short_hash(config))
    record = AuditRecord(id="", config_json=config, probes=(), seed=0, n_questions=1, **fields)
    record = AuditRecord(id=record.expected_id(), config_json=config, probes=(), seed=0, n_questions=1, **fields)
    store = RunStore(tmp_path / "theirs.db")
    store.create_audit(record, [(0, "q0", "What is 1 + 1?", "2")])
    store.close()
    with sqlite3.connect(tmp_path / "theirs.db") as conn:
        conn.execute("""UPDATE audits SET config_json='{"extractor": "first-number"}'""")
    with pytest.raises(RnrLensError, match="whose config is not the one its hash names"):
        merge([tmp_path / "theirs.db"], tmp_path / "merged.db")
    assert not (tmp_path / "merged.db").exists()
