"""The notebooks run top to bottom (small sizes) on the real SmolLM2."""

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tests.conftest import require_chromium

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
SIZES = {
    "01_quickstart.ipynb": ("8", "4"),
    "02_bottleneck_mlp.ipynb": ("40", "8"),
    "03_routes_vs_search.ipynb": ("6", "3"),
    "04_trained_pair.ipynb": ("8", "2"),
}


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
    questions, k = SIZES[path.name]
    monkeypatch.setenv("RNR_NB_QUESTIONS", questions)
    monkeypatch.setenv("RNR_NB_K", k)
    monkeypatch.setenv("RNR_NB_OUT", str(tmp_path / "figures"))
    monkeypatch.setenv("RNR_NB_STEPS", "2")
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=1200, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
    if path.name.startswith("02"):
        assert (tmp_path / "figures" / "bottleneck_repair_break.pdf").read_bytes()[:4] == b"%PDF"
    if path.name.startswith("04"):
        assert (tmp_path / "figures" / "dapo" / "final" / "model.safetensors").stat().st_size > 100e6
