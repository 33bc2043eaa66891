"""The run store: an embedded SQLite database (WAL mode) that every long loop writes to.

Each finished try is committed with its batch, keyed by audit, question, probe and try
index, so a run killed at any moment resumes exactly where it stopped (nothing lost, nothing
duplicated: the primary key forbids it). Several audits can share one database. An audit's
id is a hash of everything that determines its results (model weights, task, deployment
config hash, probes and seed), so resuming finds the same audit.
"""

from __future__ import annotations

import json
import sqlite3
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

import pandas as pd

from rnr_lens.errors import RnrLensError

SCHEMA_VERSION = 1

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

DEFAULT_PROBE = "default"


@dataclass
class Try:
    """One model evaluation of one question under one probe."""

    question_id: str
    probe: str
    try_index: int
    text: str
    extracted: str | None
    correct: bool
    n_tokens: int
    seed: int | None = None
    route: str | None = None
    ablation: str | None = None
    mean_logprob: float | None = None
    mean_entropy: float | None = None
    reward: float | None = None


_TRY_COLUMNS = [f for f in Try.__dataclass_fields__]


class RunStore:
    """A SQLite run store at ``path`` (created on first use).

    Example:
        >>> store = RunStore(":memory:")
        >>> store.audits()
        []
    """

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        if self.path != ":memory:" and not Path(self.path).parent.exists():
            raise RnrLensError(f"folder {Path(self.path).parent} does not exist; create it or choose another --out path")
        try:
            self.conn = sqlite3.connect(self.path, timeout=60, isolation_level=None)
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
            self.conn.executescript(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise RnrLensError(f"{self.path} is not an rnr_lens run store ({exc}); choose another file") from None
        row = self.conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
        if row is None:
            self.conn.execute("INSERT INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
        elif int(row[0]) != SCHEMA_VERSION:
            raise RnrLensError(f"{self.path} uses run-store schema {row[0]}, this rnr_lens reads {SCHEMA_VERSION}")

    def close(self) -> None:
        self.conn.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    # -- audits ----------------------------------------------------------------------------
    def create_audit(self, record: dict[str, Any], questions: Iterable[tuple[str, str, str]]) -> None:
        """Register an audit and its questions (idempotent for the same id)."""
        with self.transaction() as c:
            if c.execute("SELECT 1 FROM audits WHERE id=?", (record["id"],)).fetchone():
                return
            c.execute(
                "INSERT INTO audits (id, created, model, model_fingerprint, task, task_fingerprint, answer_type, config_hash,"
                " config_json, probes_json, seed, n_questions, label) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (record["id"], time.time(), record["model"], record["model_fingerprint"], record["task"], record["task_fingerprint"],
                 record["answer_type"], record["config_hash"], record["config_json"], json.dumps(record["probes"]),
                 record["seed"], record["n_questions"], record.get("label")),
            )
            c.executemany(
                "INSERT INTO questions VALUES (?,?,?,?,?)",
                [(record["id"], qid, i, prompt, gold) for i, (qid, prompt, gold) in enumerate(questions)],
            )

    def audit(self, audit_id: str) -> dict[str, Any]:
        rows = [a for a in self.audits() if a["id"] == audit_id or a["id"].startswith(audit_id)]
        if not rows:
            raise RnrLensError(f"no audit {audit_id!r} in {self.path}; list them with 'rnr-lens show {self.path}'")
        if len(rows) > 1:
            raise RnrLensError(f"audit id {audit_id!r} is ambiguous in {self.path}; give more of it")
        return rows[0]

    def audits(self) -> list[dict[str, Any]]:
        cur = self.conn.execute("SELECT * FROM audits ORDER BY created")
        names = [d[0] for d in cur.description]
        out = []
        for row in cur.fetchall():
            rec = dict(zip(names, row))
            rec["probes"] = json.loads(rec.pop("probes_json"))
            out.append(rec)
        return out

    def set_status(self, audit_id: str, status: str) -> None:
        self.conn.execute("UPDATE audits SET status=? WHERE id=?", (status, audit_id))

    # -- tries -----------------------------------------------------------------------------
    def add_tries(self, audit_id: str, tries: Iterable[Try]) -> int:
        rows = [(audit_id, *[getattr(t, c) for c in _TRY_COLUMNS]) for t in tries]
        if not rows:
            return 0
        cols = ", ".join(["audit_id", *_TRY_COLUMNS])
        with self.transaction() as c:
            c.executemany(f"INSERT INTO tries ({cols}) VALUES ({', '.join('?' * (len(_TRY_COLUMNS) + 1))})", rows)
        return len(rows)

    def done_keys(self, audit_id: str, probe: str) -> dict[tuple[str, int], Try]:
        cur = self.conn.execute(f"SELECT {', '.join(_TRY_COLUMNS)} FROM tries WHERE audit_id=? AND probe=?", (audit_id, probe))
        out = {}
        for row in cur.fetchall():
            t = Try(**dict(zip(_TRY_COLUMNS, row)))
            t.correct = bool(t.correct)
            out[(t.question_id, t.try_index)] = t
        return out

    def tries(self, audit_id: str) -> pd.DataFrame:
        df = pd.read_sql_query(
            "SELECT t.* FROM tries t JOIN questions q ON q.audit_id=t.audit_id AND q.question_id=t.question_id"
            " WHERE t.audit_id=? ORDER BY q.position, t.probe, t.try_index",
            self.conn, params=(audit_id,),
        )
        df["correct"] = df["correct"].astype(bool)
        return df

    def questions(self, audit_id: str) -> pd.DataFrame:
        return pd.read_sql_query("SELECT * FROM questions WHERE audit_id=? ORDER BY position", self.conn, params=(audit_id,))

    # -- artifacts (frozen failure sets, sweeps, summaries) ---------------------------------
    def put_artifact(self, audit_id: str, kind: str, name: str, body: Any, overwrite: bool = False) -> None:
        verb = "INSERT OR REPLACE" if overwrite else "INSERT"
        try:
            self.conn.execute(f"{verb} INTO artifacts VALUES (?,?,?,?,?)", (audit_id, kind, name, json.dumps(body), time.time()))
        except sqlite3.IntegrityError:
            raise RnrLensError(f"{kind} {name!r} already exists for audit {audit_id[:12]}; frozen results are never recomputed silently") from None

    def get_artifact(self, audit_id: str, kind: str, name: str) -> Any | None:
        row = self.conn.execute("SELECT body FROM artifacts WHERE audit_id=? AND kind=? AND name=?", (audit_id, kind, name)).fetchone()
        return json.loads(row[0]) if row else None


def try_from_row(row: dict[str, Any]) -> Try:
    """A Try from a DataFrame row (pandas' NaN for a missing value becomes None)."""
    values = {c: (None if isinstance(row[c], float) and row[c] != row[c] else row[c]) for c in _TRY_COLUMNS}
    values["correct"] = bool(values["correct"])
    return Try(**values)

