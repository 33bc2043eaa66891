"""The rnr-lens command line: real runs on a saved tiny model, and bad input."""

import json
import subprocess
import sys

import pandas as pd
import pytest

import rnr_lens as R
from rnr_lens.cli import main


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    return R.tiny_model(n_layers=4, seed=0).save_pretrained(tmp_path_factory.mktemp("m") / "tiny")


def test_audit_show_export(tiny_folder, tmp_path, capsys):
    db = tmp_path / "run.db"
    rc = main(["audit", "--model", str(tiny_folder), "--task", "add-small", "--limit", "4",
               "--probe", "sampling:k=2,t=1.0", "--probe", "routes:k=2", "--out", str(db), "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["summary"][0]["probe"].startswith("sampling") and out["summary"][0]["questions"] == 4
    assert main(["show", str(db), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [a["id"] for a in shown] == [out["audit"]] and shown[0]["status"] == "complete"
    assert main(["show", str(db)]) == 0
    assert "reachable" in capsys.readouterr().out
    for fmt in ("csv", "parquet"):
        assert main(["export", str(db), "--format", fmt, "--out", str(tmp_path / fmt)]) == 0
        files = capsys.readouterr().out.split()
        assert len(files) == 2 and all(f.endswith(f".{fmt}") for f in files)
    tries = pd.read_parquet(next(f for f in files if "tries" in f))
    assert len(tries) == 4 * (1 + 2 + 2) and set(tries["probe"]) == {"default", *[s["probe"] for s in out["summary"]]}


def test_models_lists_known_models(capsys):
    assert main(["models", "--json"]) == 0
    names = [m["name"] for m in json.loads(capsys.readouterr().out)]
    assert "smollm2-135m-instruct" in names and "gemma3-270m" in names


@pytest.mark.parametrize(
    "argv, message",
    [
        (["audit", "--model", "nope-model", "--out", "{tmp}/r.db"], "unknown model 'nope-model'"),
        (["audit", "--probe", "sampling:k=zero", "--out", "{tmp}/r.db"], "not a valid int"),
        (["audit", "--task", "add-huge", "--out", "{tmp}/r.db"], "unknown task 'add-huge'"),
        (["audit", "--out", "{tmp}/missing/r.db"], "does not exist"),
        (["show", "{tmp}/none.db"], "does not exist"),
        (["check-format", "--task", "{tmp}/none.jsonl"], "does not exist"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, message, tmp_path, capsys):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and message in err and "\n" not in err
    assert not (tmp_path / "r.db").exists(), "no half-written results"


def test_console_script_exit_code(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "rnr_lens", "audit", "--probe", "bogus:k=1", "--out", str(tmp_path / "r.db")],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.startswith("error: unknown probe 'bogus'")


def test_mine_names_the_planted_bottleneck(tiny_folder, tmp_path, capsys):
    from tests.test_miner import PLANTED, build_planted

    db = tmp_path / "mine.db"
    build_planted(R.load_model(tiny_folder), db)
    argv = ["mine", str(db), "--probe", "ablation", "--model", str(tiny_folder), "--strategy", "exhaustive",
            "--break-bound", "1", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["bottleneck"]["layer"] == PLANTED.layer and out["bottleneck"]["repair_heldout"] == 1.0
    assert len(out["layers"]) == 4 and out["agreement"]["screen_logprob"]["same_top"]
    assert main(["mine", str(db), "--probe", "ablation", "--model", str(tiny_folder)]) == 0
    assert "no bottleneck" in capsys.readouterr().out, "every ablation breaks the tiny model's controls (break 1.0 > 0.2)"
    assert main(["mine", str(db), "--probe", "ablation", "--model", str(tiny_folder), "--break-bound", "1"]) == 0
    assert f"bottleneck: mlp{PLANTED.layer}:zero" in capsys.readouterr().out
    other = R.tiny_model(seed=7).save_pretrained(tmp_path / "other")
    assert main(["mine", str(db), "--probe", "ablation", "--model", str(other)]) == 2
    assert "is not the checkpoint" in capsys.readouterr().err
