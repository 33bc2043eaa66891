"""The notebooks run top to bottom (small sizes) on the real SmolLM2."""

import json
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tests.conftest import require_chromium

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
SIZES = json.loads((Path(__file__).resolve().parents[1] / "notebooks" / "small_sizes.json").read_text())


def test_notebooks_are_stored_without_outputs():
    assert NOTEBOOKS
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        assert all(not c.get("outputs") and c.get("execution_count") is None for c in nb.cells if c.cell_type == "code"), path.name


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_top_to_bottom(path, tmp_path, monkeypatch):
    if path.name.startswith("02"):
        require_chromium()  # it exports a PDF figure
    for key, value in SIZES[path.name].items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("RNR_NB_OUT", str(tmp_path / "figures"))
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=1200, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
    if path.name.startswith("02"):
        assert (tmp_path / "figures" / "bottleneck_repair_break.pdf").read_bytes()[:4] == b"%PDF"
    if path.name.startswith("04"):
        assert (tmp_path / "figures" / "dapo" / "final" / "model.safetensors").stat().st_size > 100e6
