"""The run store: an embedded SQLite database (WAL mode) that every long loop writes to.

Each finished try is committed with its batch, keyed by audit, question, probe and try
index, so a run killed at any moment resumes exactly where it stopped (nothing lost, nothing
duplicated: the primary key forbids it). Several audits can share one database. An audit's
id is a hash of everything that determines its results (model weights, task, deployment
config hash, probes and seed), so resuming finds the same audit.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
import weakref
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import Any

import pandas as pd

from rnr_lens.core.files import acquire_writer_lock, lock_file, refused_writes, writer_active, writer_lock
from rnr_lens.core.phases import phase
from rnr_lens.core.records import (
    COMPLETE,
    DEFAULT_PROBE,
    RUNNING,
    TRY_ANSWERS,
    TRY_COLUMNS,
    TRY_KEYS,
    AuditRecord,
    AuditStatus,
    Try,
    check_audit_id,
    short_hash,
    task_fingerprint,
)
from rnr_lens.core.untrusted import STORE_VALUE_BYTES, loads_json, quoted
from rnr_lens.errors import RnrLensError
from rnr_lens.measure.probe_specs import ProbeSpec

SCHEMA_VERSION = 1
TYPICAL_TRY_BYTES = 1500
"""Disk per stored try, its WAL pages included, as measured on short arithmetic answers (about
1.3 kB); what a disk-full message assumes before a store holds a hundred tries."""


MEMORY = ":memory:"
"""The path of a run store held in memory (SQLite's own name for one): never a file, never locked."""


class Artifact(StrEnum):
    """The categories of artifact an audit keeps beside its tries (the ``artifacts`` table's
    column, called ``kind`` as older stores call it; the values are what they hold, so they
    never change)."""

    SHARD = "shard"
    """A finished shard ``i/n`` of the audit, with its question count."""
    DEPLOYMENT = "deployment"
    """The first question's prompt as the model saw it (``rendered``)."""
    FAILURE_SET = "failure_set"
    """A frozen failure set, under its name."""
    SWEEP_EVAL = "sweep_eval"
    """One ablation's greedy answers on a failure set, under its :class:`~rnr_lens.bottleneck.sweep_results.SweepKey`."""
    SWEEP = "sweep"
    """A whole sweep (screen scores, rates, details), under its failure set's name."""
    NULL = "null"
    """The null of a failure set's held-out repair (an arbitrary block, an unablated re-run)."""


_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS audits (
    id TEXT PRIMARY KEY,
    created REAL NOT NULL,
    model TEXT NOT NULL,
    model_fingerprint TEXT NOT NULL,
    task TEXT NOT NULL,
    task_fingerprint TEXT NOT NULL,
    answer_type TEXT NOT NULL,
    config_hash TEXT NOT NULL,
    config_json TEXT NOT NULL,
    probes_json TEXT NOT NULL,
    seed INTEGER NOT NULL,
    n_questions INTEGER NOT NULL,
    label TEXT,
    status TEXT NOT NULL DEFAULT 'running'
);
CREATE TABLE IF NOT EXISTS questions (
    audit_id TEXT NOT NULL REFERENCES audits(id),
    question_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    prompt TEXT NOT NULL,
    gold TEXT NOT NULL,
    PRIMARY KEY (audit_id, question_id)
);
CREATE TABLE IF NOT EXISTS tries (
    audit_id TEXT NOT NULL REFERENCES audits(id),
    question_id TEXT NOT NULL,
    probe TEXT NOT NULL,
    try_index INTEGER NOT NULL,
    seed INTEGER,
    route TEXT,
    ablation TEXT,
    text TEXT NOT NULL,
    extracted TEXT,
    correct INTEGER NOT NULL,
    mean_logprob REAL,
    mean_entropy REAL,
    reward REAL,
    n_tokens INTEGER NOT NULL,
    PRIMARY KEY (audit_id, question_id, probe, try_index)
);
CREATE TABLE IF NOT EXISTS artifacts (
    audit_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    name TEXT NOT NULL,
    body TEXT NOT NULL,
    created REAL NOT NULL,
    PRIMARY KEY (audit_id, kind, name)
);
"""


def _schema_of(conn: sqlite3.Connection) -> dict[str, list[tuple[str, str, int, int]]]:
    """Each table's columns as ``PRAGMA table_info`` gives them (name, declared type, not null,
    primary-key position)."""
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    return {t: [(c[1], c[2].upper(), c[3], c[5]) for c in conn.execute(f"PRAGMA table_info({_quoted_name(t)})")] for t in tables}


def _quoted_name(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


_EXPECTED: dict[str, list[tuple[str, str, int, int]]] = {}
"""The schema a run store's tables have (:data:`_SCHEMA`, read from an in-memory store once)."""


def _foreign_schema(conn: sqlite3.Connection) -> str | None:
    """Why ``conn``'s database is not a run store's shape (issue 73), or None where it is one or
    is empty: a view, a trigger, a table rnr_lens does not make, or a table whose columns
    differ. A database without a run store's ``meta`` table is no store at all, and is refused
    as another application's by the caller."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'").fetchone() is None:
        return None
    kinds = {r[0]: r[1] for r in conn.execute("SELECT type, name FROM sqlite_master WHERE type IN ('view', 'trigger')")}
    if kinds:
        kind, name = next(iter(kinds.items()))
        return f"it holds a {kind} ({quoted(name)}); a run store holds plain tables only"
    found = _schema_of(conn)
    if not found:
        return None
    if not _EXPECTED:
        with contextlib.closing(sqlite3.connect(":memory:")) as fresh:
            fresh.executescript(_SCHEMA)
            _EXPECTED.update(_schema_of(fresh))
    for table, columns in found.items():
        if table not in _EXPECTED:
            return f"it holds a table {quoted(table)} that a run store does not"
        if columns != _EXPECTED[table]:
            return f"its table {quoted(table)} has other columns than a run store's"
    return None


_TEXT = "typeof({c}) = 'text' AND length({c}) >= 0"
"""A text cell (``length`` reads it whole, so a cell past :data:`STORE_VALUE_BYTES` is refused here)."""
_MAYBE_TEXT = "(typeof({c}) = 'null' OR " + _TEXT + ")"
_NUMBER = "typeof({c}) IN ('integer', 'real')"
_MAYBE_NUMBER = "typeof({c}) IN ('integer', 'real', 'null')"
_JSON = "typeof({c}) = 'text' AND json_valid({c})"
_ROW_RULES: dict[str, dict[str, str]] = {
    "meta": {"key": _TEXT, "value": _JSON},
    "audits": {
        **{c: _TEXT for c in ("id", "model", "model_fingerprint", "task", "task_fingerprint", "answer_type", "config_hash", "status")},
        "created": _NUMBER,
        "config_json": _JSON + " AND json_type({c}) = 'object'",
        "probes_json": _JSON + " AND json_type({c}) = 'array'",
        "seed": "typeof({c}) = 'integer' AND {c} BETWEEN 0 AND 4294967295",
        "n_questions": "typeof({c}) = 'integer' AND {c} >= 0",
        "label": _MAYBE_TEXT,
    },
    "questions": {**{c: _TEXT for c in ("audit_id", "question_id", "prompt", "gold")}, "position": "typeof({c}) = 'integer' AND {c} >= 0"},
    "tries": {
        **{c: _TEXT for c in ("audit_id", "question_id", "probe", "text")},
        **{c: _MAYBE_TEXT for c in ("route", "ablation", "extracted")},
        "try_index": "typeof({c}) = 'integer' AND {c} >= 0",
        "seed": "typeof({c}) IN ('integer', 'null')",
        "correct": "typeof({c}) = 'integer' AND {c} IN (0, 1)",
        **{c: _MAYBE_NUMBER for c in ("mean_logprob", "mean_entropy", "reward")},
        "n_tokens": "typeof({c}) = 'integer' AND {c} >= 0",
    },
    "artifacts": {**{c: _TEXT for c in ("audit_id", "kind", "name")}, "body": _JSON, "created": _NUMBER},
}
"""What every cell of a run store's tables holds (issue 73): SQLite keeps any value in any
column, so a store from outside may hold the text 'abc' as a seed or a probe list that is not
JSON. Checked in SQL, one scan a table, when an existing store opens (:func:`_misfit_value`)."""


def _misfit_value(conn: sqlite3.Connection) -> str | None:
    """The first table and column of ``conn``'s store holding a value of the wrong kind (or one
    longer than :data:`STORE_VALUE_BYTES`), or None where every cell fits :data:`_ROW_RULES`."""
    for table, rules in _ROW_RULES.items():
        cases = " ".join(f"WHEN NOT ({rule.format(c=_quoted_name(column))}) THEN {column!r}" for column, rule in rules.items())
        try:
            row = conn.execute(f"SELECT bad FROM (SELECT CASE {cases} END AS bad FROM {table}) WHERE bad IS NOT NULL LIMIT 1").fetchone()
        except sqlite3.DataError:
            return f"its table {table} holds a value over the cap of {STORE_VALUE_BYTES.value // 10**6:,} MB (raise it with {STORE_VALUE_BYTES.env}=<MB> if you trust the file)"
        if row is not None:
            return f"its table {table} holds a {row[0]} that is not what a run store keeps there"
    return None


class _Connection(sqlite3.Connection):
    """A connection whose refused writes (a full disk, a read-only file, a damaged database)
    raise one line naming the store (:func:`rnr_lens.core.files.refusal`) instead of SQLite's words."""

    store_path = ""

    def execute(self, *args: Any, **kwargs: Any) -> sqlite3.Cursor:
        with refused_writes(self.store_path):
            return super().execute(*args, **kwargs)

    def executemany(self, *args: Any, **kwargs: Any) -> sqlite3.Cursor:
        with refused_writes(self.store_path):
            return super().executemany(*args, **kwargs)

    def executescript(self, *args: Any, **kwargs: Any) -> sqlite3.Cursor:
        with refused_writes(self.store_path):
            return super().executescript(*args, **kwargs)


class RunStore:
    """A SQLite run store at ``path``.

    Args:
        path: The database file, or ``":memory:"``.
        mode: ``"create"`` (open it, creating it if missing: the writers ``audit`` and
            ``merge``), ``"write"`` (an existing store only: ``mine`` adds its frozen sets and
            sweeps) or ``"read"`` (an existing store, opened read-only: ``show``, ``export``,
            ``compare``, the viewers). A file that is not a run store is never modified.

    Example:
        >>> store = RunStore(":memory:")
        >>> store.audits()
        []
    """

    MODES = ("create", "write", "read")

    def __init__(self, path: str | Path, mode: str = "create") -> None:
        if mode not in self.MODES:
            raise RnrLensError(f"unknown run-store mode {mode!r}; use one of {', '.join(self.MODES)}")
        self.path = str(path)
        self.mode = mode
        memory = self.path == MEMORY
        if not memory and not Path(self.path).parent.exists():
            raise RnrLensError(f"folder {Path(self.path).parent} does not exist; create it or choose another path for the store")
        exists = not memory and Path(self.path).exists()
        if exists and Path(self.path).is_dir():
            raise RnrLensError(f"{self.path} is a folder, not a run store file; choose a file path such as {Path(self.path) / 'run.db'}")
        if exists and not Path(self.path).is_file():
            raise RnrLensError(f"{self.path} is not a regular file (a device, a pipe or a socket); choose a file path for the run store")
        if mode != "create" and not memory and not exists:
            raise RnrLensError(f"run store {self.path} does not exist; create one with 'rnr-lens audit --out {self.path}'")
        if mode != "read" and not memory:
            refuse_links(self.path)
        # one writer per store file: a second process writing the same audit would repeat its work
        self._release = acquire_writer_lock(self.path, f"the run store {self.path}") if mode != "read" and not memory else (lambda: None)
        weakref.finalize(self, self._release)  # a store dropped without close() lets go of its lock
        if mode == "read" and exists:
            _await_creation(self.path)
        try:
            if mode == "create" and not memory and not exists:  # created exclusively: a link planted since the check above is refused too
                os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644))
            self._open(memory, exists)
        except FileExistsError:
            self._release()
            raise RnrLensError(f"{self.path} appeared while the run store was being created; choose another path") from None
        except BaseException:
            self._release()
            if mode == "create" and not memory and not exists:  # a store this call began (a full disk): leave no file
                for suffix in ("", "-wal", "-shm", "-journal"):
                    Path(self.path + suffix).unlink(missing_ok=True)
            raise

    def _open(self, memory: bool, exists: bool) -> None:
        mode = self.mode
        try:
            if mode == "read" and not memory:
                self.conn = sqlite3.connect(
                    f"{Path(self.path).resolve().as_uri()}?mode=ro", uri=True, timeout=60, isolation_level=None, factory=_Connection
                )
            else:
                self.conn = sqlite3.connect(self.path, timeout=60, isolation_level=None, factory=_Connection)
            self.conn.store_path = self.path
            self.conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, STORE_VALUE_BYTES.value)  # a longer cell is refused, never loaded
            # a store from outside is data: no schema object of it runs code (a view or trigger
            # calling load_extension() or an endless CTE), and none but plain tables is allowed
            self.conn.execute("PRAGMA trusted_schema=OFF")
            if hasattr(self.conn, "enable_load_extension"):  # absent where Python's SQLite cannot load any
                self.conn.enable_load_extension(False)
            # Only an empty new file (or a store) may be turned into a store: look before writing.
            tables = {r[0] for r in self.conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            foreign = _foreign_schema(self.conn)
        except sqlite3.DatabaseError as exc:
            raise RnrLensError(f"{self.path} is not an rnr_lens run store ({exc}); choose another file") from None
        if foreign is not None:
            self.conn.close()
            raise RnrLensError(f"{self.path} is not an rnr_lens run store ({foreign}); it was left untouched, so choose another file")
        is_store = "meta" in tables and self.conn.execute("SELECT 1 FROM meta WHERE key='schema'").fetchone() is not None
        fresh = memory or not exists or (not tables and Path(self.path).stat().st_size == 0)
        if not is_store and not (fresh and mode == "create"):
            self.conn.close()
            what = "an empty file" if exists and not tables else "another application's SQLite database" if tables else "missing"
            raise RnrLensError(f"{self.path} is not an rnr_lens run store ({what}); it was left untouched, so choose another file")
        if mode != "read":
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
            self.conn.executescript(_SCHEMA)
            self.conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
        row = self.conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
        if row[0] != str(SCHEMA_VERSION):
            self.conn.close()
            raise RnrLensError(f"{self.path} uses run-store schema {quoted(row[0])}, this rnr_lens reads {SCHEMA_VERSION}")
        misfit = _misfit_value(self.conn) if is_store else None  # a store that existed may come from outside
        if misfit is not None:
            self.conn.close()
            raise RnrLensError(f"{self.path} is not a run store rnr_lens made ({misfit}); it was left untouched")

    def close(self) -> None:
        self.conn.close()
        self._release()

    def bytes_per_try(self) -> float:
        """The store's size on disk (its WAL included) per stored try: what one more try costs,
        about (:data:`TYPICAL_TRY_BYTES` until the store holds enough tries to say)."""
        if self.path == MEMORY:
            return 0.0
        size = sum(Path(self.path + s).stat().st_size for s in ("", "-wal") if Path(self.path + s).exists())
        (n,) = self.conn.execute("SELECT count(*) FROM tries").fetchone()
        return size / n if n >= 100 else TYPICAL_TRY_BYTES

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        with phase("store"):  # every write goes through here: the profile's store time
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            try:
                self.conn.execute("COMMIT")
            except BaseException:
                if self.conn.in_transaction:  # a refused COMMIT (a full disk) keeps nothing of the batch
                    self.conn.execute("ROLLBACK")
                raise

    # -- store-wide records (a report's manifest) ------------------------------------------
    def put_record(self, key: str, body: Any) -> None:
        """Keep a store-wide JSON record under ``key`` (replacing the one there); ``schema`` is the store's own."""
        if key == "schema":
            raise RnrLensError("the record 'schema' is the run store's own; choose another key")
        with self.transaction() as c:
            c.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(body)))

    def get_record(self, key: str) -> Any | None:
        """The store-wide record under ``key`` (None: none kept)."""
        row = self.conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return loads_json(row[0], f"{self.path}'s record {quoted(key)}") if row and key != "schema" else None

    # -- audits ----------------------------------------------------------------------------
    def create_audit(self, record: AuditRecord, questions: Iterable[tuple[int, str, str, str]]) -> None:
        """Register an audit and its ``(position, id, prompt, gold)`` questions (idempotent;
        a shard adds its own questions to an audit another shard registered)."""
        with self.transaction() as c:
            rows = [(record.id, qid, position, prompt, gold) for position, qid, prompt, gold in questions]
            c.executemany("INSERT OR IGNORE INTO questions VALUES (?,?,?,?,?)", rows)
            if c.execute("SELECT 1 FROM audits WHERE id=?", (record.id,)).fetchone():
                return
            _insert_audit(c, record, created=time.time(), status=RUNNING)

    def audit(self, audit_id: str) -> AuditRecord:
        """The audit whose id is ``audit_id`` or starts with it."""
        rows = [a for a in self.audits() if a.id.startswith(audit_id)]
        if not rows:
            raise RnrLensError(f"no audit {audit_id!r} in {self.path}; list them with 'rnr-lens show {self.path}'")
        if len(rows) > 1:
            raise RnrLensError(f"audit id {audit_id!r} is ambiguous in {self.path}; give more of it")
        return rows[0]

    def audits(self) -> list[AuditRecord]:
        """Every audit in the store, oldest first."""
        cur = self.conn.execute("SELECT * FROM audits ORDER BY created")
        names = [d[0] for d in cur.description]
        return [AuditRecord.from_dict(dict(zip(names, row))) for row in cur.fetchall()]

    def set_status(self, audit_id: str, status: AuditStatus) -> None:
        self.conn.execute("UPDATE audits SET status=? WHERE id=?", (str(status), audit_id))

    def mark_shard_done(self, audit_id: str, shard: str, n_questions: int) -> AuditStatus:
        """Record that shard ``i/n`` of an audit finished; return the audit's new status."""
        self.put_artifact(audit_id, Artifact.SHARD, shard, {"questions": n_questions}, overwrite=True)
        return self.refresh_status(audit_id)

    def refresh_status(self, audit_id: str) -> AuditStatus:
        """``complete`` once the whole audit or every shard of some ``i/n`` split has finished,
        else ``partial (k/n shards)`` (:meth:`AuditStatus.of_shards`)."""

        status = self.audit(audit_id).status
        if status.complete:
            return status
        shards = [r[0] for r in self.conn.execute("SELECT name FROM artifacts WHERE audit_id=? AND kind='shard'", (audit_id,))]
        if not shards:
            return status
        status = AuditStatus.of_shards(shards)
        self.set_status(audit_id, status)
        return status

    # -- moving audits between stores (shards, merges, remote workers) ----------------------
    def export_audit(self, audit_id: str) -> dict[str, Any]:
        """Everything stored for one audit, as plain rows (what :meth:`absorb` takes)."""
        info = self.audit(audit_id)

        def rows(sql: str) -> list[tuple]:
            return [tuple(r) for r in self.conn.execute(sql, (info.id,)).fetchall()]

        return {
            "audit": info.to_dict(),
            # in key order, so the same store exports the same rows (the evidence is deterministic)
            "questions": rows("SELECT question_id, position, prompt, gold FROM questions WHERE audit_id=? ORDER BY position, question_id"),
            "tries": rows(f"SELECT {', '.join(TRY_COLUMNS)} FROM tries WHERE audit_id=? ORDER BY question_id, probe, try_index"),
            "artifacts": rows("SELECT kind, name, body, created FROM artifacts WHERE audit_id=? ORDER BY kind, name"),
        }

    def absorb(self, payload: dict[str, Any], source: str = "the input") -> int:
        """Add an exported audit to this store; return the number of new tries.

        Rows already here are kept once. A row that disagrees with the one here (the same try
        with another answer, the same question with another gold) or an audit of the same model,
        task, probes and seed under another deployment config raises and adds nothing.
        """
        info = AuditRecord.from_dict(payload["audit"])
        check_audit_id(info.id, source)  # an id becomes part of file names (export): only the tool's own pass
        if info.expected_id() != info.id or short_hash(info.config_json) != info.config_hash:
            raise RnrLensError(
                f"{source} holds audit {info.id} whose id is not the one its model, task, config, probes and seed give (or whose config "
                "is not the one its hash names); it was altered or not made by rnr_lens"
            )
        for other in self.audits():
            if other.identity() == info.identity() and other.config_hash != info.config_hash:
                raise RnrLensError(
                    f"{source} holds audit {info.id[:12]} made under deployment config {info.config_hash}, but the merged store has the "
                    f"same model, task, probes and seed under config {other.config_hash}; merge only results of one config (compare them with 'rnr-lens compare')"
                )
        budgets = _budgets(info)
        for row in payload["tries"]:  # what a shard may add (issue 73): the audit's own probes, within their budgets
            question, probe, index = (row[TRY_COLUMNS.index(k)] for k in TRY_KEYS)
            if probe != DEFAULT_PROBE and probe not in info.probes:
                raise RnrLensError(f"{source} holds a try of probe {quoted(probe)}, which audit {info.id[:12]} did not run; it is not a shard of it")
            if probe in budgets and not (isinstance(index, int) and 0 <= index < budgets[probe]):
                raise RnrLensError(
                    f"{source} holds try {quoted(index)} of {quoted(probe)} for question {quoted(question)} beyond the probe's budget of "
                    f"{budgets[probe]} (audit {info.id[:12]}); it is not a shard of it"
                )
        for qid, position, _prompt, _gold in payload["questions"]:
            if not (isinstance(position, int) and 0 <= position < info.n_questions):
                raise RnrLensError(
                    f"{source} holds question {quoted(qid)} at position {quoted(position)} of audit {info.id[:12]}, which has "
                    f"{info.n_questions} questions; it is not a shard of it"
                )
        with self.transaction() as c:
            here = c.execute("SELECT status FROM audits WHERE id=?", (info.id,)).fetchone()
            if here is not None and c.execute("SELECT n_questions FROM audits WHERE id=?", (info.id,)).fetchone()[0] != info.n_questions:
                raise RnrLensError(
                    f"{source} and the merged store disagree on how many questions audit {info.id[:12]} has; they are not shards of one audit"
                )
            if here is None:
                _insert_audit(c, info, created=info.created or time.time(), status=info.status)
            elif info.status.complete:
                c.execute("UPDATE audits SET status=? WHERE id=?", (str(COMPLETE), info.id))
            existing_q = {r[0]: r[1:] for r in c.execute("SELECT question_id, prompt, gold FROM questions WHERE audit_id=?", (info.id,))}
            for qid, _position, prompt, gold in payload["questions"]:
                if qid in existing_q and existing_q[qid] != (prompt, gold):
                    raise RnrLensError(
                        f"{source} and the merged store disagree on question {qid} of audit {info.id[:12]}; they are not shards of one audit"
                    )
            c.executemany("INSERT OR IGNORE INTO questions VALUES (?,?,?,?,?)", [(info.id, *q) for q in payload["questions"]])
            held = c.execute("SELECT COUNT(*) FROM questions WHERE audit_id=?", (info.id,)).fetchone()[0]
            if held > info.n_questions:  # the transaction rolls back: nothing is written
                raise RnrLensError(
                    f"{source} would give audit {info.id[:12]} {held} questions, more than the {info.n_questions} it has; it is not a shard of it"
                )
            key_cols, result_cols = TRY_KEYS, TRY_ANSWERS
            index = {c_: TRY_COLUMNS.index(c_) for c_ in (*key_cols, *result_cols)}
            existing_t = {
                tuple(r[:3]): tuple(r[3:]) for r in c.execute(f"SELECT {', '.join(key_cols + result_cols)} FROM tries WHERE audit_id=?", (info.id,))
            }
            new = []
            for row in payload["tries"]:
                key = tuple(row[index[k]] for k in key_cols)
                values = tuple(row[index[k]] for k in result_cols)
                if key in existing_t:
                    if existing_t[key] != values:
                        raise RnrLensError(
                            f"{source} and the merged store disagree on try {key[2]} of {key[1]} for question {key[0]} (audit {info.id[:12]}); "
                            "they were not made by the same deterministic run"
                        )
                    continue
                existing_t[key] = values
                new.append((info.id, *row))
            c.executemany(f"INSERT INTO tries (audit_id, {', '.join(TRY_COLUMNS)}) VALUES ({', '.join('?' * (len(TRY_COLUMNS) + 1))})", new)
            for artifact, name, body, created in payload["artifacts"]:
                row = c.execute("SELECT body FROM artifacts WHERE audit_id=? AND kind=? AND name=?", (info.id, artifact, name)).fetchone()
                if row is None:
                    c.execute("INSERT INTO artifacts VALUES (?,?,?,?,?)", (info.id, artifact, name, body, created))
                elif row[0] != body and artifact != Artifact.SHARD:
                    raise RnrLensError(
                        f"{source} and the merged store disagree on {artifact} {name!r} of audit {info.id[:12]}; merge only results of one run"
                    )
        self.refresh_status(info.id)
        return len(new)

    def checkpoint(self) -> None:
        """Fold the write-ahead log into the database file (before moving the file)."""
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    # -- tries -----------------------------------------------------------------------------
    def add_tries(self, audit_id: str, tries: Iterable[Try]) -> int:
        """Commit finished tries; return how many were new.

        A try another writer of the same audit already committed (two ``--resume`` runs at
        once) is kept as it is: an audit is deterministic, so both computed the same answer.
        """
        rows = [(audit_id, *[getattr(t, c) for c in TRY_COLUMNS]) for t in tries]
        if not rows:
            return 0
        cols = ", ".join(["audit_id", *TRY_COLUMNS])
        with self.transaction() as c:
            before = c.total_changes
            c.executemany(
                f"INSERT INTO tries ({cols}) VALUES ({', '.join('?' * (len(TRY_COLUMNS) + 1))})"
                " ON CONFLICT (audit_id, question_id, probe, try_index) DO NOTHING",
                rows,
            )
            added = c.total_changes - before
        return added

    def count_tries(self, audit_id: str) -> dict[str, int]:
        """Stored tries per probe of one audit (``default`` included)."""
        rows = self.conn.execute("SELECT probe, count(*) FROM tries WHERE audit_id=? GROUP BY probe", (audit_id,)).fetchall()
        return {probe: int(n) for probe, n in rows}

    def done_keys(self, audit_id: str, probe: str) -> dict[tuple[str, int], Try]:
        cur = self.conn.execute(f"SELECT {', '.join(TRY_COLUMNS)} FROM tries WHERE audit_id=? AND probe=?", (audit_id, probe))
        out = {}
        for row in cur.fetchall():
            t = Try(**dict(zip(TRY_COLUMNS, row)))
            t.correct = bool(t.correct)
            out[(t.question_id, t.try_index)] = t
        return out

    def tries(self, audit_id: str) -> pd.DataFrame:
        df = pd.read_sql_query(
            "SELECT t.* FROM tries t JOIN questions q ON q.audit_id=t.audit_id AND q.question_id=t.question_id"
            " WHERE t.audit_id=? ORDER BY q.position, t.probe, t.try_index",
            self.conn,
            params=(audit_id,),
        )
        df["correct"] = df["correct"].astype(bool)
        return df

    def questions(self, audit_id: str) -> pd.DataFrame:
        return pd.read_sql_query("SELECT * FROM questions WHERE audit_id=? ORDER BY position", self.conn, params=(audit_id,))

    # -- artifacts (frozen failure sets, sweeps, summaries) ---------------------------------
    def put_artifact(self, audit_id: str, artifact: Artifact, name: str, body: Any, overwrite: bool = False) -> None:
        verb = "INSERT OR REPLACE" if overwrite else "INSERT"
        try:
            self.conn.execute(f"{verb} INTO artifacts VALUES (?,?,?,?,?)", (audit_id, artifact, name, json.dumps(body), time.time()))
        except sqlite3.IntegrityError:
            raise RnrLensError(
                f"{artifact} {name!r} already exists for audit {audit_id[:12]}; frozen results are never recomputed silently"
            ) from None

    def artifacts(self, audit_id: str, artifact: Artifact, prefix: str = "") -> dict[str, Any]:
        """All artifacts of one category whose name starts with ``prefix``, by name."""
        rows = self.conn.execute(
            "SELECT name, body FROM artifacts WHERE audit_id=? AND kind=? AND substr(name, 1, ?)=?", (audit_id, artifact, len(prefix), prefix)
        ).fetchall()
        return {name: loads_json(body, f"{self.path}'s {artifact} {quoted(name)}") for name, body in rows}

    def get_artifact(self, audit_id: str, artifact: Artifact, name: str) -> Any | None:
        row = self.conn.execute("SELECT body FROM artifacts WHERE audit_id=? AND kind=? AND name=?", (audit_id, artifact, name)).fetchone()
        return loads_json(row[0], f"{self.path}'s {artifact} {quoted(name)}") if row else None


def refuse_links(path: str | Path) -> None:
    """Refuse to write a run store at ``path`` when it, its WAL or its shared memory is a symbolic
    link, dangling or not: a store is never written through a planted link (issue 73). Cheap, so
    it runs before any model loads (:func:`rnr_lens.measure.audits.prepared`) and again on opening.

    Example:
        >>> refuse_links("run.db")  # nothing there, or a plain file: no error
    """
    for linked in (str(path), f"{path}-wal", f"{path}-shm"):
        if Path(linked).is_symlink():
            raise RnrLensError(f"{linked} is a symbolic link; a run store is never written through one: remove the link or choose another path")


def _await_creation(path: str, wait: float = 10.0) -> None:
    """A reader that finds an empty store file while its writer holds the lock is looking
    between the file's creation and its schema (``rnr-lens show`` polling a starting audit):
    wait for the schema, up to ``wait`` seconds, rather than call the file empty."""
    deadline = time.monotonic() + wait
    while not _has_schema(path) and writer_active(path) and time.monotonic() < deadline:
        time.sleep(0.05)


def _has_schema(path: str) -> bool:
    try:
        with contextlib.closing(sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True, timeout=1)) as conn:
            return conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'").fetchone() is not None
    except sqlite3.DatabaseError:
        return False


def open_store(store: RunStore | str | Path | None, mode: str = "create") -> RunStore:
    """``store`` itself when it is a :class:`RunStore`, else the store at that path in ``mode``
    (None: a new one in memory)."""
    if isinstance(store, RunStore):
        return store
    return RunStore(MEMORY if store is None else store, mode=mode)


def _insert_audit(c: sqlite3.Connection, record: AuditRecord, *, created: float, status: AuditStatus) -> None:
    c.execute(
        "INSERT INTO audits (id, created, model, model_fingerprint, task, task_fingerprint, answer_type, config_hash,"
        " config_json, probes_json, seed, n_questions, label, status) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            record.id,
            created,
            record.model,
            record.model_fingerprint,
            record.task,
            record.task_fingerprint,
            record.answer_type,
            record.config_hash,
            record.config_json,
            json.dumps(list(record.probes)),
            record.seed,
            record.n_questions,
            record.label,
            str(status),
        ),
    )


def merge(inputs: Sequence[str | Path], out: str | Path) -> RunStore:
    """Merge run stores into a new one at ``out`` (written beside it, renamed when complete).

    Rows present in several inputs are kept once; rows that disagree, or audits of the same
    model, task, probes and seed made under different deployment configs, stop the merge
    with an error and leave nothing at ``out``.
    """
    out = Path(out)
    if not inputs:
        raise RnrLensError("merge needs at least one run store")
    for path in inputs:
        if not Path(path).is_file():
            raise RnrLensError(f"run store {path} does not exist")
        if Path(path).resolve() == out.resolve():
            raise RnrLensError(f"{out} is also an input; merge into a new file")
    if out.exists():
        raise RnrLensError(f"{out} already exists; merge into a new file (or delete it first)")
    if not out.parent.exists():
        raise RnrLensError(f"folder {out.parent} does not exist; create it or choose another path for the merged store")
    with built_whole(out) as merged:
        for path in inputs:
            source = RunStore(path, mode="read")
            try:
                for info in source.audits():
                    merged.absorb(source.export_audit(info.id), source=str(path))
            finally:
                source.close()
        for info in merged.audits():
            _check_whole_task(merged, info, ", ".join(map(str, inputs)))
    return RunStore(out)


def _check_whole_task(store: RunStore, info: AuditRecord, source: str) -> None:
    """Refuse a merged audit that holds every question but not the task its id names (issue 73:
    a stranger's shard under the user's audit id, its questions or golds altered): the questions
    in order give the fingerprint again. A choice task's choices are not stored, so its
    fingerprint cannot be recomputed."""
    rows = store.conn.execute("SELECT question_id, prompt, gold FROM questions WHERE audit_id=? ORDER BY position", (info.id,)).fetchall()
    if info.answer_type == "choice" or len(rows) != info.n_questions:
        return
    found = task_fingerprint(info.answer_type, ((qid, prompt, gold, ()) for qid, prompt, gold in rows))
    if found != info.task_fingerprint:
        raise RnrLensError(
            f"the questions {source} give audit {info.id[:12]} make the task fingerprint {found}, but its id names {info.task_fingerprint}; "
            "a shard's question or gold was altered, so nothing was merged"
        )


@contextmanager
def built_whole(out: str | Path) -> Iterator[RunStore]:
    """A new run store, filled inside the block beside ``out`` and renamed to ``out`` when the
    block completes; on any error nothing is left (``merge`` and an evidence restore build
    stores this way, so a store that exists is whole)."""
    out = Path(out)
    partial = out.with_name(f".{out.name}.partial")
    leftovers = (partial, Path(f"{partial}-wal"), Path(f"{partial}-shm"))
    with writer_lock(out, f"the run store {out}"):  # a second build of the same store waits its turn or is refused
        for leftover in leftovers:
            leftover.unlink(missing_ok=True)
        store = RunStore(partial)
        try:
            yield store
            store.checkpoint()
            store.close()
            os.replace(partial, out)
        except BaseException:
            store.close()
            for leftover in leftovers:
                leftover.unlink(missing_ok=True)
            raise
        finally:
            lock_file(partial).unlink(missing_ok=True)  # the partial store is only ever built under out's lock


def _budgets(info: AuditRecord) -> dict[str, int]:
    """Tries per question each of an audit's probes may hold, where its name says (the default
    deployment one; a probe named with ``k``, ``k``; an ablation's depends on the model)."""
    out = {DEFAULT_PROBE: 1}
    for probe in info.probes:
        k = ProbeSpec.parse(probe).get("k")
        if k is not None and k.isdigit():
            out[probe] = int(k)
    return out
