"""DAPO fine-tuning: the loss pieces on hand-made tensors, then real runs of the tiny model.

The planted task: each question's gold answer is what the tiny model itself writes in the
first sample of the first rollout, so every group of step 1 holds a right answer among wrong
ones, and a working policy update must make those answers more likely.
"""

import importlib
import json

import pytest
import torch

import rnr_lens as R
from rnr_lens.cli import build_parser, main
from rnr_lens.model.generation import generate
from rnr_lens.questions.deploy import DeploymentConfig
from rnr_lens.questions.tasks import Question, Task, get

T = importlib.import_module("rnr_lens.trained_pair.training")  # the module (R.train is the function)
CONFIG = DeploymentConfig.default_for("string").with_(max_new_tokens=6)
TRAIN = T.TrainConfig(steps=2, prompts_per_step=4, group_size=4, lr=3e-3, minibatches=2, max_rounds=1, overlong_buffer=2, save_every=1)


# -- the loss pieces ------------------------------------------------------------------------------
def test_group_advantages_are_normalised_within_each_group():
    adv = T.group_advantages(torch.tensor([[1.0, -1.0, -1.0, -1.0], [1.0, 1.0, 1.0, 1.0]]))
    assert torch.allclose(adv[0].mean(), torch.tensor(0.0), atol=1e-6)
    assert torch.allclose(adv[0].std(unbiased=False), torch.tensor(1.0), atol=1e-4)
    assert adv[0, 0] > 0 > adv[0, 1]
    assert torch.equal(adv[1], torch.zeros(4))  # no signal in a uniform group


def _grad(ratio: float, advantage: float) -> float:
    logp = torch.tensor([[0.0]], requires_grad=True)
    old = torch.tensor([[-float(torch.log(torch.tensor(ratio)))]])
    loss, _ = T.clipped_token_loss(logp, old, torch.tensor([advantage]), torch.ones(1, 1), clip_low=0.2, clip_high=0.28)
    loss.backward()
    return float(logp.grad)


def test_clip_ranges_are_decoupled():
    # a positive advantage may raise the ratio up to 1.28 (clip-higher), not beyond
    assert _grad(1.25, 1.0) != 0
    assert _grad(1.30, 1.0) == 0
    # a negative advantage may lower it down to 0.8, not beyond
    assert _grad(0.85, -1.0) != 0
    assert _grad(0.75, -1.0) == 0
    # the clip never blocks moving back towards the old policy
    assert _grad(0.5, 1.0) != 0


def test_loss_is_token_level():
    """A long answer weighs by its tokens: the loss is a mean over tokens, not over answers."""
    logp = torch.zeros(2, 4)
    mask = torch.tensor([[1.0, 1, 1, 1], [0, 0, 0, 1]])
    loss, diag = T.clipped_token_loss(logp, logp, torch.tensor([1.0, -1.0]), mask, 0.2, 0.28)
    assert loss.item() == pytest.approx(-(4 * 1 + 1 * -1) / 5)
    assert diag["clip_fraction"] == 0 and diag["approx_kl"] == 0


# -- on the tiny model -------------------------------------------------------------------------------
def test_policy_logprobs_match_the_sampler(tiny):
    """At temperature 1 the training forward gives the log-probabilities the sampler recorded."""
    prompts = [CONFIG.prompt(q) for q in get("add-small", n=3)]
    outs = generate(tiny, prompts, temperature=1.0, n=2, seed=3, max_new_tokens=5)
    logp, mask = T.token_logprobs(tiny, [tiny.encode(prompts[o.prompt_index]) for o in outs], [o.token_ids for o in outs], 1.0)
    for row, o in enumerate(outs):
        got = logp[row][mask[row] > 0]
        assert torch.allclose(got, torch.tensor(o.logprobs), atol=1e-4)


def test_trainable_parameters_select_blocks_and_components(tiny):
    mlp1 = T.trainable_parameters(tiny, [1], "mlp")
    assert mlp1 and all(".layers.1.mlp." in name for name in mlp1)
    blocks = T.trainable_parameters(tiny, [0, 3])
    assert any(".layers.0.self_attn." in n for n in blocks) and any(".layers.3.mlp." in n for n in blocks)
    assert not any(".layers.1." in n for n in blocks)


def planted_task(model, config: T.TrainConfig = TRAIN, with_rollouts: bool = False):
    """Four questions whose gold is the model's own first rollout sample (see module doc);
    with ``with_rollouts`` also the first step's rollouts as (prompt ids, answer ids, correct)."""
    base = list(get("add-small", split="train", n=config.prompts_per_step, seed=1))
    order = list(range(len(base)))
    import random

    random.Random(config.seed).shuffle(order)
    asked = [base[i] for i in order]
    outs = generate(
        model,
        [CONFIG.prompt(q) for q in asked],
        temperature=config.temperature,
        n=config.group_size,
        seed=T._rollout_seed(config.seed, 0, 0),
        max_new_tokens=CONFIG.max_new_tokens,
        stop=CONFIG.stop,
    )
    golds, rollouts = {}, []
    for i, q in enumerate(asked):
        group = outs[i * config.group_size : (i + 1) * config.group_size]
        answers = [CONFIG.extract(g.text) for g in group]
        gold = next((a for a in answers if a), None)
        assert gold is not None and answers.count(gold) < len(answers), "the tiny model gave no usable mixed group"
        golds[q.id] = gold
        prompt = model.encode(CONFIG.prompt(q))
        rollouts += [(prompt, T.answer_tokens(model, g), a == gold) for g, a in zip(group, answers)]
    questions = [Question(q.id, q.prompt, golds[q.id], metadata={"split": "train"}) for q in base]
    task = Task("planted-train", tuple(questions), "string")
    return (task, rollouts) if with_rollouts else task


def _mean_logprob(model, rollouts, correct: bool) -> float:
    rows = [r for r in rollouts if r[2] == correct]
    with torch.no_grad():
        logp, mask = T.token_logprobs(model, [r[0] for r in rows], [r[1] for r in rows], TRAIN.temperature)
    return float(logp.sum() / mask.sum())


@pytest.fixture()
def fresh_tiny():
    return R.tiny_model(n_layers=4, seed=0)


def test_training_raises_the_rewarded_answers_and_only_touches_chosen_blocks(fresh_tiny, tmp_path):
    model = fresh_tiny
    task, rollouts = planted_task(model, with_rollouts=True)
    right, wrong = _mean_logprob(model, rollouts, True), _mean_logprob(model, rollouts, False)
    frozen = {n: p.detach().clone() for n, p in model.engine.twin.named_parameters() if ".layers.0." in n}
    trained = {n: p.detach().clone() for n, p in T.trainable_parameters(model, [2, 3]).items()}
    result = T.train(model, task, TRAIN.with_(layers="2-3"), CONFIG, out=tmp_path / "run", progress=False)

    assert [r["step"] for r in result.history] == [1, 2]
    assert result.history[0]["groups_kept"] == 4  # every planted group is mixed
    assert all(r["groups_kept"] <= r["groups_sampled"] for r in result.history)
    # the rewarded answers of step 1 became more likely, the penalised ones less
    assert _mean_logprob(model, rollouts, True) > right
    assert _mean_logprob(model, rollouts, False) < wrong
    params = dict(model.engine.twin.named_parameters())
    assert all(torch.equal(params[n], v) for n, v in frozen.items())
    assert any(not torch.equal(params[n], v) for n, v in trained.items())
    assert all(p.requires_grad for p in model.engine.twin.parameters())  # flags restored

    reloaded = R.load_model(result.checkpoint)
    assert reloaded.name == model.name == "tiny-llama+dapo2"
    assert reloaded.fingerprint() == model.fingerprint() != R.tiny_model(n_layers=4, seed=0).fingerprint()
    history = T.read_history(tmp_path / "run")
    assert history == result.history
    summary = result.summary()  # train --json prints it (issue 57: computed by the library, not the CLI)
    assert (summary["base_model"], summary["model"], summary["steps"], summary["task"]) == ("tiny-llama", "tiny-llama+dapo2", 2, task.name)
    assert summary["first_steps_accuracy"] == summary["last_steps_accuracy"] == sum(r["accuracy"] for r in history) / 2
    assert summary["config_hash"] == CONFIG.hash() and summary["history"] == str(tmp_path / "run" / "history.jsonl")


def test_a_crashed_run_resumes_to_the_same_weights(tmp_path, monkeypatch):
    straight = R.tiny_model(n_layers=4, seed=0)
    task = planted_task(straight)
    T.train(straight, task, TRAIN, CONFIG, out=tmp_path / "straight", progress=False)

    crashing = R.tiny_model(n_layers=4, seed=0)
    real_sample, calls = T._sample_groups, []

    def crash_in_step_two(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real_sample(*args, **kwargs)

    monkeypatch.setattr(T, "_sample_groups", crash_in_step_two)
    with pytest.raises(KeyboardInterrupt):
        T.train(crashing, task, TRAIN, CONFIG, out=tmp_path / "crashed", progress=False)
    assert (tmp_path / "crashed" / "step-000001").is_dir() and not (tmp_path / "crashed" / "final").exists()
    monkeypatch.setattr(T, "_sample_groups", real_sample)

    resumed_model = R.tiny_model(n_layers=4, seed=0)
    resumed = T.train(resumed_model, task, TRAIN, CONFIG, out=tmp_path / "crashed", progress=False)
    assert resumed.resumed_from == 1
    assert resumed_model.fingerprint() == straight.fingerprint()
    assert T.read_history(tmp_path / "crashed")[1]["reward"] == T.read_history(tmp_path / "straight")[1]["reward"]
    assert not list((tmp_path / "crashed").glob("step-*"))  # the final checkpoint replaced it

    # a finished run returns its final model without training again
    again = T.train(R.tiny_model(n_layers=4, seed=0), task, TRAIN, CONFIG, out=tmp_path / "crashed", progress=False)
    assert again.model.fingerprint() == straight.fingerprint() and len(again.history) == 2


def test_train_refuses_bad_runs(tiny, tmp_path):
    with pytest.raises(R.RnrLensError, match="training split"):
        T.train(tiny, get("add-small", n=4), TRAIN, out=tmp_path / "a", progress=False)
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(R.RnrLensError, match="not empty"):
        T.train(tiny, get("add-small", split="train", n=4), TRAIN, out=tmp_path / "busy", progress=False)


def test_resume_refuses_a_different_config(tmp_path):
    model = R.tiny_model(n_layers=4, seed=0)
    task = planted_task(model)
    T.train(model, task, TRAIN.with_(steps=1), CONFIG, out=tmp_path / "run", progress=False)
    with pytest.raises(R.RnrLensError, match="different training config"):
        T.train(R.tiny_model(n_layers=4, seed=0), task, TRAIN.with_(lr=1e-4, steps=1), CONFIG, out=tmp_path / "run", progress=False)


def test_cli_train_writes_a_loadable_checkpoint_and_a_reward_curve(tmp_path, capsys):
    model = R.tiny_model(n_layers=4, seed=0)
    model.save_pretrained(tmp_path / "tiny")
    argv = [
        "train",
        "--model",
        str(tmp_path / "tiny"),
        "--task",
        "add-small",
        "--steps",
        "1",
        "--group-size",
        "2",
        "--prompts-per-step",
        "2",
        "--minibatches",
        "1",
        "--layers",
        "3",
        "--out",
        str(tmp_path / "runs" / "dapo"),  # as the README writes it: runs/ need not exist yet
        "--json",
    ]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["steps"] == 1 and out["task"] == "add-small-train"
    assert (tmp_path / "runs" / "dapo" / "reward_curve.html").stat().st_size > 10_000
    assert R.load_model(out["checkpoint"]).name == "tiny+dapo1"
    # the checkpoint says how it was made: its training command gives back the same run
    from rnr_lens.trained_pair.checkpoints import training_record

    record = training_record(out["checkpoint"])
    assert record["command"].split()[:4] == ["rnr-lens", "train", "--model", "tiny"] and record["task"] == "add-small-train"
    rerun = build_parser().parse_args(record["command"].split()[1:])
    assert (rerun.task, rerun.out, rerun.steps, rerun.layers, rerun.group_size) == ("add-small", str(tmp_path / "runs" / "dapo"), 1, "3", 2)
    assert training_record(tmp_path / "tiny") is None, "a base model folder holds no training record"
    # and where it was trained: the CPU's vector instructions and the thread count move the weights
    from rnr_lens.core.provenance import Machine

    assert record["machines"] == [Machine.here().to_dict()] and record["machines"][0]["cpu_capability"]
    assert main([*argv[:-3], "--layers", "7", "--out", str(tmp_path / "run2")]) == 2
    assert "outside 0..3" in capsys.readouterr().err
    assert not (tmp_path / "run2").exists()
    # another seed of the same recipe is another run, and its name says so (a grid pairs seeds apart)
    assert main([*argv[:-3], "--seed", "1", "--out", str(tmp_path / "seed1"), "--json"]) == 0
    assert R.load_model(json.loads(capsys.readouterr().out)["checkpoint"]).name == "tiny+dapo1-seed1"
