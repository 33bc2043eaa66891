"""What the ``rnr-lens`` commands share: tables that fit 100 columns, argument types, and the
flags several commands take (the task, the model's placement, the executor), each read into the
library's own values in one place.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from rnr_lens.core.records import MAX_SEED
from rnr_lens.core.shards import EXECUTORS
from rnr_lens.core.untrusted import one_line
from rnr_lens.errors import RnrLensError

if TYPE_CHECKING:
    from rnr_lens.core.stats import Estimate
    from rnr_lens.measure.results import AuditResult
    from rnr_lens.measure.store import RunStore
    from rnr_lens.questions.deploy import DeploymentConfig
    from rnr_lens.questions.tasks.core import Task


TERMINAL_WIDTH = 100
"""The CLI's tables fit this many columns: wider ones continue in a second block."""


def print_table(rows: list[dict], columns: Sequence[str] | None = None) -> None:
    """Rows as aligned columns; columns that would pass :data:`TERMINAL_WIDTH` continue in
    another block that repeats the first (key) column."""
    if not rows:
        print("(nothing)")
        return
    columns = list(columns or dict.fromkeys(k for r in rows for k in r))
    cells = {c: [_fmt(r.get(c)) for r in rows] for c in columns}
    widths = {c: max(len(c), *(len(v) for v in cells[c])) for c in columns}
    key, rest = columns[0], columns[1:]
    blocks: list[list[str]] = [[key]]
    for c in rest:
        if len(blocks[-1]) > 1 and sum(widths[x] + 2 for x in blocks[-1]) + widths[c] > TERMINAL_WIDTH:
            blocks.append([key])
        blocks[-1].append(c)
    for i, block in enumerate(blocks):
        if i:
            print()
        print("  ".join(c.ljust(widths[c]) for c in block).rstrip())
        for r in range(len(rows)):
            print("  ".join(cells[c][r].ljust(widths[c]) for c in block).rstrip())


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    return "" if value is None else one_line(str(value))  # a store's names may come from anyone


def load_task(args: argparse.Namespace) -> Task:
    from rnr_lens.questions import tasks

    params: dict = {}
    if getattr(args, "n", None) is not None:
        params["n"] = args.n
    if args.task in tasks.BUILTINS:
        params["seed"] = args.task_seed
    else:
        if args.task_format:
            params["format"] = args.task_format
        for item in args.field or []:
            key, eq, value = item.partition("=")
            if not eq or key not in ("question", "answer", "id", "choices"):
                raise RnrLensError(f"--field {item!r}: write it as question=NAME, answer=NAME, id=NAME or choices=NAME")
            params[key] = value
    task = tasks.get(args.task, trust_code=getattr(args, "trust_task_code", False), **params)
    if args.limit is not None:
        task = task.first(min(args.limit, len(task)))
    return task


def note_repeats(task: Task) -> None:
    """Say on stderr when a task repeats prompts (the library warns; the CLI says it once, plainly)."""
    note = task.repeated_prompts()
    if note:
        print(f"note: {note}", file=sys.stderr)


def load_config(args: argparse.Namespace, task: Task) -> DeploymentConfig:
    """--config, else the task's default deployment for the model: raw text where its
    tokenizer has no chat template (read without loading the weights, as the library and Ray
    workers do), the harness's own for an lm-eval task."""
    from rnr_lens.model.models import load_tokenizer
    from rnr_lens.questions.deploy import DeploymentConfig, check_shots_file, deployment_for_task

    config = DeploymentConfig.load(args.config) if args.config else None
    shots_file = getattr(args, "shots_file", None)
    if shots_file:
        check_shots_file(config)  # before the tokenizer loads
    if config is not None:
        return deployment_for_task(None, task, config, shots_file)
    return deployment_for_task(load_tokenizer(args.model, trust_remote_code=getattr(args, "trust_remote_code", False)), task, None, shots_file)


def existing_store(path: str, hint: str = "", mode: str = "read") -> RunStore:
    """The run store at ``path``, which must exist (``hint`` says how to make one); opened
    read-only unless ``mode`` says otherwise, so a reader never modifies the file."""

    from rnr_lens.measure.store import RunStore

    if not Path(path).is_file():
        raise RnrLensError(f"run store {path} does not exist{hint}")
    return RunStore(path, mode=mode)


def load_kwargs(args: argparse.Namespace) -> dict:
    """``load_model`` placement options from --device/--dtype/--device-map/--n-devices."""
    load: dict = {}
    for key in ("device", "dtype", "device_map", "n_devices"):
        value = getattr(args, key, None)
        if value is not None:
            load[key] = value
    if getattr(args, "trust_remote_code", False):
        load["trust_remote_code"] = True
    return load


def est(e: Estimate | None) -> str:
    """:func:`rnr_lens.core.display.estimate_text`, imported when first printed (it pulls scipy,
    which ``rnr-lens --help`` should not wait for)."""
    from rnr_lens.core.display import estimate_text

    return estimate_text(e)


def print_audit(result: AuditResult, header: str, store: str) -> None:
    """An audit as two tables that fit 100 columns (probes by short label, specs listed below);
    a warning line above them where format misses may decide the realized rate."""
    summaries = result.probe_summaries()
    labels = result.labels
    print(header)
    if result.config.shots is not None:
        print(f"worked examples: {result.config.shots.label}, before every question (show --json: rendered_prompt)")
    if not result.finished:
        done = result.progress()
        stored, expected = sum(d for d, _ in done.values()), sum(e for _, e in done.values())
        print(f"unfinished: {stored} of {expected} tries stored (still running, or stopped: rerun it with --resume)")
        print("each row summarizes the n questions whose tries are all stored")
    warning = result.format_warning()
    if warning:
        print(textwrap.fill(f"warning: {warning}", TERMINAL_WIDTH, subsequent_indent="  "))
        print(f"  list them: rnr-lens show {shlex.quote(store)} --misses")
        print("  compare extractors on them: rnr-lens check-format (same --model and --task)")
        print("  choose one: the field 'extractor' of a --config file (docs/extractors.md)")
    print()
    if not result.probes:
        n = int(result.questions["has_default"].sum())
        print(f"realized (greedy, default deployment): {est(summaries[0].realized)} over {n} questions")
        print("no probe was run: reachability is not measured (add --probe, e.g. sampling:k=8)")
        misses, _ = result.format_miss_share()
        wrong = n - int(result.questions["realized"].sum())
        print(f"format misses (wrong answers stating the gold elsewhere): {misses} of {wrong} wrong greedy answers")
        return
    print_table([s.cells(labels[s.probe]) for s in summaries])  # the notebook view's columns
    print("reachable: one of the probe's own k tries is correct (the default answer is never counted);")
    print("chance: the same tries scored against other questions' gold answers (a derangement of the golds)")
    print("95% Wilson intervals; above chance (chance fixed) resolved where the exact test agrees at 5%")
    resolved = {labels[s.probe]: s.above_chance.resolved for s in summaries if s.above_chance is not None}
    if resolved:
        print(
            "above chance, resolved: "
            + (", ".join(k for k, v in resolved.items() if v == "above") or "none")
            + "; not resolved: "
            + (", ".join(k for k, v in resolved.items() if v != "above") or "none")
        )
    print("reachable, not realized: " + ", ".join(f"{labels[s.probe]} {s.reachable_not_realized}" for s in summaries))
    misses = result.format_misses()
    wrong = int((~result.questions["realized"] & result.questions["has_default"]).sum())
    print(f"format misses (wrong answers whose text states the gold elsewhere): {len(misses)} of {wrong} wrong greedy answers")
    print("  among each probe's wrong tries: " + ", ".join(f"{labels[s.probe]} {s.format_misses}" for s in summaries))
    blind = [{"probe": labels[s.probe], **{name: est(e) for name, e in s.selectors.items()}} for s in summaries]
    if any(len(row) > 1 for row in blind):
        print("\naccuracy of each selector's pick (oracle: any try correct; the others never see the gold answer)")
        print_table(blind)
    if any(labels[s.probe] != s.probe for s in summaries):
        print("\nprobes:")
        for probe, label in labels.items():
            print(
                textwrap.fill(
                    probe.replace(",", ", "), 100, initial_indent=f"  {label:<10} ", subsequent_indent=" " * 13, break_on_hyphens=False
                ).replace(", ", ",")
            )


def add_task_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--task", default="add-small", help="built-in task name, path to a .jsonl/.json/.csv file, or lm-eval:NAME (an lm-evaluation-harness task)"
    )
    p.add_argument("--n", type=positive_int, help="size of a built-in task")
    p.add_argument("--task-seed", type=seed_int, default=0, help="seed of a built-in task's question draw")
    p.add_argument("--task-format", help="force a file format: gsm8k, svamp, arc, jsonl, csv")
    p.add_argument("--field", action="append", help="field mapping for generic files, e.g. --field answer=label")
    add_task_trust_arg(p)
    p.add_argument("--limit", type=positive_int, help="only the first N questions (a quick look)")
    p.add_argument("--config", help="deployment config file (.json or .yaml)")
    p.add_argument(
        "--shots-file",
        help="a task file whose questions are the worked examples of a config with shots source file:NAME (never a test question)",
    )
    p.add_argument("--batch-size", type=positive_int, help="rows per forward (default: from the machine's memory)")


def add_placement_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", help="where to run the model, e.g. cuda or cuda:1 (default: cpu)")
    p.add_argument("--dtype", help="weight dtype: float32 (CPU default), bfloat16 (suits GPUs), float16")
    p.add_argument("--device-map", help="Hugging Face placement over several GPUs, e.g. auto")
    p.add_argument("--n-devices", type=positive_int, help="spread the model over the first N GPUs")
    add_trust_arg(p)


def add_task_trust_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--trust-task-code",
        action="store_true",
        help="run an lm-eval task YAML of your own (lm-eval:PATH.yaml): lm-eval runs a task file as code "
        "(templates, !function, metric names), so read it first (off by default; lm-eval's own tasks need no flag)",
    )


def add_trust_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--trust-remote-code", action="store_true", help="let a hub model's own Python code run (off by default; never for offline names)")


def _int_at_least(low: int) -> Callable[[str], int]:
    """An argparse type: an integer of at least ``low``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
        return value

    return parse


positive_int = _int_at_least(1)


non_negative_int = _int_at_least(0)


def seed_int(text: str) -> int:
    """An argparse type: a seed from 0 to 2**32-1."""

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"a seed is from 0 to {MAX_SEED}, got {value}")
    return value


class UsageError(Exception):
    """A command line argparse refused (printed as one ``error:`` line, exit 2)."""


class Parser(argparse.ArgumentParser):
    """argparse, but a refused argument is one line naming the fix, not a usage dump."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}; see '{self.prog} --help'")


def check_executor_args(args: argparse.Namespace) -> None:
    """``--shards`` only with ``--executor``, and ``--shard`` (one shard here) not beside it: the
    flags of :func:`add_executor_args`, checked in this one place for every command that has them."""
    if args.shards is not None and not args.executor:
        here = " (to run one shard here, use --shard i/n)" if hasattr(args, "shard") else ""  # a command with --shard
        raise RnrLensError(f"--shards needs --executor local or --executor ray{here}")
    if args.executor and getattr(args, "shard", None):
        raise RnrLensError("give either --shard (run one shard here) or --executor (run every shard), not both")


def add_executor_args(p: argparse.ArgumentParser, audits: str = "every shard") -> None:

    p.add_argument("--executor", choices=EXECUTORS, help=f"run {audits}: here one after another, or on Ray workers")
    p.add_argument("--shards", type=positive_int, help="number of shards for --executor (default 1)")
    p.add_argument("--address", help="Ray cluster address (auto: the running cluster; default: start a local one)")
    p.add_argument("--num-cpus", type=positive_int, help="CPUs of a local Ray cluster (default: all)")
