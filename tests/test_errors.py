"""Fix-it messages name an argument as the caller spells it (issue 59): after a multi-probe
audit, freezing a failure set without a probe tells a Python caller ``probe=`` and a CLI user
``--probe``, from one owner of both spellings (``errors.arg``)."""

from __future__ import annotations

import pytest

import rnr_lens as R
from rnr_lens.cli import main
from rnr_lens.errors import SPELLINGS, arg, cli_spelling
from rnr_lens.measure.store import RunStore


def test_each_argument_has_one_spelling_per_caller():
    for name, (python, flag, takes_value) in SPELLINGS.items():
        assert arg(name, "X") == (f"{python}='X'" if takes_value else python) and "--" not in arg(name)
        with cli_spelling():
            assert arg(name, "X") == ((flag + "X" if flag.endswith("=") else f"{flag} X") if takes_value else flag)
    assert arg("probe", "sampling:k=8") == "probe='sampling:k=8'" and arg("resume") == "resume=True"
    assert arg("resume_only") == "resume='only'" and arg("no_resume") == "resume=False"
    # each flag is one the CLI has, taking a value exactly where the table says
    from rnr_lens.cli import build_parser

    actions = {
        option: action
        for sub in build_parser()._subparsers._group_actions[0].choices.values()  # type: ignore[union-attr]
        for action in sub._actions
        for option in action.option_strings
    }
    for name, (_, spelled, takes_value) in SPELLINGS.items():
        flag = spelled.split()[0]  # "--field answer=": the option, then the start of its value
        assert flag in actions, f"{name}: the CLI has no {flag}"
        assert (actions[flag].nargs != 0) == (takes_value or " " in spelled), f"{flag} takes a value: {takes_value}"


def test_freeze_after_a_multi_probe_audit_names_probe_in_python_and_the_flag_in_the_cli(tiny, tmp_path, capsys):
    db = tmp_path / "run.db"
    result = R.audit(tiny, R.tasks.get("add-small", n=3), ["sampling:k=2,t=1.0", "routes:k=2"], store=db, progress=False)
    with pytest.raises(R.RnrLensError) as err:
        R.failures.freeze(result, RunStore(db))
    said = str(err.value)
    assert "has 2 probes; name one with probe= for reachable-not-realized (one of sampling:k=2" in said and "--probe" not in said
    assert main(["mine", str(db), "--model", "tiny-llama"]) == 2  # refused before any model loads (a model named: issue 73)
    said = capsys.readouterr().err
    assert "name one with --probe for reachable-not-realized" in said and "probe=" not in said.replace("--probe", "")
    # named, the probe is read (the README's call passes the sampling probe): what remains is the set's own size check
    with pytest.raises(R.RnrLensError, match=r"are reachable-not-realized in audit .* a failure set needs at least 2"):
        R.failures.freeze(result, RunStore(db), probe="sampling:k=2,t=1.0")


def test_fix_it_hints_name_python_arguments_from_python_and_flags_from_the_cli(tiny, tmp_path, capsys):
    """The hints that once named both spellings inline (or a flag alone): each says one, by caller."""
    from rnr_lens.bottleneck.failures import check_weights

    unnamed = tmp_path / "t.jsonl"
    unnamed.write_text('{"q": "2 + 2?", "a": "4"}\n')
    (tmp_path / "c.yaml").write_text("shots: {n: 1, source: 'file:ex'}\n")
    (tmp_path / "ex.jsonl").write_text('{"question": "What is 50 + 1?", "answer": "51"}\n')
    (tmp_path / "task.yaml").write_text("task: mine\n")
    config = R.DeploymentConfig.load(tmp_path / "c.yaml")
    python = {
        "question='NAME', answer='NAME'": lambda: R.tasks.load_file(unnamed),
        "pass that file (config.for_task(task, shots_file=PATH))": lambda: R.audit(
            tiny, R.tasks.get("add-small", n=2), config=config, progress=False
        ),
        "then pass trust_code=True to run it": lambda: R.tasks.get(f"lm-eval:{tmp_path / 'task.yaml'}"),
        "mine with that checkpoint (model=R.load_model(CHECKPOINT))": lambda: check_weights(tiny, "0" * 16, "a" * 16),
        "the first N questions of a file, use task.first(N)": lambda: R.tasks.get(str(unnamed), n=5),
    }
    for said, call in python.items():
        with pytest.raises(R.RnrLensError) as err:
            call()
        assert said in str(err.value) and "--" not in str(err.value), str(err.value)
    cli = {  # each refused before a model loads
        "--field question=NAME, --field answer=NAME": ["--task", str(unnamed)],
        "pass that file (--shots-file PATH)": ["--task", "add-small", "--config", str(tmp_path / "c.yaml")],
        "then pass --trust-task-code to run it": ["--task", f"lm-eval:{tmp_path / 'task.yaml'}"],
        "the first N questions of a file, use --limit N": ["--task", str(unnamed), "--n", "5"],
    }
    for said, argv in cli.items():
        assert main(["audit", "--model", "/no/such/model", *argv, "--out", str(tmp_path / "r.db")]) == 2
        err = capsys.readouterr().err
        assert said in err and "='" not in err, err
    # the file named, the Python audit draws its example from it, as the CLI does
    result = R.audit(tiny, R.tasks.get("add-small", n=2), config=config, shots_file=tmp_path / "ex.jsonl", progress=False)
    assert [e.question for e in result.config.shots.pool] == ["What is 50 + 1?"]
