"""Few-shot contexts (issue 55): worked examples drawn by one seeded rule from a named source,
never a test question, part of the config's identity, rendered by the one prompt owner on
every path."""

import json
import re

import pytest

import rnr_lens as R
from rnr_lens.questions import tasks
from rnr_lens.questions.deploy import BASE_SHOTS, CONFIG_VERSION, SHOTS_VERSION, DeploymentConfig, default_shots, deployment_for_task
from rnr_lens.questions.shots import Example, Shots, normalize, resolve
from rnr_lens.questions.tasks import Question, Task

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


def test_train_shots_come_from_the_train_split_and_fix_the_config_hash():
    test = tasks.get("add-small", n=10)
    drawn = resolve(Shots(3), test)
    train = {q.prompt for q in tasks.get("add-small", n="all", split="train")}
    assert len(drawn.pool) == 4 and {e.question for e in drawn.pool} <= train, "n + 1: a train question never sees itself"
    assert not {normalize(e.question) for e in drawn.pool} & {normalize(q.prompt) for q in test}
    assert resolve(Shots(3), test) == drawn, "one seeded rule: the same draw again"
    other = resolve(Shots(3, seed=1), test)
    assert other.pool != drawn.pool
    config = DeploymentConfig(chat=False).with_(shots=drawn)
    assert config.version == SHOTS_VERSION and DeploymentConfig(chat=False).version == CONFIG_VERSION
    assert config.hash() != config.with_(shots=other).hash(), "other examples, another audit"
    assert DeploymentConfig.from_json(config.to_json()) == config, "the examples travel with the config (a store, evidence)"


def test_a_question_never_sees_itself_as_an_example():
    test = tasks.get("add-small", n=8)
    shots = resolve(Shots(2, "self"), test)
    assert len(shots.pool) == 3
    for q in test:
        shown = shots.examples_for(q.prompt)
        assert len(shown) == 2 and normalize(q.prompt) not in {normalize(e.question) for e in shown}


def test_the_prompt_holds_the_examples_in_the_deployments_answer_format():
    test = tasks.get("add-small", n=2)
    q = test[0]
    shots = Shots(2, "file:ex", pool=(Example("What is 1 + 2?", "3"), Example("What is 4 + 4?", "8")))
    raw = DeploymentConfig(chat=False, system_prompt="Be exact.").with_(shots=shots).prompt(q)
    assert raw == f"Be exact.\n\nWhat is 1 + 2?\nThe answer is 3.\n\nWhat is 4 + 4?\nThe answer is 8.\n\n{q.prompt}\nThe answer is "
    chat = DeploymentConfig(instruction="Add. ").with_(shots=shots).prompt(q)
    assert chat == R.ChatPrompt(
        f"Add. {q.prompt}", None, "The answer is ", turns=(("Add. What is 1 + 2?", "The answer is 3."), ("Add. What is 4 + 4?", "The answer is 8."))
    )
    text, _ = R.tiny_model(n_layers=2).render(chat)
    assert text.count("The answer is 3.") == 1 and text.index("What is 4 + 4?") < text.index(q.prompt), "earlier turns, then the question"


def test_a_base_model_gets_the_measured_default_and_a_chat_model_keeps_its_own():
    base = R.tiny_model(n_layers=2)
    base.tokenizer.chat_template = None
    test = tasks.get("add-small", n=4)
    config = deployment_for_task(base, test)
    assert not config.chat and config.shots == resolve(default_shots(test), test) and config.shots.n == BASE_SHOTS
    assert config.shots.source == "train"
    own = Task("mine", tuple(Question(f"q{i}", f"What is {i} + {i}?", str(2 * i)) for i in range(6)))
    assert deployment_for_task(base, own).shots.source == "self", "a task file is its own source, each question left out"
    assert deployment_for_task(R.tiny_model(n_layers=2), test).hash() == DeploymentConfig().hash(), "a chat model's default is unchanged"


def test_training_on_the_train_split_sees_the_audits_worked_examples():
    """DAPO trains on a task's train split and the audit asks its test split: a base model's
    default gives both the same examples, and a training question that is one of them sees the
    others instead of itself."""
    base = R.tiny_model(n_layers=2)
    base.tokenizer.chat_template = None
    audited = deployment_for_task(base, tasks.get("add-two-digit", n=20))
    trained = deployment_for_task(base, tasks.get("add-two-digit", n=30, split="train"))
    assert audited == trained, "one config, one context"
    shown = audited.shots.examples_for(tasks.get("add-two-digit", n=1)[0].prompt)
    own = Question("x", audited.shots.pool[0].question, audited.shots.pool[0].answer)
    assert audited.shots.examples_for(own.prompt) == audited.shots.pool[1 : 1 + BASE_SHOTS] and audited.prompt(own).count(own.prompt) == 1
    assert shown == audited.shots.pool[:BASE_SHOTS]


def test_the_default_number_of_shots_is_the_committed_measurements_decision():
    """BASE_SHOTS is what the rule fixed before the run decides on the committed study, not a
    number chosen by hand (docs/shots.md)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("shots_study", ROOT / "scripts" / "shots_study.py")
    study = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(study)
    _, n = study.decide(json.loads((ROOT / "assets" / "results" / "shots-study" / "study.json").read_text()))
    assert n == BASE_SHOTS


def _file(*pairs, answer_type="number"):
    return Task("examples", tuple(Question(f"e{i}", q, a) for i, (q, a) in enumerate(pairs)), answer_type)


@pytest.mark.parametrize(
    "shots, source, message",
    [
        (Shots(5, "file:ex"), _file(("What is 1 + 1?", "2")), "5 shots need 5 distinct questions; the source examples holds 1"),
        (Shots(1, "file:ex"), _file(("What is 1 + 1?", "2"), answer_type="string"), "holds string answers, task add-small number"),
        (Shots(1, "file:ex"), None, "pass that file"),
    ],
)
def test_a_bad_shots_source_is_one_line(shots, source, message):
    with pytest.raises(R.RnrLensError, match=re.escape(message)):
        resolve(shots, tasks.get("add-small", n=4), source)


def test_a_source_holding_a_test_question_is_refused_by_its_text():
    test = tasks.get("add-small", n=4)
    leaked = _file(("what is   " + test[2].prompt.removeprefix("What is ").upper(), test[2].answer), ("What is 100 + 1?", "101"))
    with pytest.raises(R.RnrLensError, match="must not be a test question"):
        resolve(Shots(2, "file:ex"), test, leaked)
    small = Task("tiny", tuple(Question(f"q{i}", f"What is {i} + 1?", str(i + 1)) for i in range(3)))
    with pytest.raises(R.RnrLensError, match="too few to be its own source of 3 shots"):
        resolve(Shots(3, "self"), small)


@pytest.mark.parametrize(
    "data, message",
    [
        ({"shots": {"n": 0}}, "shots n must be an integer from 1"),
        ({"shots": {"n": 1}, "chat": False, "harness": "lm-eval x"}, "shots must be null for a harness's task"),
        ({"shots": {"n": 2, "source": "web"}}, "shots source must be one of"),
        ({"shots": {"n": 2, "where": "x"}}, "unknown shots field 'where'"),
        ({"shots": {"n": 2}, "version": 4}, "need deployment config version 5"),
        ({"shots": {"n": 2, "pool": [["q", "a"]]}}, "shots pool holds 1 examples"),
    ],
)
def test_bad_shots_in_a_config(data, message):
    with pytest.raises(R.RnrLensError, match=message):
        DeploymentConfig.from_dict(data)


@pytest.mark.slow
def test_every_path_renders_the_audits_prompt(tmp_path, monkeypatch):
    """The default answer, sampling, random routes, the search, ablations, mining (screen,
    exhaustive sweep, null), check-format, DAPO's rollouts and a config read back from the store
    all see the one prompt :meth:`DeploymentConfig.prompt` renders, worked examples included:
    every text the model tokenizes is one of the audit's rendered prompts (a spy on the real
    model's renderer; the model is the real architecture code)."""
    from rnr_lens.bottleneck import failures
    from rnr_lens.bottleneck.miner import mine, null_repair
    from rnr_lens.measure.audits import audit
    from rnr_lens.measure.formats import check_format
    from rnr_lens.measure.store import RunStore
    from rnr_lens.model.reuse_check import OPENING
    from rnr_lens.trained_pair.training import TrainConfig, train
    from tests.planted import PLANTED, answer_text, round_trips

    model = R.tiny_model(n_layers=4, seed=0)  # its own: training changes the weights in place
    train_split = tasks.get("add-two-digit", n=4, split="train")
    examples = Task("ex", tuple(Question(f"e{i}", q.prompt, q.answer) for i, q in enumerate(train_split)), "string")
    pool = Task("pool", tuple(Question(q.id, q.prompt, q.answer) for q in tasks.get("add-two-digit", n=300, seed=2)), "string")
    config = DeploymentConfig.default_for("string").with_(max_new_tokens=6, shots=Shots(2, "file:ex")).for_task(pool, examples)
    prompts = [config.prompt(q) for q in pool]
    clean = model.generate(prompts, max_new_tokens=config.max_new_tokens, stop=config.stop)
    ablated = model.generate(prompts, max_new_tokens=config.max_new_tokens, stop=config.stop, ablations=[PLANTED])
    planted = []
    for q, c, a in zip(pool, clean, ablated):  # failures right with MLP 2 silenced, and realized controls
        if config.extract(c.text) is None or config.extract(a.text) is None or not (round_trips(model, c) and round_trips(model, a)):
            continue
        if len(planted) % 2 == 0 and config.extract(c.text) != config.extract(a.text):
            planted.append(Question(q.id, q.prompt, answer_text(a.text)))
        elif len(planted) % 2 == 1:
            planted.append(Question(q.id, q.prompt, answer_text(c.text)))
    task = Task("planted", tuple(planted[:12]), "string")
    expected = {model.render(config.prompt(q))[0] for q in task}
    assert all(text.count("The answer is ") == 3 for text in expected), "two worked examples, then the question"

    seen: dict[str, list[str]] = {}
    real = model.render

    def spy(prompt):
        text, special = real(prompt)
        if not text.startswith(OPENING):  # the reuse check's own fixed prompts (rnr_lens.model.reuse_check)
            seen.setdefault(path, []).append(text)
        return text, special

    monkeypatch.setattr(model, "render", spy)
    store = RunStore(tmp_path / "run.db")
    path = "audit"
    result = audit(model, task, ["sampling:k=2,t=1.0", "routes:k=2", "search:k=2", "ablation:component=mlp"], config, store=store, progress=False)
    fs = failures.freeze(result, store, probe="ablation")
    path = "mine"
    mine(model, fs, strategy="exhaustive", top_m=2, break_bound=1.0, store=store, progress=False)
    null_repair(model, fs, store=store)
    path = "check-format"
    check_format(model, task, config)
    path = "train"
    train(model, task, TrainConfig(steps=1, prompts_per_step=2, group_size=2, minibatches=1, max_rounds=1, overlong_buffer=2), config, progress=False)
    for where, texts in seen.items():
        assert texts and set(texts) <= expected, f"{where} rendered a prompt the audit does not: {sorted(set(texts) - expected)[:1]}"
    assert set(seen) == {"audit", "mine", "check-format", "train"}
    stored = DeploymentConfig.from_json(store.audit(result.info.id).config_json)
    assert stored == config and all(stored.prompt(q) == config.prompt(q) for q in task), "a store (and its evidence) renders the same prompts"


def test_the_committed_test_split_run_used_todays_base_model_default():
    """docs/shots.md reports Gemma-3-270M on add-small's test split under its default
    deployment; the file must hold the config today's default gives (else it reports another)."""
    check = json.loads((ROOT / "assets" / "results" / "shots-study" / "add-small-test.json").read_text())
    base = R.tiny_model(n_layers=2)
    base.tokenizer.chat_template = None
    today = deployment_for_task(base, tasks.get("add-small", n="all"))
    assert DeploymentConfig.from_dict(check["runs"]["default"]["config"]) == today
    assert DeploymentConfig.from_dict(check["runs"]["zero-shot"]["config"]) == DeploymentConfig.default_for("number", chat=False)


def test_resume_refuses_other_worked_examples_in_one_line(tmp_path, capsys):
    """Two audits with other examples never share a table: --resume under another draw names
    the shots that differ, by label, before the model loads."""
    from rnr_lens.cli import main

    tiny_folder = R.tiny_model(n_layers=2, seed=0).save_pretrained(tmp_path / "tiny")
    db = tmp_path / "run.db"
    for seed, name in ((0, "a.yaml"), (1, "b.yaml")):
        (tmp_path / name).write_text(f"shots: {{n: 1, seed: {seed}}}\n")
    assert main(["audit", "--model", str(tiny_folder), "--limit", "2", "--config", str(tmp_path / "a.yaml"), "--out", str(db)]) == 0
    capsys.readouterr()
    argv = ["audit", "--model", "/no/such/model", "--limit", "2", "--config", str(tmp_path / "b.yaml"), "--out", str(db), "--resume"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --resume found no audit") and "\n" not in err
    assert "shots 1-shot from train (seed 0) there, 1-shot from train (seed 1) now" in err


def test_the_drill_down_shows_the_worked_examples_a_question_saw():
    from rnr_lens.present.widgets import question_html

    task = tasks.get("add-small", n=3)
    config = DeploymentConfig(chat=False).with_(shots=Shots(2)).for_task(task)
    result = R.audit(R.tiny_model(n_layers=2), task, [], config, progress=False)
    shown = question_html(result, task[0].id)
    assert "asked after 2-shot from train (seed 0)" in shown
    assert all(f"{e.question} The answer is {e.answer}." in shown for e in config.shots.examples_for(task[0].prompt))


def test_a_grid_config_with_bad_shots_is_refused_before_any_store_or_model(tmp_path):
    """A report fits its grid's config to every task before it opens a store or loads a model:
    shots a task cannot give are one line, with nothing written."""
    from rnr_lens.grids.grid import Grid
    from rnr_lens.grids.reports import report

    (tmp_path / "t.jsonl").write_text('{"question": "What is 2 + 2?", "answer": "4"}\n{"question": "What is 3 + 3?", "answer": "6"}\n')
    (tmp_path / "c.yaml").write_text("shots: {n: 2, source: self}\n")
    grid = Grid(models=("/no/such/model",), tasks=(str(tmp_path / "t.jsonl"),), n=2, config=str(tmp_path / "c.yaml"))
    with pytest.raises(R.RnrLensError, match="too few to be its own source of 2 shots"):
        report(grid, tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()


def test_a_drawn_pool_is_checked_against_the_task_it_is_used_on():
    """A pool drawn for one task, reused in a config for another, is refused: its examples were
    never checked against that task's questions."""
    small = DeploymentConfig(chat=False).with_(shots=Shots(1)).for_task(tasks.get("add-small", n=4))
    with pytest.raises(R.RnrLensError, match="drawn from another task's train"):
        small.for_task(tasks.get("sub", n=4))
    own = Task("mine", tuple(Question(f"q{i}", q.question, q.answer) for i, q in enumerate(small.shots.pool)))
    with pytest.raises(R.RnrLensError, match="drawn from another task's train"):
        small.for_task(own)
    assert DeploymentConfig.from_dict({"shots": None, "version": 5}).hash() == DeploymentConfig().hash(), "one zero-shot config, one hash"
