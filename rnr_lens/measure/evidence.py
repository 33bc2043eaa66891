"""A report's evidence: the compact, model-free file its claims are re-derived from.

A report (:func:`rnr_lens.grids.reports.report`) keeps everything it computes in its run store, and
a **manifest** there: the grid, each setting's audit and the stages done, and the run's
:class:`~rnr_lens.core.provenance.Provenance`. The **evidence** is a compacted, compressed copy of
that store: ``evidence.json.gz``, one gzip-compressed JSON document

    {"format": "rnr-lens evidence", "version": 1, "manifest": {...}, "audits": [...]}

whose ``audits`` are the manifest's audits exactly as :meth:`RunStore.export_audit` writes them
(settings, fingerprints, questions, every try, and every artifact: failure sets, sweep
evaluations and tables, nulls). Nothing a claim reads lives outside it, so
:func:`restore` rebuilds a store from it alone, and the report's claims (which are always
derived from the store, never from objects held in memory) come out byte for byte the same.

Invariants: the file is replaced atomically (a run killed midway leaves the evidence of its
last finished stage); it is deterministic (rows in key order, a fixed gzip header), so the same
store writes the same bytes and a committed evidence file changes only where results did.

Example:
    >>> import tempfile, pathlib
    >>> from rnr_lens.measure.store import RunStore, built_whole
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> m = Manifest(grid={"models": ["m"], "tasks": ["t"]})
    >>> path = write(RunStore(":memory:"), m, folder / EVIDENCE_FILE)
    >>> restore(path, folder / "runs.db").grid["models"]
    ['m']
"""

from __future__ import annotations

import gzip
import io
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rnr_lens.core.files import write_atomic
from rnr_lens.core.provenance import Provenance
from rnr_lens.core.records import DEFAULT_PROBE, AuditRecord, check_audit_id, short_hash
from rnr_lens.core.untrusted import EVIDENCE_BYTES, OverLimit, check_int, check_text, loads_json, quoted, read_gzip
from rnr_lens.errors import RnrLensError
from rnr_lens.measure.store import Artifact, RunStore, built_whole
from rnr_lens.model.routes import Route

EVIDENCE_FILE = "evidence.json.gz"
"""The evidence's file name in a report folder."""
FORMAT = "rnr-lens evidence"
VERSION = 1
MIN_BYTES_PER_VALUE = 16
"""The fewest inflated bytes per JSON list or mapping in evidence (a try row is over a hundred):
a file packed with empty lists would take twenty times its size in memory when parsed."""
MIN_BYTES_PER_STRING = 12
"""The fewest inflated bytes per string in evidence (committed evidence has 25 or more): a file
packed with two-letter strings would take over ten times its size in memory when parsed."""
MANIFEST_KEY = "report"
"""The store-wide record under which a report keeps its manifest."""
AUDITED, MINED = "audit", "mined"
"""A setting's stages: its audit is complete; claim 2's failure set, sweeps and null are kept."""


@dataclass(frozen=True)
class SettingRecord:
    """One setting of a report (a model spec on a task): its audit, the stages done
    (``audit``; ``mined``: claim 2's failure set, sweeps and null kept in the store), and the
    audit of the grid's ceiling probe where the grid measures claim 3 at large k."""

    model: str
    task: str
    audit: str
    stages: tuple[str, ...] = (AUDITED,)
    ceiling: str | None = None

    def done(self, mined: bool) -> bool:
        """Every stage of this setting has finished (``mined``: the setting has claim 2's stage)."""
        return MINED in self.stages or not mined

    def to_dict(self) -> dict[str, Any]:
        out = {"model": self.model, "task": self.task, "audit": self.audit, "stages": list(self.stages)}
        return out | ({"ceiling": self.ceiling} if self.ceiling is not None else {})

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SettingRecord:
        ceiling = d.get("ceiling")
        return cls(str(d["model"]), str(d["task"]), str(d["audit"]), tuple(d.get("stages", (AUDITED,))), None if ceiling is None else str(ceiling))


@dataclass(frozen=True)
class Manifest:
    """What a report has done, in order: its grid (as the grid file's fields), its settings,
    and its provenance. The claims are derived from it and the store alone."""

    grid: Mapping[str, Any]
    settings: tuple[SettingRecord, ...] = ()
    provenance: Provenance = field(default_factory=Provenance)

    def setting(self, model: str, task: str) -> SettingRecord | None:
        """The record of ``model`` on ``task`` (None: not audited yet)."""
        return next((s for s in self.settings if (s.model, s.task) == (model, task)), None)

    def with_setting(self, record: SettingRecord) -> Manifest:
        """This manifest with ``record`` replacing its setting's record, or appended."""
        kept = [s for s in self.settings if (s.model, s.task) != (record.model, record.task)]
        at = next((i for i, s in enumerate(self.settings) if (s.model, s.task) == (record.model, record.task)), len(kept))
        return replace(self, settings=(*kept[:at], record, *kept[at:]))

    @property
    def audits(self) -> list[str]:
        """The audits the settings name (each setting's, then its ceiling audit), each once, in order."""
        return list(dict.fromkeys(a for s in self.settings for a in (s.audit, s.ceiling) if a is not None))

    def to_dict(self) -> dict[str, Any]:
        return {"grid": dict(self.grid), "settings": [s.to_dict() for s in self.settings], "provenance": self.provenance.to_dict()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Manifest:
        return cls(dict(d["grid"]), tuple(SettingRecord.from_dict(s) for s in d.get("settings", ())), Provenance.from_dict(d.get("provenance", {})))

    def save(self, store: RunStore) -> None:
        """Keep this manifest in ``store`` (a report does after every stage)."""
        store.put_record(MANIFEST_KEY, self.to_dict())

    @classmethod
    def load(cls, store: RunStore) -> Manifest | None:
        """The manifest kept in ``store`` (None: the store holds no report)."""
        body = store.get_record(MANIFEST_KEY)
        if body is None:
            return None
        if not isinstance(body, dict):  # a store from outside: its manifest is checked as evidence's is
            raise RnrLensError(f"{store.path} is not a run store rnr_lens made (its manifest is not a mapping)")
        try:
            check_manifest(body, {a.id for a in store.audits()})
        except RnrLensError as exc:
            raise RnrLensError(f"{store.path} is not a run store rnr_lens made ({exc})") from None
        return cls.from_dict(body)


def write(store: RunStore, manifest: Manifest, path: str | Path, *, every_audit: bool = False) -> Path:
    """Write the evidence of ``manifest`` (its audits, exported from ``store``) to ``path``,
    atomically; return the path. ``every_audit``: every audit in the store, those still running
    too (a snapshot taken beside a running report, so a resume elsewhere loses no try)."""
    path = Path(path)
    audits = [a.id for a in store.audits()] if every_audit else manifest.audits
    document = {"format": FORMAT, "version": VERSION, "manifest": manifest.to_dict(), "audits": [store.export_audit(a) for a in audits]}
    raw = json.dumps(document, separators=(",", ":")).encode()
    packed = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=packed, mtime=0, compresslevel=6) as z:
        z.write(raw)
    return write_atomic(path, packed.getvalue())


def read(path: str | Path) -> dict[str, Any]:
    """The evidence document at ``path``, checked to be one before anything is built from it.

    Evidence may come from a stranger, so every field is checked as :func:`check` says; any
    failure is one line naming the file.
    """
    path = Path(path)
    if not path.is_file():
        raise RnrLensError(f"evidence file {path} does not exist; give the {EVIDENCE_FILE} of a report folder")
    try:
        raw = read_gzip(path, EVIDENCE_BYTES, where="it")
        if len(raw) > 10**6 and (raw.count(b"[") + raw.count(b"{")) * MIN_BYTES_PER_VALUE > len(raw):
            raise RnrLensError(f"it holds more lists and mappings than evidence can (one per {MIN_BYTES_PER_VALUE} bytes at most)")
        if len(raw) > 10**6 and raw.count(b'"') // 2 * MIN_BYTES_PER_STRING > len(raw):
            raise RnrLensError(f"it holds more strings than evidence can (one per {MIN_BYTES_PER_STRING} bytes at most)")
        document = loads_json(raw, "it")
    except OverLimit:
        raise
    except RnrLensError as exc:
        raise RnrLensError(f"{path} is not rnr_lens evidence ({exc}); give the {EVIDENCE_FILE} a report wrote") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise RnrLensError(f"{path} is not rnr_lens evidence (no format {FORMAT!r}); give the {EVIDENCE_FILE} a report wrote")
    version = document.get("version")
    if isinstance(version, bool) or version != VERSION:
        raise RnrLensError(f"{path} is evidence version {quoted(version)}; this rnr_lens reads version {VERSION} (use the rnr_lens that wrote it)")
    if not isinstance(document.get("manifest"), dict) or "grid" not in document["manifest"] or not isinstance(document.get("audits"), list):
        raise RnrLensError(f"{path} is incomplete evidence (no manifest with a grid, or no audits); give the {EVIDENCE_FILE} a report wrote")
    try:
        check(document)
    except RnrLensError as exc:
        raise RnrLensError(f"{path} is not evidence rnr_lens wrote: {exc}") from None
    return document


# ---------------------------------------------------------------------------------------------
# The evidence's schema: what read() checks before anything is rebuilt
# ---------------------------------------------------------------------------------------------

_TRY_TYPES: dict[str, tuple[type, ...]] = {
    "question_id": (str,),
    "probe": (str,),
    "try_index": (int,),
    "text": (str,),
    "extracted": (str, type(None)),
    "correct": (int,),
    "n_tokens": (int,),
    "seed": (int, type(None)),
    "route": (str, type(None)),
    "ablation": (str, type(None)),
    "mean_logprob": (float, int, type(None)),
    "mean_entropy": (float, int, type(None)),
    "reward": (float, int, type(None)),
}
"""Each stored try column's JSON types, in :data:`~rnr_lens.core.records.TRY_COLUMNS` order."""
_NAMES = frozenset({"question_id", "probe", "route", "ablation"})
_ROUTE = list(_TRY_TYPES).index("route")
"""Try columns that are names: plain text without control characters."""
_DOCUMENT_KEYS = frozenset({"format", "version", "manifest", "audits"})
_MANIFEST_KEYS = frozenset({"grid", "settings", "provenance"})
_RECORD_NAMES = ("model", "model_fingerprint", "task", "task_fingerprint", "answer_type")


def check(document: Mapping[str, Any]) -> None:
    """Refuse, in one line, evidence that rnr_lens could not have written: wrong types, rows
    of the wrong length, integers out of range, text with lone surrogates, names with control
    characters, audit ids that are not the tool's, a config hash or an audit id that does not
    match what its fields give, and settings naming audits the evidence does not hold."""
    manifest = document["manifest"]
    for where, value, known in (("the document", document, _DOCUMENT_KEYS), ("its manifest", manifest, _MANIFEST_KEYS)):
        unknown = sorted(set(value) - known)
        if unknown:
            raise RnrLensError(f"{where} has a field evidence does not have ({quoted(unknown[0])})")
    ids = {_check_audit(payload, i) for i, payload in enumerate(document["audits"], 1)}
    check_manifest(manifest, ids)


def check_manifest(manifest: Mapping[str, Any], ids: set[str]) -> None:
    """Refuse, in one line, a manifest rnr_lens could not have written, where ``ids`` are the
    audits beside it (in the evidence, or in the run store that keeps it): settings that are not
    mappings of plain names, name audits not there, repeat a setting or share an audit (work
    per setting is bounded by what the file holds: 2,000 settings naming one audit are refused,
    not re-derived 2,000 times), and a provenance that does not read."""
    if not isinstance(manifest.get("grid"), dict):
        raise RnrLensError("its manifest's grid is not a mapping")
    settings = manifest.get("settings", [])
    if not isinstance(settings, list):
        raise RnrLensError("its manifest's settings are not a list")
    pairs: set[tuple[str, str]] = set()  # (model, task): one setting each
    used: set[tuple[str, object]] = set()  # (role, audit id): one setting each
    for i, s in enumerate(settings, 1):
        where = f"setting {i}"
        if not isinstance(s, dict):
            raise RnrLensError(f"{where} is not a mapping")
        for key in ("model", "task"):
            check_text(s.get(key), f"{where}'s {key}", name=True)
        if (s["model"], s["task"]) in pairs:
            raise RnrLensError(f"{where} repeats the setting {quoted(s['model'])} on {quoted(s['task'])}")
        pairs.add((s["model"], s["task"]))
        for key in ("audit", "ceiling"):
            if key == "audit" or s.get(key) is not None:
                if check_audit_id(s.get(key), where) not in ids:
                    raise RnrLensError(f"{where} names audit {s[key]}, which the evidence does not hold")
                if (key, s[key]) in used:
                    raise RnrLensError(f"{where} names audit {s[key]} as its {key}, which another setting does too")
                used.add((key, s[key]))
        stages = s.get("stages", [AUDITED])
        if not isinstance(stages, list) or any(stage not in (AUDITED, MINED) for stage in stages):
            raise RnrLensError(f"{where}'s stages {quoted(stages)} are not a list of {AUDITED!r} and {MINED!r}")
    if not isinstance(manifest.get("provenance", {}), dict):
        raise RnrLensError("its manifest's provenance is not a mapping")
    try:
        Manifest.from_dict(manifest)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise RnrLensError(f"its manifest does not read ({type(exc).__name__}: {quoted(str(exc))})") from None


def _check_audit(payload: object, i: int) -> str:
    """Check one exported audit (:meth:`RunStore.export_audit`'s shape); return its id."""
    where = f"audit {i}"
    if not isinstance(payload, dict) or not all(isinstance(payload.get(k), t) for k, t in _PAYLOAD.items()):
        raise RnrLensError(f"{where} is not an exported audit (a mapping of audit, questions, tries and artifacts)")
    record = payload["audit"]
    audit_id = check_audit_id(record.get("id"), where)
    where = f"audit {audit_id}"
    for key in _RECORD_NAMES:
        check_text(record.get(key), f"{where}'s {key}", name=True)
    config_json = check_text(record.get("config_json"), f"{where}'s config_json")
    if not isinstance(loads_json(config_json, f"{where}'s config_json"), dict):
        raise RnrLensError(f"{where}'s config_json is not a mapping")
    if record.get("config_hash") != short_hash(config_json):
        raise RnrLensError(f"{where}'s config_hash {quoted(record.get('config_hash'))} is not the hash of its config_json; the evidence was altered")
    probes = record.get("probes")
    if not isinstance(probes, list):
        raise RnrLensError(f"{where}'s probes are not a list")
    for probe in probes:
        check_text(probe, f"{where}'s probe", name=True)
    check_int(record.get("seed"), f"{where}'s seed", 0, 2**32 - 1)
    check_int(record.get("n_questions"), f"{where}'s n_questions")
    if record.get("label") is not None:
        check_text(record["label"], f"{where}'s label", name=True)
    created = record.get("created")
    if created is not None and (isinstance(created, bool) or not isinstance(created, (int, float))):
        raise RnrLensError(f"{where}'s created is {quoted(created)}, not a time")
    try:
        info = AuditRecord.from_dict(record)
    except (KeyError, TypeError, ValueError, RnrLensError) as exc:
        raise RnrLensError(f"{where}'s record does not read ({quoted(str(exc))})") from None
    if info.expected_id() != audit_id:
        raise RnrLensError(f"{where}'s id is not the one its model, task, config, probes and seed give; the evidence was altered")
    questions = set()
    for row in payload["questions"]:
        if not isinstance(row, list) or len(row) != 4:
            raise RnrLensError(f"{where} has a question row that is not [id, position, prompt, gold]")
        questions.add(check_text(row[0], f"{where}'s question id", name=True))
        check_int(row[1], f"{where}'s question position")
        check_text(row[2], f"{where}'s question {quoted(row[0])} prompt")
        check_text(row[3], f"{where}'s question {quoted(row[0])} gold")
    positions = {row[1] for row in payload["questions"]}
    if len(questions) != len(payload["questions"]) or len(positions) != len(questions) or not positions <= set(range(info.n_questions)):
        raise RnrLensError(f"{where} holds repeated questions, or positions outside its {info.n_questions} questions")
    if info.status.complete and len(questions) != info.n_questions:  # a count is recomputed, not trusted (issue 73)
        raise RnrLensError(f"{where} is complete with {len(questions)} questions, but says it has {info.n_questions}; the evidence was altered")
    probe_names = {DEFAULT_PROBE, *probes}
    depths: set[int] = set()
    for row in payload["tries"]:
        if not isinstance(row, list) or len(row) != len(_TRY_TYPES):
            raise RnrLensError(f"{where} has a try row that is not {len(_TRY_TYPES)} columns ({', '.join(_TRY_TYPES)})")
        for value, (column, types) in zip(row, _TRY_TYPES.items()):
            if isinstance(value, bool) or not isinstance(value, types):
                raise RnrLensError(f"{where} has a try whose {column} is {quoted(value)}")
            if isinstance(value, str):
                check_text(value, f"{where}'s try {column}", name=column in _NAMES)
            elif isinstance(value, int):
                check_int(value, f"{where}'s try {column}", -(2**63), 2**63 - 1)
            elif isinstance(value, float) and not math.isfinite(value):
                raise RnrLensError(f"{where} has a try whose {column} is {value}")
        if row[0] not in questions or row[1] not in probe_names or row[5] not in (0, 1) or row[2] < 0:
            raise RnrLensError(f"{where} has a try of an unknown question or probe, or with correct outside 0/1 or a negative index")
        if row[_ROUTE] is not None:
            depths.add(Route.depth_of(row[_ROUTE]))
            if len(depths) > 1:  # one model, one depth: a route claiming another is not this audit's (issue 73)
                raise RnrLensError(f"{where} has routes of models of {min(depths)} and {max(depths)} blocks; an audit's routes are of one model")
    kinds = {str(a) for a in Artifact}
    for row in payload["artifacts"]:
        if not isinstance(row, list) or len(row) != 4 or row[0] not in kinds:
            raise RnrLensError(f"{where} has an artifact row that is not [kind, name, body, created] of a known kind")
        check_text(row[1], f"{where}'s {row[0]} name", name=True)
        loads_json(check_text(row[2], f"{where}'s {row[0]} {quoted(row[1])}"), f"{where}'s {row[0]} {quoted(row[1])}")
        if isinstance(row[3], bool) or not isinstance(row[3], (int, float)):
            raise RnrLensError(f"{where}'s {row[0]} {quoted(row[1])} has no creation time")
    return audit_id


_PAYLOAD = {"audit": dict, "questions": list, "tries": list, "artifacts": list}


def snapshot(store_path: str | Path, path: str | Path) -> Path:
    """Evidence of a report still running: every audit in its store (read-only, beside the
    writer), those in progress too, with the manifest as it stands. A report resumed from it
    (``rnr-lens report GRID --from-evidence``) continues each audit where the snapshot left it."""
    store = RunStore(store_path, mode="read")
    try:
        manifest = Manifest.load(store)
        if manifest is None:
            raise RnrLensError(f"{store_path} holds no report yet (no manifest); snapshot the runs.db of a running rnr-lens report")
        return write(store, manifest, path, every_audit=True)
    finally:
        store.close()


def restore(path: str | Path, store_path: str | Path) -> Manifest:
    """Rebuild a run store at ``store_path`` (which must not exist) from the evidence at
    ``path``; return its manifest. Written beside its place and renamed when whole."""
    return rebuild(read(path), store_path, source=str(path))


def rebuild(document: Mapping[str, Any], store_path: str | Path, source: str = "the evidence") -> Manifest:
    """:func:`restore` from an evidence document already :func:`read`."""
    store_path = Path(store_path)
    if store_path.exists():
        raise RnrLensError(f"{store_path} already exists; restore evidence into a new report folder (or delete the store first)")
    if not store_path.parent.is_dir():
        raise RnrLensError(f"folder {store_path.parent} does not exist; create it first")
    with built_whole(store_path) as store:
        for payload in document["audits"]:
            store.absorb(payload, source=source)
        manifest = Manifest.from_dict(document["manifest"])
        manifest.save(store)
    return manifest
