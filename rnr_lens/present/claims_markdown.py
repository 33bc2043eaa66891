"""One report's claims as Markdown: the tables and the sentences the README and the results
page print, each rendered from a :class:`~rnr_lens.judge.claims.Claims` (read back from
``claims.json``), never written by hand.

Nothing here decides or recomputes: every number, direction and count comes from the claim
records, so a referee re-renders a page from the committed ``claims.json`` alone (the tests
keep each rendered block equal to what the pages hold). Claim 2's columns are the ones
:func:`~rnr_lens.present.claim_columns.bottleneck_columns` chooses, as the report page's are; an
estimate reads as the report gives it (:meth:`~rnr_lens.core.stats.Estimate.text`) with true minus
signs. Several reports read together (side by side, before and after) are
:mod:`rnr_lens.present.claims_compared`'s.

Example:
    >>> table(["task", "n"], [["sub", "115"]])
    '| task | n |\\n| --- | --- |\\n| sub | 115 |'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rnr_lens.core.phases import INNER_PHASES, Profile
from rnr_lens.core.stats import Estimate
from rnr_lens.judge.claims import Claims, Setting
from rnr_lens.judge.verdicts import Verdict
from rnr_lens.measure.probe_specs import budget_label
from rnr_lens.present.claim_columns import bottleneck_columns, rows


class _Markdown:
    """The Markdown medium of claim columns: estimates with true minus signs, a verdict as its
    bold status with the n that would decide it (its reason is listed apart, in ``reasons``)."""

    def estimate(self, e: Estimate | None) -> str:
        return estimate(measured(e) if e is not None else None)

    def verdict(self, v: Verdict, note: str | None) -> str:
        return status(v)


MARKDOWN = _Markdown()


def status(v: Verdict) -> str:
    """A verdict in a table's cell: ``**unresolved** (n≈240)``."""
    return f"**{v.status}**" + (f" (n≈{v.n_needed:,})" if v.n_needed else "")


def estimate(e: Estimate | None) -> str:
    return "–" if e is None else e.text().replace(",", ", ").replace("-", "−")


def number(v: float) -> str:
    """A rate or difference as the tables print one (two decimals, a true minus sign)."""
    return f"{v:.2f}".replace("-", "−")


def with_p(e: Estimate) -> str:
    """An estimate with its p: the test its interval inverts, the exact test beside it where one
    stands, flagged where the two disagree (:meth:`~rnr_lens.core.stats.Estimate.p_text`)."""
    return estimate(e) if e.p is None else f"{estimate(e)}, {e.p_text()}"


def task_name(setting: Setting | str) -> str:
    task = setting.task if isinstance(setting, Setting) else setting
    return Path(task).name


def table(columns: Sequence[str], rows: list[list[str]]) -> str:
    """A Markdown table; a ``|`` inside a cell is escaped, so it never splits the cell."""

    def cells(row: Sequence[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in row) + " |"

    lines = [cells(columns), "| " + " | ".join("---" for _ in columns) + " |"]
    return "\n".join(lines + [cells(r) for r in rows])


def routes_table(claims: Claims, model: str) -> str:
    """Claim 1: realized, each probe's reach beside its chance level, random − search, verdict."""
    rows = [
        [
            task_name(c.setting),
            str(c.questions),
            estimate(c.realized),
            f"{estimate(c.reachable_random)} ({c.chance_random.value:.2f})",
            f"{estimate(c.reachable_search)} ({c.chance_search.value:.2f})",
            with_p(c.random_minus_search),
            status(c.verdict),
        ]
        for c in claims.routes_vs_search
        if model in c.setting.model
    ]
    cols = ["task", "n", "realized", "random routes (chance)", "search (chance)", "random − search", "verdict"]
    return table(cols, rows)


def measured(e: Estimate) -> Estimate | None:
    """An estimate, or None where it is unmeasured (printed "–")."""
    return None if e.is_empty else e


def bottleneck_table(claims: Claims, model: str) -> str:
    """Claim 2 on ``model``'s settings, in the columns :func:`~rnr_lens.present.claim_columns.bottleneck_columns`
    chooses for a compact table (the report page shows the same, with its report-only ones)."""
    shown = [c for c in claims.bottleneck if model in c.setting.model]
    if not shown:
        return ""  # the grid mines no failure set
    columns = bottleneck_columns(shown, compact=True)
    return table([c.header for c in columns], rows(shown, columns, MARKDOWN))


def training_table(claims: Claims) -> str:
    """Claim 3: per pair and task, Δ realized and each probe's Δ reachable with its verdict; the
    run as :meth:`Claims.run_labels` names it."""
    probes = [p.probe for p in claims.training[0].probes] if claims.training else []
    rows = []
    for c, run in zip(claims.training, claims.run_labels(claims.training)):
        by = {p.probe: p for p in c.probes}
        cells = [
            f"{estimate(by[p].delta_reachable)} **{by[p].verdict.status}**" + _above_chance(by[p].above_chance_base, by[p].above_chance_trained)
            if p in by
            else "–"
            for p in probes
        ]
        rows.append([run, task_name(c.task), str(c.probes[0].questions), with_p(c.probes[0].delta_realized), *cells])
    return table(["run", "task", "n", "Δ realized", *(f"Δ reachable, `{budget_label(p)}` (each reach above chance)" for p in probes)], rows)


def _above_chance(base: Estimate, trained: Estimate) -> str:
    """Claim 3's precondition in a cell: each model's reach above its chance level ('' where none was measured)."""
    return "" if base.is_empty else f" (above chance: base {number(base.value)}, trained {number(trained.value)})"


def across_runs_table(claims: Claims) -> str:
    """Claim 3 side by side where a base has several trained runs: each run's verdict per task
    and probe, and how many runs share the most common one (:meth:`Claims.across_checkpoints`)."""
    groups = claims.across_checkpoints()
    if not groups:
        return ""
    runs = max(len(g.verdicts) for g in groups)
    rows = [[task_name(g.task), f"`{budget_label(g.probe)}`", *g.cells(runs)] for g in groups]
    return table(["task", "probe", *(f"run {i + 1}" for i in range(runs)), "agreement"], rows)


def chance_note(e: Estimate) -> str:
    """A chance level in a cell beside the reach it belongs to ('' where none was measured)."""
    return "" if e.is_empty else f" (chance {e.value:.2f})"


def ceiling_table(claims: Claims) -> str:
    """Claim 3 at large k: per run and task, pass@k of both models beside its chance level and
    their difference at each named k, claim 3's verdict there, and where the curves cross
    (:class:`rnr_lens.judge.ceiling.Crossing`) beside what guessing alone gives (chance pass@K and the
    distinct answers per question)."""
    rows = []
    for c, run in zip(claims.ceiling, claims.run_labels(claims.ceiling)):
        for k, v in c.verdicts:
            p = c.at(k)
            rows.append(
                [
                    run,
                    task_name(c.task),
                    str(k),
                    estimate(p.base) + chance_note(p.base_chance),
                    estimate(p.trained) + chance_note(p.trained_chance),
                    with_p(p.difference),
                    f"**{v.verdict.status}**",
                ]
            )
    shown = table(["run", "task", "k", "pass@k base (chance)", "pass@k trained (chance)", "trained − base", "claim 3 at k"], rows)
    crossings = "\n".join(
        f"- {run}, {task_name(c.task)}: {c.crossing.text()}" + (f"; {c.chance_text()}." if c.chance_text() else ".")
        for c, run in zip(claims.ceiling, claims.run_labels(claims.ceiling))
    )
    return f"{shown}\n\n{crossings}"


def _ks(values: Sequence[int | None], none: str) -> str:
    """Run-by-run k's as a sentence lists them ("5, 7 and 4"), ``none`` for a missing one."""
    words = [none if v is None else f"{v:,}" for v in values]
    if len(words) > 1 and len(set(words)) == 1:
        return f"{words[0]} in each"
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def counted(count: int, noun: str) -> str:
    """``1 setting``, ``3 settings``."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def listed(words: Sequence[str]) -> str:
    """Words as prose lists them ("1, 8 and 32"; one word alone)."""
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def span(values: Sequence[float], fmt: str = "{:,.0f}") -> str:
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
        return f"claim 3 is decided in none of its {counted(len(rows), 'comparison')}"
    statuses = sorted({s for _, s in decided})
    tasks = list(dict.fromkeys(task for task, _ in decided))
    per_task = ", ".join(f"`{task_name(t)}` {sum(1 for task, _ in decided if task == t)} of {sum(1 for task, _ in rows if task == t)}" for t in tasks)
    if len(statuses) > 1:
        verdict = " and ".join(f"{sum(1 for _, s in decided if s == st)} **{st}**" for st in statuses)
    else:
        verdict = f"{'all ' if len(decided) > 1 else ''}**{statuses[0]}**"
    rest = "; the rest unresolved or uninformative" if len(decided) < len(rows) else ""
    return f"claim 3 is decided in {len(decided)} of {counted(len(rows), 'comparison')}, {verdict} ({per_task}{rest})"


def _where(settings: Sequence[Setting]) -> str:
    """Settings as prose names them, grouped by model ("smollm2-135m-instruct `sub`, `word-problems`")."""
    models = dict.fromkeys(s.model for s in settings)
    return "; ".join(f"{m} " + ", ".join(f"`{task_name(s)}`" for s in settings if s.model == m) for m in models)


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
    return f"{label} is decided in {len(decided)} of {counted(total, 'setting')} ({'; '.join(parts)})"


def _realized_change(runs: Sequence[Any]) -> str:
    """A task's realized change over its trained runs, worded by each run's own test: one run
    with its interval ("rose by 0.68 [0.52, 0.80]", "changed by 0.03 [...], not resolved"),
    several as the range of their points, their intervals' span and how many rose or fell
    resolved; where a rise is not resolved, the questions that would resolve it."""
    deltas = [c.probes[0].delta_realized for c in runs]
    up, down = (sum(d.resolved == side for d in deltas) for side in ("above", "below"))
    if len(deltas) == 1:
        (d,) = deltas
        said = f"realized accuracy changed by {with_p(d)}, " + ("a resolved rise" if up else "a resolved fall" if down else "not resolved")
    else:
        points = [number(v) for v in (min(d.value for d in deltas), max(d.value for d in deltas))]
        ends = [number(v) for v in (min(d.low for d in deltas), max(d.high for d in deltas))]
        moved = [f"{word}, resolved, in {hits} of {len(deltas)} runs" for hits, word in ((up, "rose"), (down, "fell")) if hits]
        clear = [d.exact_p for d in deltas if d.resolved is None and (d.low > 0 or d.high < 0) and d.exact_p is not None]
        if clear:  # an interval clear of 0 whose exact test does not agree
            moved.append(f"an interval clear of 0 with exact McNemar p {span(clear, '{:.2g}')} in {len(clear)}")
        by = f"{points[0]} in each" if points[0] == points[1] else f"{points[0]} to {points[1]}"  # as printed: "0.01 to 0.01" says nothing
        said = f"realized accuracy changed by {by} (95% intervals within {ends[0]} to {ends[1]}), " + (
            " and ".join(moved) if moved else f"resolved in none of the {len(deltas)} runs"
        )
    unresolved = [c for c, d in zip(runs, deltas) if d.resolved is None]
    needed = [p.verdict.n_needed for c in unresolved for p in c.probes if p.verdict.n_needed is not None]
    if needed:
        said += f" (about {span(needed)} questions would resolve {'it' if len(deltas) == 1 else 'an unresolved one'}; the task has {runs[0].probes[0].questions})"
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
        sizes = f" (failure sets of {span([c.failures for c in with_set])} questions in {counted(len(with_set), 'setting')})" if with_set else ""
        said.append(_by_status([(c.setting, c.verdict.status) for c in claims.bottleneck], "claim 2" + sizes, len(claims.bottleneck)))
    else:
        said.append("claim 2 is not evaluated (the grid mines no failure set)")
    if claims.training:
        three = training_decided(claims)
        for task in dict.fromkeys(c.task for c in claims.training):
            runs = [c for c in claims.training if c.task == task]
            three += f"; on `{task_name(task)}` {_realized_change(runs)}"
            probes = [p for c in runs for p in c.probes]
            if any(p.verdict.status in ("support", "against") for p in probes):
                continue
            moves = []
            for label in dict.fromkeys(budget_label(p.probe) for p in probes):
                deltas = [p.delta_reachable for p in probes if budget_label(p.probe) == label]
                for side, word in (("below", "fell"), ("above", "rose")):
                    if hits := sum(d.resolved == side for d in deltas):
                        moves.append(f"`{label}`'s ceiling {word}, resolved, in {hits} of {counted(len(deltas), 'run')}")
            three += "; there " + ", ".join(moves) if moves else ""
        said.append(three)
    else:
        said.append("claim 3 is not evaluated (the grid names no trained pair)")
    return "; ".join(said) + "."


def reasons(claims: Claims) -> str:
    """Every verdict of a grid at its probes' budget, one bullet each, with the reason its rule
    gives and, where undecided, what this n resolves and what n would decide it (the results
    page's ``reasons:GRID`` block). The reasons are the verdicts' own sentences, written by
    :mod:`rnr_lens.judge.verdicts` from the estimates they read; the large-k verdicts are the
    ceiling table's."""

    def bullet(name: str, v: Any) -> str:
        return f"- {name}: **{v.status}**: {v.text}" + (f"; {v.power_text}" if v.power_text else "")

    out = []
    for c in claims.routes_vs_search:
        out.append(bullet(f"claim 1, {c.setting.model} `{task_name(c.setting)}`", c.verdict))
        out.append(bullet(f"claim 1's retention, {c.setting.model} `{task_name(c.setting)}`", c.retention_verdict))
    out += [bullet(f"claim 2, {c.setting.model} `{task_name(c.setting)}`", c.verdict) for c in claims.bottleneck]
    for t, run in zip(claims.training, claims.run_labels(claims.training)):
        out += [bullet(f"claim 3, {run} `{task_name(t.task)}` `{budget_label(p.probe)}`", p.verdict) for p in t.probes]
    return "\n".join(out)


def summary_lines(claims: Claims) -> str:
    """The report's own summary, one bullet per claim (``claims.json``'s ``summary``, as the
    report page and this script's default output print it)."""
    return "\n".join(f"- {claim}: {line}" for claim, line in claims.summary.items())


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
        head = f"on `{task_name(task)}` ({runs[0].questions} questions, {n} run{'s' if n > 1 else ''}): "
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
                    f"{listed(below)} of {n} at k = {listed([str(k) for k in ks])}"
                )
            lines = [c.crossing for c in runs if c.crossing.extrapolated is not None]
            if lines:
                lows = [low for x in lines if x.extrapolated_interval is not None and (low := x.extrapolated_interval[0]) is not None]
                highs = [x.extrapolated_interval[1] for x in lines if x.extrapolated_interval is not None]
                top = (
                    f"{span([h for h in highs if h is not None])}, or no upper end in {sum(h is None for h in highs)}"
                    if None in highs
                    else span([h for h in highs if h is not None])
                )
                costs = [cost / 1e6 for c in runs if (cost := c.extrapolation_cost()) is not None]
                said.append(
                    f"a straight line in log k through the top three octaves reaches zero near k = {span([x.extrapolated for x in lines if x.extrapolated is not None])} "
                    f"in {len(lines)} of {n}, an extrapolation, not a measurement (its bootstrap 95% intervals, conditional on the line "
                    f"(sampling error only), run from {span(lows)} at the low end to {top} at the high end); measuring there would take "
                    f"about {span(costs, '{:.1f}')} million draws per pair on these questions"
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
                misfit = span([m.misfit for m in models], "{:.2f}")
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
                        f"at the line's zero it puts the gap at {span([g.value for g in gaps], '{:+.2f}')} (bootstrap 95% intervals within "
                        f"{span([min(g.low for g in gaps)], '{:+.2f}')} to {span([max(g.high for g in gaps)], '{:+.2f}')}), so a "
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
            at_budget = [c.at(budget) for c in runs]
            said.append(
                f"at k = {budget} base reaches {span([p.base.value for p in at_budget], '{:.2f}')} of the questions against "
                f"{span([p.trained.value for p in at_budget], '{:.2f}')} for trained"
            )
        tops = [c.at(budget) for c in runs]
        if not tops[0].base_chance.is_empty:  # rules 3: every ceiling beside what guessing alone gives
            said.append(
                f"by chance alone (the same draws against other questions' golds) base reaches "
                f"{span([t.base_chance.value for t in tops], '{:.2f}')} and trained {span([t.trained_chance.value for t in tops], '{:.2f}')} "
                f"at k = {budget}, from {span([c.distinct[0] for c in runs if c.distinct], '{:.1f}')} and "
                f"{span([c.distinct[1] for c in runs if c.distinct], '{:.1f}')} distinct answers per question"
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
    return table(["stage", "seconds", *INNER_PHASES, "rest"], rows)


def training_history(name: str, steps: Sequence[Mapping[str, Any]]) -> str:
    """What one training run did, from its history (``history.jsonl``'s lines, one per step, as
    ``rnr-lens train`` writes them) named ``name``: the steps, the groups dynamic sampling kept
    of those it sampled, and the rollouts' accuracy (each step's share correct, averaged over
    the steps)."""
    kept, sampled = sum(s["groups_kept"] for s in steps), sum(s["groups_sampled"] for s in steps)
    accuracy = sum(s["accuracy"] for s in steps) / len(steps)
    return (
        f"`{name}`: {counted(len(steps), 'step')}; dynamic sampling kept {kept} of the {sampled:,} groups it sampled"
        f" ({kept / sampled:.1%}), and the rollouts were correct {accuracy:.1%} of the time (averaged over the steps)."
    )
