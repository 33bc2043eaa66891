"""Shards of an audit and of a sweep, merged, equal the whole run row for row."""

import shutil
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

import rnr_lens as R
from rnr_lens.bottleneck import failures
from rnr_lens.bottleneck import miner as M
from rnr_lens.cli import main
from rnr_lens.core.shards import Shard, complete_split
from rnr_lens.measure.audits import audit
from rnr_lens.measure.results import AuditResult, tries_difference
from rnr_lens.measure.store import RunStore, merge
from rnr_lens.questions import tasks

PROBES = ["sampling:k=3,t=1.0", "routes:k=2,edit_rate=0.6"]


def assert_same_tries(a: pd.DataFrame, b: pd.DataFrame) -> None:
    """Row for row the same tries (:func:`rnr_lens.measure.results.tries_difference`, the one comparison)."""
    why = tries_difference(a, b)
    assert why is None, why


def test_shard_parse_and_partition():
    assert Shard.parse("2/5") == Shard(2, 5) and str(Shard(2, 5)) == "2/5"
    for bad in ("3/3", "-1/2", "1", "a/b", "0/0"):
        with pytest.raises(R.RnrLensError, match="shard"):
            Shard.parse(bad)
    ids = [q.id for q in tasks.get("add-two-digit", n=200)]
    owners = [[i for i in range(4) if Shard(i, 4).contains(q)] for q in ids]
    assert all(len(o) == 1 for o in owners)  # each question in exactly one shard
    assert all(0.1 < sum(o == [i] for o in owners) / len(ids) < 0.4 for i in range(4))
    assert complete_split(["0/2", "1/2"]) == 2 and complete_split(["0/3", "1/3"]) is None and complete_split(["1/3", "0/1"]) == 1


@pytest.fixture(scope="module")
def whole(tiny, tmp_path_factory):
    path = tmp_path_factory.mktemp("whole") / "whole.db"
    return audit(tiny, tasks.get("add-small", n=12), PROBES, store=path, progress=False, seed=3), path


def test_merged_shards_equal_the_whole_audit(tiny, whole, tmp_path):
    full, _ = whole
    paths = []
    for i in range(3):
        paths.append(tmp_path / f"s{i}.db")
        part = audit(tiny, tasks.get("add-small", n=12), PROBES, store=paths[-1], progress=False, seed=3, shard=f"{i}/3")
        assert part.id == full.id
        assert str(part.info.status) == "partial (1/3 shards)" and not part.info.status.complete
        assert set(part.questions["question_id"]) == {q for q in full.questions["question_id"] if Shard(i, 3).contains(q)}
    merged = merge(paths, tmp_path / "all.db")
    result = AuditResult.load(merged, full.id)
    assert result.info.status.complete
    assert_same_tries(result.tries, full.tries)
    assert result.questions["question_id"].tolist() == full.questions["question_id"].tolist()
    pd.testing.assert_frame_equal(result.questions[["question_id", "realized"]], full.questions[["question_id", "realized"]])

    # merging overlapping stores keeps every row once
    again = merge([tmp_path / "all.db", paths[0], paths[1]], tmp_path / "again.db")
    assert len(AuditResult.load(again, full.id).tries) == len(full.tries)


def test_a_shard_resumes_without_duplicates(tiny, tmp_path):
    task = tasks.get("add-small", n=12)
    first = audit(tiny, task, PROBES, store=tmp_path / "s.db", progress=False, seed=3, shard="1/2")
    second = audit(tiny, task, PROBES, store=tmp_path / "s.db", progress=False, seed=3, shard="1/2")
    assert len(second.tries) == len(first.tries)
    # the other shard, run into the same store, completes the audit
    done = audit(tiny, task, PROBES, store=tmp_path / "s.db", progress=False, seed=3, shard="0/2")
    assert done.info.status.complete and len(done.questions) == len(task)


def test_merge_refuses_results_of_different_configs(tiny, tmp_path):
    task = tasks.get("add-small", n=6)
    config = R.DeploymentConfig.default_for("number")
    audit(tiny, task, PROBES, config, store=tmp_path / "a.db", progress=False, shard="0/2")
    audit(tiny, task, PROBES, config.with_(max_new_tokens=8), store=tmp_path / "b.db", progress=False, shard="1/2")
    with pytest.raises(R.RnrLensError, match="different deployment config|under config"):
        merge([tmp_path / "a.db", tmp_path / "b.db"], tmp_path / "out.db")
    assert not (tmp_path / "out.db").exists()
    assert [p.name for p in tmp_path.glob(".out.db*")] == [".out.db.lock"], "no partial store, only the writer lock's file"


def test_merge_refuses_rows_that_disagree(whole, tmp_path):
    full, path = whole
    copy = tmp_path / "copy.db"
    with sqlite3.connect(path) as src, sqlite3.connect(copy) as dst:
        src.backup(dst)
    with sqlite3.connect(copy) as conn:
        conn.execute("UPDATE tries SET text = text || 'x' WHERE probe = 'default' AND rowid = (SELECT min(rowid) FROM tries WHERE probe='default')")
    with pytest.raises(R.RnrLensError, match="disagree on try 0 of default"):
        merge([path, copy], tmp_path / "out.db")
    assert not (tmp_path / "out.db").exists()
    with pytest.raises(R.RnrLensError, match="already exists"):
        merge([path], copy)


def test_merge_refuses_a_shard_that_adds_questions_or_tries_beyond_the_audit(whole, tmp_path):
    """Issue 73: a stranger's shard carrying the user's audit id added 20 questions to a complete
    audit, or tries beyond k, all correct. A shard may add only the audit's own questions (its
    count and positions) and its probes' tries within their budgets; else the merge is refused
    in one line and nothing is written."""
    full, path = whole
    n, k = len(full.questions), 3

    def stranger(sql: str) -> Path:
        copy = tmp_path / f"stranger{len(list(tmp_path.iterdir()))}.db"
        with sqlite3.connect(path) as src, sqlite3.connect(copy) as dst:
            src.backup(dst)
        with sqlite3.connect(copy) as conn:
            conn.executescript(sql)
        return copy

    more_questions = stranger("INSERT INTO questions SELECT audit_id, question_id || '-x', position + 100, prompt, gold FROM questions;")
    beyond_k = stranger(
        f"INSERT INTO tries SELECT audit_id, question_id, probe, try_index + {k}, seed, route, ablation, text, extracted, 1, "
        "mean_logprob, mean_entropy, reward, n_tokens FROM tries WHERE probe LIKE 'sampling%';"
    )
    other_probe = stranger("UPDATE tries SET probe = 'search:k=2' WHERE probe LIKE 'routes%';")
    for bad, said in ((more_questions, f"which has {n} questions"), (beyond_k, f"beyond the probe's budget of {k}"), (other_probe, "did not run")):
        out = tmp_path / "out.db"
        with pytest.raises(R.RnrLensError, match=said) as refused:
            merge([path, bad], out)
        assert "\n" not in str(refused.value) and not out.exists(), "nothing written"


def test_cli_shard_and_merge(tmp_path, capsys):
    folder = R.tiny_model(n_layers=4, seed=0).save_pretrained(tmp_path / "tiny")
    base = ["audit", "--model", str(folder), "--task", "add-small", "--n", "6", "--probe", "sampling:k=2,t=1.0", "--json"]
    for i in range(2):
        assert main([*base, "--shard", f"{i}/2", "--out", str(tmp_path / f"s{i}.db")]) == 0
    capsys.readouterr()
    assert main(["merge", str(tmp_path / "s0.db"), str(tmp_path / "s1.db"), "--out", str(tmp_path / "all.db")]) == 0
    assert "complete" in capsys.readouterr().out
    assert main([*base, "--out", str(tmp_path / "one.db")]) == 0
    capsys.readouterr()
    assert_same_tries(AuditResult.load(RunStore(tmp_path / "all.db")).tries, AuditResult.load(RunStore(tmp_path / "one.db")).tries)
    assert main([*base, "--shard", "2/2", "--out", str(tmp_path / "x.db")]) == 2
    assert "shard 2/2 does not exist" in capsys.readouterr().err
    assert main(["merge", str(tmp_path / "nope.db"), "--out", str(tmp_path / "m.db")]) == 2
    capsys.readouterr()
    assert main([*base, "--shards", "2", "--out", str(tmp_path / "y.db")]) == 2
    assert "--shards needs --executor" in capsys.readouterr().err


def test_sweep_shards_merge_into_the_whole_sweep(tiny, tmp_path, monkeypatch):
    from tests.planted import PLANTED, build_planted

    result, store = build_planted(tiny, tmp_path / "base.db")
    fs = failures.freeze(result, store, probe="ablation")
    store.checkpoint()
    store.close()
    whole_db = tmp_path / "whole.db"
    shutil.copy(tmp_path / "base.db", whole_db)
    whole = M.mine(tiny, fs, strategy="exhaustive", break_bound=1.0, store=RunStore(whole_db), progress=False)

    parts = []
    for i in range(2):
        parts.append(tmp_path / f"p{i}.db")
        shutil.copy(tmp_path / "base.db", parts[-1])
        sweep = M.mine(tiny, fs, strategy="exhaustive", break_bound=1.0, store=RunStore(parts[-1]), progress=False, shard=f"{i}/2")
        assert set(sweep.details["question_id"]) <= {q for q in whole.details["question_id"] if Shard(i, 2).contains(q)}
    merged = merge(parts, tmp_path / "merged.db")

    def no_generation(*args, **kwargs):
        raise AssertionError("the merged sweep should be assembled from the shards, not generated again")

    monkeypatch.setattr(M, "_evaluate", no_generation)
    again = M.mine(tiny, fs, strategy="exhaustive", break_bound=1.0, store=merged, progress=False)
    cols = ["layer", "component", "method", "repair", "repair_discovery", "repair_heldout", "break"]
    pd.testing.assert_frame_equal(again.table[cols], whole.table[cols])
    assert again.bottleneck == whole.bottleneck and again.bottleneck.layer == PLANTED.layer


def test_one_completeness_rule_for_audits_and_sweeps():
    """An audit's status and a sweep assembled from merged shards (the miner) once each decided
    "is some i/n split whole" with code of their own; both read complete_split."""
    from rnr_lens.core.records import AuditState, AuditStatus

    assert complete_split(["0/2", "1/2", "0/3"]) == 2 and AuditStatus.of_shards(["0/2", "1/2"]).complete
    assert complete_split([Shard(0, 3), Shard(2, 3)]) is None and AuditStatus.of_shards(["0/3", "2/3"]).state is AuditState.PARTIAL
    assert complete_split(["0/1", "0/2", "1/2"]) == 1, "the smallest whole split"
