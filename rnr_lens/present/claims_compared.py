"""Claims read together, as Markdown: two models side by side, and one grid before and after
(earlier rules, a re-grade, a re-run).

Each table and sentence is rendered from :class:`~rnr_lens.judge.claims.Claims` records (and, where
named, the JSON lines of a training history or a re-grade) in the vocabulary of
:mod:`rnr_lens.present.claims_markdown`; nothing is recomputed. Two reports compare verdict by verdict
in the report's order, and refuse (``ValueError``) where they hold other verdicts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from math import isclose
from typing import Any

from rnr_lens.core.stats import Estimate
from rnr_lens.judge.claims import Claims
from rnr_lens.judge.verdicts import Verdict, counts
from rnr_lens.measure.probe_specs import budget_label
from rnr_lens.present.claims_markdown import chance_note, counted, estimate, listed, measured, status, table, task_name


def _cells(deep: Claims | None, trained: Claims | None) -> dict[tuple[str, str], tuple[str, str]]:
    """One model's cells of the side-by-side table, keyed by (claim row, task): each verdict's
    status, and its cell (the verdict with its estimate, interval and null)."""
    cells: dict[tuple[str, str], tuple[str, str]] = {}
    for c in deep.routes_vs_search if deep else ():
        task = task_name(c.setting)
        cells[("1, random routes vs search: random − search", task)] = (
            c.verdict.status,
            f"{status(c.verdict)} {estimate(c.random_minus_search)}; random reach {estimate(c.reachable_random)}, chance {c.chance_random.value:.2f}",
        )
        blind = {s: e for s, e in (c.retention.get(c.random) or {}).items() if e is not None}
        kept = max(blind.items(), key=lambda se: se[1].value, default=None)
        cells[("1, answer-blind selectors keep the gain: the most kept", task)] = (
            c.retention_verdict.status,
            status(c.retention_verdict) + (f" {kept[0]} {estimate(kept[1])}" if kept else ""),
        )
    for b in deep.bottleneck if deep else ():
        held = (
            f" MLP {b.bottleneck.layer} held-out repair {estimate(measured(b.bottleneck.repair_heldout))}"
            if b.bottleneck
            else f" {b.failures} failures"
        )
        null = f"; null (3 random blocks) {estimate(b.null.random_block)}" if b.null else ""
        chance = "" if b.chance is None else f"; failure set {b.chance.failures} against {b.chance.expected:.1f} by chance"
        cells[("2, one MLP repairs most failures", task_name(b.setting))] = (b.verdict.status, f"{status(b.verdict)}{held}{null}{chance}")
    pairs = trained.training[: len(trained.grid.get("tasks") or ())] if trained else ()  # the first pair: seed 0
    for t in pairs:
        for p in t.probes:
            chance = (
                ""
                if p.above_chance_base.is_empty
                else f"; reach above chance: base {estimate(p.above_chance_base)}, trained {estimate(p.above_chance_trained)}"
            )
            cells[(f"3, training at `{budget_label(p.probe)}`: Δ realized; Δ reachable", task_name(t.task))] = (
                p.verdict.status,
                f"{status(p.verdict)} {estimate(p.delta_realized)}; {estimate(p.delta_reachable)}{chance}",
            )
    return cells


def side_by_side(columns: dict[str, tuple[Claims | None, Claims | None]]) -> str:
    """Issue 56's table: rows are claim × task, one column per model with each verdict, its
    estimate and interval, and the null beside each effect; "not run" where a model's grid has
    no such setting yet."""
    cells = {model: _cells(deep, trained) for model, (deep, trained) in columns.items()}
    keys = list(dict.fromkeys(key for by in cells.values() for key in by))
    claims_, tasks_ = list(dict.fromkeys(k[0] for k in keys)), list(dict.fromkeys(k[1] for k in keys))
    rows = sorted(keys, key=lambda key: (claims_.index(key[0]), tasks_.index(key[1])))  # claim by claim, tasks in grid order
    return table(
        ["claim", "task", *columns],
        [[claim, f"`{task}`", *(by[(claim, task)][1] if (claim, task) in by else "not run" for by in cells.values())] for claim, task in rows],
    )


def _setting_status(rows: Sequence[str]) -> str:
    """One model's status on one setting (a claim on a task) from its rows' statuses: the
    decided ones (support, against) where any row is decided, ``uninformative`` where every row
    is (the precondition is absent), else ``unresolved``."""
    decided = sorted({r for r in rows if r in ("support", "against")})
    if decided:
        return " and ".join(decided)
    return "uninformative" if all(r == "uninformative" for r in rows) else "unresolved"


def side_by_side_reading(columns: dict[str, tuple[Claims | None, Claims | None]]) -> str:
    """Where the two models' verdicts agree and where they differ, **setting by setting** (a
    claim on a task: claim 1's two rows share one audit, claim 3's rows of a task share one
    realized-accuracy gate, so each counts once), separating *uninformative* (the precondition
    absent: the model cannot speak to the claim there) from *unresolved*."""
    (first, a), (second, b) = ((m, _cells(*grids)) for m, grids in columns.items())

    def settings(cells: dict[tuple[str, str], tuple[str, str]]) -> dict[tuple[str, str], str]:
        grouped: dict[tuple[str, str], list[str]] = {}
        for (row, task), (verdict, _) in cells.items():
            grouped.setdefault((row.split(",", 1)[0], task), []).append(verdict)
        return {key: _setting_status(rows) for key, rows in grouped.items()}

    by = {first: settings(a), second: settings(b)}
    both = [key for key in dict.fromkeys([*by[first], *by[second]]) if key in by[first] and key in by[second]]

    def named(keys: list[tuple[str, str]]) -> str:
        return listed([f"claim {claim} on `{task}`" for claim, task in keys])

    def of(keys: list[tuple[str, str]]) -> str:
        return f" ({named(keys)})" if keys else ""

    undecided = ("uninformative", "unresolved")
    x, y = by[first], by[second]
    same = [k for k in both if x[k] == y[k] and x[k] not in undecided]
    opposite = [k for k in both if x[k] not in undecided and y[k] not in undecided and x[k] != y[k]]
    one = [k for k in both if (x[k] in undecided) != (y[k] in undecided)]
    mute = [k for k in both if x[k] == y[k] == "uninformative"]
    open_ = [k for k in both if x[k] in undecided and y[k] in undecided and k not in mute]
    said = [
        f"of {counted(len(both), 'setting')} (a claim on a task) run on both models, {len(same)} {'is' if len(same) == 1 else 'are'} decided "
        f"the same way on both{of(same)}",
        f"{len(opposite)} opposite ways{of(opposite)}",
        f"{len(one)} on one model only" + (" (" + "; ".join(f"{named([k])}: {first} {x[k]}, {second} {y[k]}" for k in one) + ")" if one else ""),
        f"{len(mute)} {'is' if len(mute) == 1 else 'are'} uninformative on both (the precondition absent){of(mute)}",
        f"{len(open_)} undecided on both, unresolved on at least one{of(open_)}",
    ]
    cannot = []
    for model, verdicts in by.items():
        silent = [k for k in verdicts if verdicts[k] == "uninformative"]
        if silent:
            cannot.append(f"{model} cannot speak to {named(silent)}: every verdict there is uninformative (each reason names why)")
    missing = [m for m, cells in ((first, a), (second, b)) if len(cells) < len(dict.fromkeys([*a, *b]))]
    tail = f"; {listed(missing)} {'has' if len(missing) == 1 else 'have'} settings not run yet" if missing else ""
    return "Side by side, " + "; ".join(said) + tail + ". " + ". ".join(cannot) + ("." if cannot else "")


def preconditions_table(columns: Mapping[str, tuple[Claims | None, Claims | None]], histories: Mapping[str, Sequence[Mapping[str, Any]]]) -> str:
    """What each model must show before it can speak to a claim, task by task: its realized
    rate (claim 3 needs a rise from it), its failure set against the size chance gives (claim
    2), its base model's reach at the ceiling's budget against its chance level (claim 3 at large
    k), and, beneath, how many groups its training kept (``histories``: each model's first
    training run's history, ``history.jsonl``'s lines)."""
    cells: dict[str, dict[str, str]] = {}
    for model, (deep, trained) in columns.items():
        for c in deep.routes_vs_search if deep else ():
            cells.setdefault(task_name(c.setting), {})[f"{model}: realized"] = estimate(c.realized)
        for b in deep.bottleneck if deep else ():
            set_ = "–" if b.chance is None else f"{b.chance.failures} against {b.chance.expected:.1f} by chance, {b.chance.estimate.p_text()}"
            cells.setdefault(task_name(b.setting), {})[f"{model}: failure set"] = set_
        ceilings = trained.ceiling[: len(trained.grid.get("tasks") or ())] if trained else ()  # the first pair: seed 0
        for ceiling in ceilings:
            top = ceiling.at(ceiling.budget)
            cells.setdefault(task_name(ceiling.task), {})[f"{model}: base pass@K (chance)"] = (
                f"K = {ceiling.budget}: {estimate(top.base)}{chance_note(top.base_chance)}"
            )
    heads = [f"{m}: {what}" for m in columns for what in ("realized", "failure set", "base pass@K (chance)")]
    shown = table(["task", *heads], [[f"`{task}`", *(row.get(h, "–") for h in heads)] for task, row in cells.items()])
    kept = []
    for model, steps in histories.items():
        got, sampled = sum(s["groups_kept"] for s in steps), sum(s["groups_sampled"] for s in steps)
        kept.append(f"{model}'s DAPO run kept {got} of the {sampled:,} groups it sampled ({got / sampled:.1%})")
    return shown + ("\n\n" + "; ".join(kept) + "." if kept else "")


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
            numbers[f"block {b.layer} discovery"] = b.repair_discovery.value
            numbers[f"block {b.layer} held-out"] = measured(b.repair_heldout)
    if c.null is not None:
        numbers[f"null over {c.null.blocks}"] = c.null.random_block
        numbers["unablated re-run"] = c.null.rerun
    return sizes, numbers


def changes_table(old: Claims, new: Claims) -> str:
    """Every verdict that differs between two reports of one grid (``old``, e.g. under earlier
    rules, and ``new``), per claim and setting, and whether the numbers the verdict reads are the
    same in both (then the rules changed it, not the data)."""

    def same(a: Sequence[Estimate | float | None], b: Sequence[Estimate | float | None]) -> bool:
        def v(e: Estimate | float | None) -> float | None:
            if isinstance(e, float):
                return e
            return None if e is None or e.is_empty else e.value

        def alike(x: float | None, y: float | None) -> bool:
            return x is None and y is None or x is not None and y is not None and isclose(x, y, abs_tol=1e-9)

        return all(alike(v(x), v(y)) for x, y in zip(a, b))

    rows: list[list[str]] = []
    before = {(c.setting.model, c.setting.task): c for c in old.routes_vs_search}
    for c in new.routes_vs_search:
        o = before.get((c.setting.model, c.setting.task))
        if o is not None and o.verdict.status != c.verdict.status:
            read = ("realized", "reachable_random", "reachable_search", "chance_random", "chance_search")
            data = same([getattr(o, k) for k in read], [getattr(c, k) for k in read])
            rows.append(["1", c.setting.model, task_name(c.setting), o.verdict.status, c.verdict.status, "same" if data else "changed"])
    before2 = {(b.setting.model, b.setting.task): b for b in old.bottleneck}
    for b in new.bottleneck:
        o2 = before2.get((b.setting.model, b.setting.task))
        if o2 is not None and o2.verdict.status != b.verdict.status:
            (sizes_o, numbers_o), (sizes_c, numbers_c) = _claim2_numbers(o2), _claim2_numbers(b)
            shared = [k for k in numbers_c if k in numbers_o]
            data = sizes_o == sizes_c and same([numbers_o[k] for k in shared], [numbers_c[k] for k in shared])
            said = ("same" if data else "changed") if shared else f"sizes {'same' if sizes_o == sizes_c else 'changed'}; no block in both"
            rows.append(["2", b.setting.model, task_name(b.setting), o2.verdict.status, b.verdict.status, said])

    # a run is named as the report names it (its position among runs of one trained model), so
    # several seeds of one checkpoint name are paired run by run, not collapsed onto the last
    def runs(claims: Claims) -> list[tuple[tuple[str, str, int], Any]]:
        """Each pair's claim keyed by its trained model, task and place among that model's runs
        of the task (seeds share a checkpoint name: paired run by run, never collapsed)."""
        seen: dict[tuple[str, str], int] = {}
        keyed = []
        for t in claims.training:
            place = seen[(t.trained, t.task)] = seen.get((t.trained, t.task), -1) + 1
            keyed.append(((t.trained, t.task, place), t))
        return keyed

    before3 = {(*key, budget_label(p.probe)): p for key, t in runs(old) for p in t.probes}
    for (key, t), run in zip(runs(new), new.run_labels(new.training)):
        for p in t.probes:
            o3 = before3.get((*key, budget_label(p.probe)))
            if o3 is not None and o3.verdict.status != p.verdict.status:
                data = same((o3.delta_realized, o3.delta_reachable), (p.delta_realized, p.delta_reachable))
                rows.append(
                    [
                        "3",
                        f"{run} ({budget_label(p.probe)})",
                        task_name(t.task),
                        o3.verdict.status,
                        p.verdict.status,
                        "same" if data else "changed",
                    ]
                )
    return table(["claim", "model", "task", "before", "now", "the numbers it reads"], rows)


def regrading_table(grids: Mapping[str, tuple[Sequence[Mapping[str, Any]], set[str]]]) -> str:
    """What re-grading each committed grid under today's reader moved: per grid (its name, the
    audits of its ``regrading.json`` and the audit ids its evidence cites), the tries read
    again, the readings and correctness flags that changed and the mined stages dropped (and
    mined again); then every audit whose correctness moved."""
    rows: list[list[str]] = []
    moved: list[list[str]] = []
    for grid, (audits, cited) in grids.items():
        dropped = [a for a in audits if a["mined"] == "dropped"]
        rows.append(
            [
                f"`{grid}`",
                f"{sum(a['tries'] for a in audits):,}",
                f"{sum(a['readings_changed'] for a in audits):,}",
                f"{sum(a['correct_changed'] for a in audits):,}",
                ", ".join(f"{a['model']} `{task_name(a['task'])}`" for a in dropped) or "none",
            ]
        )
        moved += [
            [
                f"`{grid}`",
                a["model"],
                f"`{task_name(a['task'])}`",
                f"`{a['new_id']}`",
                f"{a['tries']:,}",
                str(a["correct_changed"]),
                (a["reason"] or "–") + ("" if a["new_id"] in cited else " (since replaced: its setting was run again)"),
            ]
            for a in audits
            if a["correct_changed"] or a["mined"] == "dropped"
        ]
    head = table(["grid", "tries read again", "readings changed", "correctness changed", "mined stages mined again"], rows)
    return (
        head + "\n\n" + table(["grid", "model", "task", "audit", "tries", "whose correctness changed", "why its mined stage was mined again"], moved)
    )


def rerun_table(old: Claims, new: Claims, model: str) -> str:
    """One model's settings before and after a re-run of them in one grid (issue 55: Gemma's rows
    re-run under its few-shot default), on the same questions: realized and claim 1's verdict,
    the failure set and claim 2's verdict, each side by side."""
    if old.rules != new.rules or [c.setting.task for c in old.routes_vs_search] != [c.setting.task for c in new.routes_vs_search]:
        raise ValueError("a re-run compares the same grid under the same verdict rules: these two claims differ in rules or tasks")
    before1 = {c.setting.task: c for c in old.routes_vs_search if c.setting.model == model}
    before2 = {c.setting.task: c for c in old.bottleneck if c.setting.model == model}
    now2 = {c.setting.task: c for c in new.bottleneck if c.setting.model == model}
    rows = []
    for c in (c for c in new.routes_vs_search if c.setting.model == model):
        o, o2, c2 = before1[c.setting.task], before2.get(c.setting.task), now2.get(c.setting.task)
        rows.append(
            [
                task_name(c.setting),
                estimate(o.realized),
                estimate(c.realized),
                f"{o.verdict.status} → {c.verdict.status}",
                f"{o2.failures if o2 else '–'} → {c2.failures if c2 else '–'}",
                f"{o2.verdict.status if o2 else '–'} → {c2.verdict.status if c2 else '–'}",
            ]
        )
    return table(["task", "realized before", "realized now", "claim 1", "failure set", "claim 2"], rows)


def _verdicts(claims: Claims) -> list[tuple[str, str]]:
    """Every verdict of a report in its order, named by claim, setting and probe."""
    out = [(f"claim 1, {c.setting.model} `{task_name(c.setting)}`", c.verdict.status) for c in claims.routes_vs_search]
    out += [(f"claim 2, {c.setting.model} `{task_name(c.setting)}`", c.verdict.status) for c in claims.bottleneck]
    out += [
        (f"claim 3, {run} `{task_name(t.task)}` {budget_label(p.probe)}", p.verdict.status)
        for t, run in zip(claims.training, claims.run_labels(claims.training))
        for p in t.probes
    ]
    out += [(f"claim 3 at k = {k}, `{task_name(c.task)}`", v.verdict.status) for c in claims.ceiling for k, v in c.verdicts]
    return out


def regrade_verdicts(before: dict[str, Claims], after: dict[str, Claims]) -> str:
    """How many verdicts re-grading moved, grid by grid (each grid's claims before and after,
    compared verdict by verdict in the report's order), naming each that moved."""
    return (
        "Re-grading under config version 4 moved "
        + ", ".join(_moved(grid, before[grid], new, "re-graded") for grid, new in after.items())
        + " verdicts."
    )


def _moved(grid: str, before: Claims, after: Claims, how: str) -> str:
    """One grid's verdicts that moved between two reports of it, compared verdict by verdict in
    the report's order: "`grid` 2 of 44 (name (a → b); ...)" (``how`` names the later report
    in the refusal where the two hold other verdicts)."""
    old_v, new_v = _verdicts(before), _verdicts(after)
    if [name for name, _ in old_v] != [name for name, _ in new_v]:
        raise ValueError(f"{grid}: the {how} claims hold other verdicts than the earlier ones")
    moved = [f"{name} ({a} → {b})" for (name, a), (_, b) in zip(old_v, new_v) if a != b]
    return f"`{grid}` {len(moved)} of {len(new_v)}" + (f" ({'; '.join(moved)})" if moved else "")


def rules_3_moved(before: dict[str, Claims], after: dict[str, Claims]) -> str:
    """What verdict rules version 3 moved, grid by grid (each grid's rules-2 claims against its
    re-derived ones, verdict by verdict), naming each verdict that moved, and how many printed
    estimates carry an exact test that disagrees with their interval's (flagged on the page)."""
    said, flagged, total = [], 0, 0
    for grid, new in after.items():
        said.append(_moved(grid, before[grid], new, "re-derived"))
        estimates = list(_estimates(new.to_dict()))
        total += len(estimates)
        flagged += sum(Estimate.from_dict(e).tests_disagree for e in estimates)
    return (
        "Verdict rules version 3 moved " + ", ".join(said) + " verdicts. "
        f"Of the {total} estimates in these files, {flagged} carry an exact test that disagrees with their interval's own test "
        "(each flagged where it is printed, and none resolved)."
    )


def _estimates(d: Any) -> Any:
    """Every estimate (a JSON record with ``value``, ``low``, ``high`` and ``method``) a claims
    record holds; a verdict's reason (the estimates its rule read, mostly ones its claim holds
    too) is not counted, so the tally is the records' own, as before verdicts were stored as
    decisions."""
    if isinstance(d, dict):
        if {"value", "low", "high", "method"} <= d.keys():
            yield d
            return
        for k, v in d.items():
            if k != "reason":
                yield from _estimates(v)
    elif isinstance(d, list):
        for v in d:
            yield from _estimates(v)


def _tally(verdicts: Sequence[Verdict]) -> str:
    """One claim's verdicts over a grid in a cell: each status's count of the whole, the
    undecided ones too (``support 1, uninformative 2 of 3``); ``not evaluated`` where none."""
    if not verdicts:
        return "not evaluated"
    by = counts(verdicts)
    return ", ".join(f"{status} {n}" for status, n in by.items() if n) + f" of {len(verdicts)}"


def grids_table(grids: Mapping[str, Claims]) -> str:
    """Every grid in one table, a row each: its models, its tasks, and per claim how many of
    its verdicts have each status (claims 1 and 2 per setting, claim 3 per comparison of a
    trained pair at each probe, and at the ceiling's budget per pair and task: the README's
    summary; each grid's findings are on the results page)."""
    rows = []
    for name, claims in grids.items():
        models = list(dict.fromkeys(c.setting.model for c in claims.routes_vs_search))
        tasks = list(dict.fromkeys(task_name(c.setting) for c in claims.routes_vs_search))
        rows.append(
            [
                f"`{name}`",
                ", ".join(models),
                f"{len(tasks)}: " + ", ".join(f"`{t}`" for t in tasks),
                _tally([c.verdict for c in claims.routes_vs_search]),
                _tally([c.verdict for c in claims.bottleneck]),
                _tally([p.verdict for c in claims.training for p in c.probes]),
                _tally([c.verdict(c.budget).verdict for c in claims.ceiling]),
            ]
        )
    heads = ["grid", "models", "tasks", "claim 1 (settings)", "claim 2 (settings)", "claim 3 (comparisons)", "claim 3 at the ceiling's k"]
    return table(heads, rows)
