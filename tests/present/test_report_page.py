"""The report page: one self-contained HTML page rendered from claim records alone, every
stranger's text on it escaped, and a partial report that says it is partial."""

import gzip
import json
from pathlib import Path

import rnr_lens as R
from rnr_lens.grids.grid import Grid
from rnr_lens.judge.claims import Claims, Progress
from rnr_lens.present.report_page import render_html

COMMITTED = Path(__file__).resolve().parents[2] / "assets" / "results"


def test_a_partial_report_says_so_and_a_finished_one_does_not():
    """A report stopped midway is read as partial at its top, with what it covers; its counts
    cover only the settings done."""
    grid = Grid(models=("x",), tasks=("add-small",)).to_dict()
    partial = render_html(Claims(grid=grid, probes=(), progress=Progress(3, 8, False)))
    done = render_html(Claims(grid=grid, probes=(), progress=Progress(8, 8, True)))
    assert "Partial report: 3 of 8 audits done" in partial and "Partial report" not in done
    assert partial.startswith("<!doctype html>") and "<script src=" not in partial, "self-contained: nothing fetched"


def test_every_committed_claims_json_renders_from_its_records_alone():
    """The page needs no store and no model: the records read back from claims.json render,
    with each setting's model and task on the page."""
    for path in sorted(COMMITTED.glob("grid-*/claims.json")):
        claims = Claims.from_dict(json.loads(path.read_text()))
        page = render_html(claims)
        assert all(c.setting.task in page for c in claims.routes_vs_search), path


def test_a_page_rendered_from_a_strangers_evidence_holds_no_raw_script(tmp_path):
    """Every free-text field of the committed lm-eval evidence that re-derives when altered
    (model and task names wherever they appear, the tries' texts, the machine) holds a script;
    the re-derived page shows each escaped. The fields evidence checks (ids, hashes, and the
    questions and golds, which the task's fingerprint covers) are refused when altered:
    tests/measure/test_evidence.py, tests/test_committed_results.py."""
    payload = "<script>alert('rnr')</script>"
    source = COMMITTED / "grid-lm-eval" / "evidence.json.gz"
    document = json.loads(gzip.decompress(source.read_bytes()))
    model, task = document["manifest"]["settings"][0]["model"], document["manifest"]["settings"][0]["task"]
    document = json.loads(json.dumps(document).replace(f'"{model}', f'"{model}{payload}').replace(f'"{task}"', f'"{task}{payload}"'))
    audit = document["audits"][0]
    for t in audit["tries"]:
        t[3] += payload
    document["manifest"]["provenance"]["runs"][0]["machine"]["cpu"] = payload
    evidence = tmp_path / "evidence.json.gz"
    evidence.write_bytes(gzip.compress(json.dumps(document).encode()))
    report = R.reports.rederive(evidence, tmp_path / "out")
    page = report.files["html"].read_text()
    assert page.count("&lt;script&gt;alert(") >= 2, "the names are on the page, escaped"
    assert "<script>alert(" not in page
