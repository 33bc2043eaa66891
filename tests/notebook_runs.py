"""Each notebook's docs copy executed once per suite (issue 77): ``tests/test_notebooks.py``
asserts on the run, ``tests/test_docs.py`` hands the executed copies to the docs build, which
renders them rather than executing the notebooks again (``docs/tutorial_copies.py``)."""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import nbformat
from nbclient import NotebookClient
from nbformat import NotebookNode

ROOT = Path(__file__).resolve().parents[1]


def _tutorial_copies() -> ModuleType:
    """docs/tutorial_copies.py, by its path (docs/ is no package)."""
    spec = importlib.util.spec_from_file_location("tutorial_copies", ROOT / "docs" / "tutorial_copies.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


copies = _tutorial_copies()


@dataclass(frozen=True)
class NotebookRun:
    """One executed copy: the notebook with its outputs, the folder it wrote its files to
    (``RNR_NB_OUT``), and what it raised (None where every cell ran)."""

    notebook: NotebookNode
    out: Path
    error: BaseException | None


class NotebookRuns:
    """Each notebook's copy executed at most once, on first ask, in a folder of its own."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.runs: dict[str, NotebookRun] = {}

    def __call__(self, path: Path) -> NotebookRun:
        if path.name not in self.runs:
            work = self.folder / path.stem
            work.mkdir(parents=True)
            nb = copies.copy_of(path)
            client = NotebookClient(nb, timeout=1200, kernel_name="python3", resources={"metadata": {"path": str(work)}})
            error: BaseException | None = None
            try:
                client.execute(env={**os.environ, "RNR_NB_OUT": str(work / "figures")})
            except Exception as e:  # the notebook's test raises it again
                error = e
            self.runs[path.name] = NotebookRun(nb, work / "figures", error)
        return self.runs[path.name]

    def executed_copies(self, folder: Path) -> Path:
        """Every notebook run (where not run yet), and each that ran whole written to ``folder``:
        what the docs build takes as ``RNR_DOCS_EXECUTED``."""
        folder.mkdir(parents=True, exist_ok=True)
        for path in copies.notebooks():
            run = self(path)
            if run.error is None:
                nbformat.write(run.notebook, folder / path.name)
        return folder
