"""``rnr-lens audit``: realized against reachable, question by question, into a run store; and what to run next."""

from __future__ import annotations

import argparse
import json
import shlex
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from rnr_lens.cli.shell import (
    add_executor_args,
    add_placement_args,
    add_task_args,
    check_executor_args,
    load_config,
    load_kwargs,
    load_task,
    note_repeats,
    print_audit,
    seed_int,
)

if TYPE_CHECKING:
    from rnr_lens.measure.audits import AuditPlan
    from rnr_lens.measure.results import AuditResult
    from rnr_lens.measure.store import RunStore

NAME = "audit"
HELP = "realized versus reachable, question by question"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from rnr_lens.model.model_cache import DEFAULT_MODEL

    p.add_argument("--model", default=DEFAULT_MODEL, help="known name, HF id, local folder or .gguf file")
    add_task_args(p)
    p.add_argument("--probe", action="append", default=[], help="e.g. sampling:k=8,t=0.7  routes:k=8  search:k=8  ablation:component=mlp")
    p.add_argument("--out", default="run.db", help="SQLite run store (created if missing)")
    p.add_argument("--seed", type=seed_int, default=0)
    p.add_argument("--resume", action="store_true", help="continue an unfinished audit with the same settings")
    p.add_argument("--label", help="free-text label stored with the audit")
    p.add_argument("--shard", help="run only shard i/n of the questions (0-based, e.g. 0/4); merge the stores with rnr-lens merge")
    add_executor_args(p)
    add_placement_args(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")


def run(args: argparse.Namespace) -> int:
    from rnr_lens.measure.audits import plan, prepared
    from rnr_lens.measure.probes import parse_probe
    from rnr_lens.measure.store import RunStore

    # everything cheap is checked before a model loads or the store is touched (audits.prepared)
    probes = [parse_probe(p) for p in args.probe]  # a bad spec is named before the task is read
    task = load_task(args)
    planned = plan(task, probes, seed=args.seed, shard=args.shard)
    note_repeats(task)
    load = load_kwargs(args)
    check_executor_args(args)
    out = Path(args.out)
    resume = "only" if args.resume else True
    # the default config needs the model's tokenizer: what differs without it is named first
    with prepared(planned, out, resume=resume, deploy=lambda p: p.with_config(load_config(args, task))) as planned:
        result, model_name = _run(args, planned, out, load, resume)
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
        return 0
    print_audit(
        result,
        f"audit {result.id}  [{result.info.status}]\nmodel {model_name}  task {task.name} ({len(task)} questions)  config {planned.deployment.hash()}  seed {args.seed}",
        str(out),
    )
    print("\nnext:")
    for what, cmd in next_steps(result, RunStore(out, mode="read"), args):
        print(f"  # {what}\n  {cmd}")
    return 0


def _run(args: argparse.Namespace, planned: AuditPlan, out: Path, load: dict, resume: bool | str) -> tuple[AuditResult, str]:
    """The audit itself, on Ray or here, under ``run``'s resume policy; the result and the model's name."""
    if args.executor:
        from rnr_lens.measure.executors import run_audit

        result = run_audit(
            args.model,
            planned.task,
            list(planned.probes),
            planned.deployment,
            store=out,
            seed=args.seed,
            shards=args.shards or 1,
            executor=args.executor,
            address=args.address,
            num_cpus=args.num_cpus,
            batch_size=args.batch_size,
            load=load,
            progress=not args.json,
            label=args.label,
            resume=resume,
        )
        return result, result.info.model
    from rnr_lens.measure.audits import audit
    from rnr_lens.model.models import load_model

    model = load_model(args.model, **load)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"task .* distinct prompts")  # said once above, as a note
        result = audit(
            model,
            planned.task,
            list(planned.probes),
            planned.deployment,
            store=out,
            seed=args.seed,
            batch_size=args.batch_size,
            progress=not args.json,
            resume=resume,
            label=args.label,
            shard=args.shard,
        )
    return result, model.name


def next_steps(result: AuditResult, store: RunStore, args: argparse.Namespace) -> list[tuple[str, str]]:
    """What to run after an audit, each command as it runs from here: ``--audit`` where the
    store holds several audits, ``--probe`` where the audit has several, ``--model`` where
    the audit's model name alone would not load it, and ``mine`` only where it has a failure
    set to mine."""

    q = shlex.quote
    path = q(str(store.path))
    several = len(store.audits()) > 1
    pick = f" --audit {result.id[:12]}" if several else ""
    steps = [("every audit in this store, with its summary", f"rnr-lens show {path}")]
    # the model as the audit loaded it: its name or path, and the flags its fingerprint depends on
    model = "" if args.model == result.info.model else f" --model {q(str(args.model))}"
    for flag in ("dtype", "device", "device_map", "n_devices"):
        if getattr(args, flag, None) is not None:
            model += f" --{flag.replace('_', '-')} {q(str(getattr(args, flag)))}"
    if getattr(args, "trust_remote_code", False):
        model += " --trust-remote-code"
    from rnr_lens.bottleneck.failures import MIN_FAILURES
    from rnr_lens.measure.probes import shortest_form

    gaps = {p: len(result.reachable_not_realized(p)) for p in result.probes}
    wrong = int((result.questions["has_default"] & ~result.questions["realized"]).sum())
    if gaps and max(gaps.values()) >= MIN_FAILURES:
        probe = max(gaps, key=lambda p: gaps[p])
        which = f" --probe {q(shortest_form(probe, result.probes))}" if len(gaps) > 1 else ""
        steps.append(
            (f"locate the bottleneck MLP on the {gaps[probe]} reachable-not-realized questions", f"rnr-lens mine {path}{pick}{which}{model}")
        )
    elif wrong >= MIN_FAILURES:
        why = "no probe was run" if not gaps else f"fewer than {MIN_FAILURES} are reachable and not realized"
        steps.append(
            (
                f"locate the bottleneck MLP on the {wrong} questions the default deployment gets wrong ({why})",
                f"rnr-lens mine {path}{pick} --failure-set not-realized{model}",
            )
        )
    steps.append(("the per-try and per-question tables", f"rnr-lens export {path}{pick} --format csv"))
    if Path("notebooks/01_quickstart.ipynb").is_file():
        steps.append(("explore the audit question by question in JupyterLab", "jupyter lab notebooks/01_quickstart.ipynb"))
    return steps
