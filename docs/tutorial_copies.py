"""The docs' copy of each notebook, and where its outputs come from.

Users open the notebooks in ``notebooks/``; the docs render a copy of each, opened by a hidden
cell that sets its small sizes (``notebooks/small_sizes.json``) and sends the files it writes to
a scratch folder unless ``RNR_NB_OUT`` names one. The test suite executes each copy once
(``tests/notebook_runs.py``) and hands the executed copies to the docs build, which renders
them instead of executing the notebooks a second time (issue 77).

Invariant: a copy's code is a function of its notebook and its sizes alone. An executed copy
is rendered only where its cells are the copy's, cell for cell; any other copy (a notebook
changed since, or one that raised and so was not handed over) is executed by the build as
before, and a cell that raises still fails the build.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
from nbformat import NotebookNode

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
SIZES: dict[str, dict[str, str]] = json.loads((NOTEBOOKS / "small_sizes.json").read_text())


def notebooks() -> list[Path]:
    """The notebooks users open, in order."""
    return sorted(NOTEBOOKS.glob("*.ipynb"))


def copy_of(notebook: Path) -> NotebookNode:
    """``notebook`` opened by its hidden setup cell (its small sizes, a scratch ``RNR_NB_OUT``)."""
    nb = nbformat.read(notebook, as_version=4)
    setup = (
        f'import os, tempfile\nos.environ.update({SIZES[notebook.name]!r})\nos.environ.setdefault("RNR_NB_OUT", tempfile.mkdtemp(prefix="rnr-docs-"))'
    )
    nb.cells.insert(0, nbformat.v4.new_code_cell(setup, metadata={"tags": ["remove-cell"]}))
    for i, cell in enumerate(nb.cells):
        cell.id = f"cell-{i}"  # ids of the copy's own, so two copies of one notebook are equal
    return nb


def cells_of(nb: NotebookNode) -> list[tuple[str, str]]:
    """What a notebook holds, outputs aside: each cell's kind and source, in order."""
    return [(cell.cell_type, cell.source) for cell in nb.cells]


def write_copies(folder: Path, executed: Path | None = None) -> list[str]:
    """Write each notebook's copy into ``folder``; where ``executed`` holds an executed copy of
    the same name whose cells are the copy's, write that one, marked for the build not to execute
    it again. Returns the names written executed."""
    folder.mkdir(exist_ok=True)
    reused: list[str] = []
    for notebook in notebooks():
        nb = copy_of(notebook)
        ran = executed / notebook.name if executed is not None else None
        if ran is not None and ran.is_file():
            done = nbformat.read(ran, as_version=4)
            if cells_of(done) == cells_of(nb):
                done.metadata["mystnb"] = {"execution_mode": "off"}  # myst-nb's per-file setting
                nb = done
                reused.append(notebook.name)
        nbformat.write(nb, folder / notebook.name)
    return reused
