"""The README's two commands are what CI and the fresh-clone check run (guards against the
README and .ci/run drifting apart, so CI always tests what a user is told to type)."""

import json
import re
from pathlib import Path

import pytest

from rnr_lens.judge.claims import Claims
from rnr_lens.present import claims_compared as compared
from rnr_lens.present import claims_markdown as md
from tests.readme_run import python_blocks, ran, readme_child

REPO = Path(__file__).resolve().parents[1]


def pages_script():
    """``scripts/claims_tables.py``, the plumbing that says which committed file feeds which
    rendered block of the pages (the tables and sentences are :mod:`rnr_lens.present.claims_markdown`'s)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("claims_tables", REPO / "scripts" / "claims_tables.py")
    tables = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tables)
    return tables


def readme_commands() -> list[str]:
    return re.findall(r"^```bash\n(.+?)\n```$", (REPO / "README.md").read_text(), flags=re.M)[:2]


def test_ci_runs_the_readme_test_command():
    main_job, test_command = readme_commands()
    assert main_job.startswith("pip install -e . && rnr-lens audit ")
    assert test_command == "bash scripts/dev-setup && python -m pytest -ra"
    ci = [line for line in (REPO / ".ci" / "run").read_text().splitlines() if line and not line.startswith("#")]
    assert ci[-1] == test_command


def test_contributing_shows_the_measured_suite_timings():
    """Issue 77: CONTRIBUTING's table of what the suite costs is rendered from the measured runs
    kept in benchmarks/suite-timings.json, and the README states the same wall time and CPU."""
    import subprocess
    import sys

    rendered = subprocess.run([sys.executable, "scripts/suite-timings", "table"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    page = (REPO / "CONTRIBUTING.md").read_text()
    shown = page.split("<!-- suite-timings -->\n")[1].split("\n<!-- /suite-timings -->")[0]
    assert shown == rendered.rstrip("\n"), "run 'scripts/suite-timings table' and paste its output between the markers"
    data = json.loads((REPO / "benchmarks" / "suite-timings.json").read_text())
    readme = " ".join((REPO / "README.md").read_text().split())
    minutes = round(data["whole"]["seconds"] / 60)
    assert f"took {minutes} minutes on {data['cores']} cores of an {data['cpu']}" in readme and data["date"] in readme


def test_setup_scripts_are_executable_bash():
    for name in ("dev-setup", "fresh-clone-check", "build-docs"):
        script = REPO / "scripts" / name
        assert script.read_text().startswith("#!/usr/bin/env bash\n") and script.stat().st_mode & 0o111


RESULTS_PAGE = REPO / "docs" / "results.md"
"""Where the README sends a reader for the grids' tables (the README itself summarizes them)."""


def test_the_results_page_grid_tables_are_the_committed_claims():
    """The results page's grid tables are printed from the committed claims.json by
    rnr_lens.present.claims_markdown (guards against a hand-edited number, or a rerun whose claims were
    committed without its tables)."""
    import json

    readme = RESULTS_PAGE.read_text()
    for results in sorted((REPO / "assets" / "results").glob("*/claims.json")):
        claims = Claims.from_dict(json.loads(results.read_text()))
        for model in {c.setting.model.split("+")[0] for c in claims.routes_vs_search}:
            assert md.routes_table(claims, model) in readme, f"{results}: claim 1 table of {model}"
            assert md.bottleneck_table(claims, model) in readme, f"{results}: claim 2 table of {model}"
        if claims.training:
            assert md.training_table(claims) in readme, f"{results}: claim 3 table"
            assert md.across_runs_table(claims) in readme, f"{results}: claim 3 across training runs"
        if claims.ceiling:
            assert md.ceiling_table(claims) in readme, f"{results}: claim 3 at large k"
        profile = results.with_name("profile.json")
        if claims.progress is not None and claims.progress.complete and profile.exists():  # a finished run says where its time went
            assert md.profile_table(json.loads(profile.read_text())) in readme, f"{profile}: time per stage"


def test_sentences_about_results_are_rendered_from_the_committed_claims():
    """Issue 54: a sentence that states a count, a direction or which tasks a statement covers
    is rendered from claims.json by rnr_lens.present.claims_markdown, not written by hand (the deep
    grid's "against wherever it is decided (5 of 9)" covered a task DAPO never trained on; the
    README's extrapolation interval was misrounded)."""
    import json

    tables = pages_script()
    page, readme = RESULTS_PAGE.read_text(), (REPO / "README.md").read_text()

    def claims(grid):
        return Claims.from_dict(json.loads((REPO / "assets" / "results" / grid / "claims.json").read_text()))

    rendered = tables.rendered_blocks()
    shots_page = (REPO / "docs" / "shots.md").read_text()
    performance = (REPO / "docs" / "performance.md").read_text()
    for name, text in (("README.md", readme), ("docs/results.md", page), ("docs/shots.md", shots_page), ("docs/performance.md", performance)):
        shown = tables.blocks_in(text)
        assert shown, f"{name} holds the rendered blocks (<!-- NAME --> ... <!-- /NAME -->)"
        for block, sentence in shown:
            if block not in rendered and (block in ("regrade-verdicts", "few-shot-rerun") or block.startswith("changes:")):
                continue  # compares with claims in git history, which a shallow or exported copy lacks
            assert sentence == " ".join(rendered[block].split()), (
                f"{name}: block {block} differs from the committed claims; rerun scripts/claims_tables.py --render"
            )
    side_by_side = {"side-by-side", "side-by-side-reading", "side-by-side-preconditions"}  # issues 56 and 72: the two architectures
    assert [b for b, _ in tables.blocks_in(readme)] == ["grids-summary", "side-by-side-reading"], (
        "the README renders every grid's verdict counts and what holds across the two architectures (issue 74: each grid's "
        "findings are on the results page)"
    )
    summary = rendered["grids-summary"]
    assert all(f"| `{grid}` |" in summary for grid in {p.parent.name for p in (REPO / "assets" / "results").glob("grid-*/claims.json")})
    assert {"regrading-table", "regrade-verdicts"} <= {b for b, _ in tables.blocks_in(page)}, "the results page says what re-grading moved"
    grids = {b.split(":", 1)[1] for b in rendered if b.startswith("findings:")}
    assert grids == {p.parent.name for p in (REPO / "assets" / "results").glob("grid-*/claims.json")}
    shown = {b for b, _ in tables.blocks_in(page)}
    for grid in grids:  # each grid's section states its findings and every verdict's reason from its claims
        assert {f"findings:{grid}", f"reasons:{grid}"} <= shown, f"docs/results.md renders {grid}'s findings and reasons"
    assert "lm-eval-parity" in shown and side_by_side <= shown
    ceilings = {b for b in rendered if b.startswith("ceiling-summary:")}
    assert ceilings and ceilings <= shown, "docs/results.md renders the k = 128 summary of every grid with a ceiling"
    assert [b for b, _ in tables.blocks_in(shots_page)] == ["shots-study", "shots-on-test"], "docs/shots.md renders the few-shot measurement"
    assert [b for b, _ in tables.blocks_in(performance)] == ["search-speedup", "reuse-verdicts", "gpu-check"], (
        "docs/performance.md renders the search's measured speed-up, each reuse's verdict per CPU and the GPU check"
    )


def test_the_results_say_which_committed_claims_are_an_earlier_rules_version():
    """A claims.json decided by other verdict rules than the code's is named as such in the
    results page, and the README's summary says so too (guards against old verdicts read as
    the current rules')."""
    import json
    import re

    from rnr_lens.judge.claims import Claims
    from rnr_lens.judge.verdicts import RULES

    page, readme = RESULTS_PAGE.read_text(), (REPO / "README.md").read_text()
    for results in sorted((REPO / "assets" / "results").glob("*/claims.json")):
        claims = Claims.from_dict(json.loads(results.read_text()))
        if claims.rules != RULES:
            note = page.split(f"decided by version {claims.rules} of the rules", 1)
            assert len(note) == 2 and f"`{results.parent.name}`" in re.split(r"\n#+ ", note[1], maxsplit=1)[0], results
            assert f"decided by version {claims.rules} of the rules" in readme, results


def test_the_results_change_table_is_printed_from_the_two_runs():
    """The default grid's table of the verdicts version 2 changed is scripts/claims_tables.py
    --changes-from the version-1 file in git history, against version 2's (guards against a
    hand-edited row)."""
    import json
    import subprocess

    import pytest

    shown = subprocess.run(["git", "show", "c6d78ee:assets/results/grid-default/claims.json"], cwd=REPO, capture_output=True, text=True)
    if shown.returncode != 0:
        pytest.skip("the version-1 claims.json is in git history only (a shallow or exported copy lacks it)")
    tables = pages_script()
    old = Claims.from_dict(json.loads(shown.stdout))
    version_2 = subprocess.run(
        ["git", "show", f"{tables.RULES_2_LAST}:assets/results/grid-default/claims.json"], cwd=REPO, capture_output=True, text=True
    )
    new = Claims.from_dict(json.loads(version_2.stdout))  # version 2's own claims, before version 3 re-derived them
    table = compared.changes_table(old, new)
    assert table.count("\n") > 2 and table in RESULTS_PAGE.read_text()


DOC_STAND_INS = {
    "docs/howto/audit-your-model.md": {'"Qwen/Qwen2.5-0.5B-Instruct"': '"smollm2-135m-instruct"'},
}
"""The only text a test changes in a page's Python before running it, each with its reason:
a hub id this machine cannot download stands for "your model" (the offline SmolLM2 loads
through the same call). A stand-in whose text left its page fails the test."""

DOC_FILES = {"my_questions.jsonl": REPO / "assets" / "questions.jsonl"}
"""Files a page's Python reads as the user's own, placed in the folder first: the question
file the page shows the format of (its example, ``assets/questions.jsonl``)."""


DOC_PAGES = sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").rglob("*.md") if "_build" not in p.parts and python_blocks(p.read_text()))

README_RUN = readme_child(
    [
        "tests/test_readme.py::test_the_readme_python_block_runs_as_written",
        *(f"tests/test_readme.py::test_every_python_block_of_the_docs_runs[{page}]" for page in DOC_PAGES),
    ]
)


@pytest.fixture(scope="module")
def readme_ran() -> Path:
    """The folder the README's Python block ran in, whole and unchanged on SmolLM2, in a
    process of its own (``tests/readme_run.py``, started when the session started): the store
    and files it wrote, and ``names.json``. The docs' blocks run on copies of its store."""
    return ran(README_RUN.result())


@pytest.mark.slow
def test_the_readme_python_block_runs_as_written(readme_ran):
    """Issue 59: what the README's block built: a finished audit of every add-small question,
    a frozen failure set of the questions sampling reached and greedy missed, a sweep that
    names its bottleneck or says why not, a PDF, and a grid's claims re-derived byte for
    byte; each read back from the store the block wrote, as its comments say it is kept."""
    from rnr_lens.bottleneck import failures
    from rnr_lens.bottleneck.sweep_results import SweepResult
    from rnr_lens.judge.claims import Claims
    from rnr_lens.measure.results import AuditResult
    from rnr_lens.measure.store import RunStore
    from rnr_lens.questions import tasks

    folder = readme_ran
    store = RunStore(folder / "run.db")
    result = AuditResult.load(store)
    failure_set, sweep = failures.load(result, store), SweepResult.load(store)
    kept = json.loads((folder / "names.json").read_text())
    assert result.finished and len(result.questions) == len(tasks.get("add-small"))
    frozen = {q.id for q in failure_set.failures}
    assert frozen == set(result.reachable_not_realized(result.probe_name("sampling:k=8,t=0.7")))
    assert sweep.bottleneck is None or sweep.bottleneck.layer in set(sweep.table["layer"])
    assert (folder / "bottleneck.pdf").read_bytes().startswith(b"%PDF")
    assert kept["out_token_ids"][0], "the routed generation produced tokens"
    committed = json.loads((REPO / "assets" / "results" / "grid-default" / "claims.json").read_text())
    assert json.loads((folder / "rederived" / "claims.json").read_text()) == committed
    assert Claims.from_dict(kept["claims"]) == Claims.from_dict(committed)


@pytest.mark.slow
@pytest.mark.parametrize("page", DOC_PAGES)
def test_every_python_block_of_the_docs_runs(page, readme_ran, tmp_path, monkeypatch):
    """Issue 59: each page's Python blocks, in order, in one namespace (a later block may use
    an earlier one's names, as a reader running them does), beside a copy of the store the
    README's block wrote: the ``run.db`` the pages read. Only :data:`DOC_STAND_INS` is changed. What each
    page built is checked where it names a result: a loaded sweep or audit, a file written,
    the route trace's passes."""
    import shutil
    import sqlite3

    folder = tmp_path  # each page on its own copy of the README's store, as a reader who ran it
    with sqlite3.connect(readme_ran / "run.db") as ran_store, sqlite3.connect(folder / "run.db") as copy:
        ran_store.backup(copy)  # its writes may sit in the WAL
    for name, source in DOC_FILES.items():
        shutil.copyfile(source, folder / name)
    monkeypatch.chdir(folder)
    text = (REPO / page).read_text()
    for old, new in DOC_STAND_INS.get(page, {}).items():
        assert old in text, f"{page}: the stand-in {old!r} is no longer on the page; update DOC_STAND_INS"
        text = text.replace(old, new)
    space: dict = {}
    for i, block in enumerate(python_blocks(text)):
        exec(compile(block, f"{page} block {i + 1}", "exec"), space)
    written = {f.name for f in folder.iterdir()}
    for name in re.findall(r'"([\w.-]+\.(?:pdf|svg|png|html))"', text):
        assert name in written, f"{page} writes {name}"
    if "result" in space:
        assert space["result"].finished and space["result"].probes
    if "sweep" in space:
        assert len(space["sweep"].table) > 0
    if "trace" in space:
        assert space["trace"].steps_of(10) == (10, 11)


def test_a_pipe_in_a_rendered_cell_never_splits_it():
    """A reuse check's reason is free text from the check; a ``|`` in it once would have split
    its table cell and shifted every cell after it."""
    import re

    tables = pages_script()
    why = {r: {"on": False, "why": "rows differ | at batch 3"} for r in tables.REUSES}
    run = {"cpu": {"model": "Xeon", "flags": "avx2"}, "threads": 2, "date": "2026-12-06", "models": {"tiny": why}}
    head, _, row = tables.reuse_verdicts([run]).splitlines()

    def columns(line: str) -> int:
        return len(re.findall(r"(?<!\\)\|", line))

    assert columns(row) == columns(head) and "rows differ \\| at batch 3" in row


def _reach_columns_without_chance(table: str) -> list[str]:
    """The columns (by header) and rows (by their first cell) of a Markdown or HTML table that
    name a reach (``reach``, ``pass@``, ``random routes``) yet hold no chance level, in the header
    or in every one of their cells."""
    import re

    if table.lstrip().startswith("<"):
        rows = [re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", r, flags=re.S) for r in re.findall(r"<tr[^>]*>(.*?)</tr>", table, flags=re.S)]
    else:
        rows = [[c.strip() for c in line.strip().strip("|").split(" | ")] for line in table.splitlines() if line.startswith("|")]
        rows = [r for r in rows if not all(set(c) <= {"-", " "} for c in r)]
    rows = [r for r in rows if r]
    if len(rows) < 2:
        return []
    head, body = rows[0], [r for r in rows[1:] if len(r) == len(rows[0])]
    names_reach = re.compile(r"reach|pass@|random routes", re.I)
    missing = []
    for i, h in enumerate(head):
        if names_reach.search(h) and "chance" not in h and not all("chance" in r[i] for r in body if r[i] not in ("–", "-", "")):
            missing.append(f"column {h!r}")
    for r in body:  # a row that names a reach: each of its estimates (a cell with an interval) beside its chance level
        if names_reach.search(r[0]) and not all("chance" in c for c in r[1:] if "[" in c):
            missing.append(f"row {r[0]!r}")
    return missing


def test_no_table_prints_a_reach_without_its_chance_level():
    """Issue 72 (rules 3): every reach, failure set and ceiling stands beside its chance level.
    Every table the results pages and the report page print from the committed claims is read,
    and any column or row that names a reach must hold the chance level too."""
    import json

    from rnr_lens.present.report_page import render_html

    tables = pages_script()
    checked = []
    for path in sorted((REPO / "assets" / "results").glob("grid-*/claims.json")):
        claims = Claims.from_dict(json.loads(path.read_text()))
        printed = [md.routes_table(claims, m) for m in {c.setting.model for c in claims.routes_vs_search}]
        if claims.training:
            printed.append(md.training_table(claims))
        if claims.ceiling:
            printed.append(md.ceiling_table(claims).split("\n\n")[0])
        page = render_html(claims)
        printed += re.findall(r"<table.*?</table>", page, flags=re.S)
        for table in printed:
            assert not _reach_columns_without_chance(table), f"{path.parent.name}: {_reach_columns_without_chance(table)} in\n{table[:400]}"
            checked.append(table)
    blocks = tables.rendered_blocks()
    for name in ("side-by-side", "side-by-side-preconditions"):
        assert not _reach_columns_without_chance(blocks[name]), (name, _reach_columns_without_chance(blocks[name]))
    assert len(checked) > 10
    assert _reach_columns_without_chance("| task | reach |\n| --- | --- |\n| a | 0.5 |"), "the check can fail"


def test_the_readme_stays_a_front_page():
    """Issue 74: the README had grown to 455 lines, 194 of them each grid's findings; it keeps
    a rendered summary and sends a reader to the results page for the rest."""
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) < 300, "move detail to docs/ (each grid's findings belong on docs/results.md)"
    assert "](docs/results.md)" in readme
