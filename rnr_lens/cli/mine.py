"""``rnr-lens mine``: a frozen failure set's single-block ablation sweep, its bottleneck, the null beside it and the verdict."""

from __future__ import annotations

import argparse
import json

from rnr_lens.cli.shell import add_placement_args, existing_store, load_kwargs, non_negative_int, positive_int, print_table, seed_int

NAME = "mine"
HELP = "sweep single-block ablations over a frozen failure set; name the bottleneck"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from rnr_lens.bottleneck.failures import SELECTIONS
    from rnr_lens.core.ablation_methods import COMPONENTS, names
    from rnr_lens.judge.sweeps import NULL_BLOCKS, STRATEGIES, SWEEP_COMPONENTS, SWEEP_METHODS, TOP_M
    from rnr_lens.judge.verdicts import BREAK_BOUND

    p.add_argument("store")
    p.add_argument("--audit", help="audit id (may be left out when the store holds one)")
    p.add_argument("--failure-set", default=SELECTIONS[0], choices=[k for k in SELECTIONS if k != "ids"], help="how the failures are chosen")
    p.add_argument("--probe", help="probe for reachable-not-realized (may be left out when the audit has one)")
    p.add_argument("--ids", help="explicit comma-separated question ids instead")
    p.add_argument("--name", default="main", help="name of the frozen failure set")
    p.add_argument("--seed", type=seed_int, default=0, help="seeds the discovery/held-out split")
    p.add_argument("--model", help="the audited model (default: the audit's model name)")
    p.add_argument("--component", action="append", choices=COMPONENTS, help=f"default: {' '.join(SWEEP_COMPONENTS)}")
    p.add_argument(
        "--method",
        action="append",
        help=f"ablation method, one of {', '.join(names(installed=False))}, or one an installed package registers (default: {' '.join(SWEEP_METHODS)})",
    )
    p.add_argument("--strategy", default=STRATEGIES[0], choices=STRATEGIES)
    p.add_argument("--top-m", type=positive_int, default=TOP_M)
    p.add_argument("--break-bound", type=float, default=BREAK_BOUND)
    p.add_argument(
        "--null-blocks",
        type=non_negative_int,
        default=NULL_BLOCKS,
        help="blocks drawn at random and silenced for the null beside the bottleneck's held-out repair (0: none)",
    )
    p.add_argument("--batch-size", type=positive_int)
    p.add_argument("--shard", help="generate only for shard i/n of the questions; merge the stores, then mine the merged one")
    add_placement_args(p)
    p.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    from rnr_lens.bottleneck import failures
    from rnr_lens.bottleneck.miner import mine, null_beside
    from rnr_lens.core.ablation_methods import ablation_method
    from rnr_lens.core.untrusted import quoted
    from rnr_lens.errors import RnrLensError
    from rnr_lens.judge.sweeps import SWEEP_COMPONENTS, SWEEP_METHODS
    from rnr_lens.measure.results import AuditResult
    from rnr_lens.model.model_cache import KNOWN_MODELS
    from rnr_lens.model.models import load_model

    for method in args.method or ():  # a method that is not registered is named before the store is read
        ablation_method(method)
    store = existing_store(args.store, f"; run 'rnr-lens audit --out {args.store}' first", mode="write")
    result = AuditResult.load(store, args.audit)
    if not args.model and result.info.model not in KNOWN_MODELS:  # issue 73: a name a store holds is data, never fetched or opened
        raise RnrLensError(
            f"audit {result.id[:12]} names the model {quoted(result.info.model)}, which is not one of rnr_lens's offline models; "
            "a model a store names is never loaded or fetched unless you name it: give --model with the audited weights"
        )
    ids = [i for i in (args.ids or "").split(",") if i]
    fs = failures.freeze(
        result, store, selection="ids" if ids else args.failure_set, probe=args.probe, ids=ids or None, name=args.name, seed=args.seed
    )
    if args.shard:
        from rnr_lens.core.shards import Shard

        Shard.parse(args.shard)
    model = load_model(args.model or result.info.model, **load_kwargs(args))
    sweep = mine(
        model,
        fs,
        components=args.component or SWEEP_COMPONENTS,
        methods=args.method or SWEEP_METHODS,
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
        admitting = b.admitted_break
        broke = f"{admitting.value:.2f}" if not admitting.is_empty else "unmeasured (no realized question to break)"
        controls = "discovery controls" if b.admitted_on == "break_discovery" else "every control"
        print(
            f"bottleneck: {b.ablation}  repair discovery {b.rates.repair_discovery.value:.2f}, "
            f"held-out {b.rates.repair_heldout.value:.2f}, break ({controls}) {broke}"
        )
        for line in b.why():
            print(f"  {line}")
    if null is not None:
        print(
            f"null: blocks {', '.join(map(str, null.blocks))} silenced repair {null.random_block.text()} of the held-out failures; an unablated re-run {null.rerun.text()}"
        )
    print(f"verdict: {verdict}")
    return 0
