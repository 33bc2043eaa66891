"""``rnr-lens train``: a DAPO fine-tune on a task's training split, and the commands that audit the pair."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rnr_lens.cli.shell import add_task_args, add_trust_arg, load_config, load_kwargs, load_task, positive_int, seed_int

NAME = "train"
HELP = "RL fine-tune with verifiable rewards (DAPO) on a task's training split"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from rnr_lens.model.model_cache import DEFAULT_MODEL
    from rnr_lens.trained_pair.dapo import TRAINABLE, TrainConfig

    training = TrainConfig()
    p.add_argument("--model", default=DEFAULT_MODEL, help="known name, HF id, local folder or .gguf file")
    add_task_args(p)
    add_trust_arg(p)
    p.add_argument("--steps", type=positive_int, default=training.steps, help="policy-update steps")
    p.add_argument(
        "--out", required=True, help="run folder, made with its parents: checkpoints (final/ loads with load_model), history.jsonl, reward_curve.html"
    )
    p.add_argument("--layers", help="blocks to train, e.g. 20-29 (default: all)")
    p.add_argument("--components", default=training.components, choices=TRAINABLE, help="what to train inside those blocks")
    p.add_argument("--group-size", type=positive_int, default=training.group_size, help="answers sampled per prompt")
    p.add_argument("--prompts-per-step", type=positive_int, default=training.prompts_per_step, help="groups kept per step after dynamic sampling")
    p.add_argument("--temperature", type=float, default=training.temperature, help="rollout temperature")
    p.add_argument("--lr", type=float, default=training.lr)
    p.add_argument("--minibatches", type=positive_int, default=training.minibatches, help="policy updates per step")
    p.add_argument("--save-every", type=positive_int, default=training.save_every, help="steps between resumable checkpoints")
    p.add_argument("--seed", type=seed_int, default=training.seed)
    p.add_argument("--no-resume", action="store_true", help="refuse to continue a run already in --out")
    p.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:

    from rnr_lens.model.models import load_model
    from rnr_lens.questions import tasks
    from rnr_lens.trained_pair.checkpoints import check_folder
    from rnr_lens.trained_pair.training import TrainConfig, train

    config = TrainConfig(
        steps=args.steps,
        prompts_per_step=args.prompts_per_step,
        group_size=args.group_size,
        temperature=args.temperature,
        lr=args.lr,
        minibatches=args.minibatches,
        layers=args.layers,
        components=args.components,
        save_every=args.save_every,
        seed=args.seed,
    )
    if args.task in tasks.BUILTINS:
        task = tasks.get(args.task, split="train", n=args.n if args.n is not None else "all", seed=args.task_seed)
    else:
        task = load_task(args)
    deployment = load_config(args, task)
    out = Path(args.out)  # a run folder, made with its parents when training starts (as the README's runs/dapo)
    check_folder(out)  # a file, another folder's content or a damaged run.json, before the model loads
    model = load_model(args.model, **load_kwargs(args))
    result = train(model, task, config, deployment, out=out, resume=not args.no_resume, progress=not args.json, batch_size=args.batch_size)
    from rnr_lens.present.viz import reward_curve, save

    summary = result.summary() | {"reward_curve": str(save(reward_curve(result.history), out / "reward_curve.html"))}
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    machine, k = summary["machine"], summary["summary_steps"]
    print(f"trained {summary['base_model']} for {summary['steps']} steps on {task.name} ({len(task)} questions); checkpoint: {result.checkpoint}")
    # what graded the rollouts is part of what was trained: the same command under another default config trains otherwise
    print(f"rewards graded under deployment config {summary['config_hash']} (version {deployment.version}, extractor {deployment.extractor!r})")
    print(
        f"trained on {machine['cpu']} ({machine['cpu_capability']}, {machine['torch_threads']} torch threads): the same command "
        "gives these weights again on this CPU type with this thread count (docs/reproducibility.md)"
    )
    print(f"training rollouts correct: first {k} steps {summary['first_steps_accuracy']:.2f}, last {k} steps {summary['last_steps_accuracy']:.2f}")
    print(f"reward curve: {summary['reward_curve']}")
    print("audit both under matched conditions, then compare:")
    print(f"  rnr-lens audit --model {args.model} --task {args.task} --probe sampling:k=8,t=0.7 --out pair.db")
    print(f"  rnr-lens audit --model {result.checkpoint} --task {args.task} --probe sampling:k=8,t=0.7 --out pair.db")
    print("  rnr-lens compare pair.db --a <first audit id> --b <second audit id>")
    return 0
