"""A report's evidence: the compact, model-free file its claims are re-derived from.

A report (:func:`rnr_lens.reports.report`) keeps everything it computes in its run store, and
a **manifest** there: the grid, each setting's audit and the stages done, and the run's
:class:`~rnr_lens.provenance.Provenance`. The **evidence** is a compacted, compressed copy of
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
    >>> from rnr_lens.store import RunStore, built_whole
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
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rnr_lens.errors import RnrLensError
from rnr_lens.files import write_atomic
from rnr_lens.provenance import Provenance
from rnr_lens.store import RunStore, built_whole

EVIDENCE_FILE = "evidence.json.gz"
"""The evidence's file name in a report folder."""
FORMAT = "rnr-lens evidence"
VERSION = 1
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
        return None if body is None else cls.from_dict(body)


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
    """The evidence document at ``path``, checked to be one (a one-line error otherwise)."""
    path = Path(path)
    if not path.is_file():
        raise RnrLensError(f"evidence file {path} does not exist; give the {EVIDENCE_FILE} of a report folder")
    try:
        document = json.loads(gzip.decompress(path.read_bytes()))
    except (OSError, EOFError, zlib.error, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RnrLensError(f"{path} is not rnr_lens evidence (not gzip-compressed JSON: {exc}); give the {EVIDENCE_FILE} a report wrote") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise RnrLensError(f"{path} is not rnr_lens evidence (no format {FORMAT!r}); give the {EVIDENCE_FILE} a report wrote")
    if document.get("version") != VERSION:
        raise RnrLensError(
            f"{path} is evidence version {document.get('version')}; this rnr_lens reads version {VERSION} (use the rnr_lens that wrote it)"
        )
    if not isinstance(document.get("manifest"), dict) or "grid" not in document["manifest"] or not isinstance(document.get("audits"), list):
        raise RnrLensError(f"{path} is incomplete evidence (no manifest with a grid, or no audits); give the {EVIDENCE_FILE} a report wrote")
    return document


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
