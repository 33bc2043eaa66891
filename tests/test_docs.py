"""The docs site builds with warnings as errors: every cross-reference resolves, every public
name is documented and on the API page, every notebook runs, the CLI page is the parser's.

The built site stays in docs/_build/html (CI keeps it as an artifact folder).
"""

import subprocess
from pathlib import Path

import pytest

from tests.conftest import require_chromium

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_docs_build_without_warnings():
    require_chromium()  # the bottleneck tutorial exports a PDF figure
    out = subprocess.run(["bash", "scripts/build-docs"], cwd=ROOT, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout[-5000:] + out.stderr[-5000:]
    site = ROOT / "docs" / "_build" / "html"
    api = (site / "api.html").read_text()
    assert all(name in api for name in ("LensModel", "load_model", "RouteSearch", "mine", "Bottleneck"))
    assert "--strategy" in (site / "cli.html").read_text(), "the CLI page is generated from the parser"
    tutorial = (site / "tutorials" / "01_quickstart.html").read_text()
    assert "cell_output" in tutorial, "notebooks are executed during the build"


def test_every_public_name_is_on_the_api_page():
    import rnr_lens

    page = (ROOT / "docs" / "api.md").read_text()
    assert [name for name in rnr_lens.__all__ if f"`{name}`" not in page] == []


def test_example_files_in_assets_load():
    """assets/ holds the example files the docs point to; they must stay loadable."""
    import rnr_lens as R

    assert R.DeploymentConfig.load(ROOT / "assets" / "deployment.yaml") == R.DeploymentConfig()
    task = R.tasks.load_file(ROOT / "assets" / "questions.jsonl", id="id")
    assert [q.id for q in task][:2] == ["apples", "pencils"]
    # assets/grid.yaml is checked with the report (tests/test_reports.py)


def test_readme_figures_exist():
    import re

    readme = (ROOT / "README.md").read_text()
    figures = re.findall(r"\]\((assets/[^)]+)\)", readme)
    assert figures, "the README shows the figures in assets/"
    for path in figures:
        assert (ROOT / path).stat().st_size > 1000, path
