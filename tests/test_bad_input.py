"""Bad input, in one table: each case ends in one ``error:`` line and exit 2, before any work.

Every audit case names a model that does not exist (``--model /no/such/model``): the check
must come before the model is loaded, or the error would be about the model instead. And no
case may leave a run store behind. Cases found by a hostile-user pass over the CLI and API;
each row is a regression that once ended in a traceback, a hang or a silent wrong result.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

import rnr_lens as R
from rnr_lens.cli import main

NO_MODEL = "/no/such/model"


def _write(tmp: Path, name: str, content: str | bytes) -> str:
    path = tmp / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return str(path)


def _audit(*extra: str) -> list[str]:
    return ["audit", "--model", NO_MODEL, "--task", "add-small", "--limit", "2", "--out", "{tmp}/run.db", *extra]


# (case id, argv with {tmp} for the test's folder, files to write first, message the error must hold)
CLI_CASES = [
    ("probe-nan-temperature", _audit("--probe", "sampling:t=nan"), {}, "t=nan must be a finite number"),
    ("probe-negative-temperature", _audit("--probe", "sampling:t=-1"), {}, "t=-1.0 must be a finite number in (0.0, 100.0]"),
    ("probe-top-p-zero", _audit("--probe", "sampling:top_p=0"), {}, "top_p=0.0 must be a finite number in (0.0, 1.0]"),
    (
        "probe-unknown-component",
        _audit("--probe", "ablation:component=foo"),
        {},
        "ablation probe: unknown ablation component 'foo'; use one of mlp, attn, block",
    ),
    (
        "probe-unknown-ablation-method",
        _audit("--probe", "ablation:method=smear"),
        {},
        "ablation probe: unknown ablation method 'smear'; use one of zero, mean, resample",
    ),
    ("probe-duplicate-key", _audit("--probe", "sampling:k=4,k=8"), {}, "k is given twice"),
    ("probe-not-an-int", _audit("--probe", "sampling:k=zero"), {}, "not a valid int"),
    ("probe-huge-budget", _audit("--probe", "routes:k=100000000"), {}, "budget k must be an integer from 1 to 100000"),
    ("probe-given-twice", _audit("--probe", "routes:k=2", "--probe", "routes:k=2"), {}, "the same probe is given twice"),
    ("config-max-new-tokens-text", _audit("--config", "{tmp}/c.yaml"), {"c.yaml": "max_new_tokens: abc\n"}, "max_new_tokens must be an integer"),
    ("config-stop-number", _audit("--config", "{tmp}/c.yaml"), {"c.yaml": "stop: 5\n"}, "stop must be a list of non-empty strings, got 5"),
    ("config-max-new-tokens-huge", _audit("--config", "{tmp}/c.yaml"), {"c.yaml": "max_new_tokens: 1000000000\n"}, "from 1 to 8192"),
    ("config-unknown-field", _audit("--config", "{tmp}/c.yaml"), {"c.yaml": "max_tokens: 5\n"}, "unknown deployment config field 'max_tokens'"),
    ("seed-negative", _audit("--seed", "-1"), {}, "a seed is from 0 to 4294967295, got -1"),
    ("limit-zero", _audit("--limit", "0"), {}, "--limit: must be at least 1"),
    ("batch-size-zero", _audit("--batch-size", "0"), {}, "--batch-size: must be at least 1"),
    (
        "task-latin-1",
        ["audit", "--model", NO_MODEL, "--task", "{tmp}/t.jsonl", "--out", "{tmp}/run.db"],
        {"t.jsonl": '{"question": "Caf\xe9 au lait: 2 + 2?", "answer": "4"}\n'.encode("latin-1")},
        "t.jsonl:1: not UTF-8 text (byte 0xe9)",
    ),
    (
        "task-file-with-n",
        ["audit", "--model", NO_MODEL, "--task", "{tmp}/t.jsonl", "--n", "5", "--out", "{tmp}/run.db"],
        {"t.jsonl": '{"question": "2 + 2?", "answer": "4"}\n'},
        "n= does not apply to a task file",
    ),
    ("task-unknown", ["audit", "--model", NO_MODEL, "--task", "add-huge", "--out", "{tmp}/run.db"], {}, "unknown task 'add-huge'"),
    ("out-folder-missing", ["audit", "--model", NO_MODEL, "--out", "{tmp}/missing/r.db"], {}, "does not exist"),
    ("out-not-a-store", _audit(), {"run.db": b"SQLite format 3\x00" + b"\x00" * 100}, "not an rnr_lens run store"),
    ("resume-nothing", _audit("--resume"), {}, "nothing to resume"),
    ("model-unknown", ["audit", "--model", "nope-model", "--out", "{tmp}/run.db"], {}, "unknown model 'nope-model'"),
    ("command-unknown", ["audt"], {}, "invalid choice: 'audt'"),
    ("show-missing", ["show", "{tmp}/none.db"], {}, "does not exist"),
    ("show-empty-file", ["show", "{tmp}/empty.db"], {"empty.db": b""}, "is not an rnr_lens run store (an empty file)"),
    ("export-missing-store", ["export", "{tmp}/none.db"], {}, "does not exist"),
    ("check-format-missing-task", ["check-format", "--task", "{tmp}/none.jsonl"], {}, "does not exist"),
    (
        "shots-more-than-the-source",
        _audit("--config", "{tmp}/c.yaml", "--shots-file", "{tmp}/ex.jsonl"),
        {"c.yaml": "shots: {n: 3, source: 'file:ex'}\n", "ex.jsonl": '{"question": "What is 50 + 1?", "answer": "51"}\n'},
        "3 shots need 3 distinct questions; the source ex holds 1",
    ),
    (
        "shots-file-of-another-answer-type",
        _audit("--config", "{tmp}/c.yaml", "--shots-file", "{tmp}/ex.jsonl"),
        {"c.yaml": "shots: {n: 1, source: 'file:ex'}\n", "ex.jsonl": '{"question": "Capital of Peru?", "answer": "Lima"}\n'},
        "gold answer 'Lima' cannot be read as a number answer",
    ),
    (
        "shots-from-a-task-too-small",
        ["audit", "--model", NO_MODEL, "--task", "{tmp}/t.jsonl", "--config", "{tmp}/c.yaml", "--out", "{tmp}/run.db"],
        {"c.yaml": "shots: {n: 2, source: self}\n", "t.jsonl": '{"question": "2 + 2?", "answer": "4"}\n{"question": "3 + 3?", "answer": "6"}\n'},
        "has 2 questions, too few to be its own source of 2 shots",
    ),
    (
        "shots-file-holding-a-test-question",
        [
            "audit",
            "--model",
            NO_MODEL,
            "--task",
            "{tmp}/t.jsonl",
            "--config",
            "{tmp}/c.yaml",
            "--shots-file",
            "{tmp}/ex.jsonl",
            "--out",
            "{tmp}/run.db",
        ],
        {
            "c.yaml": "shots: {n: 1, source: 'file:ex'}\n",
            "t.jsonl": '{"question": "What is 2 + 2?", "answer": "4"}\n',
            "ex.jsonl": '{"question": "what is 2 + 2", "answer": "4"}\n{"question": "What is 5 + 5?", "answer": "10"}\n',
        },
        "a worked example must not be a test question",
    ),
    (
        "shots-file-without-a-file-source",
        _audit("--shots-file", "{tmp}/ex.jsonl"),
        {"ex.jsonl": '{"question": "What is 50 + 1?", "answer": "51"}\n'},
        "source is file:NAME",
    ),
]


@pytest.mark.parametrize("argv, files, message", [c[1:] for c in CLI_CASES], ids=[c[0] for c in CLI_CASES])
def test_cli_refuses_before_work(argv, files, message, tmp_path, capsys):
    for name, content in files.items():
        _write(tmp_path, name, content)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err, err
    assert message in err, err
    after = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert after == before, "bad input leaves no store behind and modifies no file"


# (case id, a call that must raise, message)
API_CASES = [
    ("route-huge-run", lambda: R.Route.parse("30:0-3000000"), "block index 3000000 is out of range"),
    ("route-too-long", lambda: R.Route.parse("30:0-29,0-29,0-29"), "more than the maximum 60 blocks"),
    ("route-many-runs", lambda: R.Route.parse("30:" + ",".join(["0-29"] * 20000)), "more than the maximum 60 blocks"),
    ("route-out-of-range", lambda: R.Route.parse("4:0-9"), "block index 9 is out of range"),
    ("route-absurd-depth", lambda: R.Route.parse("1000000000:0"), "a model has 1 to 100000 blocks"),
    ("config-temperature-nan", lambda: R.DeploymentConfig(temperature=float("nan")), "temperature must be a finite number"),
    ("config-chat-not-bool", lambda: R.DeploymentConfig(chat="yes"), "chat must be true or false"),  # type: ignore[arg-type]
    ("task-file-with-n", lambda: R.tasks.get("x.jsonl", n=5), "n= does not apply to a task file"),
    ("task-builtin-with-field", lambda: R.tasks.get("add-small", question="q"), "question= does not apply to a built-in task"),
    ("search-epsilon", lambda: R.probes.parse_probe("search:epsilon=2"), "epsilon=2.0 must be a finite number in [0.0, 1.0]"),
]


@pytest.mark.parametrize("call, message", [c[1:] for c in API_CASES], ids=[c[0] for c in API_CASES])
def test_api_refuses_with_one_line(call, message):
    start = time.perf_counter()
    with pytest.raises(R.RnrLensError) as info:
        call()
    assert message in str(info.value) and "\n" not in str(info.value)
    assert time.perf_counter() - start < 5, "refused at once, not after building a huge object"


# -- cases that need a real (tiny) model: checked after loading it, still before the store ------


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory) -> Path:
    return R.tiny_model(n_layers=4, seed=0).save_pretrained(tmp_path_factory.mktemp("m") / "tiny")


def test_prompt_longer_than_the_context_is_refused(tiny_folder, tmp_path, capsys):
    """A 12,027-token prompt once ran silently on a 1,024-position model."""
    task = _write(tmp_path, "long.jsonl", '{"question": "2 + 2?", "answer": "4"}\n{"question": "' + "plus one " * 800 + '?", "answer": "4"}\n')
    assert main(["audit", "--model", str(tiny_folder), "--task", task, "--out", str(tmp_path / "run.db")]) == 2
    err = capsys.readouterr().err
    assert "question long-2: its prompt is" in err and "context of 1024 positions" in err
    assert not (tmp_path / "run.db").exists()


def test_ablation_layer_outside_the_model_is_refused(tiny_folder, tmp_path, capsys):
    argv = ["audit", "--model", str(tiny_folder), "--limit", "2", "--probe", "ablation:layers=2+7", "--out", str(tmp_path / "run.db")]
    assert main(argv) == 2
    assert "block 7 does not exist in a 4-block model" in capsys.readouterr().err
    assert not (tmp_path / "run.db").exists()


def test_seed_out_of_range_in_the_api(tiny, tmp_path):
    with pytest.raises(R.RnrLensError, match="seed must be an integer from 0"):
        R.audit(tiny, R.tasks.get("add-small", n=2), ["sampling:k=2"], store=tmp_path / "run.db", seed=-1, progress=False)
    assert not (tmp_path / "run.db").exists()


def test_resume_with_other_settings_names_what_differs(tiny_folder, tmp_path, capsys):
    """``--resume`` with another config or limit once silently started a second audit."""
    db = str(tmp_path / "run.db")
    assert main(["audit", "--model", str(tiny_folder), "--limit", "3", "--probe", "sampling:k=2", "--out", db]) == 0
    capsys.readouterr()
    for settings, differs in [
        (["--limit", "4", "--probe", "sampling:k=2"], "number of questions 3 there, 4 now"),
        (["--limit", "3", "--probe", "sampling:k=2", "--seed", "5"], "seed 0 there, 5 now"),
        (["--limit", "3", "--probe", "sampling:k=3"], "differs in: probes"),
    ]:
        assert main(["audit", "--model", NO_MODEL, "--out", db, "--resume", *settings]) == 2
        err = capsys.readouterr().err
        assert "--resume found no audit with these settings" in err and differs in err, err
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM audits").fetchone()[0] == 1
    # the same settings resume (a finished audit: nothing to do) and print its table
    assert main(["audit", "--model", str(tiny_folder), "--limit", "3", "--probe", "sampling:k=2", "--out", db, "--resume"]) == 0


def test_export_out_must_be_a_writable_folder(tiny_folder, tmp_path, capsys):
    db = str(tmp_path / "run.db")
    assert main(["audit", "--model", str(tiny_folder), "--limit", "2", "--out", db]) == 0
    capsys.readouterr()
    a_file = _write(tmp_path, "taken.csv", "x")
    assert main(["export", db, "--out", a_file]) == 2
    assert "is a file; export writes two files into a folder" in capsys.readouterr().err
    assert main(["export", db, "--out", a_file + "/sub"]) == 2  # below a file: cannot be created
    assert "cannot write into --out" in capsys.readouterr().err


def test_show_leaves_another_applications_database_untouched(tmp_path, capsys):
    other = tmp_path / "app.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE users (name TEXT)")
        conn.execute("INSERT INTO users VALUES ('ada')")
    conn.close()
    before = other.read_bytes()
    assert main(["show", str(other)]) == 2
    assert "another application's SQLite database" in capsys.readouterr().err
    assert other.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]
    with pytest.raises(R.RnrLensError, match="left untouched"):
        R.store.RunStore(other, mode="write")
    assert other.read_bytes() == before


def test_resume_with_other_weights_says_so(tiny, tmp_path):
    db = tmp_path / "run.db"
    task = R.tasks.get("add-small", n=2)
    R.audit(tiny, task, ["sampling:k=2"], store=db, progress=False)
    other = R.tiny_model(n_layers=4, seed=1)  # same name and shape, other weights
    with pytest.raises(R.RnrLensError, match=r"differs in: model weights differ \(other weights, or an audit made before"):
        R.audit(other, task, ["sampling:k=2"], store=db, progress=False, resume="only")
    assert len(R.store.RunStore(db, mode="read").audits()) == 1


def test_resume_under_another_config_names_the_fields(tiny_folder, tmp_path, capsys):
    """A resume whose config differed said only "deployment config differs" (two hashes); the
    default extractor's change made that the commonest case."""
    db, old = str(tmp_path / "run.db"), tmp_path / "v1.yaml"
    old.write_text("version: 1\n")  # a version-1 file naming no extractor: the old default
    assert main(["audit", "--model", str(tiny_folder), "--limit", "2", "--config", str(old), "--out", db]) == 0
    capsys.readouterr()
    assert main(["audit", "--model", str(tiny_folder), "--limit", "2", "--out", db, "--resume"]) == 2
    err = capsys.readouterr().err
    assert "extractor 'number' there, 'concluding-exact' now" in err and "version 1 there, 4 now" in err, err
