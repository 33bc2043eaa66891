"""Every committed result re-derives from its evidence, byte for byte, with no model (guards
against a claims.json that no file in the repository supports, a rule change whose committed
claims were not re-derived, and evidence too large to commit)."""

import json
from pathlib import Path

import pytest

from rnr_lens.grids.reports import rederive
from rnr_lens.judge.claims import Claims
from rnr_lens.measure.evidence import EVIDENCE_FILE

RESULTS = Path(__file__).resolve().parents[1] / "assets" / "results"
FOLDERS = sorted(p.parent for p in RESULTS.glob("*/claims.json"))
MAX_BYTES = 15_000_000

AWAITING_RERUN: set[str] = set()
"""Results decided by an earlier rules version whose stores were lost before evidence existed
(the README would name them as that version's). Empty since the deep grid's re-run (issue 35):
every committed result carries its evidence. A folder enters it only with the README's note."""


def test_the_results_folders_are_known_and_their_evidence_is_committable():
    assert FOLDERS, "assets/results holds the committed grids"
    assert AWAITING_RERUN <= {f.name for f in FOLDERS}, "a folder awaiting its re-run was removed: drop it from AWAITING_RERUN"
    for evidence in RESULTS.rglob(EVIDENCE_FILE):  # finished results and snapshots of runs in progress (partial/)
        assert evidence.stat().st_size <= MAX_BYTES, f"{evidence}: evidence over 15 MB"


@pytest.mark.slow
@pytest.mark.parametrize("folder", FOLDERS, ids=[f.name for f in FOLDERS])
def test_a_committed_claims_json_rederives_from_its_evidence(folder, tmp_path):
    evidence = folder / EVIDENCE_FILE
    if folder.name in AWAITING_RERUN:
        assert not evidence.exists(), f"{folder.name} has evidence now: drop it from AWAITING_RERUN"
        assert Claims.from_dict(json.loads((folder / "claims.json").read_text())).rules == "1"
        return
    assert evidence.is_file(), f"{folder.name}: every committed result carries its evidence"
    rederived = rederive(evidence, tmp_path / "referee")
    assert (tmp_path / "referee" / "claims.json").read_bytes() == (folder / "claims.json").read_bytes(), (
        f"{folder.name}: claims.json differs from what its evidence gives; re-derive it with "
        f"'rnr-lens report --from-evidence {evidence} --out DIR' and commit DIR/claims.json (after a rule change, with the README's tables)"
    )
    assert rederived.claims.provenance is not None and rederived.claims.provenance.models, "provenance names the weights"


@pytest.mark.slow
@pytest.mark.parametrize("folder", FOLDERS, ids=[f.name for f in FOLDERS])
def test_every_committed_try_reads_as_its_config_reads_it(folder):
    """Issue 54's referee: every stored answer and correctness flag (tries and kept sweep
    evaluations) is what the audit's own config reads from the stored text today, so a reader
    changed without a new name, or evidence never re-graded after one, fails here."""
    from rnr_lens.grids.regrade import regrade
    from rnr_lens.measure.evidence import read
    from rnr_lens.questions.deploy import DeploymentConfig

    document = read(folder / EVIDENCE_FILE)
    own = [a for a in document["audits"] if not DeploymentConfig.from_json(a["audit"]["config_json"]).harness]
    for payload in own:  # each audit under its recorded config (a harness's task is read by its harness: lm-eval-parity)
        again = regrade(
            {**document, "audits": [payload], "manifest": {**document["manifest"], "settings": []}},
            DeploymentConfig.from_json(payload["audit"]["config_json"]),
        )
        (moved,) = again.audits
        assert moved.readings_changed == moved.correct_changed == 0 and moved.mined != "dropped", f"{folder.name}: {moved}"


@pytest.mark.slow
@pytest.mark.parametrize("folder", FOLDERS, ids=[f.name for f in FOLDERS])
def test_an_independent_reading_agrees_with_every_stored_flag(folder):
    """Issue 54's "Done when": an implementation of ``concluding-exact`` written from the
    documentation alone (tests/independent_reader.py, sharing no code with the package) reads
    every committed try and kept sweep evaluation as correct or not exactly as stored. Where its
    answer differs at all, the output is the documented open edge: a thousands-grouped number
    run into further digits ("42,2222")."""
    import re

    from rnr_lens.measure.evidence import read
    from rnr_lens.questions.deploy import DeploymentConfig

    from .independent_reader import correct, value
    from .independent_reader import read as read_independently

    run_on = re.compile(r"\d{1,3}(?:,\d{3})+\d")
    checked = 0
    for payload in read(folder / EVIDENCE_FILE)["audits"]:
        config = DeploymentConfig.from_json(payload["audit"]["config_json"])
        if config.extractor != "concluding-exact":
            continue
        gold = {q[0]: q[3] for q in payload["questions"]}
        rows = [(t[0], t[3], t[4], t[5]) for t in payload["tries"]]
        for kind, _, data, *_ in payload["artifacts"]:
            if kind == "sweep_eval":
                rows += [(r["question_id"], r["text"], r.get("answer", r.get("extracted")), r["correct"]) for r in json.loads(data) if "text" in r]
        for question, text, stored, stored_correct in rows:
            mine = read_independently(text, config.assistant_prefix or "")
            assert correct(mine, gold[question]) == bool(stored_correct), (
                f"{folder.name}: {text!r} (gold {gold[question]}): stored {stored!r}, read {mine!r}"
            )
            if (mine is None) != (stored is None) or (mine is not None and value(mine) != value(stored)):
                assert run_on.search(text), f"{folder.name}: {text!r}: stored {stored!r}, read independently {mine!r}"
            checked += 1
    if folder.name in {"grid-default", "grid-deep", "grid-seeds"}:
        assert checked, f"{folder.name}: its audits are read by concluding-exact"


@pytest.mark.slow  # over 5 s on two cores (CONTRIBUTING's table)
def test_a_referee_rederives_with_the_cli_and_no_torch(tmp_path):
    """`rnr-lens report --from-evidence` is a referee's command on a machine that may hold no
    model: it reads the evidence, derives every claim and renders the page without loading torch
    (issue 57), and gives the committed claims.json byte for byte."""
    import subprocess
    import sys

    folder = RESULTS / "grid-default"
    code = (
        "import sys\nfrom rnr_lens.cli import main\n"
        f"assert main(['report', '--from-evidence', {str(folder / EVIDENCE_FILE)!r}, '--out', {str(tmp_path / 'referee')!r}]) == 0\n"
        "assert 'torch' not in sys.modules, 'the re-derivation loaded torch'\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    assert (tmp_path / "referee" / "claims.json").read_bytes() == (folder / "claims.json").read_bytes()


@pytest.mark.parametrize(
    "tamper",
    [
        "every greedy flag true",
        "golds set to what the greedy try read",
        "a sweep evaluation's flag flipped",
        "a sweep's repair count raised",
        "a sweep's repair rate raised",
        "a sweep's repair rate as text",
        "a sweep row's flag flipped",
        "a null's rate lowered",
        "a null's rate as text",
    ],
)
def test_tampered_evidence_is_refused_before_anything_is_derived(tamper, tmp_path):
    """Issue 73: every greedy try's correctness flag set to true re-derived, realized moving from
    0.00 to 1.00 with no warning; golds replaced by what the greedy try read, with the flags set
    to match, moved realized from 0.00 to 0.38. The referee recomputes every derived field (each
    try's reading and correctness from its text, reader and gold; each task's fingerprint from
    its questions) and refuses the first that differs, in one line, with nothing written."""
    import gzip

    from rnr_lens.errors import RnrLensError
    from rnr_lens.measure.evidence import read

    document = read(RESULTS / "grid-deep-gemma" / EVIDENCE_FILE)
    columns = ("question_id", "probe", "try_index", "text", "extracted", "correct")
    from rnr_lens.core.records import TRY_COLUMNS

    at = {c: TRY_COLUMNS.index(c) for c in columns}
    payload = next(p for p in document["audits"] if any(not t[at["correct"]] for t in p["tries"] if t[at["probe"]] == "default"))
    greedy = {t[at["question_id"]]: t for t in payload["tries"] if t[at["probe"]] == "default"}
    if tamper.startswith("a null's rate"):  # the bar a bottleneck's held-out repair must clear
        payload, row = next((p, a) for p in document["audits"] for a in p["artifacts"] if a[0] == "null")
        null = json.loads(row[2])
        null["random_block"]["value"] = 0.0 if tamper.endswith("lowered") else "high"  # once a traceback
        row[2] = json.dumps(null)
        said = "null 'report' gives its random block a rate"
    elif tamper.startswith(("a sweep's", "a sweep row's")):  # claim 2's rates as the sweep keeps them, beside the rows they count
        payload, row = next((p, a) for p in document["audits"] for a in p["artifacts"] if a[0] == "sweep")
        sweep = json.loads(row[2])
        generated = next(r for r in sweep["table"] if r.get("n_repaired") is not None)
        if tamper == "a sweep's repair count raised":
            generated["n_repaired"] += 1
        elif tamper == "a sweep's repair rate raised":
            generated["repair"] = min(1.0, generated["repair"] + 0.25)
        elif tamper == "a sweep's repair rate as text":  # once a traceback
            generated["repair"] = "high"
        else:
            sweep["details"][0]["after_correct"] = not sweep["details"][0]["after_correct"]
        row[2] = json.dumps(sweep)
        said = "sweep 'report"
    elif tamper == "a sweep evaluation's flag flipped":  # claim 2's repair rates are counted from these
        payload, row = next((p, a) for p in document["audits"] for a in p["artifacts"] if a[0] == "sweep_eval")
        outcomes = json.loads(row[2])
        outcomes[0]["correct"] = not outcomes[0]["correct"]
        row[2] = json.dumps(outcomes)
        said = "sweep evaluation"
    elif tamper == "every greedy flag true":
        for t in greedy.values():
            t[at["correct"]] = 1
        said = "reads"
    else:  # each gold becomes what the greedy try read, and every flag follows it: consistent, but not the task audited
        from rnr_lens.questions.answers import is_correct_as
        from rnr_lens.questions.deploy import DeploymentConfig

        reader = DeploymentConfig.from_json(payload["audit"]["config_json"]).extractor
        gold = {}
        for q in payload["questions"]:
            read_as = greedy[q[0]][at["extracted"]]
            q[3] = gold[q[0]] = read_as if read_as is not None else q[3]
        for t in payload["tries"]:
            t[at["correct"]] = int(is_correct_as(reader, t[at["extracted"]], gold[t[at["question_id"]]], payload["audit"]["answer_type"]))
        for row in payload["artifacts"]:  # the sweep evaluations' flags follow too
            if row[0] == "sweep_eval":
                outcomes = json.loads(row[2])
                for o in outcomes:
                    o["correct"] = is_correct_as(reader, o["extracted"], gold[o["question_id"]], payload["audit"]["answer_type"])
                row[2] = json.dumps(outcomes)
        said = "task fingerprint|sweep 'report"  # the sweeps' own rows, or else the questions, give it away
    altered = tmp_path / "altered.json.gz"
    altered.write_bytes(gzip.compress(json.dumps(document).encode()))
    out = tmp_path / "referee"
    with pytest.raises(RnrLensError, match=said) as refused:
        rederive(altered, out)
    assert "\n" not in str(refused.value) and not out.exists(), "refused before anything is written"


def test_a_harness_audit_whose_flags_cannot_be_read_again_is_named_not_passed_over(tmp_path, capsys):
    """A harness's audit is graded by its filter, which needs the task; its flags cannot be
    recomputed from the file, so the re-derivation says they were taken as recorded (with its
    id), where before it said nothing. Its task fingerprint is still recomputed: a gold altered
    in it is refused."""
    import gzip

    from rnr_lens.cli import main
    from rnr_lens.errors import RnrLensError
    from rnr_lens.measure.evidence import read

    source = RESULTS / "grid-lm-eval" / EVIDENCE_FILE
    assert main(["report", "--from-evidence", str(source), "--out", str(tmp_path / "referee")]) == 0
    assert "not read again: 1 audit(s) graded by a harness's filter (0905469e6897)" in capsys.readouterr().out
    document = read(source)
    document["audits"][0]["questions"][0][3] = "999"
    altered = tmp_path / "altered.json.gz"
    altered.write_bytes(gzip.compress(json.dumps(document).encode()))
    with pytest.raises(RnrLensError, match="task fingerprint"):
        rederive(altered, tmp_path / "again")


@pytest.mark.slow
def test_a_harness_audits_tampered_flag_is_refused_where_the_referee_names_its_task(tmp_path, capsys, shared_data, monkeypatch):
    """Issue 73's first case, on the lm-eval evidence: a try's flag flipped re-derived with no
    word. Naming the task (the referee's own, never a path from the file) reads every try,
    sweep evaluation and sweep row again with the harness's filter and metric; the flip is
    refused in one line, and the honest file re-derives byte for byte."""
    import gzip

    pytest.importorskip("lm_eval")
    from rnr_lens.cli import main
    from rnr_lens.measure.evidence import read

    monkeypatch.chdir(RESULTS.parents[1])  # the task file reads ../shared/data relative to the repository root
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    spec = "lm-eval:assets/lm-eval/gsm8k_local.yaml"
    source = RESULTS / "grid-lm-eval" / EVIDENCE_FILE
    argv = ["report", "--from-evidence", str(source), "--task", spec, "--trust-task-code", "--out", str(tmp_path / "honest")]
    assert main(argv) == 0
    assert "not read again" not in capsys.readouterr().out
    assert (tmp_path / "honest" / "claims.json").read_bytes() == (RESULTS / "grid-lm-eval" / "claims.json").read_bytes()
    document = read(source)
    default = next(t for t in document["audits"][0]["tries"] if t[1] == "default")
    default[5] = 1 - default[5]
    altered = tmp_path / "altered.json.gz"
    altered.write_bytes(gzip.compress(json.dumps(document).encode()))
    assert main(["report", "--from-evidence", str(altered), "--task", spec, "--trust-task-code", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "reads" in err and "the file was altered" in err and not (tmp_path / "o").exists()
