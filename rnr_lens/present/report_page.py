"""The claims report as one self-contained HTML page, read from a :class:`~rnr_lens.judge.claims.Claims`.

The page renders what ``claims.json`` holds and decides nothing: every verdict, estimate and
note comes from the claim records (:func:`rnr_lens.grids.reports.report` builds them), so a written report
can be rendered again from its ``claims.json``. Plotly figures are embedded inline with
plotly.js once, so the page reads offline.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from typing import Any

from rnr_lens.core.display import estimate_text, html_table
from rnr_lens.core.provenance import Provenance
from rnr_lens.core.stats import Estimate
from rnr_lens.judge.claims import Claims, RoutesClaim
from rnr_lens.judge.verdicts import Verdict
from rnr_lens.measure.probe_specs import budget_label
from rnr_lens.present.claim_columns import bottleneck_columns, rows
from rnr_lens.present.viz import caption, ceiling_curves
from rnr_lens.questions.deploy import DeploymentConfig
from rnr_lens.questions.tasks.core import Question

HOW_TO_READ = (
    "Every rate has a Wilson 95% interval (over prompts, with their design effect, where questions repeat one; the sweep's "
    "repair and break rates count questions). Paired differences (random - search, delta realized, delta reachable, a "
    "probe's gain over realized) have Tango's score interval with the score test it inverts, and count as resolved only "
    "where the exact McNemar test beside it agrees too, in the direction of the estimate; contrasts (random routes keeping half of the search's gain; half the realized "
    "rise minus the ceiling's) have the same score construction with the score test it inverts, and margins are tested by "
    "that score test at the shifted null. A probe's reach above its chance level treats the chance level as fixed: the "
    "reach's Wilson interval shifted, with the score test it inverts and the exact Poisson-binomial test beside it. "
    "A failure set, and a trained pair's reaches, speak to their claims only above their chance levels. Reachable: one of the probe's own k tries is "
    "correct; the default answer is never counted, so reachable can fall below realized. Chance: the same tries scored "
    "against other questions' gold answers. Random routes are drawn per question from the search's own move set "
    "(single-block skips and repeats) at the same budget, never the identity route and never one route twice. Retention: "
    "(blind - realized) / (oracle - realized), net of lost realized answers, with Fieller's interval and its t-test, given "
    "only where the probe's reach is resolved above chance and its gain over realized above zero. Each verdict is support, "
    "against, unresolved or uninformative (the setting cannot speak to the claim); an unresolved verdict says what n would "
    "decide it. Levels are per setting and per claim (one-sided 2.5% each way), with no correction across the grid: about "
    "2.5% of settings per direction are expected to be decided wrongly by chance, and the summary's counts are a tally, "
    "not a test."
)


class _Figures:
    """Plotly figures inline, each with its caption; plotly.js itself is embedded once, with the
    first figure the page shows (so the page reads offline)."""

    def __init__(self) -> None:
        self.embedded = False

    def html(self, figures: list[tuple[str, Any]]) -> str:
        out = []
        for title, fig in figures:
            out.append(
                f"<h3>{html.escape(title)}</h3>"
                + fig.to_html(full_html=False, include_plotlyjs=False if self.embedded else "inline")
                + f"<p class='caption'><i>{html.escape(caption(fig))}</i></p>"
            )
            self.embedded = True
        return "".join(out)


def _edits_text(c: RoutesClaim) -> str:
    """The random routes' fixed depth beside the depth the search's tried routes reached."""
    return f"{c.edits_random} / " + ("-" if c.edits_search_mean is None else f"{c.edits_search_mean:.1f} (max {c.edits_search_max})")


def _retention_text(net: Any, gross: Any) -> str:
    """A selector's net retention, with its gross share of the gained questions where known."""
    return estimate_text(net) + (f" (gross {estimate_text(gross)})" if gross is not None else "")


def _above_chance_text(base: Estimate, trained: Estimate) -> str:
    """Claim 3's precondition beside a change of reach: each model's reach above its chance
    level ('' where none was measured: files of rules before 3)."""
    return "" if base.is_empty else f" (above chance: base {estimate_text(base)}, trained {estimate_text(trained)})"


def _verdict_text(v: Verdict, note: str | None = None) -> str:
    """``unresolved: … (this n resolves …)``, with the setting's format-miss note where it has one."""
    return str(v) + (f" [{note}]" if note else "")


class _Page:
    """The report page's medium of claim columns: an estimate as every view prints it, a
    verdict as its whole sentence (written beneath its row)."""

    def estimate(self, e: Estimate | None) -> str:
        return estimate_text(e)

    def verdict(self, v: Verdict, note: str | None) -> str:
        return _verdict_text(v, note)


_PAGE = _Page()


def render_html(claims: Claims, figures: dict[str, list[tuple[str, Any]]] | None = None) -> str:
    """The report as one self-contained HTML page: tables, and the plotly figures (with
    plotly.js embedded, so it reads offline): the header, each claim's section in turn, the
    deployment configs and the provenance."""
    figures = figures or {}
    shown = _Figures()
    sections = [
        _header_html(claims),
        _routes_html(claims) + shown.html(figures.get("routes", [])),
        _retention_html(claims),
        _bottleneck_html(claims) + shown.html(figures.get("bottleneck", [])),
        _training_html(claims),
        _ceiling_html(claims, shown),
        _configs_html(claims),
    ]
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>rnr_lens claims report</title>"
        "<style>body{font-family:Helvetica,Arial,sans-serif;max-width:1200px;margin:2em auto;color:#222}"
        "table{border-collapse:collapse;margin:0.5em 0}tr:nth-child(even){background:#f6f6f6}</style></head><body>"
        + "".join(sections)
        + "</body></html>"
    )


def _header_html(claims: Claims) -> str:
    """The title, whether the report is partial, how to read it, the rules' version and the summary."""
    done = claims.progress
    partial = (
        f"<p><b>Partial report: {done.audits_done} of {done.audits_total} audits done. Rerun the same command to resume; "
        "every count below covers only the settings done so far.</b></p>"
        if done is not None and not done.complete
        else ""
    )
    return (
        f"<h1>rnr_lens claims report</h1>{partial}<p>{html.escape(HOW_TO_READ)}</p>"
        f"<p>Verdict rules: version {html.escape(claims.rules)} (rnr_lens.judge.verdicts.RULES).</p>"
        "<h2>Summary</h2><ul>" + "".join(f"<li>{html.escape(v)}</li>" for v in claims.summary.values()) + "</ul>"
    )


def _routes_html(claims: Claims) -> str:
    """Claim 1's section: random routes against the search, per setting."""
    e = estimate_text
    rows: list[list[Any]] = [
        [
            c.setting.model,
            c.setting.task,
            e(c.realized),
            e(c.reachable_random),
            e(c.chance_random),
            e(c.reachable_search),
            e(c.chance_search),
            _edits_text(c),
            e(c.search_gain),
            e(c.random_minus_search),
            e(c.kept_half),
            _verdict_text(c.verdict, c.format_misses.note),
        ]
        for c in claims.routes_vs_search
    ]
    probes = claims.probes
    return (
        "<h2>1. Random routes against structured search at a matched budget</h2>"
        + "<p>"
        + html.escape(
            f"Probes compared (same k, same single-block skip/repeat move set): {' vs '.join(probes[1:])}; "
            "the default (identity) route's answer counts toward neither probe's reachability. The random routes make "
            "exactly the grid's number of edits; the search's tree goes as deep as its budget takes it (the edits "
            "column gives the mean and largest depth of the routes it tried). Against: random - search resolved below "
            f"-{claims.grid['margin']:.2f}, or random routes keeping less than half of the search's gain, (R-D) - (S-D)/2 "
            "resolved below zero (Holm over the two). Support: random routes resolved above both the search and realized; or, "
            "where the search's gain over realized (S - D) is resolved above zero and its reach above chance, random - "
            f"search's lower bound above -{claims.grid['margin']:.2f} and (R-D) - (S-D)/2 resolved above zero, both. "
            "Uninformative: the search gains nothing resolved to match."
        )
        + "</p>"
        + html_table(
            rows,
            [
                "model",
                "task",
                "realized",
                "random",
                "chance (random)",
                "search",
                "chance (search)",
                "edits: random / search",
                "search - realized",
                "random - search",
                "(R-D) - (S-D)/2",
                "verdict",
            ],
            below=("verdict",),
        )
    )


def _retention_html(claims: Claims) -> str:
    """Claim 1's second half: each answer-blind selector's retention of the oracle's gain (empty where none was measured)."""
    e = estimate_text
    names = list(dict.fromkeys(n for c in claims.routes_vs_search for r in c.retention.values() for n in r))
    keep = [
        [
            c.setting.model,
            c.setting.task,
            budget_label(probe),
            e(c.oracle_gain[probe]),
            *[_retention_text(r.get(n), c.retention_gross.get(probe, {}).get(n)) for n in names],
            _verdict_text(c.retention_verdict) if probe == c.random else "",
        ]
        for c in claims.routes_vs_search
        for probe, r in c.retention.items()
    ]
    if not keep:
        return ""
    return (
        "<h3>Retention of the gain by answer-blind selectors</h3><p>"
        + html.escape(
            "Retention = (blind - realized) / (oracle - realized) with Fieller's interval, net of the realized answers a "
            "selector loses (its gross share of the gained questions follows the net one); '-' where the probe's reach is "
            "not resolved above its chance level, since a share of a gain that may be chance means nothing. Against: one "
            "selector resolved above the margin, Holm over the selectors; support: every one resolved below. "
            "logprob-or-default keeps the default answer unless the probe's most confident try is more confident."
        )
        + "</p>"
        + html_table(keep, ["model", "task", "probe", "oracle gain", *names, "verdict"], below=("verdict",))
    )


def _bottleneck_html(claims: Claims) -> str:
    """Claim 2's section: the bottleneck MLP of each failure set beside its null."""
    columns = bottleneck_columns(claims.bottleneck, compact=False)
    return (
        "<h2>2. One MLP block and the failure set</h2><p>"
        + html.escape(
            "A failure set speaks to the claim only where its size is resolved above the size chance gives (the same tries "
            "scored against other questions' golds; the exact Poisson-binomial test beside the interval's own): otherwise the "
            "verdict is uninformative. "
            f"The bottleneck is chosen on the discovery half among blocks whose break rate on the discovery half of the "
            f"controls is at most {claims.grid['break_bound']:.2f}; blocks tied on discovery repair are each confirmed on "
            "the held-out half (Holm over the tie). Support needs all of: its held-out repair resolved above one half (exact "
            f"binomial test), its break rate on the held-out controls with a 95% upper bound below "
            f"{claims.grid['break_bound']:.2f}, and its held-out repair resolved above each null arm, paired per question "
            "(an arbitrary block: blocks drawn at random, silenced; the unablated model re-run in the same batches). Against "
            "needs an exhaustive sweep in which every block is ruled out (repair resolved below one half, or break above the "
            "bound, at 97.5% each); a screen alone never gives against."
            + (
                ""
                if any(c.screen_vs_exhaustive for c in claims.bottleneck)
                else " The exhaustive sweep was not run (the grid's exhaustive: true runs it), so no column compares the screen's pick with it."
            )
        )
        + "</p>"
        + html_table(
            rows(claims.bottleneck, columns, _PAGE),
            [c.header for c in columns],
            wrap=("screen vs exhaustive",),
            below=("verdict",),
        )
    )


def _training_html(claims: Claims) -> str:
    """Claim 3's section: each trained pair's realized and reachable deltas per probe."""
    e = estimate_text
    labels = claims.run_labels(claims.training)
    rows = [
        [
            c.base,
            label,
            c.task,
            budget_label(p.probe),
            f"{p.questions}" + (f" ({p.excluded} left out: unfinished)" if p.excluded else ""),
            e(p.delta_realized),
            e(p.delta_reachable) + _above_chance_text(p.above_chance_base, p.above_chance_trained),
            e(p.contrast),
            _verdict_text(p.verdict),
        ]
        for c, label in sorted(zip(claims.training, labels), key=lambda cl: cl[0].base)  # grouped by base: a base's runs together
        for p in c.probes
    ]
    return (
        "<h2>3. Training: realized against the reachable ceiling</h2><p>"
        + html.escape(
            "Over the questions complete in both audits. Checked first: at least one model's reach resolved above its chance "
            "level (the same tries scored against other questions' golds; uninformative where neither is). Then: a resolved "
            "rise in realized accuracy (uninformative "
            f"where it is resolved below zero or shown flat within ±{claims.grid['margin']:.2f}; unresolved otherwise). "
            f"Against: delta reachable resolved above +{claims.grid['margin']:.2f}. Support: delta reachable's upper bound "
            f"below +{claims.grid['margin']:.2f} and the contrast, delta realized / 2 - delta reachable per question, "
            "resolved above zero."
        )
        + "</p>"
        + (
            html_table(
                rows,
                ["base", "trained", "task", "probe", "n", "Δ realized", "Δ reachable (each reach above chance)", "Δr/2 - Δk", "verdict"],
                below=("verdict",),
            )
            if rows
            else "<p>No trained pairs in this grid.</p>"
        )
        + _across_checkpoints_html(claims)
    )


def _ceiling_html(claims: Claims, shown: _Figures) -> str:
    """Claim 3 at large k (grids with ``ceiling_k``; nothing otherwise): per trained pair and
    task, the curves and the verdict at each named k, the crossing, and the figure."""
    if not claims.ceiling:
        return ""
    e = estimate_text
    labels = claims.run_labels(claims.ceiling)
    rows = [
        [
            c.base,
            label,
            c.task,
            str(k),
            e(c.at(k).base) + ("" if c.at(k).base_chance.is_empty else f" (chance {c.at(k).base_chance.value:.2f})"),
            e(c.at(k).trained) + ("" if c.at(k).trained_chance.is_empty else f" (chance {c.at(k).trained_chance.value:.2f})"),
            e(c.at(k).difference),
            e(v.delta_reachable) + _above_chance_text(v.above_chance_base, v.above_chance_trained),
            _verdict_text(v.verdict),
        ]
        for c, label in sorted(zip(claims.ceiling, labels), key=lambda cl: cl[0].base)
        for k, v in c.verdicts
    ]
    crossings = "".join(
        f"<li>{html.escape(f'{label} on {c.task}: {c.crossing.text()}' + (f'; {c.chance_text()}' if c.chance_text() else ''))}</li>"
        for c, label in zip(claims.ceiling, labels)
    )
    figures = [(f"{label} against {c.base} on {c.task}", ceiling_curves(c, trained=label)) for c, label in zip(claims.ceiling, labels)]
    return (
        "<h2>3, at large k: the ceiling as pass@k curves</h2><p>"
        + html.escape(
            "pass@k is the unbiased estimator from every draw of the ceiling's probe (Wilson intervals; the difference, "
            "trained - base, with the score interval and the sign-flip test, pointwise at each k; at k = K, Tango's interval and McNemar's exact test). Claim 3's verdict at k reads a question as "
            "reached when one of its first k draws is correct (Δ reachable with Tango's interval and the exact McNemar test), "
            "under the rule above."
        )
        + "</p>"
        + html_table(
            rows,
            [
                "base",
                "trained",
                "task",
                "k",
                "pass@k base (chance)",
                "pass@k trained (chance)",
                "difference",
                "Δ reached in k (above chance)",
                "verdict",
            ],
            below=("verdict",),
        )
        + f"<ul>{crossings}</ul>"
        + shown.html(figures)
    )


def _configs_html(claims: Claims) -> str:
    """The deployment configs the audits ran under, then the provenance."""
    configs = "<h2>Deployment configs</h2>" + "".join(
        f"<h3>{html.escape(h)}</h3><pre>{html.escape(json.dumps(c, indent=1))}</pre>"
        f"<p>A question's prompt under it, before any chat template:</p><pre>{html.escape(_prompt_shape(c))}</pre>"
        for h, c in claims.configs.items()
    )
    return configs + (_provenance_html(claims.provenance) if claims.provenance is not None else "")


def _prompt_shape(config: Mapping[str, Any]) -> str:
    """The prompt a config gives a question, worked examples included, with ``{question}`` for
    the question (the one owner of the shape, :meth:`DeploymentConfig.prompt`, asked here)."""
    deployment = DeploymentConfig.from_dict(dict(config))
    if deployment.harness:
        return "(the harness's own prompt, verbatim)"
    prompt = deployment.prompt(Question("shape", "{question}", ""))
    if isinstance(prompt, str):
        return prompt
    turns = [f"system: {prompt.system}"] if prompt.system is not None else []
    turns += [f"{role}: {text}" for asked, answered in prompt.turns for role, text in (("user", asked), ("assistant", answered))]
    return "\n".join([*turns, f"user: {prompt.user}", f"assistant: {prompt.assistant_prefix}"])


def _provenance_html(p: Provenance) -> str:
    """What computed these numbers: each model's weights, each run's code and machine."""
    weights = [
        [
            m.spec,
            m.fingerprint,
            f"{m.device}, {m.dtype}",
            (m.training or {}).get("command", "") if m.checkpoint else "",
        ]
        for m in p.models
    ]
    runs = [
        [
            f"{r.start} to {r.end}",
            f"rnr_lens {r.code.version}"
            + (f" at {r.code.commit[:12]}" if r.code.commit else "")
            + (" with uncommitted changes" if r.code.dirty else ""),
            ", ".join(f"{k} {v}" for k, v in r.code.libraries.items()) + f", Python {r.code.python}",
            f"{r.machine.cpu}; {r.machine.cores} cores, "
            + ("torch not loaded" if r.machine.torch_threads is None else f"{r.machine.torch_threads} torch threads"),
        ]
        for r in p.runs
    ]
    return (
        "<h2>Provenance</h2><p>The weights each setting speaks for (an audit's id is made from the fingerprint), and the code "
        "and machine of each run (a grid resumed after a stop has several). <code>rnr-lens report --from-evidence</code> "
        "re-derives every number above from this report's evidence.json.gz without a model.</p>"
        + html_table(weights, ["model", "weights fingerprint", "device, dtype", "trained by"])
        + html_table(runs, ["run", "code", "libraries", "machine"])
    )


def _across_checkpoints_html(claims: Claims) -> str:
    """Claim 3's verdicts side by side where a base has several trained checkpoints."""
    groups = claims.across_checkpoints()
    if not groups:
        return ""
    runs = max(len(g.verdicts) for g in groups)
    rows = [[g.base, g.task, budget_label(g.probe), *g.cells(runs)] for g in groups]
    names = {g.base: [t for t, _ in g.verdicts] for g in groups}
    return (
        "<h3>Across training runs</h3><p>"
        + html.escape(
            "Each checkpoint trained from one base, side by side (runs in the grid's pair order: "
            + "; ".join(f"{base}: " + ", ".join(ts) for base, ts in names.items())
            + "). The agreement is a tally of per-run verdicts, each at its own level; a verdict shared by every run "
            "is a property of the training recipe on this model, not of one run."
        )
        + "</p>"
        + html_table(rows, ["base", "task", "probe", *[f"run {i + 1}" for i in range(runs)], "agreement"])
    )
