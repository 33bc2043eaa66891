"""What the tool writes to disk: whole or not at all, one writer at a time, one line when the machine refuses.

Invariants:

- :func:`write_atomic` writes a temporary file beside the target and renames it over the target,
  so a kill or a full disk leaves the old file or the new one, never half of one, and a write
  that fails removes its temporary file (a full disk is not made fuller by leftovers).
- :func:`writer_lock` lets one process at a time write a run store or a training folder; a
  second one is refused in one line naming the holder. The lock is an ``flock`` on a hidden file
  beside what it guards, so it dies with its process: ``kill -9`` never leaves a stale lock.
- :func:`refusal` turns what the operating system or SQLite says when it refuses a write (no
  space, a read-only file or folder, a busy or damaged database) into one
  :class:`~rnr_lens.errors.RnrLensError` naming the path, the free space there and what to do.

Example:
    >>> import tempfile, pathlib
    >>> path = write_atomic(pathlib.Path(tempfile.mkdtemp()) / "claims.json", "{}")
    >>> path.read_text()
    '{}'
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rnr_lens.core.faults import point
from rnr_lens.errors import RnrLensError

NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
READ_ONLY = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})
_SQLITE_NO_SPACE = ("database or disk is full", "disk is full")
_SQLITE_READ_ONLY = ("readonly database", "read-only", "unable to open database file")
_SQLITE_BUSY = ("database is locked", "database table is locked")
_SQLITE_DAMAGED = ("malformed", "file is not a database", "disk i/o error")


def human_bytes(n: float) -> str:
    """``1536`` -> ``'1.5 kB'`` (decimal units, as ``df -H`` prints them)."""
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    raise AssertionError("unreachable")


def free_bytes(path: str | Path) -> int | None:
    """Free space on the filesystem that holds ``path`` (its nearest existing folder)."""
    here = Path(path).absolute()
    while not here.exists() and here != here.parent:
        here = here.parent
    try:
        return shutil.disk_usage(here).free
    except OSError:
        return None


class NoSpace(RnrLensError):
    """A write refused for want of space (see :func:`refusal`); :meth:`needing` adds how much the work left needs."""

    def __init__(self, where: str | Path, *, need: int | None = None) -> None:
        self.where = where
        free = free_bytes(where)
        room = f"{human_bytes(free)} free there" if free is not None else "its free space unknown"
        needs = f"; the work left needs about {human_bytes(need)}" if need else ""
        super().__init__(
            f"no space left on the device of {where} ({room}{needs}): free space there or choose another output path, then rerun the same command; what finished is kept"
        )

    def needing(self, need: int) -> NoSpace:
        """The same refusal, saying that the work left needs about ``need`` bytes."""
        return NoSpace(self.where, need=need)


def refusal(exc: BaseException, path: str | Path, *, need: int | None = None) -> RnrLensError | None:
    """The one-line error for a write the machine refused, or None when ``exc`` is not one.

    Args:
        exc: An ``OSError`` or ``sqlite3`` error.
        path: What was being written.
        need: About how many more bytes the work needs there, when the caller knows.
    """
    message = str(exc).lower()
    code = exc.errno if isinstance(exc, OSError) else None
    where = exc.filename if isinstance(exc, OSError) and exc.filename else path
    said_no_space = "no space left on device" in message or "os error 28" in message  # safetensors, torch.save
    if code in NO_SPACE or said_no_space or (isinstance(exc, sqlite3.OperationalError) and any(s in message for s in _SQLITE_NO_SPACE)):
        return NoSpace(where, need=need)
    if code in READ_ONLY or (isinstance(exc, sqlite3.OperationalError) and any(s in message for s in _SQLITE_READ_ONLY)):
        return RnrLensError(
            f"cannot write {where}: it or its folder is read-only ({exc.strerror if isinstance(exc, OSError) else exc}); make it writable or choose another output path, then rerun the same command"
        )
    if isinstance(exc, sqlite3.OperationalError) and any(s in message for s in _SQLITE_BUSY):
        return RnrLensError(f"{where} stayed locked by another process for a minute ({exc}); wait for it to finish, then rerun the same command")
    if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.IntegrityError) and any(s in message for s in _SQLITE_DAMAGED):
        return RnrLensError(
            f"{where} is damaged or not an rnr_lens run store ({exc}); rebuild it from its evidence or an export, or choose another file"
        )
    return None


@contextmanager
def refused_writes(path: str | Path, *, need: int | None = None) -> Iterator[None]:
    """Raise :func:`refusal`'s one line instead of the machine's error inside the block."""
    try:
        yield
    except RnrLensError:
        raise
    except Exception as exc:
        error = refusal(exc, path, need=need)
        if error is None:
            raise
        raise error from None


def write_atomic(path: str | Path, data: str | bytes, *, fault_point: bool = True) -> Path:
    """Replace ``path`` with ``data`` whole (see the module's invariants); return the path.

    The temporary file has an unpredictable name and is created exclusively, and the rename
    replaces whatever is at ``path``, a symlink included, without following it: a link planted
    in the folder is never written through. ``fault_point``: pass the fault campaign's
    ``file:written`` point (off for the tool's own caches, which a run may or may not write).
    """
    path = Path(path)
    tmp: Path | None = None
    try:
        with refused_writes(path, need=len(data)):
            fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
            tmp = Path(name)
            with os.fdopen(fd, "wb") as f:
                f.write(data.encode() if isinstance(data, str) else data)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, _FILE_MODE)  # mkstemp makes 0600; what open() would have made
            if fault_point:
                point("file:written")  # written, not yet in place
            os.replace(tmp, path)
    finally:
        if tmp is not None:
            tmp.unlink(missing_ok=True)
    return path


def _file_mode() -> int:
    """The mode ``open()`` gives a new file under this process's umask, read once at import
    from ``/proc`` (setting the umask to read it is not safe while other threads create files;
    that is only the fallback, at import)."""
    try:
        line = next(ln for ln in Path("/proc/self/status").read_text().splitlines() if ln.startswith("Umask:"))
        mask = int(line.split()[1], 8)
    except (OSError, StopIteration, ValueError, IndexError):
        mask = os.umask(0o022)
        os.umask(mask)
    return 0o666 & ~mask


_FILE_MODE = _file_mode()


def read_text(path: str | Path) -> str:
    """A text file the user gave, as UTF-8 (a byte-order mark is dropped); one line naming the
    line and byte where it is not UTF-8."""
    path = Path(path)
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        line_no = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise RnrLensError(
            f"{path}:{line_no}: not UTF-8 text (byte {exc.object[exc.start]:#04x}); re-save the file as UTF-8, e.g. iconv -f latin1 -t utf-8"
        ) from None


def read_json(path: str | Path, what: str) -> Any:
    """A JSON file the tool wrote (``what`` names it), or one line saying it is damaged."""
    try:
        return json.loads(read_text(path))
    except json.JSONDecodeError as exc:
        raise RnrLensError(f"{what} {path} is damaged (not JSON: {exc.msg} at line {exc.lineno}); delete it or restore it, then rerun") from None


# ---------------------------------------------------------------------------------------------
# One writer at a time
# ---------------------------------------------------------------------------------------------

_held: dict[str, tuple[int, int]] = {}  # lock file -> (fd, how many holders in this process)
_held_guard = threading.Lock()


def lock_file(path: str | Path) -> Path:
    """The hidden lock file that guards ``path``: inside it for an existing folder (a training
    run's), beside it for a file (a run store, which need not exist yet)."""
    path = Path(path).absolute()
    return path / ".rnr-lens.lock" if path.is_dir() else path.with_name(f".{path.name}.lock")


@contextmanager
def writer_lock(path: str | Path, what: str) -> Iterator[None]:
    """Hold the writer lock of ``path`` for the block; refuse in one line if another process holds it.

    Re-entrant within a process (a report and the audits it runs share their store's lock).

    Args:
        path: The store file or folder to guard (it need not exist yet; its folder must).
        what: How the refusal names it, e.g. ``"the run store runs.db"``.
    """
    release = acquire_writer_lock(path, what)
    try:
        yield
    finally:
        release()


def acquire_writer_lock(path: str | Path, what: str) -> Callable[[], None]:
    """Take the writer lock of ``path`` (see :func:`writer_lock`); return the function that releases it."""
    lock = lock_file(path)
    key = str(lock)
    with _held_guard:
        if key in _held:
            fd, count = _held[key]
            _held[key] = (fd, count + 1)
        else:
            with refused_writes(lock):
                try:
                    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)  # never through a planted link
                except OSError as exc:
                    if exc.errno != errno.ELOOP:
                        raise
                    raise RnrLensError(f"{lock} is a symbolic link; rnr_lens makes its lock files itself, so remove it") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _holder(fd)
                os.close(fd)
                raise RnrLensError(
                    f"{what} is being written by {holder}; wait for it to finish (or stop it), then rerun: "
                    "two runs on one store or folder would repeat each other's work"
                ) from None
            program = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python"
            program = "rnr-lens" if program in ("__main__.py", "rnr-lens") else program  # python -m rnr_lens
            holder = f"pid {os.getpid()} ({' '.join([program, *sys.argv[1:]])[:120]})"
            with contextlib.suppress(OSError):  # who holds it is a courtesy: a full disk must not stop the run here
                os.ftruncate(fd, 0)
                os.pwrite(fd, holder.encode(errors="backslashreplace"), 0)
            _held[key] = (fd, 1)
    released = False

    def release() -> None:
        nonlocal released
        if released:
            return
        released = True
        with _held_guard:
            if key not in _held:  # let go of already (release_all)
                return
            fd, count = _held[key]
            if count > 1:
                _held[key] = (fd, count - 1)
                return
            del _held[key]
            os.close(fd)  # closing drops the flock; the file stays (unlinking it would race a waiter)

    return release


def _holder(fd: int, wait: float = 2.0) -> str:
    """Who holds the lock open as ``fd``: the holder writes its pid and command just after
    taking it, so an empty file is read again for up to ``wait`` seconds."""
    deadline = time.monotonic() + wait
    while True:
        holder = os.pread(fd, 200, 0).decode(errors="replace").strip()
        if holder or time.monotonic() > deadline:
            return holder or "another process"
        time.sleep(0.05)


def writer_active(path: str | Path) -> bool:
    """Does a process hold ``path``'s writer lock now (without taking it)?"""
    lock = lock_file(path)
    if not lock.exists():
        return False
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:  # a planted link is no writer's lock
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops a shared lock taken here
    return False


def release_all() -> None:
    """Let go of every writer lock this process holds (a command that has finished: the CLI)."""
    with _held_guard:
        for fd, _ in _held.values():
            os.close(fd)
        _held.clear()
