"""Each notebook's docs copy executed once per suite (issue 77): ``tests/test_notebooks.py``
asserts on the run, ``tests/test_docs.py`` hands the executed copies to the docs build, which
renders them rather than executing the notebooks again (``docs/tutorial_copies.py``).

Each run is a child (``tests/background.py``): ``python -m tests.notebook_runs NOTEBOOK FOLDER``
executes the copy in a kernel, beside the suite at the lowest priority, and writes the executed
copy, the files it made and what it raised into ``FOLDER``. Its kernel runs torch on one
thread (``OMP_NUM_THREADS=1``), so a kernel that waits for a core never stalls a second one;
no notebook output is compared to stored bits.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import nbformat
from nbformat import NotebookNode

from tests.background import Child, child

ROOT = Path(__file__).resolve().parents[1]
CELL_SECONDS = 3600
"""A cell's limit, generous: at the lowest priority a kernel may wait for a core."""


def _tutorial_copies() -> ModuleType:
    """docs/tutorial_copies.py, by its path (docs/ is no package)."""
    spec = importlib.util.spec_from_file_location("tutorial_copies", ROOT / "docs" / "tutorial_copies.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


copies = _tutorial_copies()
DOCS_TEST = "tests/test_docs.py::test_docs_build_without_warnings"


@dataclass(frozen=True)
class NotebookRun:
    """One executed copy: the notebook with its outputs, the folder it wrote its files to
    (``RNR_NB_OUT``), and what it raised (None where every cell ran)."""

    notebook: NotebookNode
    out: Path
    error: str | None


def _child_of(path: Path) -> Child:
    return child(
        f"notebook-{path.stem}",
        [f"tests/test_notebooks.py::test_notebook_runs_top_to_bottom[{path.name}]", DOCS_TEST],
        lambda folder: [sys.executable, "-m", "tests.notebook_runs", str(path), str(folder)],
        env={"OMP_NUM_THREADS": "1"},
    )


RUNS: dict[str, Child] = {path.name: _child_of(path) for path in copies.notebooks()}


def run_of(path: Path) -> NotebookRun:
    """The run of ``path``'s copy: its child's, waited for (or run now, where the lane has not)."""
    finished = RUNS[path.name].result()
    executed, error = finished.folder / "executed.ipynb", finished.folder / "error.txt"
    notebook = nbformat.read(executed, as_version=4) if executed.exists() else copies.copy_of(path)
    said = error.read_text() if error.exists() else None
    if said is None and finished.returncode != 0:
        said = f"the notebook's child exited {finished.returncode}: {finished.stderr[-3000:]}"
    return NotebookRun(notebook, finished.folder / "figures", said)


def executed_copies(folder: Path) -> Path:
    """Each notebook's run, and each that ran whole written to ``folder``: what the docs build
    takes as ``RNR_DOCS_EXECUTED``."""
    folder.mkdir(parents=True, exist_ok=True)
    for path in copies.notebooks():
        run = run_of(path)
        if run.error is None:
            nbformat.write(run.notebook, folder / path.name)
    return folder


def main(notebook: Path, folder: Path) -> int:
    """Execute ``notebook``'s copy with ``folder`` as its working folder and ``folder/figures``
    as ``RNR_NB_OUT``; write ``executed.ipynb``, and ``error.txt`` where a cell raised."""
    from nbclient import NotebookClient

    nb = copies.copy_of(notebook)

    def lowest(**_: object) -> None:
        """The kernel starts a session of its own, and with it a scheduler autogroup (Linux),
        where the nice value it inherited no longer yields to the suite: its group's goes too."""
        pid = client.km.provisioner.pid if client.km is not None and client.km.provisioner is not None else None
        with contextlib.suppress(OSError, TypeError):
            Path(f"/proc/{pid}/autogroup").write_text("19")

    client = NotebookClient(nb, timeout=CELL_SECONDS, kernel_name="python3", resources={"metadata": {"path": str(folder)}}, on_notebook_start=lowest)
    try:
        client.execute(env={**os.environ, "RNR_NB_OUT": str(folder / "figures")})
    except Exception as e:  # the notebook's test raises it again
        (folder / "error.txt").write_text(f"{type(e).__name__}: {e}")
        return 1
    finally:
        nbformat.write(nb, folder / "executed.ipynb")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
