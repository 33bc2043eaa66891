"""Children: the slow tests whose whole work is one child process (a campaign, mypy, a script on
the real model) have it started when the session starts, and read its result where they run.

The suite's own process keeps both cores busy only part of the time (Python between torch
calls, pandas, SQLite); a child started early fills the gaps instead of waiting for its turn
(issue 77). The tests that read a child run last, so each finds its child finished or nearly.
A child runs at the lowest priority (``nice -n 19``): beside the suite's torch threads at their
normal priority it takes only what they leave, since a torch forward whose second thread
waits for a core stalls whole (measured: the suite ran five times slower with children at
equal priority). Where the scheduler groups processes by session (Linux's autogroups), a nice
value yields only within its group: a child stays in the suite's session, and a child that
starts a session of its own (a Jupyter kernel) lowers its group's priority too (see
``tests/notebook_runs.py``). Only children with no deadline of their own qualify: the fault campaign,
whose signal cases time an exit, runs in the suite's turn.

Invariants:
- a child starts only where a test that reads it was collected and selected (``-m "not slow"``
  or one module starts only its own), and never under ``--collect-only``;
- children run one at a time, in the order registered (those marked ``first`` before the
  others), in a lane beside the tests (two while a test waits for one, when the suite itself
  leaves a core free; measured on two cores, two at a time throughout made the whole suite
  slower, 20.2 min against 18.4);
- a child's output goes to files, never a pipe nobody reads; it is killed, with everything it
  started, when the session ends;
- a test reads the same :class:`Finished` it would have got running the child itself (the
  command, its folder and its environment are the test's); a child asked for before the lane
  reached it runs at once.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Finished:
    """A child that ran: its exit status, output, and the folder it was given (``folder``)."""

    returncode: int
    stdout: str
    stderr: str
    folder: Path


@dataclass
class Child:
    """One child process and the tests that read it (pytest node ids)."""

    name: str
    tests: tuple[str, ...]
    argv: Callable[[Path], Sequence[str]]
    """The command, given a fresh folder of its own to write in."""
    env: dict[str, str | None] = field(default_factory=dict)
    """Set in the child's environment over the session's (None: left out)."""
    in_folder: bool = False
    """Run in its own folder (else in the repository's root)."""
    timeout: float = 3600
    """Wall seconds before it is killed: generous, since at the lowest priority it may wait."""
    needs: Callable[[], bool] = lambda: True
    """False where the tests would skip anyway (their data is absent): the child is not run."""
    first: bool = False
    """Started before the children registered without it (the longest, whose tests wait)."""
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _proc: subprocess.Popen[bytes] | None = None
    _finished: Finished | None = None
    _folder: Path | None = None

    def run(self) -> Finished:
        """Run the child to its end (once; a second caller waits for the first's result)."""
        with self._lock:
            if self._finished is None:
                self._finished = self._run()
        return self._finished

    def _run(self) -> Finished:
        folder = Path(tempfile.mkdtemp(prefix=f"child-{self.name}-"))
        self._folder = folder
        out, err = folder / "stdout.txt", folder / "stderr.txt"
        with out.open("wb") as o, err.open("wb") as e:
            env = {k: v for k, v in {**os.environ, **self.env}.items() if v is not None}
            cwd = folder if self.in_folder else ROOT
            lowest = ["nice", "-n", "19"] if shutil.which("nice") else []
            # a process group of its own to kill, in the suite's session: a new session would put it
            # in a scheduler autogroup of its own, where its nice value no longer yields to the suite
            self._proc = subprocess.Popen([*lowest, *self.argv(folder)], cwd=cwd, env=env, stdout=o, stderr=e, process_group=0)
            try:
                code = self._proc.wait(timeout=self.timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                code = self._proc.wait()
        return Finished(code, out.read_text(errors="replace"), err.read_text(errors="replace"), folder)

    def result(self) -> Finished:
        """What the child did: waited for where the lane runs it, else run now."""
        with LANE.waiting() if LANE is not None else contextlib.nullcontext():
            return self.run()

    def kill(self) -> None:
        """The child and everything it started (its own process group), if still running."""
        if self._proc is not None and self._proc.poll() is None:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def remove(self) -> None:
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)


CHILDREN: list[Child] = []


def child(name: str, tests: Sequence[str], argv: Callable[[Path], Sequence[str]], **kwargs) -> Child:
    """Register a child for ``tests`` (node ids, ``tests/test_x.py::test_name``); see the module."""
    made = Child(name, tuple(tests), argv, **kwargs)
    CHILDREN.append(made)
    return made


class Lane:
    """Runs the children a session's selected tests read, in the order registered, one at a
    time; one more while a test waits for a child (the suite then leaves a core free)."""

    def __init__(self, children: list[Child]) -> None:
        self.children = children
        self.thread = threading.Thread(target=self._run, name="children", daemon=True)
        self.stopped = False
        self.width, self.running = 1, 0
        self.turn = threading.Condition()

    def _run(self) -> None:
        for c in self.children:
            with self.turn:
                self.turn.wait_for(lambda: self.stopped or self.running < self.width)
                if self.stopped:
                    return
                self.running += 1
            threading.Thread(target=self._one, args=(c,), name=c.name, daemon=True).start()

    def _one(self, c: Child) -> None:
        try:
            c.run()
        finally:
            with self.turn:
                self.running -= 1
                self.turn.notify_all()

    @contextlib.contextmanager
    def waiting(self) -> Iterator[None]:
        """While a test waits for a child, the next one may start beside it."""
        with self.turn:
            self.width += 1
            self.turn.notify_all()
        try:
            yield
        finally:
            with self.turn:
                self.width -= 1

    def start(self) -> None:
        global LANE
        LANE = self
        self.thread.start()

    def stop(self) -> None:
        global LANE
        LANE = None
        with self.turn:
            self.stopped = True
            self.turn.notify_all()
        for c in self.children:
            c.kill()
        for c in self.children:
            c.remove()


LANE: Lane | None = None
"""The session's lane, once started."""


def selected(node_ids: set[str]) -> list[Child]:
    """The registered children that a test among ``node_ids`` reads, whose needs are met: those
    marked ``first``, then the others, each in the order registered."""
    return sorted((c for c in CHILDREN if node_ids.intersection(c.tests) and c.needs()), key=lambda c: not c.first)


def reads_a_child(node_id: str) -> bool:
    return any(node_id in c.tests for c in CHILDREN)
