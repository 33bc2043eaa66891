"""The claims report end to end on a two-setting grid of a tiny model (the machinery, not the
science: the real grid is a benchmark run), plus a trained pair of two tiny checkpoints."""

import json
import sqlite3

import numpy as np
import pytest
import yaml

import rnr_lens as R
from rnr_lens.cli import main
from rnr_lens.grids.grid import Grid
from rnr_lens.measure.evidence import Manifest
from rnr_lens.measure.store import RunStore

READER = "concluding-exact"


@pytest.fixture(scope="module")
def grid_file(tmp_path_factory):
    folder = tmp_path_factory.mktemp("grid")
    R.tiny_model(n_layers=4, seed=0).save_pretrained(folder / "base")
    R.tiny_model(n_layers=4, seed=5).save_pretrained(folder / "tuned")
    (folder / "mine.jsonl").write_text("\n".join(json.dumps({"question": f"What is {i} + {i}?", "answer": 2 * i}) for i in range(6)) + "\n")
    # the machinery under test needs failure sets on a random model's answers: the deployment is
    # pinned (the first number after "answer is"), so a change of the default extractor cannot
    # empty them
    R.DeploymentConfig(extractor="number").save(folder / "deploy.yaml")
    grid = {
        "config": "deploy.yaml",
        "models": ["base"],
        "tasks": ["add-small", "mine.jsonl"],
        "n": 5,
        "k": 3,
        "temperature": 1.0,
        "edits": 1,
        "pairs": [{"base": "base", "trained": "./tuned"}],  # ./: a path even where it is absent
    }
    (folder / "grid.yaml").write_text(yaml.safe_dump(grid))
    return folder / "grid.yaml"


@pytest.fixture(scope="module")
def first_report(grid_file, tmp_path_factory):
    """The grid reported once, unsharded: ``(folder, printed lines, claims)``."""
    import contextlib
    import io

    out = tmp_path_factory.mktemp("first") / "report"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["report", str(grid_file), "--out", str(out), "--profile"]) == 0
    return out, printed.getvalue(), json.loads((out / "claims.json").read_text())


@pytest.mark.slow
def test_report_answers_the_three_claims_and_resumes(first_report, grid_file, capsys):
    out, printed, claims = first_report
    assert "settings" in printed and str(out / "report.html") in printed
    profile = json.loads((out / "profile.json").read_text())  # --profile: where the time went
    stages = {s["stage"] for s in profile["stages"]}
    assert {"audit:default", "audit:sampling", "audit:search", "mine:screen", "mine:confirm"} <= stages
    assert "prefill" in printed and sum(s["seconds"] for s in profile["stages"] if s["stage"].startswith("audit:")) <= profile["wall_s"]
    routes = claims["routes_vs_search"]
    assert [(c["task"], c["model"]) for c in routes] == [("add-small", "base"), ("mine[:5]", "base")]
    for c in routes:  # every number is the audit's own
        result = R.AuditResult.load(out / "runs.db", c["audit"])
        summary = {r["probe"]: r for r in result.summary_records()}
        assert c["reachable_random"] == summary[c["random"]]["reachable"] and c["reachable_search"] == summary[c["search"]]["reachable"]
        q = result.questions
        diff = q[result.column(c["random"])].to_numpy(float) - q[result.column(c["search"])].to_numpy(float)
        assert c["random_minus_search"]["value"] == pytest.approx(diff.mean())
        for probe, above in ((c["random"], c["above_chance_random"]), (c["search"], c["above_chance_search"])):
            gain = c["oracle_gain"][probe]
            assert gain["value"] == pytest.approx((q[result.column(probe)].to_numpy(float) - q["realized"].to_numpy(float)).mean())
            if R.Estimate.from_dict(above).resolved != "above":
                assert all(v is None for v in c["retention"][probe].values()), "no share of a gain that may be chance"
            assert "logprob-or-default" in c["retention"][probe], "a blind selector that may keep the default answer"
        assert c["random"] == "routes:k=3,edits=1,protect=1,shared=false" and c["search"].startswith("search:k=3,")
        per_question = result.tries[result.tries["probe"] == c["random"]].groupby("question_id")["route"].apply(tuple)
        assert per_question.nunique() > 1, "each question draws its own routes"
        assert all(len(set(r)) == len(r) for r in per_question), "never one route twice for a question"
        searched = [R.Route.parse(r).n_edits for r in result.tries.loc[result.tries["probe"] == c["search"], "route"]]
        assert c["edits_random"] == 1 and c["edits_search"] == {"mean": pytest.approx(np.mean(searched)), "max": max(searched)}
        random_routes = result.tries.loc[result.tries["probe"] == c["random"], "route"]
        assert {R.Route.parse(r).n_edits for r in random_routes} == {1}, "random routes make exactly the grid's edits"
        assert c["verdict"]["status"] in R.verdicts.STATUSES and c["retention_verdict"]["status"] in R.verdicts.STATUSES
    assert len(claims["bottleneck"]) == 2 and all(c["verdict"]["status"] in R.verdicts.STATUSES for c in claims["bottleneck"])
    (pair_small, pair_mine) = claims["training"]
    assert pair_small["base"] == "base" and pair_small["trained"] == "tuned" and len(pair_small["probes"]) == 3
    assert all(p["verdict"]["status"] in R.verdicts.STATUSES and p["excluded"] == 0 for p in pair_small["probes"])
    statuses = [c["verdict"]["status"] for c in routes]
    summary = claims["summary"]["routes_vs_search"]
    for status in R.verdicts.STATUSES:
        assert f"{status} {statuses.count(status)}" in summary, "the summary gives all four counts"
    html = (out / "report.html").read_text()
    for heading in (
        "1. Random routes",
        "2. One MLP block",
        "3. Training",
        "Wilson 95% interval",
        "counts toward neither probe",
        "null: random block",
    ):
        assert heading in html
    assert html.count("Plotly.newPlot") >= 2 and html.count("plotly.js v") == 1, "figures inline, plotly.js embedded once"
    assert 'src="http' not in html, "no script is fetched: it reads offline"
    # a rerun resumes: nothing is generated again, and the claims are the same
    with sqlite3.connect(out / "runs.db") as conn:
        before = conn.execute("SELECT count(*) FROM tries").fetchone()[0]
    conn.close()
    assert main(["report", str(grid_file), "--out", str(out), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    with sqlite3.connect(out / "runs.db") as conn:
        assert conn.execute("SELECT count(*) FROM tries").fetchone()[0] == before
    conn.close()
    assert again["routes_vs_search"] == claims["routes_vs_search"] and again["training"] == claims["training"]
    assert claims["progress"] == {"audits_done": 4, "audits_total": 4, "complete": True} and "Partial report" not in html
    assert all(c.get("screen_vs_exhaustive") is None for c in claims["bottleneck"]), "exhaustive is off by default"
    assert "The exhaustive sweep was not run" in html and "screen vs exhaustive" not in html, "a column no setting fills is said, not shown"


@pytest.mark.slow
def test_a_report_rederives_from_its_evidence_alone_and_resumes_from_it(first_report, grid_file, tmp_path, capsys, monkeypatch):
    """Guards the referee's path: claims.json re-derived from evidence.json.gz, with no model
    loadable, is byte for byte the run's own; and a machine that has only the evidence
    continues the grid from it without generating anything again."""
    from rnr_lens.model import models

    out, _, _ = first_report
    claims = json.loads((out / "claims.json").read_text())
    evidence = out / "evidence.json.gz"
    assert evidence.stat().st_size < 1_000_000

    def no_model(*args, **kwargs):
        raise AssertionError("re-deriving loaded a model")

    monkeypatch.setattr(models, "load_model", no_model)
    referee = tmp_path / "referee"
    assert main(["report", "--from-evidence", str(evidence), "--out", str(referee)]) == 0
    printed = capsys.readouterr().out
    assert (referee / "claims.json").read_bytes() == (out / "claims.json").read_bytes()
    assert "re-derived without a model" in printed
    from rnr_lens.core.provenance import Code

    dirty = Code.here().dirty
    assert ("ran with uncommitted changes" if dirty else "the code is the code that ran") in printed, "a difference is said, never hidden"
    page = (referee / "report.html").read_text()
    assert (referee / "evidence.json.gz").read_bytes() == evidence.read_bytes() and "3. Training" in page and "<h2>Provenance</h2>" in page
    # provenance: every model's weights as the audits saw them, the code, the machine, each run
    provenance = claims["provenance"]
    fingerprints = {R.AuditResult.load(out / "runs.db", c["audit"]).info.model_fingerprint for c in claims["routes_vs_search"]}
    assert fingerprints <= {m["fingerprint"] for m in provenance["models"]} and {m["spec"] for m in provenance["models"]} == {
        str(grid_file.parent / "base"),
        str(grid_file.parent / "tuned"),
    }
    run = provenance["runs"][-1]
    assert run["code"]["libraries"]["torch"] and run["machine"]["torch_threads"] >= 1 and run["start"] <= run["end"]
    monkeypatch.undo()
    # a new machine: only the evidence; the grid continues and generates nothing again
    elsewhere = tmp_path / "elsewhere"
    assert main(["report", str(grid_file), "--out", str(elsewhere), "--from-evidence", str(evidence), "--json"]) == 0
    resumed = json.loads(capsys.readouterr().out)
    with sqlite3.connect(out / "runs.db") as a, sqlite3.connect(elsewhere / "runs.db") as b:
        assert a.execute("SELECT count(*) FROM tries").fetchone() == b.execute("SELECT count(*) FROM tries").fetchone()
    a.close()
    b.close()
    for key in ("routes_vs_search", "bottleneck", "training", "summary"):
        assert resumed[key] == claims[key], key
    assert len(resumed["provenance"]["runs"]) == len(provenance["runs"]) + 1, "the resumed run is one more run"
    # resumed in the same folder once more: still exactly what its evidence re-derives
    assert main(["report", str(grid_file), "--out", str(elsewhere)]) == 0
    assert main(["report", "--from-evidence", str(elsewhere / "evidence.json.gz"), "--out", str(tmp_path / "again")]) == 0
    assert (tmp_path / "again" / "claims.json").read_bytes() == (elsewhere / "claims.json").read_bytes()
    assert main(["report", str(grid_file), "--out", str(elsewhere), "--from-evidence", str(evidence)]) == 2
    assert "resumes from it: drop --from-evidence" in capsys.readouterr().err
    other = _with(grid_file, tmp_path, k=4)
    assert main(["report", str(other), "--out", str(tmp_path / "wrong"), "--from-evidence", str(evidence)]) == 2
    assert "evidence of another grid (its k is 3, this grid's 4)" in capsys.readouterr().err and not (tmp_path / "wrong").exists()
    assert main(["report", str(other), "--out", str(elsewhere)]) == 2, "a folder's report continues under its own grid only"
    assert "holds the report of another grid (its k is 3, this grid's 4)" in capsys.readouterr().err


@pytest.mark.slow
def test_a_model_absent_here_keeps_its_finished_settings_only_when_asked(first_report, grid_file, tmp_path, capsys):
    """Issue 55's re-run: a machine without a trained checkpoint resumes a report from its
    evidence; the absent model is refused in one line naming the way out, and with
    --keep-absent its finished settings stand as recorded (claims equal to the run's) while
    the models that are here run as usual."""
    out, _, _ = first_report
    evidence = out / "evidence.json.gz"
    tuned, away, task_file, saved = grid_file.parent / "tuned", grid_file.parent / "tuned-away", grid_file.parent / "mine.jsonl", None
    tuned.rename(away)
    try:
        assert main(["report", str(grid_file), "--out", str(tmp_path / "refused"), "--from-evidence", str(evidence)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "or pass --keep-absent" in err and str(tuned) in err
        assert not (tmp_path / "refused").exists(), "refused before anything is written"
        kept = tmp_path / "kept"
        assert main(["report", str(grid_file), "--out", str(kept), "--from-evidence", str(evidence), "--keep-absent", "--json"]) == 0
        captured = capsys.readouterr()
        assert f"kept as recorded: every setting of {str(tuned)!r}" in captured.err
        resumed, claims = json.loads(captured.out), json.loads((out / "claims.json").read_text())
        for key in ("routes_vs_search", "bottleneck", "training", "summary"):
            assert resumed[key] == claims[key], key
        runs = resumed["provenance"]["runs"]
        assert runs[-1]["kept"] == [str(tuned)] and all("kept" not in r for r in runs[:-1]), "the provenance says what this run kept unrun"
        # a folder without a store has nothing finished to keep
        assert main(["report", str(grid_file), "--out", str(tmp_path / "bare"), "--keep-absent"]) == 2
        err = capsys.readouterr().err
        assert "--keep-absent cannot keep it: its setting on add-small is not in this report" in err and not (tmp_path / "bare").exists()
        # a kept setting must still be this grid's: a task file edited since is refused, not kept stale
        saved = task_file.read_text()
        task_file.write_text(saved.replace("What is 0 + 0?", "What is 0 + 0 + 0?"))
        assert main(["report", str(grid_file), "--out", str(tmp_path / "stale"), "--from-evidence", str(evidence), "--keep-absent"]) == 2
        assert "audited on other questions than this grid's task gives" in capsys.readouterr().err and not (tmp_path / "stale").exists()
    finally:
        away.rename(tuned)
        if saved is not None:
            task_file.write_text(saved)


@pytest.mark.slow
def test_the_ceiling_added_to_a_finished_report_audits_only_its_own_probe(first_report, grid_file, tmp_path, capsys):
    """Claim 3 at large k (issue 41) on a report that ran without it: the grid with ceiling_k
    and ceiling_n added resumes the folder (its finished claims stand byte for byte), audits
    each pair member once more with the ceiling's probe on the first ceiling_n questions, and
    its claims re-derive from the evidence alone."""
    import shutil

    out, _, before = first_report
    folder = tmp_path / "report"
    shutil.copytree(out, folder)
    with_ceiling = _with(grid_file, tmp_path, ceiling_k=6, ceiling_n=3)
    assert main(["report", str(with_ceiling), "--out", str(folder)]) == 0
    capsys.readouterr()
    claims = json.loads((folder / "claims.json").read_text())
    for key in ("routes_vs_search", "bottleneck", "training"):
        assert claims[key] == before[key], key
    assert claims["grid"]["ceiling_k"] == 6 and "ceiling_k" not in before["grid"], "a grid without the ceiling writes what it always wrote"
    assert len(claims["ceiling"]) == 2 and claims["progress"]["complete"], "one per task of the one pair"
    probe = Grid.load(with_ceiling).ceiling_probe
    assert probe == "sampling:k=6,t=1.0,top_p=1.0,draw=inverse-cdf"
    store = RunStore(folder / "runs.db", mode="read")
    ceiling_audits = [a for a in store.audits() if a.probes == (probe,)]
    assert len(ceiling_audits) == 4 and all(a.n_questions == 3 for a in ceiling_audits)
    for c in claims["ceiling"]:
        assert c["probe"] == probe and [v["k"] for v in c["verdicts"]] == [1, 6] and len(c["curve"]) == 6
    assert "the same at the ceiling's budget, k = 6" in claims["summary"]["ceiling"]
    page = (folder / "report.html").read_text()
    assert "3, at large k" in page and "The ceiling at large k" in page
    assert main(["report", "--from-evidence", str(folder / "evidence.json.gz"), "--out", str(tmp_path / "referee")]) == 0
    assert (tmp_path / "referee" / "claims.json").read_bytes() == (folder / "claims.json").read_bytes()
    capsys.readouterr()
    # any other change still refuses the folder
    other = _with(grid_file, tmp_path, ceiling_k=6, ceiling_n=3, k=4)
    assert main(["report", str(other), "--out", str(folder)]) == 2
    assert "holds the report of another grid (its k is 3, this grid's 4)" in capsys.readouterr().err


@pytest.mark.slow
def test_a_pair_appended_to_a_finished_report_audits_only_its_checkpoint(first_report, grid_file, tmp_path, capsys):
    """Issue 56's seeds 1 and 2, trained after seed 0's report had finished: the grid with a pair
    appended resumes the folder (everything it finished stands, the recorded pair's claims
    first), audits only the new checkpoint, and its claims re-derive from the evidence alone;
    a pair dropped or moved first is another grid's report, refused in one line."""
    import shutil

    out, _, before = first_report
    folder = tmp_path / "report"
    shutil.copytree(out, folder)
    R.tiny_model(n_layers=4, seed=6).save_pretrained(grid_file.parent / f"tuned-{tmp_path.name}")
    pairs = [*yaml.safe_load(grid_file.read_text())["pairs"], {"base": "base", "trained": f"./tuned-{tmp_path.name}"}]
    store = RunStore(folder / "runs.db", mode="read")
    audited = {a.id: a.model_fingerprint for a in store.audits()}
    store.close()
    assert main(["report", str(_with(grid_file, tmp_path, pairs=pairs)), "--out", str(folder)]) == 0
    capsys.readouterr()
    claims = json.loads((folder / "claims.json").read_text())
    for key in ("routes_vs_search", "bottleneck"):
        assert claims[key] == before[key], key
    n = len(before["training"])
    assert claims["training"][:n] == before["training"] and len(claims["training"]) == 2 * n and claims["progress"]["complete"]
    store = RunStore(folder / "runs.db", mode="read")
    new = [a for a in store.audits() if a.id not in audited]
    store.close()
    assert len(new) == n and not {a.model_fingerprint for a in new} & set(audited.values()), "one audit per task, of the new checkpoint only"
    assert main(["report", "--from-evidence", str(folder / "evidence.json.gz"), "--out", str(tmp_path / "referee")]) == 0
    assert (tmp_path / "referee" / "claims.json").read_bytes() == (folder / "claims.json").read_bytes()
    capsys.readouterr()
    for other in (pairs[::-1], pairs[1:]):
        assert main(["report", str(_with(grid_file, tmp_path, pairs=other)), "--out", str(folder)]) == 2
        assert "holds the report of another grid (its pairs is " in capsys.readouterr().err


def _with(grid_file, tmp_path, **changes):
    """A copy of the test grid with ``changes`` (its model folders and task file beside it)."""
    grid = yaml.safe_load(grid_file.read_text())
    grid.update(changes)
    path = grid_file.parent / f"grid-{tmp_path.name}.yaml"
    path.write_text(yaml.safe_dump(grid))
    return path


@pytest.mark.slow
def test_sharded_report_equals_the_unsharded_one_and_checks_the_screen(first_report, grid_file, tmp_path):
    """Guards the executor seam: shards run here give the same audits and the same claims, and
    ``exhaustive: true`` adds the screen-vs-exhaustive agreement. With every block generated,
    the exhaustive sweep decides claim 2 (its pick, and against only from it). The agreement
    once set the screen's pick (chosen within the break bound) against the exhaustive sweep's
    best ignoring the bound, an unmatched comparison that charged the screen a regret for not
    picking a block that breaks too much."""
    _, _, claims = first_report
    out = tmp_path / "sharded"
    assert main(["report", str(_with(grid_file, tmp_path, exhaustive=True)), "--out", str(out), "--executor", "local", "--shards", "2"]) == 0
    sharded = json.loads((out / "claims.json").read_text())
    assert sharded["routes_vs_search"] == claims["routes_vs_search"] and sharded["training"] == claims["training"]
    checked, regrets = 0, []
    for plain, full in zip(claims["bottleneck"], sharded["bottleneck"], strict=True):
        agreement = full.get("screen_vs_exhaustive")
        assert {k: full.get(k) for k in ("audit", "failures", "discovery", "heldout", "control")} == {
            k: plain.get(k) for k in ("audit", "failures", "discovery", "heldout", "control")
        }, "the same failure set, split the same way"
        if full["failures"] < 2:
            assert agreement is None, "no failure set, nothing swept"
            continue
        # recompute the agreement from the exhaustive sweep itself, by the admission rule (discovery controls)
        from rnr_lens.bottleneck import failures
        from rnr_lens.bottleneck.miner import mine

        result = R.AuditResult.load(out / "runs.db", full["audit"])
        fs = failures.freeze(result, RunStore(out / "runs.db"), probe=result.probe_name(claims["probes"][0]), name="report")
        sweep = mine(
            R.load_model(grid_file.parent / "base"), fs, strategy="exhaustive", break_bound=1.0, store=RunStore(out / "runs.db"), progress=False
        )
        table = sweep.table.sort_values(["repair_discovery", "break_discovery", "layer"], ascending=[False, True, True])
        bound = full["break_bound"]
        valid = table[((table["break_discovery"] <= bound) | table["break_discovery"].isna()) & (table["repair_discovery"] > 0)]
        best = valid.iloc[0] if len(valid) else table.iloc[0]  # the same rule as the screen's pick
        if plain.get("bottleneck"):
            assert agreement["screen_block"] in (plain.get("tie") or [plain["bottleneck"]["block"]]), "the agreement speaks for the screen's pick"
        if len(valid):
            tied = valid[valid["repair_discovery"] == best["repair_discovery"]]["layer"].tolist()
            assert full["bottleneck"]["block"] in tied and sorted(full["tie"]) == sorted(tied), "the exhaustive sweep's tie decides"
        else:  # no block within the bound: every block was generated, and the verdict says so (or rules every one out)
            said = R.verdicts.Verdict.from_dict(full["verdict"]).text
            assert full["verdict"]["status"] == "against" or f"({len(table)} of {len(table)} blocks generated)" in said
        picked = table[table["layer"] == agreement["screen_block"]].iloc[0]
        kept = picked["repair_discovery"] if picked.name in valid.index or not len(valid) else 0.0
        assert agreement["exhaustive_block"] == best["layer"] and agreement["same_block"] == (best["layer"] == picked["layer"])
        assert agreement["regret"] == pytest.approx(best["repair_discovery"] - kept) and agreement["regret"] >= 0
        checked += 1
        regrets.append(agreement)
    assert checked, "the test grid gives at least one setting a failure set to sweep"
    html = (out / "report.html").read_text()
    assert "screen vs exhaustive" in html
    # a tie at 0 (no block repairs any discovery failure) is no match (issue 72): counted apart
    some = [a for a in regrets if a["exhaustive_repair_discovery"] > 0]
    said = sharded["summary"]["bottleneck"]
    if not some:
        assert f"in none of the {len(regrets)} settings where both ran does a block repair a discovery failure" in said
    else:
        assert f"as the exhaustive sweep's best in {len(some) - sum(a['regret'] > 0 for a in some)} of {len(some)} settings where both ran" in said
        assert len(some) == len(regrets) or f"({len(regrets) - len(some)} more where no block repairs any)" in said


@pytest.mark.slow
def test_report_on_ray_equals_the_local_report(first_report, grid_file, tmp_path):
    """One setting's audit on a local two-CPU Ray cluster, the mining here: the same claims as
    the local report (one setting: every Ray audit starts its own workers)."""
    pytest.importorskip("ray")
    _, _, claims = first_report
    out = tmp_path / "ray"
    grid = _with(grid_file, tmp_path, tasks=["add-small"], pairs=[])
    assert main(["report", str(grid), "--out", str(out), "--executor", "ray", "--shards", "2", "--num-cpus", "2"]) == 0
    on_ray = json.loads((out / "claims.json").read_text())
    for key in ("routes_vs_search", "bottleneck"):
        assert on_ray[key] == claims[key][:1], key


@pytest.mark.slow
def test_an_interrupted_report_leaves_a_partial_one_that_says_so(grid_file, tmp_path, capsys):
    """The claims are written after every setting, so a grid that stops halfway (here: a
    question too long for the model's context, found when its audit starts) leaves the
    settings already answered, marked partial; the rerun after the fix completes it."""
    long = tmp_path / "long.jsonl"
    long.write_text(json.dumps({"question": "What is " + " + ".join(["1"] * 700) + "?", "answer": 700}) + "\n")
    grid = _with(grid_file, tmp_path, tasks=["add-small", str(long)], pairs=[], mine=False)
    out = tmp_path / "partial"
    assert main(["report", str(grid), "--out", str(out)]) == 2
    assert "exceeds" in capsys.readouterr().err
    claims = json.loads((out / "claims.json").read_text())
    assert claims["progress"] == {"audits_done": 1, "audits_total": 2, "complete": False}
    assert [c["task"] for c in claims["routes_vs_search"]] == ["add-small"]
    assert "Partial report: 1 of 2 audits done" in (out / "report.html").read_text()
    # the evidence of the stopped run re-derives its partial claims
    assert main(["report", "--from-evidence", str(out / "evidence.json.gz"), "--out", str(tmp_path / "rederived")]) == 0
    assert (tmp_path / "rederived" / "claims.json").read_bytes() == (out / "claims.json").read_bytes()
    long.write_text(json.dumps({"question": "What is 1 + 1?", "answer": 2}) + "\n")
    assert main(["report", str(grid), "--out", str(out)]) == 0
    assert json.loads((out / "claims.json").read_text())["progress"]["complete"]


def test_report_refuses_shards_without_an_executor(grid_file, tmp_path, capsys):
    assert main(["report", "--out", str(tmp_path / "out")]) == 2
    assert "give a grid file to run, or --from-evidence FILE" in capsys.readouterr().err
    assert main(["report", "--out", str(tmp_path / "out"), "--from-evidence", "x.json.gz", "--shards", "2"]) == 2
    assert "takes no --executor, --shards, --profile or --keep-absent" in capsys.readouterr().err
    assert main(["report", "--out", str(tmp_path / "out"), "--from-evidence", str(grid_file)]) == 2
    assert "is not rnr_lens evidence" in capsys.readouterr().err
    assert main(["report", str(grid_file), "--out", str(tmp_path / "out"), "--shards", "2"]) == 2
    assert "--shards needs --executor" in capsys.readouterr().err and not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "content, message",
    [
        ("models: []\ntasks: [add-small]\n", "at least one model and one task"),
        ("models: [x]\ntasks: [add-small]\nk: 0\n", "grid field k must be a whole number"),
        ("models: [x]\ntasks: [add-small]\nbudget: 8\n", "unknown grid field 'budget'"),
        ("models: [x]\ntasks: [add-small]\npairs: [{base: x}]\n", "each grid pair needs exactly base: and trained:"),
        ("models: [x]\ntasks: [add-small]\nexhaustive: 'yes'\n", "grid field exhaustive must be true or false"),
        ("models: [x]\ntasks: [add-small]\nceiling_n: 50\n", "grid field ceiling_n sizes the ceiling's audits: add ceiling_k"),
        ("models: [x]\ntasks: [add-small]\nceiling_k: 128\n", "grid field ceiling_k compares trained pairs at large k: add pairs:"),
        ("models: [x]\ntasks: [add-small]\nceiling_k: 0\n", "grid field ceiling_k must be a whole number of at least 1"),
        (
            "models: [smollm2-135m-instruct]\ntasks: [add-small]\npairs: [{base: smollm2-135m-instruct, trained: ./no-such-run/final}]\n",
            "no-such-run/final': unknown model",  # named as resolved against the grid's folder
        ),
        ("models: [smollm2-135m-instruct]\ntasks: [no-such-task.jsonl]\n", "no-such-task.jsonl"),
        ("[1, 2]\n", "must hold a mapping"),
    ],
)
def test_bad_grids_are_one_line_errors(tmp_path, content, message, capsys):
    path = tmp_path / "grid.yaml"
    path.write_text(content)
    assert main(["report", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists(), "nothing written"


@pytest.mark.slow
def test_the_report_fits_a_1280px_window(first_report):
    """At 1280 px the report was 1381 px wide, its verdict column cut off or one word per line."""
    from tests.jupyterlab import overflowing

    out, _, claims = first_report
    page = (out / "report.html").resolve().as_uri()
    assert not overflowing([page]), overflowing([page])
    text = (out / "report.html").read_text()
    assert text.count("class='rnr-below'") >= len(claims["routes_vs_search"]), "each verdict under its row, across the table"
    assert "<p class='caption'>" in text, "figures carry their captions"


@pytest.mark.slow
def test_claims_json_reads_back_into_the_records_that_wrote_it(first_report):
    """Every claim of a real report (routes, a mined failure set, a trained pair) survives
    claims.json: read back and written again, nothing changes, and the page renders from it."""
    from rnr_lens.judge.claims import Claims
    from rnr_lens.present.report_page import render_html

    _, _, claims = first_report
    again = Claims.from_dict(claims)
    assert json.loads(json.dumps(again.to_dict(), default=str)) == claims
    assert again.training and again.bottleneck and again.progress is not None and again.progress.complete
    page = render_html(again)
    assert all(c.setting.task in page for c in again.routes_vs_search)


@pytest.mark.slow
def test_a_report_regraded_without_a_model_then_mined_again_with_only_the_models_it_needs(first_report, grid_file, tmp_path, capsys, monkeypatch):
    """Issue 54's re-grading path: ``--regrade`` reads every try of the evidence again under
    another reader with no model loadable (new config, new ids, what moved in regrading.json,
    the mined stages whose failure set moved dropped), and ``--mine-again`` mines those with
    only the models whose settings need it; the folder then re-derives from its evidence."""
    from rnr_lens.model import models

    out, _, _ = first_report
    config = tmp_path / "reader.yaml"
    R.DeploymentConfig(extractor=READER).save(config)
    real_load = models.load_model
    monkeypatch.setattr(models, "load_model", lambda *a, **k: pytest.fail("re-grading loaded a model"))
    folder = tmp_path / "regraded"
    assert main(["report", "--from-evidence", str(out / "evidence.json.gz"), "--regrade", str(config), "--out", str(folder)]) == 0
    printed = capsys.readouterr().out
    moved = json.loads((folder / "regrading.json").read_text())["audits"]
    claims = json.loads((folder / "claims.json").read_text())
    runs = len(json.loads((out / "claims.json").read_text())["provenance"]["runs"])  # the report's runs so far (other tests resume it)
    assert list(claims["configs"]) == [R.DeploymentConfig.load(config).hash()] and len(claims["provenance"]["runs"]) == runs + 1, (
        "the re-reading is a run"
    )
    assert sum(a["correct_changed"] for a in moved) > 0 and printed.count("re-graded: ") >= len(moved)
    dropped = [a for a in moved if a["mined"] == "dropped"]
    assert dropped, "the new reader moves a try that chose the add-small failure set"
    assert all(a["new_id"] != a["old_id"] for a in moved) and "--mine-again" in printed
    store = RunStore(folder / "runs.db", mode="read")
    for a in dropped:  # a set that moved goes whole; a kept set keeps its re-read evaluations, not the tables built from them
        assert store.get_artifact(a["new_id"], "sweep", "report:screen+confirm") is None
        kept_set = "its failure set and evaluations are kept" in a["reason"]
        assert (store.get_artifact(a["new_id"], "failure_set", "report") is None) == (not kept_set), a["reason"]
    store.close()
    loaded = []
    monkeypatch.setattr(models, "load_model", lambda spec, *a, **k: loaded.append(spec) or real_load(spec, *a, **k))
    assert main(["report", "--mine-again", "--out", str(folder)]) == 0
    assert loaded == [str(grid_file.parent / "base")], "only the model whose setting was dropped is loaded"
    manifest = Manifest.load(RunStore(folder / "runs.db", mode="read"))
    assert all("mined" in s.stages for s in manifest.settings if s.model == str(grid_file.parent / "base"))
    assert len(json.loads((folder / "claims.json").read_text())["provenance"]["runs"]) == runs + 2, "and so is the mining"
    loaded.clear()
    assert main(["report", "--mine-again", "--out", str(folder)]) == 0 and loaded == [], "nothing left to mine loads nothing"
    capsys.readouterr()
    assert main(["report", "--from-evidence", str(folder / "evidence.json.gz"), "--out", str(tmp_path / "referee")]) == 0
    assert (tmp_path / "referee" / "claims.json").read_bytes() == (folder / "claims.json").read_bytes()
    # refusals: one line, exit 2, nothing written
    R.DeploymentConfig(extractor=READER, max_new_tokens=5).save(tmp_path / "longer.yaml")
    assert (
        main(["report", "--from-evidence", str(out / "evidence.json.gz"), "--regrade", str(tmp_path / "longer.yaml"), "--out", str(tmp_path / "no")])
        == 2
    )
    assert "max_new_tokens differ" in capsys.readouterr().err and not (tmp_path / "no").exists()
    assert main(["report", str(grid_file), "--regrade", "--out", str(tmp_path / "no")]) == 2
    assert "--regrade re-reads a report's evidence without a model" in capsys.readouterr().err
    assert main(["report", "--mine-again", "--out", str(tmp_path / "no")]) == 2
    assert "holds no report store" in capsys.readouterr().err


def test_a_profile_left_by_a_run_whose_store_is_gone_is_not_continued(tmp_path):
    """``report --profile`` continues the profile of the run it resumes; one whose store was
    deleted belongs to no run (the rule lived in the CLI's handler until issue 57)."""
    from rnr_lens.grids.reports import profile_file

    saved = tmp_path / "profile.json"
    saved.write_text("{}")
    assert profile_file(tmp_path) == saved and not saved.exists(), "no runs.db: a stale profile, removed"
    saved.write_text("{}")
    (tmp_path / "runs.db").write_bytes(b"")
    assert profile_file(tmp_path) == saved and saved.read_text() == "{}", "the run it resumes: kept, to be continued"
