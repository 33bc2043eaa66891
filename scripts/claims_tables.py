"""Print a report's claims and profile as Markdown tables (the README's grid tables are made
with this).

Reads ``claims.json`` back into its records (:class:`rnr_lens.claims.Claims`) and prints, per
claim, one row per setting: its estimates with their 95% intervals as the report gives them
(``Estimate.text``) and its verdict; with ``--profile``, the run's time per stage
(:class:`rnr_lens.phases.Profile`). Nothing is recomputed here.

    python scripts/claims_tables.py report/claims.json [--model smollm2] [--profile report/profile.json [--stages mine:]]
    python scripts/claims_tables.py report/claims.json --changes-from OLD/claims.json   # the verdicts that changed
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rnr_lens.claims import BlockRates, Claims, Setting  # noqa: E402
from rnr_lens.display import probe_budget_label  # noqa: E402
from rnr_lens.phases import INNER_PHASES, Profile  # noqa: E402
from rnr_lens.stats import Estimate  # noqa: E402


def _e(e: Estimate | None) -> str:
    return "–" if e is None else e.text().replace(",", ", ").replace("-", "−")


def _p(e: Estimate) -> str:
    """An estimate with its exact test's p (a verdict needs the interval and the test to agree)."""
    return _e(e) if e.p is None else f"{_e(e)}, p {e.p:.2g}"


def _task(setting: Setting | str) -> str:
    task = setting.task if isinstance(setting, Setting) else setting
    return Path(task).name


def _table(columns: Sequence[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "| " + " | ".join("---" for _ in columns) + " |"]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def routes_table(claims: Claims, model: str) -> str:
    """Claim 1: realized, each probe's reach beside its chance level, random − search, verdict."""
    rows = [
        [
            _task(c.setting),
            str(c.questions),
            _e(c.realized),
            f"{_e(c.reachable_random)} ({c.chance_random.value:.2f})",
            f"{_e(c.reachable_search)} ({c.chance_search.value:.2f})",
            _p(c.random_minus_search),
            f"**{c.verdict.status}**" + (f" (n≈{c.verdict.n_needed})" if c.verdict.n_needed else ""),
        ]
        for c in claims.routes_vs_search
        if model in c.setting.model
    ]
    cols = ["task", "n", "realized", "random routes (chance)", "search (chance)", "random − search", "verdict"]
    return _table(cols, rows)


def _block(b: BlockRates | None) -> str:
    if b is None:
        return "–"
    return f"MLP {b.layer}: {_e(b.repair_heldout)}, breaks {_e(b.break_rate)}"


def bottleneck_table(claims: Claims, model: str) -> str:
    """Claim 2: the failure set's halves, the bottleneck's held-out repair and break, the null."""
    rows = []
    for c in claims.bottleneck:
        if model not in c.setting.model:
            continue
        halves = f"{c.failures} ({c.mined.discovery}/{c.mined.heldout}; {c.mined.control})" if c.mined else str(c.failures)
        null = f"{_e(c.null.random_block)}; re-run {_e(c.null.rerun)}" if c.null else "–"
        agree = "–"
        if c.screen_vs_exhaustive is not None:
            a = c.screen_vs_exhaustive
            rho = "–" if a.spearman is None else f"{a.spearman:.2f}"
            agree = f"{'same' if a.same_block else f'{a.screen_block} vs {a.exhaustive_block}'}; regret {a.regret:.2f}; ρ {rho}"
        verdict = f"**{c.verdict.status}**" + (f" (n≈{c.verdict.n_needed})" if c.verdict.n_needed else "")
        rows.append([_task(c.setting), halves, _block(c.bottleneck), null, agree, verdict])
    cols = [
        "task",
        "failures (discovery/held-out; controls)",
        "bottleneck: held-out repair, break",
        "null: 3 random blocks",
        "screen vs exhaustive",
        "verdict",
    ]
    return _table(cols, rows)


def training_table(claims: Claims) -> str:
    """Claim 3: per pair and task, Δ realized and each probe's Δ reachable with its verdict; the
    run as :meth:`Claims.run_labels` names it."""
    probes = [p.probe for p in claims.training[0].probes] if claims.training else []
    rows = []
    for c, run in zip(claims.training, claims.run_labels(claims.training)):
        by = {p.probe: p for p in c.probes}
        cells = [f"{_e(by[p].delta_reachable)} **{by[p].verdict.status}**" if p in by else "–" for p in probes]
        rows.append([run, _task(c.task), str(c.probes[0].questions), _p(c.probes[0].delta_realized), *cells])
    return _table(["run", "task", "n", "Δ realized", *(f"Δ reachable, `{probe_budget_label(p)}`" for p in probes)], rows)


def across_runs_table(claims: Claims) -> str:
    """Claim 3 side by side where a base has several trained runs: each run's verdict per task
    and probe, and how many runs share the most common one (:meth:`Claims.across_checkpoints`)."""
    groups = claims.across_checkpoints()
    if not groups:
        return ""
    runs = max(len(g.verdicts) for g in groups)
    rows = [[_task(g.task), f"`{probe_budget_label(g.probe)}`", *g.cells(runs)] for g in groups]
    return _table(["task", "probe", *(f"run {i + 1}" for i in range(runs)), "agreement"], rows)


def ceiling_table(claims: Claims) -> str:
    """Claim 3 at large k: per run and task, pass@k of both models and their difference at each
    named k, claim 3's verdict there, and where the curves cross (:class:`rnr_lens.ceiling.Crossing`)."""
    rows = []
    for c, run in zip(claims.ceiling, claims.run_labels(claims.ceiling)):
        for k, v in c.verdicts:
            p = c.at(k)
            rows.append([run, _task(c.task), str(k), _e(p.base), _e(p.trained), _p(p.difference), f"**{v.verdict.status}**"])
    table = _table(["run", "task", "k", "pass@k base", "pass@k trained", "trained − base", "claim 3 at k"], rows)
    crossings = "\n".join(f"- {run}, {_task(c.task)}: {c.crossing.text()}." for c, run in zip(claims.ceiling, claims.run_labels(claims.ceiling)))
    return f"{table}\n\n{crossings}"


def profile_table(profile: dict[str, Any], stages: str = "") -> str:
    """Where a run's time went, from its ``profile.json``: each stage whose name starts with
    ``stages`` (all by default), slowest first, its seconds and the share of them in each inner
    phase; the whole profile ends with its wall time (summed over the runs it covers)."""
    whole = Profile.from_dict(profile)  # its earlier runs are the runs the file covers
    blank = ["–"] * (len(INNER_PHASES) + 1)
    rows = [
        [r.stage, f"{r.seconds:.1f}", *([f"{share:.0%}" for share in r.shares] if r.shares else blank)]
        for r in whole.rows()
        if r.stage.startswith(stages)
    ]
    if not stages:
        runs = len(whole.earlier)
        rows.append([f"all (wall time{f', {runs} runs' if runs > 1 else ''})", f"{sum(whole.earlier):.1f}", *([""] * len(blank))])
    return _table(["stage", "seconds", *INNER_PHASES, "rest"], rows)


def _claim2_numbers(c: Any) -> tuple[tuple[Any, ...], dict[str, Estimate | float | None]]:
    """What a claim-2 verdict reads from the data, as far as claims.json keeps it: the failure
    set's sizes, and the estimates it holds per block named (its discovery and held-out repair;
    the break rate is left out, its halves differ between rules versions) and per null arm
    (keyed by the blocks the null drew). Which block is picked is the rules' decision, so
    blocks named in only one file are not compared."""
    sizes = (c.failures, c.mined and (c.mined.discovery, c.mined.heldout, c.mined.control))
    numbers: dict[str, Estimate | float | None] = {}
    for b in (c.bottleneck, c.second):
        if b is not None:
            numbers[f"block {b.layer} discovery"] = b.repair_discovery
            numbers[f"block {b.layer} held-out"] = b.repair_heldout
    if c.null is not None:
        numbers[f"null over {c.null.blocks}"] = c.null.random_block
        numbers["unablated re-run"] = c.null.rerun
    return sizes, numbers


def changes_table(old: Claims, new: Claims) -> str:
    """Every verdict that differs between two reports of one grid (``old``, e.g. under earlier
    rules, and ``new``), per claim and setting, and whether the numbers the verdict reads are the
    same in both (then the rules changed it, not the data)."""
    from math import isclose

    def same(a: Sequence[Estimate | float | None], b: Sequence[Estimate | float | None]) -> bool:
        def v(e: Estimate | float | None) -> float | None:
            if isinstance(e, float):
                return e
            return None if e is None or e.is_empty else e.value

        return all(
            (v(x) is None and v(y) is None) or (v(x) is not None and v(y) is not None and isclose(v(x), v(y), abs_tol=1e-9)) for x, y in zip(a, b)
        )

    rows: list[list[str]] = []
    before = {(c.setting.model, c.setting.task): c for c in old.routes_vs_search}
    for c in new.routes_vs_search:
        o = before.get((c.setting.model, c.setting.task))
        if o is not None and o.verdict.status != c.verdict.status:
            read = ("realized", "reachable_random", "reachable_search", "chance_random", "chance_search")
            data = same([getattr(o, k) for k in read], [getattr(c, k) for k in read])
            rows.append(["1", c.setting.model, _task(c.setting), o.verdict.status, c.verdict.status, "same" if data else "changed"])
    before2 = {(c.setting.model, c.setting.task): c for c in old.bottleneck}
    for c in new.bottleneck:
        o = before2.get((c.setting.model, c.setting.task))
        if o is not None and o.verdict.status != c.verdict.status:
            (sizes_o, numbers_o), (sizes_c, numbers_c) = _claim2_numbers(o), _claim2_numbers(c)
            shared = [k for k in numbers_c if k in numbers_o]
            data = sizes_o == sizes_c and same([numbers_o[k] for k in shared], [numbers_c[k] for k in shared])
            rows.append(["2", c.setting.model, _task(c.setting), o.verdict.status, c.verdict.status, "same" if data else "changed"])
    before3 = {(t.trained, t.task, probe_budget_label(p.probe)): p for t in old.training for p in t.probes}
    for t in new.training:
        for p in t.probes:
            o3 = before3.get((t.trained, t.task, probe_budget_label(p.probe)))
            if o3 is not None and o3.verdict.status != p.verdict.status:
                data = same((o3.delta_realized, o3.delta_reachable), (p.delta_realized, p.delta_reachable))
                rows.append(
                    [
                        "3",
                        f"{t.trained} ({probe_budget_label(p.probe)})",
                        _task(t.task),
                        o3.verdict.status,
                        p.verdict.status,
                        "same" if data else "changed",
                    ]
                )
    return _table(["claim", "model", "task", "before", "now", "the numbers it reads"], rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("claims", type=Path)
    parser.add_argument("--model", default="", help="only settings whose model name contains this")
    parser.add_argument("--profile", type=Path, help="the run's profile.json: print its time per stage too")
    parser.add_argument("--stages", default="", help="only the profile's stages whose name starts with this (e.g. mine:)")
    parser.add_argument("--changes-from", type=Path, help="an earlier claims.json of the grid: print only the verdicts that changed since")
    args = parser.parse_args()
    claims = Claims.from_dict(json.loads(args.claims.read_text()))
    if args.changes_from:
        print(changes_table(Claims.from_dict(json.loads(args.changes_from.read_text())), claims))
        return
    print(routes_table(claims, args.model), end="\n\n")
    print(bottleneck_table(claims, args.model), end="\n\n")
    print(training_table(claims), end="\n\n")
    if across := across_runs_table(claims):
        print(across, end="\n\n")
    if claims.ceiling:
        print(ceiling_table(claims), end="\n\n")
    for claim, line in claims.summary.items():
        print(f"- {claim}: {line}")
    if args.profile:
        print("", profile_table(json.loads(args.profile.read_text()), args.stages), sep="\n")


if __name__ == "__main__":
    main()
