"""Writing files whole, one writer at a time, and one line when the machine refuses a write.

Guards against a crash or a full disk leaving half a claims.json or a temporary file behind, a
second process writing a store beside the first, and a full disk or a read-only file ending in a
traceback instead of one line naming the path.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import subprocess
import sys

import pytest

from rnr_lens.core.files import NoSpace, human_bytes, lock_file, refusal, write_atomic, writer_lock
from rnr_lens.errors import RnrLensError
from rnr_lens.measure.store import RunStore


def test_write_atomic_replaces_whole_and_leaves_no_temporary_file(tmp_path):
    target = tmp_path / "claims.json"
    write_atomic(target, "old")
    write_atomic(target, b"new")
    assert target.read_text() == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["claims.json"]


def test_write_atomic_replaces_a_planted_symlink_and_never_writes_through_it(tmp_path):
    victim = tmp_path / "elsewhere" / "victim.txt"
    victim.parent.mkdir()
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "claims.json").symlink_to(victim)  # dangling: exists() is False, open() would write through it
    write_atomic(folder / "claims.json", "{}")
    assert not victim.exists() and not (folder / "claims.json").is_symlink() and (folder / "claims.json").read_text() == "{}"
    victim.write_text("theirs")
    (folder / "claims.json").unlink()
    (folder / "claims.json").symlink_to(victim)
    write_atomic(folder / "claims.json", "{}")
    assert victim.read_text() == "theirs"


def test_a_planted_lock_file_link_is_refused_and_its_target_untouched(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("theirs")
    (tmp_path / ".runs.db.lock").symlink_to(victim)
    with pytest.raises(RnrLensError, match="is a symbolic link; rnr_lens makes its lock files itself"):
        with writer_lock(tmp_path / "runs.db", "the run store"):
            pass
    assert victim.read_text() == "theirs"


def test_a_refused_write_keeps_the_old_file_and_removes_its_temporary_one(tmp_path, monkeypatch):
    target = tmp_path / "claims.json"
    write_atomic(target, "old")

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)  # the write is refused midway, as on a full disk
    with pytest.raises(NoSpace, match=r"no space left on the device of .*claims\.json \(.* free there; the work left needs about 3 B\)"):
        write_atomic(target, "new")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["claims.json"]


@pytest.mark.parametrize(
    ("exc", "says"),
    [
        (OSError(errno.ENOSPC, "No space left on device"), "no space left on the device of"),
        (sqlite3.OperationalError("database or disk is full"), "no space left on the device of"),
        (RuntimeError("I/O error: No space left on device (os error 28)"), "no space left on the device of"),  # safetensors' words
        (OSError(errno.EROFS, "Read-only file system"), "it or its folder is read-only"),
        (sqlite3.OperationalError("attempt to write a readonly database"), "it or its folder is read-only"),
        (sqlite3.OperationalError("database is locked"), "stayed locked by another process"),
        (sqlite3.DatabaseError("database disk image is malformed"), "is damaged or not an rnr_lens run store"),
    ],
)
def test_what_the_machine_says_becomes_one_line_naming_the_path(exc, says, tmp_path):
    error = refusal(exc, tmp_path / "run.db")
    assert error is not None and says in str(error) and str(tmp_path / "run.db") in str(error) and "\n" not in str(error)


def test_other_errors_are_not_translated(tmp_path):
    assert refusal(ValueError("a bug"), tmp_path) is None
    assert refusal(sqlite3.IntegrityError("UNIQUE constraint failed"), tmp_path) is None
    assert human_bytes(1536) == "1.5 kB" and human_bytes(12) == "12 B"


@pytest.mark.slow  # starts processes
def test_a_second_process_is_refused_while_one_writes_a_store(tmp_path):
    db = tmp_path / "run.db"
    store = RunStore(db)
    RunStore(db).close()  # the same process may open its store again (a report and its audits)
    code = f"from rnr_lens.measure.store import RunStore\nRunStore({str(db)!r})"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert other.returncode != 0 and "the run store" in other.stderr and f"is being written by pid {os.getpid()}" in other.stderr
    RunStore(db, mode="read").close()  # readers are never refused
    store.close()
    assert subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0, "closing the store lets go of it"
    assert lock_file(db).name == ".run.db.lock"


@pytest.mark.slow  # starts a process
def test_the_lock_dies_with_its_process(tmp_path):
    code = "import os\nfrom rnr_lens.core.files import acquire_writer_lock\nacquire_writer_lock({!r}, 'it')\nos._exit(0)"
    subprocess.run([sys.executable, "-c", code.format(str(tmp_path / "run.db"))], check=True)
    with writer_lock(tmp_path / "run.db", "it"):
        pass


def test_a_store_begun_on_a_full_disk_leaves_no_file(tmp_path, monkeypatch):
    """Before: a disk that filled while the store was created left a run.db with no tables,
    which every later run refused as "an empty file"."""
    from rnr_lens.measure import store as store_module

    def full(self, script):  # what SQLite says when the schema does not fit
        with store_module.refused_writes(self.store_path):
            raise sqlite3.OperationalError("database or disk is full")

    with monkeypatch.context() as m:
        m.setattr(store_module._Connection, "executescript", full)
        with pytest.raises(NoSpace, match="run.db"):
            RunStore(tmp_path / "run.db")
    assert not [p for p in tmp_path.iterdir() if not p.name.startswith(".")]
    RunStore(tmp_path / "run.db").close()  # and the rerun creates it
