"""A compact RL fine-tune with verifiable rewards, following DAPO (Yu et al., 2025).

rnr_lens trains only to make a matched *pair* of checkpoints to audit: a base model and an
RL-tuned version of it, under the same deployment config. One step:

1. Draw prompts from the task's training split (seeded; the order is fixed by ``seed``) and
   sample a group of ``group_size`` answers per prompt at ``temperature``, in the deployment's
   prompt format.
2. Reward each answer: ``+1`` if correct, ``-1`` if not, plus DAPO's *soft overlong
   punishment*: answers longer than ``max_new_tokens - overlong_buffer`` tokens lose up to 1,
   linearly, and a truncated answer loses 1.
3. *Dynamic sampling*: drop groups whose answers are all right or all wrong (no correctness
   signal; length alone does not keep a group) and draw more prompts, up to ``max_rounds`` rounds, until ``prompts_per_step``
   groups are kept.
4. *Group-relative advantages*: ``(r - mean(group)) / (std(group) + 1e-6)`` for every token of
   the answer.
5. ``minibatches`` policy updates of the clipped objective with *decoupled clip ranges*
   ``[1 - clip_low, 1 + clip_high]`` (``clip_high > clip_low``: "clip-higher"), averaged over
   all answer tokens of the minibatch (*token-level loss*). No KL term.

Only the blocks named by ``layers`` (and, within them, ``components``) are trained; the
rest are frozen, which also stops backpropagation below the lowest trained block.

A run folder holds one resumable checkpoint (``step-NNNNNN/``, replaced as training goes) and,
when done, ``final/``; both are safetensors model folders that :func:`rnr_lens.model.models.load_model`
reloads. ``history.jsonl`` holds one line per step (the reward curve).

Example:
    >>> from rnr_lens import tasks, load_model
    >>> model = load_model("smollm2-135m-instruct")  # doctest: +SKIP
    >>> result = train(model, tasks.get("add-two-digit", split="train", n=2000),  # doctest: +SKIP
    ...                TrainConfig(steps=40, layers="20-29"), out="ckpt")
    >>> result.checkpoint  # doctest: +SKIP
    PosixPath('ckpt/final')
"""

from __future__ import annotations

import hashlib
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch
from jaxtyping import Float

from rnr_lens.core.display import progress_bar
from rnr_lens.core.faults import point
from rnr_lens.core.provenance import Machine
from rnr_lens.errors import RnrLensError
from rnr_lens.model import adapters
from rnr_lens.model.generation import Generation, generate, token_logprobs
from rnr_lens.model.lens import LensModel
from rnr_lens.questions.deploy import DeploymentConfig, deployment_for_task
from rnr_lens.questions.tasks.core import Question, Task
from rnr_lens.trained_pair.checkpoints import HISTORY_FILE, RunFolder, TrainState, read_history, trained_name
from rnr_lens.trained_pair.dapo import TRAINABLE, TrainConfig, overlong_penalty, parse_layers


@dataclass
class TrainResult:
    """What :func:`train` returns.

    Attributes:
        model: The trained model (trained in place).
        history: One record per step (see :func:`train` for the fields).
        checkpoint: The final checkpoint folder (None when trained without ``out``).
        config: The training config.
    """

    model: LensModel
    history: list[dict[str, Any]]
    checkpoint: Path | None
    config: TrainConfig
    resumed_from: int = 0
    base_model: str = ""
    """The name of the model it was trained from."""
    task: str = ""
    """The name of the task it was trained on."""
    deployment: DeploymentConfig | None = None
    """The deployment whose prompts and grader made the rollouts and their rewards."""

    SUMMARY_STEPS: ClassVar[int] = 5
    """Steps at each end of the run whose rollout accuracy :meth:`summary` reports."""

    def summary(self) -> dict[str, Any]:
        """The run at the JSON edge (``train --json``): the checkpoint, what it was trained
        from and on, under which deployment and on which machine (the CPU's vector instructions
        and the thread count move float sums, so the weights depend on it:
        docs/reproducibility.md), and the rollouts' accuracy over the first and last
        :attr:`SUMMARY_STEPS` steps.

        Example:
            >>> train(model, task, TrainConfig(steps=2)).summary()["last_steps_accuracy"]  # doctest: +SKIP
            0.25
        """
        k = min(self.SUMMARY_STEPS, len(self.history))
        head, tail = self.history[:k], self.history[len(self.history) - k :]
        return {
            "checkpoint": str(self.checkpoint) if self.checkpoint is not None else None,
            "model": self.model.name,
            "base_model": self.base_model,
            "task": self.task,
            "steps": len(self.history),
            "resumed_from": self.resumed_from,
            "config_hash": self.deployment.hash() if self.deployment is not None else None,
            "machine": Machine.here().to_dict(),
            "summary_steps": k,
            "first_steps_accuracy": sum(r["accuracy"] for r in head) / k if k else None,
            "last_steps_accuracy": sum(r["accuracy"] for r in tail) / k if k else None,
            "history": str(self.checkpoint.parent / HISTORY_FILE) if self.checkpoint is not None else None,
        }


# ---------------------------------------------------------------------------------------------
# The pieces of one step, each testable alone
# ---------------------------------------------------------------------------------------------


def trainable_parameters(model: LensModel, layers: Sequence[int], components: str = "block") -> dict[str, torch.nn.Parameter]:
    """The parameters :func:`train` updates, by their Hugging Face names."""
    return adapters.block_parameters(model.bridge, layers, None if components == "block" else components)


def answer_tokens(model: LensModel, sample: Generation) -> list[int]:
    """The tokens the policy chose: the generated ones plus the end-of-sequence it chose."""
    ids = list(sample.token_ids)
    if sample.finish_reason == "eos":
        eos = model.tokenizer.eos_token_id
        ids.append(eos if eos in model.eos_token_ids else min(model.eos_token_ids))
    return ids


# ---------------------------------------------------------------------------------------------
# The loop
# ---------------------------------------------------------------------------------------------


def _check_run(task: Task, config: TrainConfig, deployment: DeploymentConfig) -> int:
    """Refuse a run that cannot train (no questions, test-split questions, an answer budget no
    longer than the overlong buffer), in one line each; the rollouts' answer budget."""
    if len(task) == 0:
        raise RnrLensError("cannot train on an empty task; give it some training questions")
    if any("split" in q.metadata and q.metadata["split"] == "test" for q in task):
        raise RnrLensError(f"task {task.name} holds test-split questions; train on the training split, e.g. tasks.get(name, split='train')")
    budget = config.max_new_tokens or deployment.max_new_tokens
    if budget <= config.overlong_buffer:
        raise RnrLensError(
            f"the answer budget ({budget} tokens) must exceed TrainConfig.overlong_buffer ({config.overlong_buffer}); "
            "lower overlong_buffer, or raise TrainConfig.max_new_tokens"
        )
    return budget


def train(
    model: LensModel,
    task: Task,
    config: TrainConfig | None = None,
    deployment: DeploymentConfig | None = None,
    *,
    out: str | Path | None = None,
    resume: bool = True,
    progress: bool = True,
    batch_size: int | None = None,
) -> TrainResult:
    """Fine-tune ``model`` in place on ``task`` (use its training split) with DAPO.

    Args:
        model: The model; its weights change.
        task: Questions to train on, e.g. ``tasks.get("add-two-digit", split="train", n=2000)``.
        config: Hyper-parameters (:class:`TrainConfig`).
        deployment: The prompt format, answer budget and grader (default: the task's default
            deployment); audit the result under the same config.
        out: Run folder for checkpoints and the reward curve. With ``resume`` (default) an
            unfinished run there continues from its last checkpoint; a finished run returns
            its final model.
        resume: Continue a run found in ``out`` (else refuse to overwrite it).
        progress: Show a tqdm bar with the running reward.
        batch_size: Rows per generation forward (default: chosen from the machine's memory).

    Returns:
        A :class:`TrainResult`. Each history record has ``step``, ``reward`` (mean over all
        sampled answers), ``accuracy`` (share correct), ``groups_sampled``, ``groups_kept``,
        ``answer_tokens``, ``mean_length``, ``loss``, ``clip_fraction``, ``approx_kl``,
        ``grad_norm`` and ``seconds``.
    """
    config = config or TrainConfig()
    deployment = deployment_for_task(model, task, deployment)
    budget = _check_run(task, config, deployment)
    layers = parse_layers(config.layers, model.n_layers)
    params = trainable_parameters(model, layers, config.components)
    base_name = model.name
    run = RunFolder(Path(out), model, task, config, deployment) if out is not None else None
    optimizer = torch.optim.AdamW(list(params.values()), lr=config.lr, weight_decay=config.weight_decay)
    state = TrainState()
    if run is not None:
        found = run.open(resume)
        if found is not None:
            state = run.restore(found, params, optimizer)
            base_name = run.meta["base_model"]
            if found.name == "final":
                model.name = run.meta["final_name"]
                run.close()
                return TrainResult(model, state.history, found, config, state.step, base_name, task.name, deployment)
    resumed_from = state.step
    order = list(range(len(task)))
    random.Random(config.seed).shuffle(order)

    all_params = model.engine.all_parameters()
    saved_flags = [p.requires_grad for p in all_params]
    for p in all_params:
        p.requires_grad_(False)
    for p in params.values():
        p.requires_grad_(True)
    bar = progress_bar(progress, config.steps, f"train ({base_name})", "step", initial=state.step)
    try:
        while state.step < config.steps:
            started = time.perf_counter()
            groups, sampled, cursor = _sample_groups(model, task, order, state, config, deployment, budget, batch_size)
            state.cursor = cursor
            record = (
                _update(model, groups, optimizer, params, config)
                if groups
                else {"loss": None, "clip_fraction": None, "approx_kl": None, "grad_norm": None}
            )
            record = _step_record(state.step + 1, sampled, groups, record, started)
            state.history.append(record)
            state.step += 1
            if bar is not None:
                bar.set_postfix(reward=f"{record['reward']:+.2f}", acc=f"{record['accuracy']:.2f}", kept=f"{len(groups)}/{len(sampled)}")
                bar.update(1)
            if run is not None:
                run.write_history(state.history)
                if state.step % config.save_every == 0 or state.step == config.steps:
                    run.save(state, optimizer, final=state.step == config.steps, base_name=base_name)
    finally:
        if bar is not None:
            bar.close()
        if run is not None:
            run.close()
        for p, flag in zip(all_params, saved_flags):
            p.requires_grad_(flag)
    model.name = trained_name(base_name, state.step, config.seed)
    checkpoint = run.folder / "final" if run is not None else None
    return TrainResult(model, state.history, checkpoint, config, resumed_from, base_name, task.name, deployment)


def _step_record(step: int, sampled: list[_Group], kept: list[_Group], update: dict[str, Any], started: float) -> dict[str, Any]:
    """One step's line of ``history.jsonl``: the rollouts' mean reward and accuracy, the groups
    sampled and kept (dynamic sampling), answer lengths, the update's figures and the time."""
    rewards = [r for g in sampled for r in g.rewards]
    return {
        "step": step,
        "reward": sum(rewards) / len(rewards),
        "accuracy": sum(c for g in sampled for c in g.correct) / len(rewards),
        "groups_sampled": len(sampled),
        "groups_kept": len(kept),
        "answer_tokens": sum(len(a) for g in kept for a in g.answers),
        "mean_length": sum(len(a) for g in sampled for a in g.answers) / len(rewards),
        **update,
        "seconds": round(time.perf_counter() - started, 3),
    }


@dataclass
class _Group:
    prompt: list[int]
    answers: list[list[int]]
    rewards: list[float]
    correct: list[bool]


def _rollout_seed(seed: int, step: int, round_: int) -> int:
    digest = hashlib.sha256(f"rnr-lens-train:{seed}:{step}:{round_}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


def _sample_groups(
    model: LensModel,
    task: Task,
    order: list[int],
    state: TrainState,
    config: TrainConfig,
    deployment: DeploymentConfig,
    budget: int,
    batch_size: int | None,
) -> tuple[list[_Group], list[_Group], int]:
    """Roll out groups until ``prompts_per_step`` have mixed rewards (or rounds run out)."""
    kept: list[_Group] = []
    sampled: list[_Group] = []
    cursor = state.cursor
    for round_ in range(config.max_rounds):
        questions: list[Question] = []
        for _ in range(config.prompts_per_step):
            questions.append(task[order[cursor % len(order)]])
            cursor += 1
        prompts = [deployment.prompt(q) for q in questions]
        outs = generate(
            model,
            prompts,
            temperature=config.temperature,
            n=config.group_size,
            seed=_rollout_seed(config.seed, state.step, round_),
            max_new_tokens=budget,
            stop=deployment.stop,
            batch_size=batch_size,
        )
        for i, q in enumerate(questions):
            samples = outs[i * config.group_size : (i + 1) * config.group_size]
            correct = [deployment.grade(s.text, q, task.answer_type)[1] for s in samples]
            answers = [answer_tokens(model, s) for s in samples]
            rewards = [
                (1.0 if ok else -1.0) + overlong_penalty(len(s.token_ids) + (s.finish_reason == "length"), budget, config.overlong_buffer)
                for ok, s in zip(correct, samples)
            ]
            group = _Group(model.encode(prompts[i]), answers, rewards, correct)
            sampled.append(group)
            if 0 < sum(correct) < len(correct) and len(kept) < config.prompts_per_step:
                kept.append(group)
        if len(kept) >= config.prompts_per_step:
            break
    return kept, sampled, cursor


def _update(
    model: LensModel, groups: list[_Group], optimizer: torch.optim.Optimizer, params: dict[str, torch.nn.Parameter], config: TrainConfig
) -> dict[str, float | None]:
    """``minibatches`` clipped policy updates on the kept groups."""
    n_mb = min(config.minibatches, len(groups))
    advantages = group_advantages(torch.tensor([g.rewards for g in groups])).tolist()
    chunks = [range(i, len(groups), n_mb) for i in range(n_mb)]
    flat = [[(groups[j].prompt, answer, adv) for j in chunk for answer, adv in zip(groups[j].answers, advantages[j])] for chunk in chunks]
    olds: list[torch.Tensor] = []
    with torch.no_grad():
        for rows in flat:
            lp, _ = token_logprobs(model, [r[0] for r in rows], [r[1] for r in rows], config.temperature)
            olds.append(lp)
    stats: dict[str, list[float]] = {"loss": [], "clip_fraction": [], "approx_kl": [], "grad_norm": []}
    for rows, old in zip(flat, olds):
        with torch.enable_grad():
            lp, mask = token_logprobs(model, [r[0] for r in rows], [r[1] for r in rows], config.temperature)
            adv = torch.tensor([r[2] for r in rows], device=lp.device)
            loss, diag = clipped_token_loss(lp, old, adv, mask, config.clip_low, config.clip_high)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(list(params.values()), config.grad_clip)
        point("train:optimizer")  # gradients computed, weights not yet updated
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        stats["loss"].append(loss.item())
        stats["grad_norm"].append(norm.item())
        for key, value in diag.items():
            stats[key].append(value)
    return {k: sum(v) / len(v) for k, v in stats.items()}


# -- DAPO's two tensor formulas (each tested alone on hand-made tensors) -------------------------
def group_advantages(rewards: Float[torch.Tensor, "n_groups group_size"]) -> Float[torch.Tensor, "n_groups group_size"]:
    """``(r - mean) / (std + 1e-6)`` within each group (population std, as in GRPO/DAPO)."""
    mean = rewards.mean(-1, keepdim=True)
    std = rewards.std(-1, unbiased=False, keepdim=True)
    return (rewards - mean) / (std + 1e-6)


def clipped_token_loss(
    logprobs: Float[torch.Tensor, "batch cont"],
    old_logprobs: Float[torch.Tensor, "batch cont"],
    advantages: Float[torch.Tensor, " batch"],
    mask: Float[torch.Tensor, "batch cont"],
    clip_low: float,
    clip_high: float,
) -> tuple[torch.Tensor, dict[str, float]]:
    """DAPO's token-level clipped objective (to minimise) and diagnostics.

    Every answer token counts once, whatever the answer's length: the loss is a sum over
    tokens divided by the number of tokens, not a mean of per-answer means.
    """
    ratio = torch.exp(logprobs - old_logprobs)
    adv = advantages[:, None]
    unclipped = ratio * adv
    clipped = ratio.clamp(1 - clip_low, 1 + clip_high) * adv
    objective = torch.minimum(unclipped, clipped)
    n_tokens = mask.sum().clamp(min=1)
    loss = -(objective * mask).sum() / n_tokens
    with torch.no_grad():
        was_clipped = ((clipped < unclipped) & (mask > 0)).float().sum() / n_tokens
        approx_kl = ((old_logprobs - logprobs) * mask).sum() / n_tokens
    return loss, {"clip_fraction": float(was_clipped), "approx_kl": float(approx_kl)}


__all__ = [
    "TrainConfig",
    "TrainResult",
    "train",
    "parse_layers",
    "trainable_parameters",
    "overlong_penalty",
    "group_advantages",
    "clipped_token_loss",
    "read_history",
    "TRAINABLE",
]
