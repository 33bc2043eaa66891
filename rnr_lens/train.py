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
when done, ``final/``; both are safetensors model folders that :func:`rnr_lens.load_model`
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
import json
import os
import random
import shutil
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Sequence

import torch
from jaxtyping import Float

from rnr_lens.deploy import DeploymentConfig
from rnr_lens.errors import RnrLensError
from rnr_lens.generation import Generation, generate
from rnr_lens.lens import LensModel
from rnr_lens.tasks.core import Question, Task

CHECKPOINT_FILE = "rnr_lens_checkpoint.json"
"""Written into every checkpoint folder: the model's display name and how it was trained."""

COMPONENTS = ("block", "mlp", "attn")


@dataclass(frozen=True)
class TrainConfig:
    """Hyper-parameters of a DAPO run (defaults follow the paper where a CPU allows).

    Attributes:
        steps: Policy-update steps (each with its own sampled batch).
        prompts_per_step: Groups kept per step after dynamic sampling.
        group_size: Answers sampled per prompt (G).
        temperature: Sampling temperature for the rollouts (the policy is ``softmax(logits / T)``).
        lr: AdamW learning rate.
        weight_decay: AdamW weight decay.
        clip_low: Lower clip range (ratio >= 1 - clip_low).
        clip_high: Upper clip range (ratio <= 1 + clip_high); DAPO's "clip-higher".
        minibatches: Policy updates per step (the kept groups split into this many minibatches).
        max_new_tokens: Answer budget; None: the deployment's.
        overlong_buffer: Tokens before the budget where the soft overlong punishment starts.
        max_rounds: Sampling rounds per step for dynamic sampling.
        layers: Blocks to train, as runs like ``"20-29"`` or ``"0,5-7"``; None: all blocks.
        components: ``"block"`` (everything in the block), ``"mlp"`` or ``"attn"``.
        grad_clip: Gradient-norm clip.
        save_every: Steps between resumable checkpoints.
        seed: Seed for the prompt order and the rollouts.
    """

    steps: int = 40
    prompts_per_step: int = 8
    group_size: int = 8
    temperature: float = 1.0
    lr: float = 1e-5
    weight_decay: float = 0.0
    clip_low: float = 0.2
    clip_high: float = 0.28
    minibatches: int = 2
    max_new_tokens: int | None = None
    overlong_buffer: int = 4
    max_rounds: int = 3
    layers: str | None = None
    components: str = "block"
    grad_clip: float = 1.0
    save_every: int = 10
    seed: int = 0

    def __post_init__(self) -> None:
        positive = ("steps", "prompts_per_step", "minibatches", "max_rounds", "save_every")
        for name in positive:
            if getattr(self, name) < 1:
                raise RnrLensError(f"TrainConfig.{name} must be at least 1, got {getattr(self, name)}")
        if self.group_size < 2:
            raise RnrLensError(f"TrainConfig.group_size must be at least 2 (advantages are relative within a group), got {self.group_size}")
        if self.temperature <= 0:
            raise RnrLensError(f"TrainConfig.temperature must be > 0 (rollouts are sampled), got {self.temperature}")
        if not 0 < self.clip_low < 1 or self.clip_high <= 0:
            raise RnrLensError(f"clip ranges must satisfy 0 < clip_low < 1 and clip_high > 0, got {self.clip_low}, {self.clip_high}")
        if self.lr <= 0:
            raise RnrLensError(f"TrainConfig.lr must be > 0, got {self.lr}")
        if self.components not in COMPONENTS:
            raise RnrLensError(f"TrainConfig.components must be one of {', '.join(COMPONENTS)}, not {self.components!r}")
        if self.max_new_tokens is not None and self.max_new_tokens <= self.overlong_buffer:
            raise RnrLensError(f"max_new_tokens ({self.max_new_tokens}) must exceed overlong_buffer ({self.overlong_buffer})")
        if self.minibatches > self.prompts_per_step:
            raise RnrLensError(f"minibatches ({self.minibatches}) cannot exceed prompts_per_step ({self.prompts_per_step}); each minibatch holds whole groups")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def hash(self) -> str:
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()[:16]

    def with_(self, **changes: Any) -> "TrainConfig":
        known = {f.name for f in fields(self)}
        unknown = set(changes) - known
        if unknown:
            raise RnrLensError(f"unknown TrainConfig field(s): {', '.join(sorted(unknown))}")
        return TrainConfig(**{**self.to_dict(), **changes})


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

    def reward_curve(self) -> Any:
        """The reward curve as a plotly figure (see :func:`rnr_lens.viz.reward_curve`)."""
        from rnr_lens.viz import reward_curve

        return reward_curve(self.history)


# ---------------------------------------------------------------------------------------------
# The pieces of one step, each testable alone
# ---------------------------------------------------------------------------------------------


def parse_layers(spec: str | None, n_layers: int) -> list[int]:
    """Block indices from runs like ``"20-29"`` or ``"0,5-7"`` (None: all blocks)."""
    if spec is None or spec.strip() in ("", "all"):
        return list(range(n_layers))
    layers: set[int] = set()
    for run in filter(None, (p.strip() for p in spec.split(","))):
        try:
            a, _, b = run.partition("-")
            lo, hi = int(a), int(b or a)
        except ValueError:
            raise RnrLensError(f"cannot parse layers {spec!r}: write runs like '20-29' or '0,5-7'") from None
        if not 0 <= lo <= hi < n_layers:
            raise RnrLensError(f"layers {run!r} are outside 0..{n_layers - 1} for this {n_layers}-block model")
        layers.update(range(lo, hi + 1))
    return sorted(layers)


def trainable_parameters(model: LensModel, layers: Sequence[int], components: str = "block") -> dict[str, torch.nn.Parameter]:
    """The parameters :func:`train` updates, by their Hugging Face names."""
    from rnr_lens import adapters

    twin = model.twin
    if twin is None:
        raise RnrLensError(f"cannot train {model.name}: {model._twin_error}")
    parent, attr = adapters.decoder_layers_owner(model.bridge, root=twin)
    blocks = getattr(parent, attr)
    sub = adapters.component_module_names(model.bridge)
    names = {id(module): name for name, module in twin.named_modules()}
    out: dict[str, torch.nn.Parameter] = {}
    for layer in layers:
        module = blocks[layer]
        if components != "block":
            module = getattr(module, sub[components])
        base = names[id(module)]
        for name, param in module.named_parameters():
            out[f"{base}.{name}"] = param
    return out


def overlong_penalty(length: int, max_new_tokens: int, buffer: int) -> float:
    """DAPO's soft overlong punishment for an answer of ``length`` tokens (0 down to -1)."""
    expected = max_new_tokens - buffer
    if length <= expected:
        return 0.0
    if length <= max_new_tokens:
        return (expected - length) / buffer
    return -1.0


def group_advantages(rewards: Float[torch.Tensor, "groups G"]) -> Float[torch.Tensor, "groups G"]:
    """``(r - mean) / (std + 1e-6)`` within each group (population std, as in GRPO/DAPO)."""
    mean = rewards.mean(-1, keepdim=True)
    std = rewards.std(-1, unbiased=False, keepdim=True)
    return (rewards - mean) / (std + 1e-6)


def clipped_token_loss(
    logprobs: Float[torch.Tensor, "rows tokens"],
    old_logprobs: Float[torch.Tensor, "rows tokens"],
    advantages: Float[torch.Tensor, " rows"],
    mask: Float[torch.Tensor, "rows tokens"],
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


def answer_tokens(model: LensModel, sample: Generation) -> list[int]:
    """The tokens the policy chose: the generated ones plus the end-of-sequence it chose."""
    ids = list(sample.token_ids)
    if sample.finish_reason == "eos":
        eos = model.tokenizer.eos_token_id
        ids.append(eos if eos in model.eos_token_ids else min(model.eos_token_ids))
    return ids


def policy_logprobs(
    model: LensModel, prompts: Sequence[list[int]], answers: Sequence[list[int]], temperature: float
) -> tuple[Float[torch.Tensor, "rows tokens"], Float[torch.Tensor, "rows tokens"]]:
    """Log-probabilities of each answer token under ``softmax(logits / temperature)``, right
    aligned in a ``(rows, longest answer)`` tensor, with its mask. Differentiable."""
    width = max(1, max(len(a) for a in answers))
    ids, attn = model.pad([p + a for p, a in zip(prompts, answers)])
    logits = model.forward_tokens(ids, attn, logits_to_keep=width + 1)[:, :-1]
    logprobs = torch.log_softmax(logits.float() / temperature, dim=-1)
    targets = torch.full((len(answers), width), 0, dtype=torch.long, device=logits.device)
    mask = torch.zeros((len(answers), width), device=logits.device)
    for row, a in enumerate(answers):
        if a:
            targets[row, width - len(a):] = torch.tensor(a, device=logits.device)
            mask[row, width - len(a):] = 1
    picked = logprobs.gather(-1, targets[..., None])[..., 0]
    return picked * mask, mask


# ---------------------------------------------------------------------------------------------
# The loop
# ---------------------------------------------------------------------------------------------


@dataclass
class _State:
    step: int = 0
    cursor: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)


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
        batch_size: Rows per generation forward (default: chosen from free memory).

    Returns:
        A :class:`TrainResult`. Each history record has ``step``, ``reward`` (mean over all
        sampled answers), ``accuracy`` (share correct), ``groups_sampled``, ``groups_kept``,
        ``answer_tokens``, ``mean_length``, ``loss``, ``clip_fraction``, ``approx_kl``,
        ``grad_norm`` and ``seconds``.
    """
    config = config or TrainConfig()
    deployment = deployment or DeploymentConfig.default_for(task.answer_type)
    if len(task) == 0:
        raise RnrLensError("cannot train on an empty task; give it some training questions")
    if any("split" in q.metadata and q.metadata["split"] == "test" for q in task):
        raise RnrLensError(f"task {task.name} holds test-split questions; train on the training split, e.g. tasks.get(name, split='train')")
    budget = config.max_new_tokens or deployment.max_new_tokens
    if budget <= config.overlong_buffer:
        raise RnrLensError(f"the answer budget ({budget}) must exceed overlong_buffer ({config.overlong_buffer}); lower --overlong-buffer")
    layers = parse_layers(config.layers, model.n_layers)
    params = trainable_parameters(model, layers, config.components)
    base_name = model.name
    run = _RunFolder(Path(out), model, task, config, deployment) if out is not None else None
    optimizer = torch.optim.AdamW(list(params.values()), lr=config.lr, weight_decay=config.weight_decay)
    state = _State()
    if run is not None:
        found = run.open(resume)
        if found is not None:
            state = run.restore(found, params, optimizer)
            base_name = run.meta["base_model"]
            if found.name == "final":
                model.name = run.meta["final_name"]
                return TrainResult(model, state.history, found, config, resumed_from=state.step)
    resumed_from = state.step
    order = list(range(len(task)))
    random.Random(config.seed).shuffle(order)

    all_params = [p for p in _all_parameters(model)]
    saved_flags = [p.requires_grad for p in all_params]
    for p in all_params:
        p.requires_grad_(False)
    for p in params.values():
        p.requires_grad_(True)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=config.steps, initial=state.step, desc=f"train ({base_name})", unit="step")
    try:
        while state.step < config.steps:
            started = time.perf_counter()
            groups, sampled, cursor = _sample_groups(model, task, order, state, config, deployment, budget, batch_size)
            state.cursor = cursor
            record = _update(model, groups, optimizer, params, config) if groups else {"loss": None, "clip_fraction": None, "approx_kl": None, "grad_norm": None}
            rewards = [r for g in sampled for r in g.rewards]
            record = {
                "step": state.step + 1,
                "reward": sum(rewards) / len(rewards),
                "accuracy": sum(c for g in sampled for c in g.correct) / len(rewards),
                "groups_sampled": len(sampled),
                "groups_kept": len(groups),
                "answer_tokens": sum(len(a) for g in groups for a in g.answers),
                "mean_length": sum(len(a) for g in sampled for a in g.answers) / len(rewards),
                **record,
                "seconds": round(time.perf_counter() - started, 3),
            }
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
        for p, flag in zip(all_params, saved_flags):
            p.requires_grad_(flag)
        model._reference_cache.clear()  # mean-ablation references were of the old weights
    model.name = f"{base_name}+dapo{state.step}"
    checkpoint = run.folder / "final" if run is not None else None
    return TrainResult(model, state.history, checkpoint, config, resumed_from=resumed_from)


def _all_parameters(model: LensModel) -> list[torch.nn.Parameter]:
    seen: dict[int, torch.nn.Parameter] = {}
    for module in (model.bridge.original_model, model.twin):
        if module is not None:
            for p in module.parameters():
                seen.setdefault(id(p), p)
    return list(seen.values())


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
    state: _State,
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
            model, prompts, temperature=config.temperature, n=config.group_size, seed=_rollout_seed(config.seed, state.step, round_),
            max_new_tokens=budget, stop=deployment.stop, batch_size=batch_size,
        )
        for i, q in enumerate(questions):
            samples = outs[i * config.group_size:(i + 1) * config.group_size]
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
) -> dict[str, float]:
    """``minibatches`` clipped policy updates on the kept groups."""
    n_mb = min(config.minibatches, len(groups))
    advantages = group_advantages(torch.tensor([g.rewards for g in groups])).tolist()
    chunks = [range(i, len(groups), n_mb) for i in range(n_mb)]
    flat = [[(groups[j].prompt, answer, adv) for j in chunk for answer, adv in zip(groups[j].answers, advantages[j])] for chunk in chunks]
    olds: list[torch.Tensor] = []
    with torch.no_grad():
        for rows in flat:
            lp, _ = policy_logprobs(model, [r[0] for r in rows], [r[1] for r in rows], config.temperature)
            olds.append(lp)
    stats: dict[str, list[float]] = {"loss": [], "clip_fraction": [], "approx_kl": [], "grad_norm": []}
    for rows, old in zip(flat, olds):
        with torch.enable_grad():
            lp, mask = policy_logprobs(model, [r[0] for r in rows], [r[1] for r in rows], config.temperature)
            adv = torch.tensor([r[2] for r in rows], device=lp.device)
            loss, diag = clipped_token_loss(lp, old, adv, mask, config.clip_low, config.clip_high)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(list(params.values()), config.grad_clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        stats["loss"].append(loss.item())
        stats["grad_norm"].append(norm.item())
        for key, value in diag.items():
            stats[key].append(value)
    return {k: sum(v) / len(v) for k, v in stats.items()}


# ---------------------------------------------------------------------------------------------
# The run folder: atomic checkpoints that resume
# ---------------------------------------------------------------------------------------------


class _RunFolder:
    """``out/``: ``run.json`` (what is trained, on what), ``history.jsonl``, the newest
    ``step-NNNNNN/`` checkpoint and, when done, ``final/``."""

    def __init__(self, folder: Path, model: LensModel, task: Task, config: TrainConfig, deployment: DeploymentConfig) -> None:
        self.folder = folder
        self.model = model
        self.meta = {
            "base_model": model.name,
            "base_fingerprint": model.fingerprint(),
            "task": task.name,
            "task_fingerprint": task.fingerprint(),
            "train_config": config.to_dict(),
            "train_config_hash": config.hash(),
            "deployment_hash": deployment.hash(),
            "deployment": deployment.to_dict(),
        }

    def checkpoints(self) -> list[Path]:
        found = [p for p in self.folder.glob("step-*") if (p / CHECKPOINT_FILE).exists()]
        return sorted(found)

    def open(self, resume: bool) -> Path | None:
        """Create the folder, or check that the run in it is this run; return the checkpoint to
        resume from (None: start fresh)."""
        meta_path = self.folder / "run.json"
        if not meta_path.exists():
            if self.folder.exists() and any(p for p in self.folder.iterdir() if not p.name.startswith(".")):
                raise RnrLensError(f"{self.folder} is not empty and holds no rnr_lens training run; choose a new --out folder")
            self.folder.mkdir(parents=True, exist_ok=True)
            _atomic_write(meta_path, json.dumps(self.meta, indent=2))
            return None
        stored = json.loads(meta_path.read_text())
        if not resume:
            raise RnrLensError(f"{self.folder} already holds a training run; pass resume=True (CLI: drop --no-resume) or choose a new --out folder")
        for key, what in (("base_fingerprint", "base model"), ("task_fingerprint", "task"), ("train_config_hash", "training config"), ("deployment_hash", "deployment config")):
            if stored.get(key) != self.meta[key]:
                raise RnrLensError(f"{self.folder} holds a run with a different {what}; resume it with the same settings or choose a new --out folder")
        self.meta = stored
        if (self.folder / "final" / CHECKPOINT_FILE).exists():
            return self.folder / "final"
        found = self.checkpoints()
        return found[-1] if found else None

    def restore(self, checkpoint: Path, params: dict[str, torch.nn.Parameter], optimizer: torch.optim.Optimizer) -> _State:
        from safetensors.torch import load_file

        tensors: dict[str, torch.Tensor] = {}
        for shard in sorted(checkpoint.glob("*.safetensors")):
            tensors.update(load_file(shard))
        with torch.no_grad():
            for name, param in params.items():
                if name not in tensors:
                    raise RnrLensError(f"checkpoint {checkpoint} lacks {name}; it was not written by this run, start a new --out folder")
                param.copy_(tensors[name].to(param.dtype))
        info = json.loads((checkpoint / CHECKPOINT_FILE).read_text())
        optimizer.load_state_dict(torch.load(checkpoint / "optimizer.pt", weights_only=True))
        self.meta["final_name"] = info["name"]
        return _State(step=info["step"], cursor=info["cursor"], history=info["history"])

    def write_history(self, history: list[dict[str, Any]]) -> None:
        _atomic_write(self.folder / "history.jsonl", "".join(json.dumps(r) + "\n" for r in history))

    def save(self, state: _State, optimizer: torch.optim.Optimizer, *, final: bool, base_name: str) -> Path:
        info = {
            "name": f"{base_name}+dapo{state.step}",
            "base_model": base_name,
            "base_fingerprint": self.meta["base_fingerprint"],
            "step": state.step,
            "cursor": state.cursor,
            "task": self.meta["task"],
            "train_config": self.meta["train_config"],
            "deployment_hash": self.meta["deployment_hash"],
            "history": state.history,
        }
        target = self.folder / ("final" if final else f"step-{state.step:06d}")
        staging = self.folder / f".{target.name}.partial"
        shutil.rmtree(staging, ignore_errors=True)
        optimizer_bytes = _torch_bytes(optimizer.state_dict())
        self.model.save_pretrained(staging, extra_files={CHECKPOINT_FILE: json.dumps(info, indent=2).encode(), "optimizer.pt": optimizer_bytes})
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)
        for old in self.checkpoints():
            if old != target:
                shutil.rmtree(old, ignore_errors=True)
        return target


def _torch_bytes(obj: Any) -> bytes:
    import io

    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def read_history(folder: str | Path) -> list[dict[str, Any]]:
    """The per-step records of the run in ``folder`` (its reward curve)."""
    path = Path(folder) / "history.jsonl"
    if not path.exists():
        raise RnrLensError(f"{folder} holds no history.jsonl; point at the --out folder of rnr-lens train")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


__all__ = [
    "TrainConfig", "TrainResult", "train", "parse_layers", "trainable_parameters", "overlong_penalty", "group_advantages",
    "clipped_token_loss", "policy_logprobs", "read_history",
]
