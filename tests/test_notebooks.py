"""The notebooks run top to bottom (small sizes) on the real SmolLM2: each as the docs render
it, executed once per suite (the docs build renders the same run, tests/notebook_runs.py)."""

import nbformat
import pytest

from tests.conftest import require_chromium
from tests.notebook_runs import copies, run_of

NOTEBOOKS = copies.notebooks()


def test_notebooks_are_stored_without_outputs():
    assert NOTEBOOKS
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        assert all(not c.get("outputs") and c.get("execution_count") is None for c in nb.cells if c.cell_type == "code"), path.name


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_top_to_bottom(path):
    if path.name.startswith("02"):
        require_chromium()  # it exports a PDF figure
    run = run_of(path)  # started when the session started (tests/notebook_runs.py)
    assert run.error is None, run.error
    errors = [o for c in run.notebook.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
    assert all(c.get("execution_count") for c in run.notebook.cells if c.cell_type == "code"), "every cell ran"
    if path.name.startswith("02"):
        assert (run.out / "bottleneck_repair_break.pdf").read_bytes()[:4] == b"%PDF"
    if path.name.startswith("04"):
        assert (run.out / "dapo" / "final" / "model.safetensors").stat().st_size > 100e6
