"""Print a report's claims and profile as Markdown tables (the README's grid tables are made
with this).

Reads ``claims.json`` back into its records (:class:`rnr_lens.claims.Claims`) and prints, per
claim, one row per setting: its estimates with their 95% intervals as the report gives them
(``Estimate.text``) and its verdict; with ``--profile``, the run's time per stage
(:class:`rnr_lens.phases.Profile`). Nothing is recomputed here.

    python scripts/claims_tables.py report/claims.json [--model smollm2] [--profile report/profile.json [--stages mine:]]
    python scripts/claims_tables.py report/claims.json --changes-from OLD/claims.json   # the verdicts that changed
    python scripts/claims_tables.py --render   # the rendered sentences into README.md and docs/results.md
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rnr_lens.claims import Claims, Setting, judged_break  # noqa: E402
from rnr_lens.phases import INNER_PHASES, Profile  # noqa: E402
from rnr_lens.probe_specs import budget_label  # noqa: E402
from rnr_lens.reuse import REUSES  # noqa: E402
from rnr_lens.stats import Estimate, wilson  # noqa: E402
from rnr_lens.sweeps import BlockRates  # noqa: E402


def _e(e: Estimate | None) -> str:
    return "–" if e is None else e.text().replace(",", ", ").replace("-", "−")


def _number(v: float) -> str:
    """A rate or difference as the tables print one (two decimals, a true minus sign)."""
    return f"{v:.2f}".replace("-", "−")


def _p(e: Estimate) -> str:
    """An estimate with its p: the test its interval inverts, the exact test beside it where one
    stands, flagged where the two disagree (:meth:`~rnr_lens.stats.Estimate.p_text`)."""
    return _e(e) if e.p is None else f"{_e(e)}, {e.p_text()}"


def _task(setting: Setting | str) -> str:
    task = setting.task if isinstance(setting, Setting) else setting
    return Path(task).name


def _table(columns: Sequence[str], rows: list[list[str]]) -> str:
    """A Markdown table; a ``|`` inside a cell is escaped, so it never splits the cell."""

    def cells(row: Sequence[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in row) + " |"

    lines = [cells(columns), "| " + " | ".join("---" for _ in columns) + " |"]
    return "\n".join(lines + [cells(r) for r in rows])


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


def _measured(e: Estimate) -> Estimate | None:
    """An estimate, or None where it is unmeasured (printed "–")."""
    return None if e.is_empty else e


def _block(b: BlockRates | None) -> str:
    if b is None:
        return "–"
    return f"MLP {b.layer}: {_e(_measured(b.repair_heldout))}, breaks {_e(_measured(judged_break(b)))}"


def bottleneck_table(claims: Claims, model: str) -> str:
    """Claim 2: the failure set's halves, the bottleneck's held-out repair and break, the null."""
    rows = []
    for c in claims.bottleneck:
        if model not in c.setting.model:
            continue
        halves = f"{c.failures} ({c.mined.discovery}/{c.mined.heldout}; {c.mined.control})" if c.mined else str(c.failures)
        chance = "–" if c.chance is None else f"{c.chance.expected:.1f} of {c.chance.questions}; {c.chance.estimate.p_text()}"
        null = f"{_e(c.null.random_block)}; re-run {_e(c.null.rerun)}" if c.null else "–"
        agree = "–"
        if c.screen_vs_exhaustive is not None:
            a = c.screen_vs_exhaustive
            rho = "–" if a.spearman is None else f"{a.spearman:.2f}"
            agree = f"{f'same, MLP {a.screen_block}' if a.same_block else f'MLP {a.screen_block} vs {a.exhaustive_block}'}; regret {a.regret:.2f}; ρ {rho}"
        verdict = f"**{c.verdict.status}**" + (f" (n≈{c.verdict.n_needed})" if c.verdict.n_needed else "")
        rows.append([_task(c.setting), halves, chance, _block(c.bottleneck), null, agree, verdict])
    if not rows:
        return ""  # the grid mines no failure set
    cols = [
        "task",
        "failures (discovery/held-out; controls)",
        "expected by chance (of not realized; test of the set's size)",
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
        cells = [
            f"{_e(by[p].delta_reachable)} **{by[p].verdict.status}**" + _above_chance(by[p].above_chance_base, by[p].above_chance_trained)
            if p in by
            else "–"
            for p in probes
        ]
        rows.append([run, _task(c.task), str(c.probes[0].questions), _p(c.probes[0].delta_realized), *cells])
    return _table(["run", "task", "n", "Δ realized", *(f"Δ reachable, `{budget_label(p)}` (each reach above chance)" for p in probes)], rows)


def _above_chance(base: Estimate, trained: Estimate) -> str:
    """Claim 3's precondition in a cell: each model's reach above its chance level ('' where none was measured)."""
    return "" if base.is_empty else f" (above chance: base {_number(base.value)}, trained {_number(trained.value)})"


def across_runs_table(claims: Claims) -> str:
    """Claim 3 side by side where a base has several trained runs: each run's verdict per task
    and probe, and how many runs share the most common one (:meth:`Claims.across_checkpoints`)."""
    groups = claims.across_checkpoints()
    if not groups:
        return ""
    runs = max(len(g.verdicts) for g in groups)
    rows = [[_task(g.task), f"`{budget_label(g.probe)}`", *g.cells(runs)] for g in groups]
    return _table(["task", "probe", *(f"run {i + 1}" for i in range(runs)), "agreement"], rows)


def _chance(e: Estimate) -> str:
    """A chance level in a cell beside the reach it belongs to ('' where none was measured)."""
    return "" if e.is_empty else f" (chance {e.value:.2f})"


def ceiling_table(claims: Claims) -> str:
    """Claim 3 at large k: per run and task, pass@k of both models beside its chance level and
    their difference at each named k, claim 3's verdict there, and where the curves cross
    (:class:`rnr_lens.ceiling.Crossing`) beside what guessing alone gives (chance pass@K and the
    distinct answers per question)."""
    rows = []
    for c, run in zip(claims.ceiling, claims.run_labels(claims.ceiling)):
        for k, v in c.verdicts:
            p = c.at(k)
            rows.append(
                [
                    run,
                    _task(c.task),
                    str(k),
                    _e(p.base) + _chance(p.base_chance),
                    _e(p.trained) + _chance(p.trained_chance),
                    _p(p.difference),
                    f"**{v.verdict.status}**",
                ]
            )
    table = _table(["run", "task", "k", "pass@k base (chance)", "pass@k trained (chance)", "trained − base", "claim 3 at k"], rows)
    crossings = "\n".join(
        f"- {run}, {_task(c.task)}: {c.crossing.text()}" + (f"; {c.chance_text()}." if c.chance_text() else ".")
        for c, run in zip(claims.ceiling, claims.run_labels(claims.ceiling))
    )
    return f"{table}\n\n{crossings}"


def _ks(values: Sequence[int | None], none: str) -> str:
    """Run-by-run k's as a sentence lists them ("5, 7 and 4"), ``none`` for a missing one."""
    words = [none if v is None else f"{v:,}" for v in values]
    if len(words) > 1 and len(set(words)) == 1:
        return f"{words[0]} in each"
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def _n(count: int, noun: str) -> str:
    """``1 setting``, ``3 settings``."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _and(words: Sequence[str]) -> str:
    """Words as prose lists them ("1, 8 and 32"; one word alone)."""
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def _span(values: Sequence[float], fmt: str = "{:,.0f}") -> str:
    """A range of values as prose gives it ("4,014–8,557"; signed: "+0.12 to +0.15"), one
    value alone."""
    low, high = (fmt.format(v).replace("-", "−") for v in (min(values), max(values)))
    return low if low == high else f"{low} to {high}" if "+" in fmt else f"{low}–{high}"


def training_decided(claims: Claims) -> str:
    """Where claim 3 is decided, as one sentence: how many of the comparisons, which verdicts,
    and on which tasks, from the claims' verdicts (a count, a direction and the tasks it covers
    are never written by hand)."""
    rows = [(c.task, p.verdict.status) for c in claims.training for p in c.probes]
    decided = [(task, status) for task, status in rows if status in ("support", "against")]
    if not decided:
        return f"claim 3 is decided in none of its {_n(len(rows), 'comparison')}"
    statuses = sorted({s for _, s in decided})
    tasks = list(dict.fromkeys(task for task, _ in decided))
    per_task = ", ".join(f"`{_task(t)}` {sum(1 for task, _ in decided if task == t)} of {sum(1 for task, _ in rows if task == t)}" for t in tasks)
    if len(statuses) > 1:
        verdict = " and ".join(f"{sum(1 for _, s in decided if s == st)} **{st}**" for st in statuses)
    else:
        verdict = f"{'all ' if len(decided) > 1 else ''}**{statuses[0]}**"
    rest = "; the rest unresolved or uninformative" if len(decided) < len(rows) else ""
    return f"claim 3 is decided in {len(decided)} of {_n(len(rows), 'comparison')}, {verdict} ({per_task}{rest})"


def _where(settings: Sequence[Setting]) -> str:
    """Settings as prose names them, grouped by model ("smollm2-135m-instruct `sub`, `word-problems`")."""
    models = dict.fromkeys(s.model for s in settings)
    return "; ".join(f"{m} " + ", ".join(f"`{_task(s)}`" for s in settings if s.model == m) for m in models)


def _by_status(pairs: Sequence[tuple[Setting, str]], label: str, total: int) -> str:
    """One claim's verdicts over settings: how many are decided, and where each status falls."""
    decided = [(s, v) for s, v in pairs if v in ("support", "against")]
    parts = [f"**{v}** on {_where([s for s, x in pairs if x == v])}" for v in ("support", "against") if any(x == v for _, x in pairs)]
    unresolved = [s for s, v in pairs if v == "unresolved"]
    if unresolved:
        parts.append(f"unresolved on {_where(unresolved)}")
    rest = total - len(decided) - len(unresolved)
    if rest:
        parts.append(f"uninformative or not evaluated in the other {rest}" if parts else "uninformative or not evaluated in every one")
    return f"{label} is decided in {len(decided)} of {_n(total, 'setting')} ({'; '.join(parts)})"


def _realized_change(runs: Sequence[Any]) -> str:
    """A task's realized change over its trained runs, worded by each run's own test: one run
    with its interval ("rose by 0.68 [0.52, 0.80]", "changed by 0.03 [...], not resolved"),
    several as the range of their points, their intervals' span and how many rose or fell
    resolved; where a rise is not resolved, the questions that would resolve it."""
    deltas = [c.probes[0].delta_realized for c in runs]
    up, down = (sum(d.resolved == side for d in deltas) for side in ("above", "below"))
    if len(deltas) == 1:
        (d,) = deltas
        said = f"realized accuracy changed by {_p(d)}, " + ("a resolved rise" if up else "a resolved fall" if down else "not resolved")
    else:
        points = [_number(v) for v in (min(d.value for d in deltas), max(d.value for d in deltas))]
        span = [_number(v) for v in (min(d.low for d in deltas), max(d.high for d in deltas))]
        moved = [f"{word}, resolved, in {hits} of {len(deltas)} runs" for hits, word in ((up, "rose"), (down, "fell")) if hits]
        clear = [d.exact_p for d in deltas if d.resolved is None and (d.low > 0 or d.high < 0) and d.exact_p is not None]
        if clear:  # an interval clear of 0 whose exact test does not agree
            moved.append(f"an interval clear of 0 with exact McNemar p {_span(clear, '{:.2g}')} in {len(clear)}")
        by = f"{points[0]} in each" if points[0] == points[1] else f"{points[0]} to {points[1]}"  # as printed: "0.01 to 0.01" says nothing
        said = f"realized accuracy changed by {by} (95% intervals within {span[0]} to {span[1]}), " + (
            " and ".join(moved) if moved else f"resolved in none of the {len(deltas)} runs"
        )
    unresolved = [c for c, d in zip(runs, deltas) if d.resolved is None]
    needed = [p.verdict.n_needed for c in unresolved for p in c.probes if p.verdict.n_needed is not None]
    if needed:
        said += f" (about {_span(needed)} questions would resolve {'it' if len(deltas) == 1 else 'an unresolved one'}; the task has {runs[0].probes[0].questions})"
    return said


def findings(claims: Claims) -> str:
    """What a grid found, claim by claim, as one sentence rendered from its claims (the
    README's bullet for each grid): where each claim is decided which way, the failure-set
    sizes behind claim 2, and for claim 3 the realized rise where it is decided; where it is
    not, the n that would resolve that rise and which way each probe's ceiling moved."""
    routes = [(c.setting, c.verdict.status) for c in claims.routes_vs_search]
    said = [_by_status(routes, "claim 1", len(routes))]
    if claims.bottleneck:
        with_set = [c for c in claims.bottleneck if c.failures >= 2]
        sizes = f" (failure sets of {_span([c.failures for c in with_set])} questions in {_n(len(with_set), 'setting')})" if with_set else ""
        said.append(_by_status([(c.setting, c.verdict.status) for c in claims.bottleneck], "claim 2" + sizes, len(claims.bottleneck)))
    else:
        said.append("claim 2 is not evaluated (the grid mines no failure set)")
    if claims.training:
        three = training_decided(claims)
        for task in dict.fromkeys(c.task for c in claims.training):
            runs = [c for c in claims.training if c.task == task]
            three += f"; on `{_task(task)}` {_realized_change(runs)}"
            probes = [p for c in runs for p in c.probes]
            if any(p.verdict.status in ("support", "against") for p in probes):
                continue
            moves = []
            for label in dict.fromkeys(budget_label(p.probe) for p in probes):
                deltas = [p.delta_reachable for p in probes if budget_label(p.probe) == label]
                for side, word in (("below", "fell"), ("above", "rose")):
                    if hits := sum(d.resolved == side for d in deltas):
                        moves.append(f"`{label}`'s ceiling {word}, resolved, in {hits} of {_n(len(deltas), 'run')}")
            three += "; there " + ", ".join(moves) if moves else ""
        said.append(three)
    else:
        said.append("claim 3 is not evaluated (the grid names no trained pair)")
    return "; ".join(said) + "."


def reasons(claims: Claims) -> str:
    """Every verdict of a grid at its probes' budget, one bullet each, with the reason its rule
    gives and, where undecided, what this n resolves and what n would decide it (the results
    page's ``reasons:GRID`` block). The reasons are the verdicts' own sentences, written by
    :mod:`rnr_lens.verdicts` from the estimates they read; the large-k verdicts are the
    ceiling table's."""

    def bullet(name: str, v: Any) -> str:
        return f"- {name}: **{v.status}**: {v.text}" + (f"; {v.power_text}" if v.power_text else "")

    out = []
    for c in claims.routes_vs_search:
        out.append(bullet(f"claim 1, {c.setting.model} `{_task(c.setting)}`", c.verdict))
        out.append(bullet(f"claim 1's retention, {c.setting.model} `{_task(c.setting)}`", c.retention_verdict))
    out += [bullet(f"claim 2, {c.setting.model} `{_task(c.setting)}`", c.verdict) for c in claims.bottleneck]
    for c, run in zip(claims.training, claims.run_labels(claims.training)):
        out += [bullet(f"claim 3, {run} `{_task(c.task)}` `{budget_label(p.probe)}`", p.verdict) for p in c.probes]
    return "\n".join(out)


def summary_lines(claims: Claims) -> str:
    """The report's own summary, one bullet per claim (``claims.json``'s ``summary``, as the
    report page and this script's default output print it)."""
    return "\n".join(f"- {claim}: {line}" for claim, line in claims.summary.items())


SIDE_BY_SIDE: dict[str, tuple[str, str | None]] = {
    "SmolLM2-135M-Instruct": ("grid-deep", "grid-seeds"),
    "Gemma-3-270M": ("grid-deep-gemma", "grid-dapo-gemma"),
}
"""Issue 56's two architectures: per model, the grid behind claims 1 and 2 (the deep grid's
design) and the grid behind claim 3 (the seeds grid's design; its first pair, seed 0)."""


def _status(v: Any) -> str:
    return f"**{v.status}**" + (f" (n≈{v.n_needed:,})" if v.n_needed else "")


def _cells(deep: Claims | None, trained: Claims | None) -> dict[tuple[str, str], tuple[str, str]]:
    """One model's cells of the side-by-side table, keyed by (claim row, task): each verdict's
    status, and its cell (the verdict with its estimate, interval and null)."""
    cells: dict[tuple[str, str], tuple[str, str]] = {}
    for c in deep.routes_vs_search if deep else ():
        task = _task(c.setting)
        cells[("1, random routes vs search: random − search", task)] = (
            c.verdict.status,
            f"{_status(c.verdict)} {_e(c.random_minus_search)}; random reach {_e(c.reachable_random)}, chance {c.chance_random.value:.2f}",
        )
        blind = {s: e for s, e in (c.retention.get(c.random) or {}).items() if e is not None}
        kept = max(blind.items(), key=lambda se: se[1].value, default=None)
        cells[("1, answer-blind selectors keep the gain: the most kept", task)] = (
            c.retention_verdict.status,
            _status(c.retention_verdict) + (f" {kept[0]} {_e(kept[1])}" if kept else ""),
        )
    for b in deep.bottleneck if deep else ():
        held = (
            f" MLP {b.bottleneck.layer} held-out repair {_e(_measured(b.bottleneck.repair_heldout))}" if b.bottleneck else f" {b.failures} failures"
        )
        null = f"; null (3 random blocks) {_e(b.null.random_block)}" if b.null else ""
        chance = "" if b.chance is None else f"; failure set {b.chance.failures} against {b.chance.expected:.1f} by chance"
        cells[("2, one MLP repairs most failures", _task(b.setting))] = (b.verdict.status, f"{_status(b.verdict)}{held}{null}{chance}")
    pairs = trained.training[: len(trained.grid.get("tasks") or ())] if trained else ()  # the first pair: seed 0
    for t in pairs:
        for p in t.probes:
            chance = (
                "" if p.above_chance_base.is_empty else f"; reach above chance: base {_e(p.above_chance_base)}, trained {_e(p.above_chance_trained)}"
            )
            cells[(f"3, training at `{budget_label(p.probe)}`: Δ realized; Δ reachable", _task(t.task))] = (
                p.verdict.status,
                f"{_status(p.verdict)} {_e(p.delta_realized)}; {_e(p.delta_reachable)}{chance}",
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
    return _table(
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
        for (row, task), (status, _) in cells.items():
            grouped.setdefault((row.split(",", 1)[0], task), []).append(status)
        return {key: _setting_status(rows) for key, rows in grouped.items()}

    by = {first: settings(a), second: settings(b)}
    both = [key for key in dict.fromkeys([*by[first], *by[second]]) if key in by[first] and key in by[second]]

    def named(keys: list[tuple[str, str]]) -> str:
        return _and([f"claim {claim} on `{task}`" for claim, task in keys])

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
        f"of {_n(len(both), 'setting')} (a claim on a task) run on both models, {len(same)} {'is' if len(same) == 1 else 'are'} decided "
        f"the same way on both{of(same)}",
        f"{len(opposite)} opposite ways{of(opposite)}",
        f"{len(one)} on one model only" + (" (" + "; ".join(f"{named([k])}: {first} {x[k]}, {second} {y[k]}" for k in one) + ")" if one else ""),
        f"{len(mute)} {'is' if len(mute) == 1 else 'are'} uninformative on both (the precondition absent){of(mute)}",
        f"{len(open_)} undecided on both, unresolved on at least one{of(open_)}",
    ]
    cannot = []
    for model, status in by.items():
        silent = [k for k in status if status[k] == "uninformative"]
        if silent:
            cannot.append(f"{model} cannot speak to {named(silent)}: every verdict there is uninformative (each reason names why)")
    missing = [m for m, cells in ((first, a), (second, b)) if len(cells) < len(dict.fromkeys([*a, *b]))]
    tail = f"; {_and(missing)} {'has' if len(missing) == 1 else 'have'} settings not run yet" if missing else ""
    return "Side by side, " + "; ".join(said) + tail + ". " + ". ".join(cannot) + ("." if cannot else "")


def preconditions_table(columns: dict[str, tuple[Claims | None, Claims | None]], histories: dict[str, Path | None]) -> str:
    """What each model must show before it can speak to a claim, task by task: its realized
    rate (claim 3 needs a rise from it), its failure set against the size chance gives (claim
    2), its base model's reach at the ceiling's budget against its chance level (claim 3 at large
    k), and, beneath, how many groups its training kept (``histories``: each model's first
    training run's ``*history.jsonl``)."""
    cells: dict[str, dict[str, str]] = {}
    for model, (deep, trained) in columns.items():
        for c in deep.routes_vs_search if deep else ():
            cells.setdefault(_task(c.setting), {})[f"{model}: realized"] = _e(c.realized)
        for b in deep.bottleneck if deep else ():
            set_ = "–" if b.chance is None else f"{b.chance.failures} against {b.chance.expected:.1f} by chance, {b.chance.estimate.p_text()}"
            cells.setdefault(_task(b.setting), {})[f"{model}: failure set"] = set_
        ceilings = trained.ceiling[: len(trained.grid.get("tasks") or ())] if trained else ()  # the first pair: seed 0
        for c in ceilings:
            top = c.at(c.budget)
            cells.setdefault(_task(c.task), {})[f"{model}: base pass@K (chance)"] = f"K = {c.budget}: {_e(top.base)}{_chance(top.base_chance)}"
    heads = [f"{m}: {what}" for m in columns for what in ("realized", "failure set", "base pass@K (chance)")]
    table = _table(["task", *heads], [[f"`{task}`", *(row.get(h, "–") for h in heads)] for task, row in cells.items()])
    kept = []
    for model, path in histories.items():
        if path is not None and path.exists():
            steps = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
            got, sampled = sum(s["groups_kept"] for s in steps), sum(s["groups_sampled"] for s in steps)
            kept.append(f"{model}'s DAPO run kept {got} of the {sampled:,} groups it sampled ({got / sampled:.1%})")
    return table + ("\n\n" + "; ".join(kept) + "." if kept else "")


SIDE_BY_SIDE_HISTORIES = {"SmolLM2-135M-Instruct": "grid-deep/dapo-history.jsonl", "Gemma-3-270M": "grid-dapo-gemma/dapo-history.jsonl"}
"""Each model's first DAPO run (the seeds grids' seed 0), whose kept groups the preconditions show."""


def parity_table(parity: dict[str, Any]) -> str:
    """lm-eval parity, from ``scripts/lm-eval-parity``'s ``parity.json``: per question, whether
    the prompt, the greedy text and each filter's correctness are alike in both tools, then the
    realized rate each filter gives (Wilson)."""
    t, n = parity["totals"], parity["totals"]["n"]
    filters = [f for f in t if isinstance(t[f], dict)]
    rows = [["prompt (few-shot context)", "", "", f"{t['same_prompt']} of {n}"], ["greedy text", "", "", f"{t['same_text']} of {n}"]]
    rows += [
        [f"`{f}` correct (realized)", str(t[f]["lm_eval_correct"]), str(t[f]["rnr_lens_correct"]), f"{t[f]['same_correctness']} of {n}"]
        for f in filters
    ]
    table = _table([f"per question, {n} questions", "`lm_eval`", "`rnr-lens audit`", "alike"], rows)
    said = "; ".join(
        f"`{f}`: `lm_eval` {t[f]['lm_eval_correct']} of {n} ({_e(wilson(t[f]['lm_eval_correct'], n))}), "
        f"`rnr-lens audit` {t[f]['rnr_lens_correct']} of {n} ({_e(wilson(t[f]['rnr_lens_correct'], n))})"
        for f in filters
    )
    return f"{table}\n\nRealized (Wilson 95%) under each filter: {said}."


def search_speedup(bench: dict[str, Any]) -> str:
    """The prompt-state reuse's measured speedup on the search, from ``benchmarks``' JSON (the
    ratio of the baseline's to the new code's time in the same run, its interval, and whether
    every try came out identical)."""
    low, high = bench["speedup_interval"]
    same = "every try identical" if bench["identical"] == bench["tries"] else f"{bench['identical']} of {bench['tries']} tries identical"
    return f"The search ran {bench['speedup']:.3f}x [{low:.3f}, {high:.3f}] as fast as the code before it, {same}."


def reuse_verdicts(runs: Sequence[dict[str, Any]]) -> str:
    """Each reuse's verdict per CPU and model, from ``scripts/reuse_verdicts.py``'s JSON files
    (one per CPU kind): on or off, and why, as the check said it."""

    def kind(flags: str) -> str:
        have = flags.split()
        return ", ".join(n for n, f in (("AMX", "amx_tile"), ("AVX-512", "avx512f"), ("AVX2", "avx2")) if f in have) or "no vector flags read"

    rows = [
        [f"{run['cpu']['model']} ({kind(run['cpu']['flags'])}; {run['threads']} threads; {run['date']})", model]
        + [f"{'on' if verdicts[r]['on'] else 'off'}: {verdicts[r]['why']}" for r in REUSES]
        for run in runs
        for model, verdicts in run["models"].items()
    ]
    return _table(["CPU", "model", *REUSES], rows)


def gpu_summary(check: dict[str, Any]) -> str:
    """What ``scripts/gpu-check`` found on a GPU, from its ``gpu-check.json``."""
    s = check["summary"]
    said = [f"passed {_n(s['pass'], 'check')}", f"{s['fail']} failed"]
    for status, word in (("fail", "failed"), ("skip", "skipped")):
        named = [f"{c['name']} ({c['detail']})" if c.get("detail") else c["name"] for c in check["checks"] if c["status"] == status]
        if named:
            said.append(f"{word}: {'; '.join(named)}")
    return f"On one {check['gpu'].removeprefix('NVIDIA ')} it {', '.join(said)}."


def training_histories(folder: Path) -> str:
    """What each training run behind a grid did, one sentence per history file in its results
    folder (``*history.jsonl``, one JSON line per step, as ``rnr-lens train`` writes it): the
    steps, the groups dynamic sampling kept of those it sampled, and the rollouts' accuracy
    (each step's share correct, averaged over the steps)."""
    said = []
    for path in sorted(folder.glob("*history.jsonl")):
        steps = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        kept, sampled = sum(s["groups_kept"] for s in steps), sum(s["groups_sampled"] for s in steps)
        accuracy = sum(s["accuracy"] for s in steps) / len(steps)
        said.append(
            f"`{path.name}`: {_n(len(steps), 'step')}; dynamic sampling kept {kept} of the {sampled:,} groups it sampled"
            f" ({kept / sampled:.1%}), and the rollouts were correct {accuracy:.1%} of the time (averaged over the steps)."
        )
    return " ".join(said)


def ceiling_summary(claims: Claims) -> str:
    """Claim 3 at large k over a grid's runs, one paragraph per task: whether trained stays
    resolved above base, where the straight line in log k and each bounded model put the
    crossing (the line's interval conditional on the line), what a measurement at the line's
    zero would tell apart, and where base first lies above trained, by the pointwise interval and under a
    simultaneous band."""
    out = []
    for task in dict.fromkeys(c.task for c in claims.ceiling):
        runs = [c for c in claims.ceiling if c.task == task]
        n, budget = len(runs), runs[0].budget
        lead = [c for c in runs if c.crossing.lead is not None and c.crossing.point is None and c.crossing.tied is None]
        head = f"on `{_task(task)}` ({runs[0].questions} questions, {n} run{'s' if n > 1 else ''}): "
        said = []
        guessing = all(
            v.above_chance_base.resolved != "above" and v.above_chance_trained.resolved != "above" and not v.above_chance_base.is_empty
            for c in runs
            for _, v in c.verdicts
        )
        if guessing:  # rules 3: the curves exist, but claim 3 cannot read them
            said.append(
                "at no named k in any run is either model's reach resolved above its chance level, so claim 3 is uninformative there "
                "and what follows describes how each model guesses, not a ceiling"
            )
        if len(lead) == n:
            stays = sum(c.crossing.not_excluded is None for c in runs)
            said.append(
                f"the curves do not cross by k = {budget} in {n} of {n}, and trained − base's pointwise 95% interval stays above zero at every k "
                f"in {stays} of {n}"
            )
            ks = [k for k, _ in runs[0].verdicts]
            if ks:
                below = [str(sum(c.verdict(k).ceiling_vs_gain.resolved == "below" for c in runs)) for k in ks]
                said.append(
                    f"the ceiling's rise exceeds half the realized rise (Δ realized / 2 − Δ reachable resolved below zero) in "
                    f"{_and(below)} of {n} at k = {_and([str(k) for k in ks])}"
                )
            lines = [c.crossing for c in runs if c.crossing.extrapolated is not None]
            if lines:
                lows = [x.extrapolated_interval[0] for x in lines if x.extrapolated_interval is not None]
                highs = [x.extrapolated_interval[1] for x in lines if x.extrapolated_interval is not None]
                top = (
                    f"{_span([h for h in highs if h is not None])}, or no upper end in {sum(h is None for h in highs)}"
                    if None in highs
                    else _span(highs)
                )
                costs = [cost / 1e6 for c in runs if (cost := c.extrapolation_cost()) is not None]
                said.append(
                    f"a straight line in log k through the top three octaves reaches zero near k = {_span([x.extrapolated for x in lines])} "
                    f"in {len(lines)} of {n}, an extrapolation, not a measurement (its bootstrap 95% intervals, conditional on the line "
                    f"(sampling error only), run from {_span(lows)} at the low end to {top} at the high end); measuring there would take "
                    f"about {_span(costs, '{:.1f}')} million draws per pair on these questions"
                )
            for name in dict.fromkeys(m.model for m in runs[0].crossing.models):
                models = [m for c in runs for m in c.crossing.models if m.model == name]
                crossing = [m.crossing for m in models]
                ends = [m.interval for m in models if m.interval is not None]
                spread = (
                    f" (bootstrap 95% intervals from k = {_ks([e[0] for e in ends], 'none by 10^7')} to {_ks([e[1] for e in ends], 'none by 10^7')})"
                    if ends
                    else ""
                )
                where = (
                    f"puts no crossing by k = 10^7 in {len(models)} of {n}"
                    if all(k is None for k in crossing)
                    else f"puts the crossing at k = {_ks(crossing, 'none by 10^7')}"
                )
                misfit = _span([m.misfit for m in models], "{:.2f}")
                lls = [m.loglik for m in models if m.loglik is not None]
                likely = f", log-likelihood {_ks([round(x) for x in lls], 'none')}" if lls else ""
                said.append(
                    f"a {name} fit to each question's draws (within {misfit} of the observed curves{likely}) {where}{spread}, runs in order"
                    + (", which holds only if that model is right" if lls else "")
                )
                gaps = [m.gap_at_line for m in models if m.gap_at_line is not None]
                if gaps and lines:
                    told = sum(g.low > 0 or g.high < 0 for g in gaps)
                    said.append(
                        f"at the line's zero it puts the gap at {_span([g.value for g in gaps], '{:+.2f}')} (bootstrap 95% intervals within "
                        f"{_span([min(g.low for g in gaps)], '{:+.2f}')} to {_span([max(g.high for g in gaps)], '{:+.2f}')}), so a "
                        f"measurement there would tell it from the line's 0 in {told} of {len(gaps)} runs (where its interval excludes 0)"
                    )
        else:
            never = sum(all(p.difference.resolved != "above" for p in c.curve) for c in runs)
            said.append(f"trained is resolved above base at no k in {never} of {n}")
            said.append(
                f"the pointwise 95% interval first puts base above trained at k = {_ks([c.crossing.reversed for c in runs], 'none')} "
                f"(runs in order), and a simultaneous 95% band over k at k = {_ks([c.crossing.reversed_band for c in runs], 'none')}"
            )
            earlier = sum(
                c.crossing.reversed_band is not None and (c.crossing.reversed is None or c.crossing.reversed_band < c.crossing.reversed) for c in runs
            )
            if earlier:  # a simultaneous band narrower than a pointwise interval: the pointwise score interval has lost its power there
                said.append(
                    f"the band comes before the pointwise interval in {earlier} of {n}: on a mean of fractional pass@k differences "
                    "the score interval is conservative, so its k is late, not the band's early"
                )
            ends = [c.at(budget) for c in runs]
            said.append(
                f"at k = {budget} base reaches {_span([e.base.value for e in ends], '{:.2f}')} of the questions against "
                f"{_span([e.trained.value for e in ends], '{:.2f}')} for trained"
            )
        tops = [c.at(budget) for c in runs]
        if not tops[0].base_chance.is_empty:  # rules 3: every ceiling beside what guessing alone gives
            said.append(
                f"by chance alone (the same draws against other questions' golds) base reaches "
                f"{_span([t.base_chance.value for t in tops], '{:.2f}')} and trained {_span([t.trained_chance.value for t in tops], '{:.2f}')} "
                f"at k = {budget}, from {_span([c.distinct[0] for c in runs if c.distinct], '{:.1f}')} and "
                f"{_span([c.distinct[1] for c in runs if c.distinct], '{:.1f}')} distinct answers per question"
            )
        out.append(head + "; ".join(said) + ".")
    return " ".join(s[0].upper() + s[1:] for s in out)


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
            numbers[f"block {b.layer} discovery"] = b.repair_discovery.value
            numbers[f"block {b.layer} held-out"] = _measured(b.repair_heldout)
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
            said = ("same" if data else "changed") if shared else f"sizes {'same' if sizes_o == sizes_c else 'changed'}; no block in both"
            rows.append(["2", c.setting.model, _task(c.setting), o.verdict.status, c.verdict.status, said])

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
                        _task(t.task),
                        o3.verdict.status,
                        p.verdict.status,
                        "same" if data else "changed",
                    ]
                )
    return _table(["claim", "model", "task", "before", "now", "the numbers it reads"], rows)


def _audits_of(folder: Path) -> set[str]:
    """Every audit a report folder's evidence holds for its settings (their ceilings too)."""
    import gzip

    with gzip.open(folder / "evidence.json.gz", "rt") as f:
        settings = json.load(f)["manifest"]["settings"]
    return {a for s in settings for a in (s["audit"], s.get("ceiling")) if a}


def regrading_table(folders: Sequence[Path]) -> str:
    """What re-grading each committed grid under today's reader moved (its ``regrading.json``):
    per grid, the tries read again, the readings and correctness flags that changed and the
    mined stages dropped (and mined again); then every audit whose correctness moved."""
    rows, moved = [], []
    for folder in folders:
        audits = json.loads((folder / "regrading.json").read_text())["audits"]
        cited = _audits_of(folder)
        dropped = [a for a in audits if a["mined"] == "dropped"]
        rows.append(
            [
                f"`{folder.name}`",
                f"{sum(a['tries'] for a in audits):,}",
                f"{sum(a['readings_changed'] for a in audits):,}",
                f"{sum(a['correct_changed'] for a in audits):,}",
                ", ".join(f"{a['model']} `{_task(a['task'])}`" for a in dropped) or "none",
            ]
        )
        moved += [
            [
                f"`{folder.name}`",
                a["model"],
                f"`{_task(a['task'])}`",
                f"`{a['new_id']}`",
                f"{a['tries']:,}",
                str(a["correct_changed"]),
                (a["reason"] or "–") + ("" if a["new_id"] in cited else " (since replaced: its setting was run again)"),
            ]
            for a in audits
            if a["correct_changed"] or a["mined"] == "dropped"
        ]
    head = _table(["grid", "tries read again", "readings changed", "correctness changed", "mined stages mined again"], rows)
    return (
        head + "\n\n" + _table(["grid", "model", "task", "audit", "tries", "whose correctness changed", "why its mined stage was mined again"], moved)
    )


def rerun_table(old: Claims, new: Claims, model: str) -> str:
    """One model's settings before and after a re-run of them in one grid (issue 55: Gemma's rows
    re-run under its few-shot default), on the same questions: realized and claim 1's verdict,
    the failure set and claim 2's verdict, each side by side."""
    if old.rules != new.rules or [c.setting.task for c in old.routes_vs_search] != [c.setting.task for c in new.routes_vs_search]:
        raise SystemExit("a re-run compares the same grid under the same verdict rules: these two claims differ in rules or tasks")
    before1 = {c.setting.task: c for c in old.routes_vs_search if c.setting.model == model}
    before2 = {c.setting.task: c for c in old.bottleneck if c.setting.model == model}
    now2 = {c.setting.task: c for c in new.bottleneck if c.setting.model == model}
    rows = []
    for c in (c for c in new.routes_vs_search if c.setting.model == model):
        o, o2, c2 = before1[c.setting.task], before2.get(c.setting.task), now2.get(c.setting.task)
        rows.append(
            [
                _task(c.setting),
                _e(o.realized),
                _e(c.realized),
                f"{o.verdict.status} → {c.verdict.status}",
                f"{o2.failures if o2 else '–'} → {c2.failures if c2 else '–'}",
                f"{o2.verdict.status if o2 else '–'} → {c2.verdict.status if c2 else '–'}",
            ]
        )
    return _table(["task", "realized before", "realized now", "claim 1", "failure set", "claim 2"], rows)


FEW_SHOT_FROM = "3bceda4"
"""The commit whose ``grid-default`` holds Gemma-3-270M's zero-shot rows, before issue 55 re-ran
them under its few-shot default (the table of what the re-run changed)."""

CHANGES_FROM = {"grid-default": ("c6d78ee", ""), "grid-deep": ("a58fef3^", "grid-deep-training")}
"""Where git history holds each grid's version-1 claims (the deep grid kept claim 3 in a folder
of its own then), for the tables of verdicts that verdict rules version 2 changed."""

REGRADED_FROM = "825a24b"
"""The commit whose committed claims were read under config version 3, before issue 54's re-grade."""

RULES_2_LAST = "90166fe"
"""The last commit whose committed claims were decided by verdict rules version 2 (before issue
72's version 3): the tables of what version 2 and the re-grade changed compare against it, and
the sentence of what version 3 moved compares with it."""


def _verdicts(claims: Claims) -> list[tuple[str, str]]:
    """Every verdict of a report in its order, named by claim, setting and probe."""
    out = [(f"claim 1, {c.setting.model} `{_task(c.setting)}`", c.verdict.status) for c in claims.routes_vs_search]
    out += [(f"claim 2, {c.setting.model} `{_task(c.setting)}`", c.verdict.status) for c in claims.bottleneck]
    out += [
        (f"claim 3, {run} `{_task(t.task)}` {budget_label(p.probe)}", p.verdict.status)
        for t, run in zip(claims.training, claims.run_labels(claims.training))
        for p in t.probes
    ]
    out += [(f"claim 3 at k = {k}, `{_task(c.task)}`", v.verdict.status) for c in claims.ceiling for k, v in c.verdicts]
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
        raise SystemExit(f"{grid}: the {how} claims hold other verdicts than the earlier ones")
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
    """Every estimate (a JSON record with ``value``, ``low``, ``high`` and ``method``) in a claims record."""
    if isinstance(d, dict):
        if {"value", "low", "high", "method"} <= d.keys():
            yield d
            return
        for v in d.values():
            yield from _estimates(v)
    elif isinstance(d, list):
        for v in d:
            yield from _estimates(v)


BLOCK = r"( *)<!-- ({name}) -->.*?<!-- /\2 -->"
PAGES = (ROOT / "README.md", ROOT / "docs" / "results.md", ROOT / "docs" / "shots.md", ROOT / "docs" / "performance.md")
"""The pages whose blocks :func:`render` fills."""
"""A rendered block in a page: ``<!-- NAME -->`` ... ``<!-- /NAME -->``, indented as its marker."""


def rendered_blocks() -> dict[str, str]:
    """Every block name the pages may hold, with its text from the committed claims: the
    k = 128 summary of each grid with a ceiling (``ceiling-summary:GRID``), the lm-eval parity table
    (``lm-eval-parity``), the search's measured speedup (``search-speedup``), the GPU check
    (``gpu-check``), the few-shot measurement (``shots-study``), each grid's findings, every verdict's reason and the report's summary
    (``findings:GRID``, ``reasons:GRID``, ``summary:GRID``), what re-grading moved
    (``regrading-table``) and, where git history holds the earlier claims, which verdicts the
    re-grade moved (``regrade-verdicts``), which verdict rules version 2 changed
    (``changes:GRID``) and what re-running Gemma's rows few-shot changed (``few-shot-rerun``)."""
    results = ROOT / "assets" / "results"

    def claims(grid: str) -> Claims:
        return Claims.from_dict(json.loads((results / grid / "claims.json").read_text()))

    blocks: dict[str, str] = {}

    def committed(grid: str | None) -> Claims | None:  # None: that grid has not run yet
        return claims(grid) if grid and (results / grid / "claims.json").exists() else None

    columns = {model: (committed(deep), committed(trained)) for model, (deep, trained) in SIDE_BY_SIDE.items()}
    blocks["side-by-side"] = side_by_side(columns)
    blocks["side-by-side-reading"] = side_by_side_reading(columns)
    blocks["side-by-side-preconditions"] = preconditions_table(
        columns, {model: results / path for model, path in SIDE_BY_SIDE_HISTORIES.items() if model in columns}
    )
    blocks["lm-eval-parity"] = parity_table(json.loads((results / "lm-eval-parity" / "parity.json").read_text()))
    blocks["search-speedup"] = search_speedup(json.loads((results / "bench-prefix-store" / "search-rounds.json").read_text()))
    blocks["reuse-verdicts"] = reuse_verdicts([json.loads(f.read_text()) for f in sorted((results / "reuse-verdicts").glob("*.json"))])
    blocks["gpu-check"] = gpu_summary(json.loads((results / "gpu-h200" / "gpu-check.json").read_text()))
    study = _shots_study()
    table, n = study.decide(json.loads((results / "shots-study" / "study.json").read_text()))
    blocks["shots-on-test"] = study.on_test_sentence(json.loads((results / "shots-study" / "add-small-test.json").read_text()))
    blocks["shots-study"] = f"{table}\n\nBy the rule, a base model's default deployment gets {n} worked example{'s' if n != 1 else ''}."
    for path in sorted(results.glob("grid-*/claims.json")):
        grid, read = path.parent.name, claims(path.parent.name)
        blocks[f"findings:{grid}"] = findings(read)
        blocks[f"reasons:{grid}"] = reasons(read)
        blocks[f"summary:{grid}"] = summary_lines(read)
        if read.ceiling:  # claim 3 at large k
            blocks[f"ceiling-summary:{grid}"] = ceiling_summary(read)
        if any(path.parent.glob("*history.jsonl")):  # the training runs behind its pairs
            blocks[f"training-history:{grid}"] = training_histories(path.parent)
    regraded = sorted(p.parent.name for p in results.glob("*/regrading.json"))
    blocks["regrading-table"] = regrading_table([results / g for g in regraded])
    for grid, (rev, training) in CHANGES_FROM.items():  # which verdicts version 2's rules changed, where history holds versions 1 and 2
        before = _claims_at(rev, grid)
        before_training = _claims_at(rev, training) if training else before
        version_2 = _claims_at(RULES_2_LAST, grid)
        if before is not None and before_training is not None and version_2 is not None:
            blocks[f"changes:{grid}"] = changes_table(dataclasses.replace(before, training=before_training.training), version_2)
    grids = sorted(p.parent.name for p in results.glob("grid-*/claims.json"))
    version_2_claims = {g: _claims_at(RULES_2_LAST, g) for g in grids}
    if all(c is not None for c in version_2_claims.values()):  # git history holds them
        blocks["rules-3-verdicts"] = rules_3_moved({g: c for g, c in version_2_claims.items() if c is not None}, {g: claims(g) for g in grids})
    zero_shot = _claims_at(FEW_SHOT_FROM, "grid-default")
    few_shot = _claims_at(RULES_2_LAST, "grid-default")  # the re-run as decided then, under the same rules as the zero-shot rows
    if zero_shot is not None and few_shot is not None:  # git history holds both
        blocks["few-shot-rerun"] = rerun_table(zero_shot, few_shot, "gemma3-270m")
    earlier = {g: _claims_at(REGRADED_FROM, g) for g in regraded}
    if all(c is not None for c in earlier.values()) and zero_shot is not None:  # git history holds them (a bare export does not)
        # the re-grade's own result: the default grid as re-graded, before issue 55 re-ran its Gemma rows
        regraded_claims = {g: zero_shot if g == "grid-default" else _claims_at(RULES_2_LAST, g) or claims(g) for g in regraded}
        blocks["regrade-verdicts"] = regrade_verdicts({g: c for g, c in earlier.items() if c is not None}, regraded_claims)
    return blocks


def _shots_study() -> Any:
    """``scripts/shots_study.py``, the owner of the few-shot measurement's table and rule."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("shots_study", ROOT / "scripts" / "shots_study.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _claims_at(rev: str, grid: str) -> Claims | None:
    """A grid's committed claims at an earlier commit (None: git history does not hold it).
    ``rev`` is any revision git reads (``a58fef3^``)."""
    import subprocess

    shown = subprocess.run(["git", "show", f"{rev}:assets/results/{grid}/claims.json"], cwd=ROOT, capture_output=True, text=True)
    return Claims.from_dict(json.loads(shown.stdout)) if shown.returncode == 0 else None


def blocks_in(text: str) -> list[tuple[str, str]]:
    """The rendered blocks of a page as ``(name, text)``, the text's lines joined (what
    :func:`render` wrote, read back)."""
    import re

    return [
        (m.group(2), " ".join(m.group(0).split("-->", 1)[1].rsplit("<!--", 1)[0].split()))
        for m in re.finditer(BLOCK.format(name=r"[\w:.-]+"), text, flags=re.S)
    ]


def render() -> None:
    """Write the sentences rendered from the committed claims into the marked blocks of
    README.md and docs/results.md (:func:`rendered_blocks`, wrapped at 92 columns)."""
    import re
    import textwrap

    blocks = rendered_blocks()
    for page in PAGES:
        text = page.read_text()

        def fill(match: re.Match[str], page: Path = page) -> str:
            indent, name = match.group(1), match.group(2)
            if name not in blocks:
                raise SystemExit(f"{page}: block {name!r} has no rendering; known: {', '.join(blocks)}")
            if blocks[name].startswith(("|", "- ")):  # a table or a list, as printed
                wrapped = textwrap.indent(blocks[name], indent)
            else:
                wrapped = textwrap.fill(blocks[name], width=92, initial_indent=indent, subsequent_indent=indent, break_on_hyphens=False)
            return f"{indent}<!-- {name} -->\n{wrapped}\n{indent}<!-- /{name} -->"

        page.write_text(re.sub(BLOCK.format(name=r"[\w:.-]+"), fill, text, flags=re.S))


def main() -> None:
    if sys.argv[1:] == ["--render"]:
        render()
        return
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
    if claims.training:  # a grid without trained pairs has no claim 3 table
        print(training_table(claims), end="\n\n")
    if across := across_runs_table(claims):
        print(across, end="\n\n")
    if claims.ceiling:
        print(ceiling_table(claims), end="\n\n")
    print(summary_lines(claims))
    if args.profile:
        print("", profile_table(json.loads(args.profile.read_text()), args.stages), sep="\n")


if __name__ == "__main__":
    main()
