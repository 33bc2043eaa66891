"""``rnr-lens report``: the three claims over a grid (or re-derived from a report's evidence without a model)."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from rnr_lens.cli.shell import add_executor_args, add_task_trust_arg, check_executor_args, positive_int
from rnr_lens.errors import RnrLensError

if TYPE_CHECKING:
    from rnr_lens.grids.reports import Report
    from rnr_lens.questions.deploy import DeploymentConfig
    from rnr_lens.questions.tasks import Task

NAME = "report"
HELP = "the three claims over a grid of models and tasks: claims.json and report.html"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("grid", nargs="?", help="grid file (YAML): models, tasks, n, k, pairs; see assets/grid.yaml")
    p.add_argument("--out", help="folder for runs.db, claims.json, report.html and evidence.json.gz (rerun to resume)")
    p.add_argument(
        "--from-evidence",
        metavar="FILE",
        help="alone: re-derive claims.json and report.html from a report's evidence.json.gz, with no model; "
        "with a grid: rebuild the store from it and continue the grid (a new machine resumes a run)",
    )
    p.add_argument(
        "--regrade",
        nargs="?",
        const="default",
        metavar="CONFIG",
        help="with --from-evidence alone: read every try again under CONFIG (a deployment config file that differs from the run's only "
        "in its reader; no value: each task's default today), with no model; regrading.json says what moved and which mined stages "
        "must be mined again",
    )
    p.add_argument(
        "--verify",
        type=positive_int,
        metavar="N",
        help="with --from-evidence alone, no --out: a referee's spot-check: draw N tries at random, load the audited weights "
        "(--model where the evidence names none loadable by name), check their fingerprint, generate the tries again and say how "
        "many texts and answers agree (exit 1 where a text differs); writes nothing",
    )
    p.add_argument("--verify-seed", type=int, default=0, metavar="S", help="seeds --verify's draw (default 0; stated in its output)")
    p.add_argument("--model", help="with --verify: the audited weights (a known name, folder or .gguf file)")
    p.add_argument(
        "--task",
        action="append",
        metavar="SPEC",
        help="with --from-evidence alone: a harness's task (lm-eval:NAME or lm-eval:PATH.yaml, the latter with --trust-task-code) "
        "to read its audits' tries again with (and, with --verify, to generate them); without it they are named as not read again "
        "(repeat for several tasks)",
    )
    p.add_argument(
        "--mine-again",
        action="store_true",
        help="alone with --out: mine the settings of that report folder that were audited but not mined (a re-grade's dropped stages), "
        "loading only their models and reusing every kept evaluation",
    )
    p.add_argument(
        "--keep-absent",
        action="store_true",
        help="with a grid: a model whose weights are not here (a trained checkpoint made elsewhere) keeps its settings as the "
        "store or --from-evidence records them, where every one is finished; it is neither loaded nor audited again",
    )
    p.add_argument("--batch-size", type=positive_int)
    add_task_trust_arg(p)
    add_executor_args(p, audits="every audit's shards")
    p.add_argument(
        "--profile",
        action="store_true",
        help="print where this run's time went (prefill, decode, teacher-forced scoring, store, the rest) and write profile.json; "
        "written after every stage; a resumed run continues it (wall time summed over the runs); Ray workers' audits are not seen",
    )
    p.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:

    from rnr_lens.core.phases import profiling
    from rnr_lens.grids.grid import Grid
    from rnr_lens.grids.reports import mine_again, profile_file, rederive, report

    if args.verify is not None or args.model is not None:
        return _verify(args)
    if args.out is None:
        raise RnrLensError("give --out FOLDER: where the report writes runs.db, claims.json, report.html and evidence.json.gz")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise RnrLensError(f"--out {out} is a file; the report writes a folder (runs.db, claims.json, report.html, evidence.json.gz)")
    if args.mine_again:
        if args.grid is not None or args.from_evidence is not None or args.regrade is not None or args.keep_absent or args.task:
            raise RnrLensError(
                "--mine-again continues the report folder --out names: give no grid, --from-evidence, --regrade, --task or --keep-absent"
            )
        return _print_report(mine_again(out, progress=not args.json), args, rederived=False)
    if args.grid is None and args.from_evidence is None:
        raise RnrLensError("give a grid file to run, or --from-evidence FILE to re-derive a report without a model")
    if args.grid is None:
        if args.shards is not None or args.executor or args.profile or args.keep_absent:
            raise RnrLensError(
                "--from-evidence alone runs no model, so it takes no --executor, --shards, --profile or --keep-absent; give the grid too to resume"
            )
        result = rederive(args.from_evidence, out, regrade=_regrade_to(args.regrade), harness_tasks=_harness_tasks(args))
        return _print_report(result, args, rederived=True)
    if args.task:
        raise RnrLensError("--task names a harness's task to read a report's evidence again with: give --from-evidence FILE and no grid")
    if args.regrade is not None:
        raise RnrLensError("--regrade re-reads a report's evidence without a model: give --from-evidence FILE and no grid")
    grid = Grid.load(args.grid)
    check_executor_args(args)
    saved = profile_file(out) if args.profile else out / "profile.json"
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
            trust_code=args.trust_task_code,
            keep_absent=args.keep_absent,
        )
    if profile is not None and not args.json:
        print(profile.text() + f"\nprofile: {saved}\n")
    return _print_report(result, args, rederived=False)


def _verify(args: argparse.Namespace) -> int:
    """``--verify N``: a sample of the evidence's tries generated again (:mod:`rnr_lens.grids.spot_check`)."""
    from rnr_lens.grids.spot_check import verify

    if args.verify is None:
        raise RnrLensError("--model names the weights --verify loads: give --verify N too")
    if args.from_evidence is None or args.grid is not None or args.out is not None or args.regrade is not None or args.mine_again:
        raise RnrLensError(
            "--verify N spot-checks a report's evidence and writes nothing: give --from-evidence FILE and no grid, --out, --regrade or --mine-again"
        )
    checked = verify(
        args.from_evidence, args.verify, seed=args.verify_seed, model=args.model, harness_tasks=_harness_tasks(args), progress=not args.json
    )
    if args.json:
        print(
            json.dumps(
                {"seed": checked.seed, "drawn": len(checked.drawn), "texts_agree": checked.texts_agree, "answers_agree": checked.answers_agree}
            )
        )
    else:
        print(checked.summary())
    return 0 if checked.texts_agree == len(checked.drawn) else 1


def _harness_tasks(args: argparse.Namespace) -> tuple[Task, ...]:
    """``--task``'s harness tasks, loaded as the user named them (never a path the evidence names)."""
    from rnr_lens.questions import tasks

    named = []
    for spec in args.task or ():
        if not tasks.lm_eval.is_spec(spec):
            raise RnrLensError(f"--task {spec} is not a harness's task; name one as lm-eval:NAME or lm-eval:PATH.yaml")
        named.append(tasks.get(spec, trust_code=args.trust_task_code))
    return tuple(named)


def _regrade_to(spec: str | None) -> bool | DeploymentConfig:
    """``--regrade``'s value: no re-grade, each task's default (``default``), or a config file."""
    from rnr_lens.questions.deploy import DeploymentConfig

    if spec is None:
        return False
    return True if spec == "default" else DeploymentConfig.load(spec)


def _print_report(result: Report, args: argparse.Namespace, *, rederived: bool) -> int:
    from rnr_lens.core.provenance import code_differences

    if rederived:  # said on stderr under --json, which keeps stdout for the claims
        recorded = result.claims.provenance
        differs = code_differences(recorded) if recorded is not None else ["the evidence records no provenance"]
        said = "re-derived without a model; " + (
            "the code is the code that ran" if not differs else "the code differs from the run's: " + "; ".join(differs)
        )
        print(said, file=sys.stderr if args.json else sys.stdout)
        for line in result.regrading.lines() if result.regrading is not None else ():
            print(f"re-graded: {line}", file=sys.stderr if args.json else sys.stdout)
        if result.unread:
            print(
                f"not read again: {len(result.unread)} audit(s) graded by a harness's filter ({', '.join(a[:12] for a in result.unread)}), "
                "which needs the task: their correctness flags are as the evidence records them (name the task with --task to read them "
                "again, or spot-check with --verify N)",
                file=sys.stderr if args.json else sys.stdout,
            )
    if args.json:
        print(json.dumps(result.claims.to_dict(), indent=2, default=str))
        return 0
    for line in result.claims.summary.values():
        print(line)
    print(f"claims: {result.files['claims']}\nreport: {result.files['html']}\nevidence: {result.files['evidence']}\nstore:  {result.store}")
    return 0
