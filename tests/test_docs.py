"""The docs site builds with warnings as errors: every cross-reference resolves, every public
name is documented and on the API page, every notebook runs, the CLI page is the parser's.

The built site stays in docs/_build/html (CI keeps it as an artifact folder).
"""

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import require_chromium
from tests.notebook_runs import copies, executed_copies  # registers each notebook's run

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_docs_build_without_warnings(tmp_path):
    """The notebooks' runs are the suite's own (tests/notebook_runs.py): each that ran whole is
    rendered as it ran; one that raised is executed by the build, and fails it."""
    require_chromium()  # the bottleneck tutorial exports a PDF figure
    executed = executed_copies(tmp_path / "executed")
    env = {**os.environ, "RNR_DOCS_EXECUTED": str(executed)}
    out = subprocess.run(["bash", "scripts/build-docs"], cwd=ROOT, capture_output=True, text=True, check=False, env=env)
    assert out.returncode == 0, out.stdout[-5000:] + out.stderr[-5000:]
    site = ROOT / "docs" / "_build" / "html"
    api = (site / "api.html").read_text()
    assert all(name in api for name in ("LensModel", "load_model", "RouteSearch", "mine", "Bottleneck"))
    assert "--strategy" in (site / "cli.html").read_text(), "the CLI page is generated from the parser"
    tutorial = (site / "tutorials" / "01_quickstart.html").read_text()
    assert "cell_output" in tutorial, "notebooks are executed during the build"
    page = (site / "index.html").read_text()
    assert "Copyright ©" not in page or "rnr_lens developers" in page, "the footer names who holds the copyright"

    # every page fits a 1280 px window: code blocks and tables scroll inside it
    from tests.jupyterlab import overflowing

    pages = [
        p for p in sorted(site.rglob("*.html")) if "_modules" not in p.parts and p.name not in ("genindex.html", "search.html", "py-modindex.html")
    ]
    assert not overflowing([p.as_uri() for p in pages]), overflowing([p.as_uri() for p in pages])


def test_the_docs_render_an_executed_copy_only_where_its_cells_are_unchanged(tmp_path):
    """Issue 77: the build takes a notebook's run from the suite where the copy it would execute
    is the one that ran, cell for cell; a copy changed since is executed again."""
    import nbformat

    first, second = copies.notebooks()[:2]
    ran = tmp_path / "ran"
    ran.mkdir()
    for path in (first, second):
        nb = copies.copy_of(path)
        nb.cells[-1].outputs = [nbformat.v4.new_output("stream", text="ran\n")]
        nbformat.write(nb, ran / path.name)
    stale = nbformat.read(ran / second.name, as_version=4)
    stale.cells[1].source += "\n"  # a notebook edited after its run
    nbformat.write(stale, ran / second.name)

    out = tmp_path / "tutorials"
    assert copies.write_copies(out, ran) == [first.name]
    rendered = nbformat.read(out / first.name, as_version=4)
    assert rendered.metadata["mystnb"] == {"execution_mode": "off"} and rendered.cells[-1].outputs
    fresh = nbformat.read(out / second.name, as_version=4)
    assert "mystnb" not in fresh.metadata and copies.cells_of(fresh) == copies.cells_of(copies.copy_of(second))
    assert copies.write_copies(out) == [], "without a folder of runs, every copy is executed by the build"


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
    # assets/grid.yaml is checked with the report (tests/grids/test_reports.py)


def test_readme_figures_exist():
    import re

    readme = (ROOT / "README.md").read_text()
    figures = re.findall(r"\]\((assets/[^)]+)\)", readme)
    assert figures, "the README shows the figures in assets/"
    for path in figures:
        assert (ROOT / path).stat().st_size > 1000, path


def _cli_options() -> dict[str, set[str]]:
    """Each rnr-lens command's long options, read from the parser itself."""
    import argparse

    from rnr_lens.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {name: {o for a in p._actions for o in a.option_strings if o.startswith("--")} for name, p in sub.choices.items()}


def test_every_cli_flag_the_docs_mention_exists():
    """The how-to once said a hub model's code runs "only with --trust-remote-code", a flag the
    CLI did not have. Every `rnr-lens CMD ... --flag` line in the README and docs must parse
    its flags, and every flag named alone in backticks must belong to some command."""
    import re

    options = _cli_options()
    everywhere = set().union(*options.values())
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    wrong = []
    for page in pages:
        if "_build" in page.parts:
            continue
        text = page.read_text().replace("\\\n", " ")
        for line in text.splitlines():
            for command, rest in re.findall(r"rnr-lens ([a-z-]+)([^`|#\n]*)", line):
                if command not in options:
                    continue  # prose such as "rnr-lens reads ..."
                wrong += [
                    f"{page.name}: rnr-lens {command} {flag}"
                    for flag in re.findall(r"(?<![\w-])--[a-z][a-z-]*", rest)
                    if flag not in options[command]
                ]
            wrong += [f"{page.name}: {flag}" for flag in re.findall(r"`(--[a-z][a-z-]*)`", line) if flag not in everywhere]
    assert not wrong, wrong


def test_code_blocks_fit_the_docs_column():
    """Code blocks once ran past the docs' text column and scrolled sideways: every line of a
    fenced block in the docs fits 90 characters (a shell command continues with a backslash)."""
    long = []
    for page in sorted((ROOT / "docs").rglob("*.md")):
        if "_build" in page.parts:
            continue
        fenced = False
        for number, line in enumerate(page.read_text().splitlines(), 1):
            if line.startswith("```"):
                fenced = not fenced
            elif fenced and len(line) > 90:
                long.append(f"{page.relative_to(ROOT)}:{number} ({len(line)} characters)")
    assert not long, long
