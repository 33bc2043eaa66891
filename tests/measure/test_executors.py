"""Executors: shards run here or on a local two-CPU Ray cluster give the single-process audit
row for row, also when a Ray worker dies mid-shard."""

import pytest

import rnr_lens as R
from rnr_lens.cli import main
from rnr_lens.measure.audits import audit
from rnr_lens.measure.executors import CRASH_ONCE_ENV, run_audit
from rnr_lens.measure.results import AuditResult
from rnr_lens.measure.store import RunStore
from rnr_lens.questions import tasks
from tests.core.test_shards import assert_same_tries

PROBES = ["sampling:k=3,t=1.0", "routes:k=2,edit_rate=0.6"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return R.tiny_model(n_layers=4, seed=0).save_pretrained(tmp_path_factory.mktemp("m") / "tiny")


@pytest.fixture(scope="module")
def single(folder, tmp_path_factory):
    return audit(R.load_model(folder), tasks.get("add-small", n=12), PROBES, store=tmp_path_factory.mktemp("s") / "one.db", progress=False, seed=5)


def test_local_executor_equals_single_process_and_resumes(folder, single, tmp_path):
    db = tmp_path / "local.db"
    result = run_audit(folder, tasks.get("add-small", n=12), PROBES, store=db, seed=5, shards=3, progress=False)
    assert result.id == single.id and result.info.status.complete
    assert_same_tries(result.tries, single.tries)
    again = run_audit(folder, tasks.get("add-small", n=12), PROBES, store=db, seed=5, shards=3, progress=False)
    assert len(again.tries) == len(single.tries)


def test_the_label_is_stored_under_every_executor(folder, tmp_path):
    """Guards against `rnr-lens audit --label` being dropped whenever --executor was given
    (the executor never passed it on); Ray is checked in the slow test below."""
    result = run_audit(folder, tasks.get("add-small", n=4), PROBES[:1], store=tmp_path / "l.db", shards=2, progress=False, label="shards")
    assert result.info.label == "shards"
    argv = ["audit", "--model", str(folder), "--task", "add-small", "--n", "4", "--probe", PROBES[0], "--out", str(tmp_path / "c.db")]
    assert main([*argv, "--executor", "local", "--shards", "2", "--label", "cli", "--json"]) == 0
    assert AuditResult.load(RunStore(tmp_path / "c.db")).info.label == "cli"


def test_local_executor_takes_a_loaded_model(folder, single, tmp_path):
    """The report hands its loaded model to the local executor rather than loading it twice."""
    result = run_audit(R.load_model(folder), tasks.get("add-small", n=12), PROBES, store=tmp_path / "l.db", seed=5, shards=2, progress=False)
    assert result.id == single.id
    assert_same_tries(result.tries, single.tries)


def test_executor_rejects_bad_input(folder, tmp_path):
    with pytest.raises(R.RnrLensError, match="unknown executor"):
        run_audit(folder, tasks.get("add-small", n=2), store=tmp_path / "x.db", executor="dask")
    with pytest.raises(R.RnrLensError, match="shards must be at least 1"):
        run_audit(folder, tasks.get("add-small", n=2), store=tmp_path / "x.db", shards=0)
    with pytest.raises(R.RnrLensError, match="on Ray needs the model as a name or path"):
        run_audit(R.tiny_model(), tasks.get("add-small", n=2), store=tmp_path / "x.db", executor="ray")


@pytest.mark.slow
def test_ray_executor_survives_a_dying_worker(folder, single, tmp_path, monkeypatch, tiny_base_folder):
    from rnr_lens.measure.executors import init_ray

    crash = tmp_path / "crashed-once"
    monkeypatch.setenv(CRASH_ONCE_ENV, str(crash))
    ray = init_ray(num_cpus=2)
    try:
        db = tmp_path / "ray.db"
        result = run_audit(folder, tasks.get("add-small", n=12), PROBES, store=db, seed=5, shards=4, executor="ray", progress=False)
        assert crash.exists(), "a worker should have died in its first shard"
        assert result.id == single.id and result.info.status.complete
        assert_same_tries(result.tries, single.tries)
        assert RunStore(db).conn.execute("SELECT count(*) FROM tries").fetchone()[0] == len(single.tries)

        # the command line reaches the same executor (on the cluster already running)
        cli_db = tmp_path / "cli.db"
        argv = [
            "audit",
            "--model",
            str(folder),
            "--task",
            "add-small",
            "--n",
            "12",
            "--seed",
            "5",
            "--executor",
            "ray",
            "--shards",
            "2",
            "--out",
            str(cli_db),
            "--json",
            "--label",
            "on ray",
            *[x for p in PROBES for x in ("--probe", p)],
        ]
        assert main(argv) == 0
        assert_same_tries(AuditResult.load(RunStore(cli_db)).tries, single.tries)
        assert AuditResult.load(RunStore(cli_db)).info.label == "on ray", "the label reaches the store through the workers"

        # a base model (no chat template): the driver reads its tokenizer and deploys it on raw
        # text, as a process holding the model does; the workers run that same deployment
        base_task = tasks.get("add-small", n=4)
        here = audit(R.load_model(tiny_base_folder), base_task, PROBES[:1], store=tmp_path / "base-here.db", progress=False)
        there = run_audit(tiny_base_folder, base_task, PROBES[:1], store=tmp_path / "base-ray.db", shards=2, executor="ray", progress=False)
        assert not there.config.chat and there.id == here.id
        assert_same_tries(there.tries, here.tries)

        # a model the workers cannot load is one clear error, not a Ray traceback
        # (the driver reads the tokenizer first, so it says so before any worker starts)
        with pytest.raises(R.RnrLensError, match="unknown model .*missing"):
            run_audit(tmp_path / "missing", tasks.get("add-small", n=2), store=tmp_path / "bad.db", executor="ray", progress=False, max_retries=0)
    finally:
        ray.shutdown()


def test_run_audit_refuses_where_audit_does(folder, single, tmp_path):
    """``run_audit`` with a path store once opened it itself, skipping every check ``audit``
    and the CLI make (audits.prepared): a missing folder, a file that is no run store and a
    resume with nothing to resume are refused before any model loads (the model named here
    does not exist), and ``resume=False`` refuses an unfinished audit as ``audit`` does."""
    import sqlite3

    nowhere, task = tmp_path / "no-model", tasks.get("add-small", n=12)
    with pytest.raises(R.RnrLensError, match=r"folder .*missing does not exist"):
        run_audit(nowhere, task, PROBES, store=tmp_path / "missing" / "x.db", shards=2)
    text = tmp_path / "notes.db"
    text.write_text("not a store")
    with pytest.raises(R.RnrLensError, match="damaged or not an rnr_lens run store"):
        run_audit(nowhere, task, PROBES, store=text, shards=2)
    assert text.read_text() == "not a store"
    with pytest.raises(R.RnrLensError, match="nothing to resume"):
        run_audit(nowhere, task, PROBES, store=tmp_path / "none.db", shards=2, resume="only")
    assert not (tmp_path / "none.db").exists() and not (tmp_path / "missing").exists()

    db = tmp_path / "unfinished.db"
    run_audit(folder, task, PROBES, store=db, seed=5, shards=2, progress=False)
    with sqlite3.connect(db) as conn:  # as a kill leaves it: running, one shard done, the other's rows gone
        conn.execute("UPDATE audits SET status='running'")
        (kept,) = conn.execute("SELECT name FROM artifacts WHERE kind='shard' ORDER BY name LIMIT 1").fetchone()
        conn.execute("DELETE FROM artifacts WHERE kind='shard' AND name != ?", (kept,))
    conn.close()
    with pytest.raises(R.RnrLensError, match="already exists in .* unfinished; pass resume=True"):
        run_audit(folder, task, PROBES, store=db, seed=5, shards=2, progress=False, resume=False)
    resumed = run_audit(folder, task, PROBES, store=db, seed=5, shards=2, progress=False, resume="only")
    assert resumed.id == single.id and resumed.info.status.complete
    assert_same_tries(resumed.tries, single.tries)
