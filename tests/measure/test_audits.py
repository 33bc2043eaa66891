"""The audit loop on real (tiny) models: determinism, consistency of the aggregates, resume."""

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

import rnr_lens as R
from rnr_lens.measure.audits import audit
from rnr_lens.measure.results import AuditResult
from rnr_lens.measure.store import RunStore
from rnr_lens.questions import tasks
from tests.conftest import AUDIT_PROBES


def test_same_config_and_seed_give_identical_results(tiny, tiny_audit, tmp_path):
    again = audit(tiny, tasks.get("add-small", n=8), AUDIT_PROBES, store=tmp_path / "b.db", progress=False, seed=1)
    cols = ["question_id", "probe", "try_index", "text", "route", "seed", "correct"]
    pd.testing.assert_frame_equal(tiny_audit.tries[cols].reset_index(drop=True), again.tries[cols].reset_index(drop=True))
    assert again.id == tiny_audit.id


def test_every_question_has_its_full_budget(tiny_audit):
    counts = tiny_audit.tries.groupby(["probe", "question_id"]).size()
    for probe, budget in zip(tiny_audit.probes, [4, 3, 3]):
        assert (counts.loc[probe] == budget).all()
    assert (counts.loc["default"] == 1).all()


def test_several_audits_share_one_store(tiny, tmp_path):
    db = tmp_path / "shared.db"
    a = audit(tiny, tasks.get("add-small", n=3), ["routes:k=2"], store=db, progress=False)
    b = audit(tiny, tasks.get("sub", n=3), ["routes:k=2"], store=db, progress=False)
    assert {x.id for x in RunStore(db).audits()} == {a.id, b.id}
    with pytest.raises(R.RnrLensError, match="holds 2 audits"):
        AuditResult.load(db)
    assert AuditResult.load(db, b.id).info.task == "sub"


def test_unfinished_audit_needs_resume(tiny, tmp_path):
    db = tmp_path / "r.db"
    t = tasks.get("add-small", n=3)
    first = audit(tiny, t, ["routes:k=2"], store=db, progress=False)
    RunStore(db).set_status(first.id, "running")
    with pytest.raises(R.RnrLensError, match="pass resume=True"):
        audit(tiny, t, ["routes:k=2"], store=db, progress=False, resume=False)
    assert audit(tiny, t, ["routes:k=2"], store=db, progress=False, resume="only").id == first.id
    with pytest.raises(R.RnrLensError, match="resume must be one of True, False, 'only', got 'yes'"):
        audit(tiny, t, ["routes:k=2"], store=tmp_path / "other.db", progress=False, resume="yes")
    assert not (tmp_path / "other.db").exists(), "a bad policy is refused before the store is touched"


def test_a_python_caller_is_refused_where_the_cli_is_before_the_store_is_touched(tiny, tmp_path):
    """The audit's checks lived in the CLI's handler (issue 57): ``R.audit`` with a path in a
    missing folder, or ``resume='only'`` on a missing file, made the file and then failed; a
    resume whose settings differ named nothing. One library function (``audits.prepared``)
    now makes every check for both, each naming the argument as the caller spells it."""
    t = tasks.get("add-small", n=3)
    with pytest.raises(R.RnrLensError, match=r"folder .*nowhere does not exist; create it or choose another store= path"):
        audit(tiny, t, ["routes:k=2"], store=tmp_path / "nowhere" / "r.db", progress=False)
    with pytest.raises(R.RnrLensError, match=r"nothing to resume: .*r.db does not exist; leave out resume='only' to start an audit"):
        audit(tiny, t, ["routes:k=2"], store=tmp_path / "r.db", progress=False, resume="only")
    assert not (tmp_path / "r.db").exists(), "a refused resume leaves no store behind"
    notes = tmp_path / "notes.txt"
    notes.write_text("not a run store")
    with pytest.raises(R.RnrLensError, match="is damaged or not an rnr_lens run store"):
        audit(tiny, t, ["routes:k=2"], store=notes, progress=False)
    assert notes.read_text() == "not a run store", "a file that is not a run store is refused untouched"
    db = tmp_path / "r.db"
    empty = tmp_path / "empty.db"
    empty.touch()  # a tempfile: the store is made there, as RunStore makes one
    assert audit(tiny, t, ["routes:k=2"], store=empty, progress=False).finished and RunStore(empty, mode="read").audits()
    lock = tmp_path / ".:memory:.lock"
    assert audit(tiny, t, ["routes:k=2"], store=":memory:", progress=False).finished
    assert not lock.exists() and not list(Path.cwd().glob(".:memory:*")), "a store in memory takes no lock file"
    done = audit(tiny, t, ["routes:k=2"], store=db, progress=False)
    with pytest.raises(R.RnrLensError, match=r"differs in: probes .*rerun with its settings"):
        audit(tiny, t, ["routes:k=3"], store=db, progress=False, resume="only")
    there = done.config.max_new_tokens
    with pytest.raises(R.RnrLensError, match=rf"differs in: deployment config \(max_new_tokens {there} there, {there - 1} now\)"):
        audit(tiny, t, ["routes:k=2"], done.config.with_(max_new_tokens=there - 1), store=db, progress=False, resume="only")


@pytest.mark.parametrize("planted", ["", "-wal"])
def test_a_planted_link_at_the_store_is_refused_before_the_model_is_read(tmp_path, capsys, planted):
    """A dangling link in the store's place (or its WAL's) was refused only when the store was
    opened, after the model had loaded: the hostile-input campaign's case took 1 GB with
    PyPI's CUDA wheel of torch. ``prepared`` refuses it with its other path checks, before the
    model is read (the model named here does not exist, so its error would come first)."""
    from rnr_lens.cli import main

    (tmp_path / "out").mkdir()
    (tmp_path / "out" / f"run.db{planted}").symlink_to(tmp_path / "elsewhere.db")
    argv = ["audit", "--model", str(tmp_path / "no-model"), "--task", "add-small", "--n", "2", "--out", str(tmp_path / "out" / "run.db")]
    assert main(argv) == 2
    said = capsys.readouterr().err.strip()
    assert (
        said
        == f"error: {tmp_path / 'out' / f'run.db{planted}'} is a symbolic link; a run store is never written through one: remove the link or choose another path"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"] and sorted(p.name for p in (tmp_path / "out").iterdir()) == [f"run.db{planted}"]


def _rows(db, aid):
    with sqlite3.connect(db) as c:
        return c.execute(
            "SELECT question_id, probe, try_index, seed, route, text, extracted, correct FROM tries WHERE audit_id=? "
            "ORDER BY question_id, probe, try_index",
            (aid,),
        ).fetchall()


@pytest.mark.slow  # over 5 s on two cores (CONTRIBUTING's table)
def test_kill_9_then_resume_gives_exactly_the_uninterrupted_rows(tmp_path):
    """A real CLI audit killed with SIGKILL mid-run resumes to exactly the rows of a clean run."""
    folder = R.tiny_model(n_layers=4, seed=0).save_pretrained(tmp_path / "tiny")
    args = [
        sys.executable,
        "-m",
        "rnr_lens",
        "audit",
        "--model",
        str(folder),
        "--task",
        "add-small",
        "--n",
        "24",
        "--probe",
        "sampling:k=4,t=1.0",
        "--probe",
        "routes:k=4,edit_rate=0.6",
        "--batch-size",
        "4",
        "--json",
    ]
    env = {**os.environ, "RNR_LENS_CACHE": str(tmp_path / "cache")}
    clean_db, killed_db = tmp_path / "clean.db", tmp_path / "killed.db"
    subprocess.run(args + ["--out", str(clean_db)], check=True, env=env, capture_output=True)
    (aid,) = [a.id for a in RunStore(clean_db).audits()]
    expected = _rows(clean_db, aid)

    proc = subprocess.Popen(args + ["--out", str(killed_db)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline:
        time.sleep(0.2)
        if killed_db.exists():
            try:
                n = len(_rows(killed_db, aid))
            except sqlite3.Error:
                continue
            if n >= 30:
                break
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    partial = _rows(killed_db, aid)
    assert 0 < len(partial) < len(expected), "the kill should land mid-run"
    result = subprocess.run(args + ["--out", str(killed_db), "--resume"], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert _rows(killed_db, aid) == expected


def test_a_model_without_a_chat_template_is_deployed_on_raw_text():
    """A base model (Gemma-3-270M's GGUF has no chat template) gets the default deployment as
    raw text with its measured worked examples (issue 55); a config that asks for chat names
    the fix."""
    from rnr_lens.questions.deploy import default_shots
    from rnr_lens.questions.shots import resolve

    model = R.tiny_model(n_layers=2, seed=0)
    model.tokenizer.chat_template = None
    task = tasks.get("add-small", n=3)
    result = R.audit(model, task, ["sampling:k=2,t=1.0"], progress=False)
    config = R.DeploymentConfig.default_for("number", chat=False).with_(shots=resolve(default_shots(task), task))
    assert result.info.config_hash == config.hash() and len(result.tries) == 3 * 3
    with pytest.raises(R.RnrLensError, match="chat: false"):
        R.audit(model, tasks.get("add-small", n=3), [], R.DeploymentConfig.default_for("number"), progress=False)


def test_the_progress_bar_names_the_task_whole(tmp_path, capsys):
    """Issue 59: "smollm2-135m-instruct / add-small" was cut to "… / add-sma…"; a long model
    name is shortened instead, the task's name never."""
    model = R.tiny_model(n_layers=4, name="smollm2-135m-instruct+a-long-checkpoint-name")
    audit(model, tasks.get("add-small", n=2), ["routes:k=1"], store=tmp_path / "r.db", progress=True)
    shown = capsys.readouterr().err
    assert " / add-small" in shown and "add-sma…" not in shown and "smollm2-135m-instruct+a-lon… / add-small" in shown
