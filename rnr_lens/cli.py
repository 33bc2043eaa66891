"""The ``rnr-lens`` command line.

Every subcommand is a thin layer over the library: parse arguments, call one function, print
a table (or JSON with ``--json``). Bad input prints ``error: <one line>`` and exits with 2.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import shlex
import signal
import sys
import textwrap
import threading
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NoReturn

from rnr_lens.errors import RnrLensError
from rnr_lens.files import acquire_writer_lock, refusal, release_all

if TYPE_CHECKING:  # the CLI imports the library lazily, so that --help answers at once
    from pathlib import Path

    from rnr_lens.audits import AuditPlan
    from rnr_lens.deploy import DeploymentConfig
    from rnr_lens.reports import Report
    from rnr_lens.results import AuditResult
    from rnr_lens.stats import Estimate
    from rnr_lens.store import RunStore
    from rnr_lens.tasks.core import Task

COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {}


def command(name: str) -> Callable[[Callable[[argparse.Namespace], int]], Callable[[argparse.Namespace], int]]:
    def register(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
        COMMANDS[name] = fn
        return fn

    return register


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
    return "" if value is None else str(value)


@command("models")
def cmd_models(args: argparse.Namespace) -> int:
    from rnr_lens.model_cache import list_models

    rows = list_models()
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print_table(rows, ["name", "cached", "description", "path"])
    return 0


def _load_task(args: argparse.Namespace) -> Task:
    from rnr_lens import tasks

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
    task = tasks.get(args.task, **params)
    if args.limit is not None:
        task = task.first(min(args.limit, len(task)))
    return task


def _note_repeats(task: Task) -> None:
    """Say on stderr when a task repeats prompts (the library warns; the CLI says it once, plainly)."""
    note = task.repeated_prompts()
    if note:
        print(f"note: {note}", file=sys.stderr)


def _load_config(args: argparse.Namespace, task: Task) -> DeploymentConfig:
    """--config, else the task's default deployment for the model: raw text where its
    tokenizer has no chat template (read without loading the weights, as the library and Ray
    workers do), the harness's own for an lm-eval task."""
    from rnr_lens.deploy import DeploymentConfig, check_config_fits, deployment_for_task
    from rnr_lens.models import load_tokenizer

    if args.config:
        config = DeploymentConfig.load(args.config)
        check_config_fits(config, task)
        return config
    return deployment_for_task(load_tokenizer(args.model, trust_remote_code=getattr(args, "trust_remote_code", False)), task)


def _existing_store(path: str, hint: str = "", mode: str = "read") -> RunStore:
    """The run store at ``path``, which must exist (``hint`` says how to make one); opened
    read-only unless ``mode`` says otherwise, so a reader never modifies the file."""
    from pathlib import Path

    from rnr_lens.store import RunStore

    if not Path(path).is_file():
        raise RnrLensError(f"run store {path} does not exist{hint}")
    return RunStore(path, mode=mode)


def _load_kwargs(args: argparse.Namespace) -> dict:
    """``load_model`` placement options from --device/--dtype/--device-map/--n-devices."""
    load: dict = {}
    for key in ("device", "dtype", "device_map", "n_devices"):
        value = getattr(args, key, None)
        if value is not None:
            load[key] = value
    if getattr(args, "trust_remote_code", False):
        load["trust_remote_code"] = True
    return load


def _est(e: Estimate | None) -> str:
    """:func:`rnr_lens.display.estimate_text`, imported when first printed (it pulls scipy,
    which ``rnr-lens --help`` should not wait for)."""
    from rnr_lens.display import estimate_text

    return estimate_text(e)


def print_audit(result: AuditResult, header: str, store: str) -> None:
    """An audit as two tables that fit 100 columns (probes by short label, specs listed below);
    a warning line above them where format misses may decide the realized rate."""
    from rnr_lens.display import probe_labels

    summaries = result.probe_summaries()
    labels = probe_labels([s.probe for s in summaries])
    print(header)
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
        print(f"realized (greedy, default deployment): {_est(summaries[0].realized)} over {n} questions")
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
    blind = [{"probe": labels[s.probe], **{name: _est(e) for name, e in s.selectors.items()}} for s in summaries]
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


def _refuse_mismatch(planned: AuditPlan, out: Path) -> None:
    """Stop a --resume whose settings match no audit in ``out``, naming what differs."""
    from rnr_lens.store import RunStore

    mismatch = planned.resume_mismatch(RunStore(out, mode="read"))
    if mismatch:
        raise RnrLensError(mismatch)


@command("audit")
def cmd_audit(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rnr_lens.audits import audit, plan
    from rnr_lens.models import load_model
    from rnr_lens.probes import parse_probe
    from rnr_lens.store import RunStore

    # validate everything cheap before loading a model or touching the store
    probes = [parse_probe(p) for p in args.probe]  # a bad spec is named before the task is read
    task = _load_task(args)
    planned = plan(task, probes, seed=args.seed, shard=args.shard)
    _note_repeats(task)
    out = Path(args.out)
    if not out.parent.exists():
        raise RnrLensError(f"folder {out.parent} does not exist; create it or choose another --out path")
    if args.resume and not out.is_file():
        raise RnrLensError(f"nothing to resume: {out} does not exist; leave out --resume to start an audit")
    if not args.resume and out.exists():
        RunStore(out, mode="read").close()  # refuses a file that is not a run store, untouched
    if args.resume:  # what differs without the model first; the default config needs its tokenizer
        _refuse_mismatch(planned, out)
    planned = planned.with_config(_load_config(args, task))
    if args.resume:
        _refuse_mismatch(planned, out)
    config = planned.deployment
    load = _load_kwargs(args)
    _check_executor_args(args)
    # every cheap check done: one writer per store, and a read-only folder, found before the model
    # loads (released when the command ends)
    acquire_writer_lock(out, f"the run store {out}")
    if args.executor:
        from rnr_lens.executors import run_audit

        result = run_audit(
            args.model,
            task,
            probes,
            config,
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
        )
        model_name = result.info.model
    else:
        model = load_model(args.model, **load)
        model_name = model.name
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r"task .* distinct prompts")  # said once above, as a note
            result = audit(
                model,
                task,
                probes,
                config,
                store=out,
                seed=args.seed,
                batch_size=args.batch_size,
                progress=not args.json,
                resume=args.resume,
                label=args.label,
                shard=args.shard,
                require_existing=args.resume,
            )
    if args.json:
        print(
            json.dumps(
                {
                    "audit": result.id,
                    "store": str(out),
                    "config_hash": result.info.config_hash,
                    "status": result.info.status,
                    "summary": result.summary_records(),
                },
                indent=2,
            )
        )
    else:
        print_audit(
            result,
            f"audit {result.id}  [{result.info.status}]\nmodel {model_name}  task {task.name} ({len(task)} questions)  config {config.hash()}  seed {args.seed}",
            str(out),
        )
        print("\nnext:")
        for what, cmd in next_steps(result, RunStore(out, mode="read"), args):
            print(f"  # {what}\n  {cmd}")
    return 0


def _short_prefix(name: str, names: Sequence[str]) -> str:
    """The shortest comma-cut prefix of ``name`` that no other of ``names`` starts with
    (what ``AuditResult.probe_name`` accepts), e.g. ``sampling:k=2,t=1.0``."""
    parts = name.split(",")
    for i in range(1, len(parts) + 1):
        prefix = ",".join(parts[:i])
        if sum(n.startswith(prefix) for n in names) == 1:
            return prefix
    return name


def next_steps(result: AuditResult, store: RunStore, args: argparse.Namespace) -> list[tuple[str, str]]:
    """What to run after an audit, each command as it runs from here: ``--audit`` where the
    store holds several audits, ``--probe`` where the audit has several, ``--model`` where
    the audit's model name alone would not load it, and ``mine`` only where it has a failure
    set to mine."""
    from pathlib import Path

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
    from rnr_lens.failures import MIN_FAILURES

    gaps = {p: len(result.reachable_not_realized(p)) for p in result.probes}
    wrong = int((result.questions["has_default"] & ~result.questions["realized"]).sum())
    if gaps and max(gaps.values()) >= MIN_FAILURES:
        probe = max(gaps, key=lambda p: gaps[p])
        which = f" --probe {q(_short_prefix(probe, result.probes))}" if len(gaps) > 1 else ""
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


@command("show")
def cmd_show(args: argparse.Namespace) -> int:
    from rnr_lens.results import AuditResult
    from rnr_lens.store import Artifact

    store = _existing_store(args.store, f"; create one with 'rnr-lens audit --out {args.store}'")
    results = [AuditResult.load(store, info.id) for info in store.audits()]
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "id": r.id,
                        "model": r.info.model,
                        "task": r.info.task,
                        "questions": r.info.n_questions,
                        "config_hash": r.info.config_hash,
                        "config": r.config.to_dict(),
                        "rendered_prompt": store.get_artifact(r.id, Artifact.DEPLOYMENT, "rendered"),
                        "seed": r.info.seed,
                        "status": r.info.status,
                        "progress": {p: {"stored": d, "expected": e} for p, (d, e) in r.progress().items()},
                        "summary": r.summary_records(),
                    }
                    for r in results
                ],
                indent=2,
            )
        )
        return 0
    if not results:
        print(f"{args.store} holds no audits")
    for r in results:
        i = r.info
        print()
        print_audit(
            r,
            f"audit {r.id}  [{i.status}]\nmodel {i.model}  task {i.task} ({i.n_questions} questions)  config {i.config_hash}  seed {i.seed}",
            args.store,
        )
        if r.config.chat and r.config.system_prompt is None:
            print("system prompt: null in the config, so the chat template's own default (show --json: rendered_prompt)")
        if args.misses:
            from rnr_lens.display import short_text

            misses = r.format_misses()
            print(f"\nformat misses of the default deployment (extractor {r.config.extractor!r}): {len(misses)}")
            if len(misses):
                print_table(
                    [
                        {"question": m.question_id, "gold": m.gold, "read": m.extracted, "text": short_text(str(m.text), 60)}
                        for m in misses.itertuples()
                    ]
                )
    return 0


@command("export")
def cmd_export(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rnr_lens.results import AuditResult

    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise RnrLensError(f"--out {out} is a file; export writes two files into a folder, so give a folder path")
    result = AuditResult.load(_existing_store(args.store), args.audit)
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".rnr_lens_write_test.{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise RnrLensError(f"cannot write into --out {out} ({exc.strerror or exc}); choose a folder you can write to") from None
    written = []
    for name, frame in (("tries", result.tries), ("questions", result.questions)):
        path = out / f"{result.id}-{name}.{args.format}"
        tmp = path.with_suffix(path.suffix + ".tmp")
        if args.format == "parquet":
            frame.to_parquet(tmp, index=False)
        else:
            frame.to_csv(tmp, index=False)
        tmp.replace(path)
        written.append(str(path))
    print("\n".join(written))
    return 0


@command("check-format")
def cmd_check_format(args: argparse.Namespace) -> int:
    from rnr_lens.display import short_text
    from rnr_lens.formats import check_format
    from rnr_lens.models import load_model

    task = _load_task(args)
    _note_repeats(task)
    config = _load_config(args, task)
    check = check_format(load_model(args.model, **_load_kwargs(args)), task, config, batch_size=args.batch_size)
    if args.json:
        print(json.dumps(check.to_dict(), indent=2))
        return 0
    print(f"model {args.model}  task {task.name} ({check.n} questions)  config {check.config_hash}  extractor {check.extractor!r}")
    print(f"answer extracted: {check.extractable.text()}")
    print(f"correct:          {check.accuracy.text()}")
    for example in check.unextractable_examples:
        print(f"  no answer in: {example!r}")
    if len(check.readings) > 1:
        print(f"\nthe same {check.n} greedy answers read by each extractor ('extractor' in --config chooses one; docs/extractors.md)")
        print_table(
            [{"extractor": r.extractor, "reads": r.read, "correct": r.correct, f"differs from {check.extractor}": r.differs} for r in check.readings]
        )
        for d in check.disagreements:
            readings = ", ".join(f"{r.extractor} {d[r.extractor]}" for r in check.readings)
            print(f"  {short_text(repr(d['text']), 60)}  gold {d['gold']}: {readings}")
    return 0


@command("mine")
def cmd_mine(args: argparse.Namespace) -> int:
    from rnr_lens import failures
    from rnr_lens.miner import mine, null_beside
    from rnr_lens.models import load_model
    from rnr_lens.results import AuditResult

    store = _existing_store(args.store, f"; run 'rnr-lens audit --out {args.store}' first", mode="write")
    result = AuditResult.load(store, args.audit)
    ids = [i for i in (args.ids or "").split(",") if i]
    fs = failures.freeze(
        result, store, selection="ids" if ids else args.failure_set, probe=args.probe, ids=ids or None, name=args.name, seed=args.seed
    )
    if args.shard:
        from rnr_lens.shards import Shard

        Shard.parse(args.shard)
    model = load_model(args.model or result.info.model, **_load_kwargs(args))
    sweep = mine(
        model,
        fs,
        components=args.component or inspect.signature(mine).parameters["components"].default,
        methods=args.method or inspect.signature(mine).parameters["methods"].default,
        strategy=args.strategy,
        top_m=args.top_m,
        break_bound=args.break_bound,
        store=store,
        batch_size=args.batch_size,
        progress=not args.json,
        shard=args.shard,
    )
    null = null_beside(model, fs, sweep, blocks=args.null_blocks, store=store, batch_size=args.batch_size, progress=not args.json)
    verdict = sweep.verdict(null).verdict
    if args.json:
        print(json.dumps({**sweep.to_json(), "null": null.to_dict() if null else None, "verdict": verdict.to_dict()}, indent=2, default=str))
        return 0
    print(fs.describe())
    cols = [
        "layer",
        "component",
        "method",
        "screen_logprob",
        "screen_atp",
        "repair",
        "repair_discovery",
        "repair_heldout",
        "break_discovery",
        "break_heldout",
    ]
    print_table(sweep.table[[c for c in cols if c in sweep.table]].astype(object).where(sweep.table.notna(), None).to_dict("records"))
    b = sweep.bottleneck
    if b is None:
        print(f"no bottleneck: no candidate repairs a failure with break rate <= {args.break_bound}")
    else:
        broke = f"{b.break_rate:.2f}" if b.break_rate is not None else "unmeasured (no realized question to break)"
        print(
            f"bottleneck: {b.ablation}  repair discovery {b.repair_discovery:.2f}, held-out {b.repair_heldout:.2f}, break (discovery controls) {broke}"
        )
        for line in b.why():
            print(f"  {line}")
    if null is not None:
        print(
            f"null: blocks {', '.join(map(str, null.blocks))} silenced repair {null.random_block.text()} of the held-out failures; an unablated re-run {null.rerun.text()}"
        )
    print(f"verdict: {verdict}")
    return 0


@command("merge")
def cmd_merge(args: argparse.Namespace) -> int:
    from rnr_lens.store import merge

    store = merge(args.stores, args.out)
    audits = store.audits()
    if args.json:
        print(json.dumps([{k: getattr(a, k) for k in ("id", "model", "task", "config_hash", "status", "n_questions")} for a in audits], indent=2))
        return 0
    print(f"merged {len(args.stores)} run stores into {args.out}")
    print_table(
        [
            {
                "audit": a.id,
                "model": a.model,
                "task": a.task,
                "config": a.config_hash,
                "status": a.status,
                "tries": sum(store.count_tries(a.id).values()),
            }
            for a in audits
        ]
    )
    return 0


@command("compare")
def cmd_compare(args: argparse.Namespace) -> int:
    from rnr_lens.comparison import compare
    from rnr_lens.results import AuditResult

    store = _existing_store(args.store)
    result = compare(AuditResult.load(store, args.a), AuditResult.load(store, args.b))
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
        return 0
    print(f"b = {result.b.id} ({result.b.info.model})  against  a = {result.a.id} ({result.a.info.model})")
    for probe, left_out in result.excluded.items():
        if left_out:
            print(f"{probe}: {left_out} question(s) not complete in both audits are left out (finish them with --resume)")
    rows = [
        {
            "probe": r["probe"],
            "n": r["n"],
            "realized a": f"{r['realized_a']:.2f}",
            "realized b": f"{r['realized_b']:.2f}",
            "delta realized": _est(r["delta_realized"]),
            "reachable a": f"{r['reachable_a']:.2f}",
            "reachable b": f"{r['reachable_b']:.2f}",
            "delta reachable": _est(r["delta_reachable"]),
        }
        for r in result.deltas.to_dict("records")
    ]
    print_table(rows)
    print("deltas: b - a, paired per question (Tango score interval; resolved where the exact McNemar test agrees at 5%)")
    for probe in result.a.probes:
        print(f"{probe}: {result.verdict(probe).verdict}")
    for probe in result.a.probes:
        print(f"\ntransitions under {probe} (rows: a, columns: b)")
        print(result.transition_counts(probe).to_string())
    return 0


@command("train")
def cmd_train(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rnr_lens import tasks
    from rnr_lens.checkpoints import check_folder
    from rnr_lens.models import load_model
    from rnr_lens.training import TrainConfig, train

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
        task = _load_task(args)
    deployment = _load_config(args, task)
    out = Path(args.out)  # a run folder, made with its parents when training starts (as the README's runs/dapo)
    check_folder(out)  # a file, another folder's content or a damaged run.json, before the model loads
    model = load_model(args.model, **_load_kwargs(args))
    base = model.name
    result = train(model, task, config, deployment, out=out, resume=not args.no_resume, progress=not args.json, batch_size=args.batch_size)
    from rnr_lens.viz import reward_curve, save

    curve = save(reward_curve(result.history), out / "reward_curve.html")
    head, tail = result.history[: min(5, len(result.history))], result.history[-min(5, len(result.history)) :]
    summary = {
        "checkpoint": str(result.checkpoint),
        "model": result.model.name,
        "base_model": base,
        "task": task.name,
        "steps": len(result.history),
        "resumed_from": result.resumed_from,
        "config_hash": deployment.hash(),
        "first_steps_accuracy": sum(r["accuracy"] for r in head) / len(head),
        "last_steps_accuracy": sum(r["accuracy"] for r in tail) / len(tail),
        "reward_curve": str(curve),
        "history": str(out / "history.jsonl"),
    }
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    print(f"trained {base} for {summary['steps']} steps on {task.name} ({len(task)} questions); checkpoint: {result.checkpoint}")
    # what graded the rollouts is part of what was trained: the same command under another default config trains otherwise
    print(f"rewards graded under deployment config {deployment.hash()} (version {deployment.version}, extractor {deployment.extractor!r})")
    print(
        f"training rollouts correct: first {len(head)} steps {summary['first_steps_accuracy']:.2f}, last {len(tail)} steps {summary['last_steps_accuracy']:.2f}"
    )
    print(f"reward curve: {curve}")
    print("audit both under matched conditions, then compare:")
    print(f"  rnr-lens audit --model {args.model} --task {args.task} --probe sampling:k=8,t=0.7 --out pair.db")
    print(f"  rnr-lens audit --model {result.checkpoint} --task {args.task} --probe sampling:k=8,t=0.7 --out pair.db")
    print("  rnr-lens compare pair.db --a <first audit id> --b <second audit id>")
    return 0


@command("report")
def cmd_report(args: argparse.Namespace) -> int:
    import contextlib
    from pathlib import Path

    from rnr_lens.phases import profiling
    from rnr_lens.reports import Grid, rederive, report

    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise RnrLensError(f"--out {out} is a file; the report writes a folder (runs.db, claims.json, report.html, evidence.json.gz)")
    if args.grid is None and args.from_evidence is None:
        raise RnrLensError("give a grid file to run, or --from-evidence FILE to re-derive a report without a model")
    if args.grid is None:
        if args.shards is not None or args.executor or args.profile:
            raise RnrLensError("--from-evidence alone runs no model, so it takes no --executor, --shards or --profile; give the grid too to resume")
        result = rederive(args.from_evidence, out)
        return _print_report(result, args, rederived=True)
    grid = Grid.load(args.grid)
    _check_executor_args(args)
    saved = out / "profile.json"
    if args.profile and saved.exists() and not (out / "runs.db").exists():
        saved.unlink()  # a profile of a run whose store is gone: this run starts afresh
    with profiling(path=saved) if args.profile else contextlib.nullcontext() as profile:
        result = report(
            grid,
            out,
            progress=not args.json,
            batch_size=args.batch_size,
            executor=args.executor or "local",
            shards=args.shards or 1,
            address=args.address,
            num_cpus=args.num_cpus,
            evidence=args.from_evidence,
        )
    if profile is not None and not args.json:
        print(profile.text() + f"\nprofile: {saved}\n")
    return _print_report(result, args, rederived=False)


def _print_report(result: Report, args: argparse.Namespace, *, rederived: bool) -> int:
    from rnr_lens.provenance import code_differences

    if rederived:  # said on stderr under --json, which keeps stdout for the claims
        recorded = result.claims.provenance
        differs = code_differences(recorded) if recorded is not None else ["the evidence records no provenance"]
        said = "re-derived without a model; " + (
            "the code is the code that ran" if not differs else "the code differs from the run's: " + "; ".join(differs)
        )
        print(said, file=sys.stderr if args.json else sys.stdout)
    if args.json:
        print(json.dumps(result.claims.to_dict(), indent=2, default=str))
        return 0
    for line in result.claims.summary.values():
        print(line)
    print(f"claims: {result.files['claims']}\nreport: {result.files['html']}\nevidence: {result.files['evidence']}\nstore:  {result.store}")
    return 0


def _add_task_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--task", default="add-small", help="built-in task name, path to a .jsonl/.json/.csv file, or lm-eval:NAME (an lm-evaluation-harness task)"
    )
    p.add_argument("--n", type=positive_int, help="size of a built-in task")
    p.add_argument("--task-seed", type=seed_int, default=0, help="seed of a built-in task's question draw")
    p.add_argument("--task-format", help="force a file format: gsm8k, svamp, arc, jsonl, csv")
    p.add_argument("--field", action="append", help="field mapping for generic files, e.g. --field answer=label")
    p.add_argument("--limit", type=positive_int, help="only the first N questions (a quick look)")
    p.add_argument("--config", help="deployment config file (.json or .yaml)")
    p.add_argument("--batch-size", type=positive_int, help="rows per forward (default: from free memory)")


def _add_placement_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", help="where to run the model, e.g. cuda or cuda:1 (default: cpu)")
    p.add_argument("--dtype", help="weight dtype: float32 (CPU default), bfloat16 (suits GPUs), float16")
    p.add_argument("--device-map", help="Hugging Face placement over several GPUs, e.g. auto")
    p.add_argument("--n-devices", type=positive_int, help="spread the model over the first N GPUs")
    _add_trust_arg(p)


def _add_trust_arg(p: argparse.ArgumentParser) -> None:
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
    from rnr_lens.audits import MAX_SEED

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"a seed is from 0 to {MAX_SEED}, got {value}")
    return value


class _UsageError(Exception):
    """A command line argparse refused (printed as one ``error:`` line, exit 2)."""


class Parser(argparse.ArgumentParser):
    """argparse, but a refused argument is one line naming the fix, not a usage dump."""

    def error(self, message: str) -> NoReturn:
        raise _UsageError(f"{self.prog}: {message}; see '{self.prog} --help'")


def _check_executor_args(args: argparse.Namespace) -> None:
    """``--shards`` only with ``--executor``, and ``--shard`` (one shard here) not beside it: the
    flags of :func:`_add_executor_args`, checked in this one place for every command that has them."""
    if args.shards is not None and not args.executor:
        here = " (to run one shard here, use --shard i/n)" if hasattr(args, "shard") else ""  # a command with --shard
        raise RnrLensError(f"--shards needs --executor local or --executor ray{here}")
    if args.executor and getattr(args, "shard", None):
        raise RnrLensError("give either --shard (run one shard here) or --executor (run every shard), not both")


def _add_executor_args(p: argparse.ArgumentParser, audits: str = "every shard") -> None:
    from rnr_lens.executors import EXECUTORS

    p.add_argument("--executor", choices=EXECUTORS, help=f"run {audits}: here one after another, or on Ray workers")
    p.add_argument("--shards", type=positive_int, help="number of shards for --executor (default 1)")
    p.add_argument("--address", help="Ray cluster address (auto: the running cluster; default: start a local one)")
    p.add_argument("--num-cpus", type=positive_int, help="CPUs of a local Ray cluster (default: all)")


def build_parser() -> argparse.ArgumentParser:
    # every default and choice comes from the library, so the CLI cannot drift from it
    from rnr_lens.dapo import TRAINABLE, TrainConfig
    from rnr_lens.failures import SELECTIONS
    from rnr_lens.interventions import COMPONENTS, METHODS
    from rnr_lens.miner import NULL_BLOCKS, STRATEGIES, mine
    from rnr_lens.model_cache import DEFAULT_MODEL

    mining = {name: p.default for name, p in inspect.signature(mine).parameters.items()}
    training = TrainConfig()
    parser = Parser(prog="rnr-lens", description="Realized versus reachable: audit a model question by question.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("models", help="list the known offline models and whether each is cached")
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = sub.add_parser("audit", help="realized versus reachable, question by question")
    p.add_argument("--model", default=DEFAULT_MODEL, help="known name, HF id, local folder or .gguf file")
    _add_task_args(p)
    p.add_argument("--probe", action="append", default=[], help="e.g. sampling:k=8,t=0.7  routes:k=8  search:k=8  ablation:component=mlp")
    p.add_argument("--out", default="run.db", help="SQLite run store (created if missing)")
    p.add_argument("--seed", type=seed_int, default=0)
    p.add_argument("--resume", action="store_true", help="continue an unfinished audit with the same settings")
    p.add_argument("--label", help="free-text label stored with the audit")
    p.add_argument("--shard", help="run only shard i/n of the questions (0-based, e.g. 0/4); merge the stores with rnr-lens merge")
    _add_executor_args(p)
    _add_placement_args(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = sub.add_parser("show", help="list every audit in a run store with its summary")
    p.add_argument("store")
    p.add_argument("--misses", action="store_true", help="also list the default deployment's format misses (the gold stated, another number read)")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("export", help="write an audit's tries and questions as parquet or csv")
    p.add_argument("store")
    p.add_argument("--audit", help="audit id (may be left out when the store holds one)")
    p.add_argument("--format", choices=["parquet", "csv"], default="parquet")
    p.add_argument("--out", default=".", help="folder to write into")

    p = sub.add_parser("mine", help="sweep single-block ablations over a frozen failure set; name the bottleneck")
    p.add_argument("store")
    p.add_argument("--audit", help="audit id (may be left out when the store holds one)")
    p.add_argument("--failure-set", default=SELECTIONS[0], choices=[k for k in SELECTIONS if k != "ids"], help="how the failures are chosen")
    p.add_argument("--probe", help="probe for reachable-not-realized (may be left out when the audit has one)")
    p.add_argument("--ids", help="explicit comma-separated question ids instead")
    p.add_argument("--name", default="main", help="name of the frozen failure set")
    p.add_argument("--seed", type=seed_int, default=0, help="seeds the discovery/held-out split")
    p.add_argument("--model", help="the audited model (default: the audit's model name)")
    p.add_argument("--component", action="append", choices=COMPONENTS, help=f"default: {' '.join(mining['components'])}")
    p.add_argument("--method", action="append", choices=METHODS, help=f"ablation method (default: {' '.join(mining['methods'])})")
    p.add_argument("--kind", dest="method", action="append", choices=METHODS, help=argparse.SUPPRESS)  # the old name, still read
    p.add_argument("--strategy", default=mining["strategy"], choices=STRATEGIES)
    p.add_argument("--top-m", type=positive_int, default=mining["top_m"])
    p.add_argument("--break-bound", type=float, default=mining["break_bound"])
    p.add_argument(
        "--null-blocks",
        type=non_negative_int,
        default=NULL_BLOCKS,
        help="blocks drawn at random and silenced for the null beside the bottleneck's held-out repair (0: none)",
    )
    p.add_argument("--batch-size", type=positive_int)
    p.add_argument("--shard", help="generate only for shard i/n of the questions; merge the stores, then mine the merged one")
    _add_placement_args(p)
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("compare", help="matched comparison of two audits: delta realized, delta reachable, transitions")
    p.add_argument("store")
    p.add_argument("--a", required=True, help="the earlier audit (id or prefix)")
    p.add_argument("--b", required=True, help="the later audit (id or prefix)")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("train", help="RL fine-tune with verifiable rewards (DAPO) on a task's training split")
    p.add_argument("--model", default=DEFAULT_MODEL, help="known name, HF id, local folder or .gguf file")
    _add_task_args(p)
    _add_trust_arg(p)
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

    p = sub.add_parser("merge", help="merge run stores (e.g. shards of one audit) into a new one")
    p.add_argument("stores", nargs="+", help="run stores to merge")
    p.add_argument("--out", required=True, help="the new merged run store (must not exist)")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("report", help="the three claims over a grid of models and tasks: claims.json and report.html")
    p.add_argument("grid", nargs="?", help="grid file (YAML): models, tasks, n, k, pairs; see assets/grid.yaml")
    p.add_argument("--out", required=True, help="folder for runs.db, claims.json, report.html and evidence.json.gz (rerun to resume)")
    p.add_argument(
        "--from-evidence",
        metavar="FILE",
        help="alone: re-derive claims.json and report.html from a report's evidence.json.gz, with no model; "
        "with a grid: rebuild the store from it and continue the grid (a new machine resumes a run)",
    )
    p.add_argument("--batch-size", type=positive_int)
    _add_executor_args(p, audits="every audit's shards")
    p.add_argument(
        "--profile",
        action="store_true",
        help="print where this run's time went (prefill, decode, teacher-forced scoring, store, the rest) and write profile.json; "
        "written after every stage; a resumed run continues it (wall time summed over the runs); Ray workers' audits are not seen",
    )
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("check-format", help="share of outputs from which an answer can be extracted")
    p.add_argument("--model", default=DEFAULT_MODEL)
    _add_task_args(p)
    _add_trust_arg(p)
    p.add_argument("--json", action="store_true")
    return parser


class _Terminated(KeyboardInterrupt):
    """SIGTERM (a scheduler's or ``kill``'s stop), handled as Ctrl-C is: what finished is kept."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise _Terminated


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = None
    previous = signal.signal(signal.SIGTERM, _on_sigterm) if threading.current_thread() is threading.main_thread() else None
    try:
        args = parser.parse_args(argv)
        return COMMANDS[args.command](args)
    except (RnrLensError, _UsageError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        # audit resumes only when asked (--resume); train, mine and report resume by themselves
        how = "with --resume" if args is not None and args.command == "audit" else "the same command"
        what = "stopped (SIGTERM)" if isinstance(exc, _Terminated) else "interrupted"
        print(f"{what}; rerun {how} to continue where it stopped", file=sys.stderr)
        return 143 if isinstance(exc, _Terminated) else 130
    except OSError as exc:  # a write the machine refused outside the store (the store says its own)
        error = refusal(exc, exc.filename or getattr(args, "out", None) or os.getcwd())
        if error is None:
            raise
        print(f"error: {error}", file=sys.stderr)
        return 2
    finally:
        release_all()  # the command is over: its stores and folders are free for the next one
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
