"""A setting's claims: each of the paper's three questions answered for one audit of a grid.

A claim builder reads a finished audit (and claim 2's sweeps and null, kept in the store by
:func:`mine_setting`) and returns the frozen records of :mod:`rnr_lens.judge.claims`; it loads no
model and draws no figure, so a referee's re-derivation from the evidence alone
(:func:`rnr_lens.grids.reports.rederive`) calls the very functions the run called:

- :func:`claim_routes`: claim 1, random routes against the search at the grid's budget;
- :func:`claim_bottleneck`: claim 2, the bottleneck MLP of the reachable-not-realized set,
  with :func:`screen_agreement` where every block was swept;
- :func:`claim_training`: claim 3, one trained pair on one task.

:func:`mine_setting` is claim 2's one computation with a model: everything it finds goes to
the store under the names below, and :func:`claim_bottleneck` reads it back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from rnr_lens.bottleneck import failures
from rnr_lens.bottleneck.sweep_results import SweepResult, load_null, save_null
from rnr_lens.core.stats import Estimate, paired_difference, rate
from rnr_lens.errors import arg
from rnr_lens.grids.grid import Grid
from rnr_lens.judge import verdicts
from rnr_lens.judge.claims import (
    BottleneckClaim,
    FailureSetSize,
    FormatMisses,
    RoutesClaim,
    ScreenAgreement,
    Setting,
    TrainingClaim,
    TrainingProbe,
)
from rnr_lens.judge.sweeps import BlockRates, ranked, within_bound
from rnr_lens.judge.verdict_words import Reason
from rnr_lens.measure import selectors
from rnr_lens.measure.probe_specs import budget_label
from rnr_lens.measure.results import FORMAT_MISS_WARN, AuditResult
from rnr_lens.measure.store import Artifact, RunStore
from rnr_lens.model.routes import Route
from rnr_lens.trained_pair.comparison import compare

REPORT_SET = "report"
"""The name of the failure set a report freezes in each audit (and of the null kept beside it)."""
SCREEN_SWEEP, EXHAUSTIVE_SWEEP = "report:screen+confirm", "report:exhaustive"
"""The names a report keeps its two sweeps under (so the exhaustive one never hides the screen)."""


def _setting_columns(result: AuditResult, probes: Sequence[str]) -> tuple[pd.DataFrame, np.ndarray]:
    """The questions complete under every probe of ``probes`` (and the mask that picks them)."""
    mask = np.ones(len(result.questions), dtype=bool)
    for probe in probes:
        mask &= result.complete_mask(probe).to_numpy()
    return result.questions[mask], mask


def claim_routes(result: AuditResult, grid: Grid) -> RoutesClaim:
    """Claim 1 for one audit: random routes against search at the matched budget, with the
    verdict (:func:`rnr_lens.judge.verdicts.routes_vs_search`) and each answer-blind selector's
    retention of the oracle's gain, judged where reach is resolved above chance."""
    random_probe, search_probe = result.probe_name(grid.random), result.probe_name(grid.search)
    rows = {s.probe: s for s in result.probe_summaries()}
    q, mask = _setting_columns(result, (random_probe, search_probe))
    prompts = q["prompt"].tolist()
    realized = q["realized"].to_numpy(float)
    reach = {p: q[result.column(p)].to_numpy(float) for p in (random_probe, search_probe)}
    chance = {p: result.chance(p)[mask] for p in (random_probe, search_probe)}
    decided = verdicts.routes_vs_search(
        reach[random_probe], reach[search_probe], realized, chance[random_probe], chance[search_probe], prompts, margin=grid.margin
    )
    above = {random_probe: decided.above_chance_random, search_probe: decided.above_chance_search}
    retention: dict[str, dict[str, Estimate | None]] = {}
    gross: dict[str, dict[str, Estimate | None]] = {}
    gains: dict[str, Estimate] = {}
    judged: dict[str, list[verdicts.Retention]] = {}
    for probe in (random_probe, search_probe):
        picks = result.selections(probe).pivot(index="question_id", columns="selector", values="correct").reindex(q["question_id"])
        blind = {s: picks[s].to_numpy(float) for s in selectors.ANSWER_BLIND if s in picks}
        gain = paired_difference(reach[probe], realized, prompts)
        judged[probe] = verdicts.retention(blind, realized, reach[probe], above[probe], prompts, gain=gain, margin=grid.retention_margin)
        gains[probe] = gain
        retention[probe] = {r.selector: r.estimate for r in judged[probe]}
        gross[probe] = {r.selector: r.gross for r in judged[probe]}
    # read leniently (any try whose text states the gold counts as correct), would it differ?
    stated = {p: q["question_id"].isin(result.format_misses(p)["question_id"]).to_numpy(float) for p in (random_probe, search_probe)}
    lenient = verdicts.routes_vs_search(  # reach and its chance level both read leniently: matched
        np.maximum(reach[random_probe], stated[random_probe]),
        np.maximum(reach[search_probe], stated[search_probe]),
        realized,
        result.chance(random_probe, lenient=True)[mask],
        result.chance(search_probe, lenient=True)[mask],
        prompts,
        margin=grid.margin,
    ).verdict
    routes = result.tries.loc[result.tries["probe"] == search_probe, "route"].dropna()
    depth = [Route.edits_of(str(r)) for r in routes]  # linear in the text, whatever depth a route claims
    random_row, search_row = rows[random_probe], rows[search_probe]
    return RoutesClaim(
        setting=setting_of(result),
        random=random_probe,
        search=search_probe,
        questions=len(q),
        realized=random_row.realized,
        reachable_random=_measured(random_row.reachable),
        reachable_search=_measured(search_row.reachable),
        chance_random=_measured(random_row.chance),
        chance_search=_measured(search_row.chance),
        above_chance_random=decided.above_chance_random,
        above_chance_search=decided.above_chance_search,
        random_minus_search=decided.difference,
        random_minus_search_margin=decided.versus_margin,
        search_gain=decided.search_gain,
        random_gain=decided.random_gain,
        kept_half=decided.kept_half,
        margin=grid.margin,
        edits_random=grid.edits,
        edits_search_mean=float(np.mean(depth)) if depth else None,
        edits_search_max=max(depth, default=None),
        oracle_gain=gains,
        retention=retention,
        retention_gross=gross,
        retention_verdict=verdicts.retention_verdict(judged[random_probe], margin=grid.retention_margin),
        verdict=decided.verdict,
        format_misses=_format_misses(result, {p: int(stated[p].sum()) for p in (random_probe, search_probe)}, decided.verdict, lenient),
    )


def _measured(e: Estimate | None) -> Estimate:
    """A probe's rate in its summary (present for every probe, empty over no questions)."""
    return e if e is not None else Estimate.empty()


def setting_of(result: AuditResult) -> Setting:
    """The setting an audit's claim records speak for."""
    return Setting(result.info.model, result.info.task, result.id, result.info.config_hash)


def _format_misses(result: AuditResult, probes: dict[str, int], verdict: verdicts.Verdict, lenient: verdicts.Verdict) -> FormatMisses:
    """A setting's format misses: greedy answers, and questions where one of each probe's
    tries, that state the gold but were read as another number; and claim 1's verdict read
    leniently (every stated number counts, for reach and its chance level alike). A note where
    the greedy share passes :data:`~rnr_lens.measure.results.FORMAT_MISS_WARN` or the lenient verdict
    differs; numeric tasks only."""
    misses, answered = result.format_miss_share()
    share = misses / answered if answered else 0.0
    note = None
    if result.info.answer_type == "number" and (share > FORMAT_MISS_WARN or lenient.status != verdict.status):
        tries = ", ".join(f"{budget_label(p)} {n}" for p, n in probes.items())
        note = (
            f"format misses: {misses} of {answered} greedy answers, and on {tries} questions a try, state the gold but read as another number; "
            + (
                f"read leniently (every stated number counts, for reach and chance alike) the verdict would be {lenient.status}"
                if lenient.status != verdict.status
                else "read leniently the verdict is the same"
            )
        )
    return FormatMisses(misses, answered, probes, result.config.extractor, lenient.status, note)


def _mine_where_audited() -> str:
    """The fix-it hint of a report whose mining model is not its audit's
    (:func:`rnr_lens.bottleneck.failures.check_weights`), naming the argument as the caller spells it."""
    return (
        "a grid mines with the weights it audited, and Ray workers load their own (on GPUs in bfloat16): "
        f"run it with {arg('executor', 'local')} (its audits then run here, with the weights that mine them)"
    )


def mine_setting(model: Any, result: AuditResult, store: RunStore, grid: Grid, progress: bool) -> None:
    """Claim 2's computation for one audit, every result kept in ``store`` (nothing returned:
    :func:`claim_bottleneck` reads them back): the reachable-not-realized set frozen, the
    screen+confirm sweep, with ``exhaustive`` the sweep of every block, and the null beside the
    block the deciding sweep picks. ``model`` must hold the weights that audited ``result``
    (checked first: one line naming the fix where it does not)."""
    failures.check_weights(model, result.info.model_fingerprint, result.id, fix=_mine_where_audited())
    from rnr_lens.bottleneck.miner import mine, null_beside  # the model floor: only where a run mines

    probe = result.probe_name(grid.sampling)
    if len(result.reachable_not_realized(probe)) < failures.MIN_FAILURES:
        return
    fs = failures.freeze(result, store, probe=probe, name=REPORT_SET)
    sweep = mine(model, fs, strategy="screen+confirm", top_m=3, break_bound=grid.break_bound, store=store, progress=progress, name=SCREEN_SWEEP)
    judged = sweep
    if grid.exhaustive and len(ranked(sweep.table)):  # reuses the confirmed evaluations from the store; generates the rest
        judged = mine(model, fs, strategy="exhaustive", break_bound=grid.break_bound, store=store, progress=progress, name=EXHAUSTIVE_SWEEP)
    null = null_beside(model, fs, judged, store=store)
    if null is not None:
        save_null(null, store, result.id, REPORT_SET)


def claim_bottleneck(result: AuditResult, store: RunStore, grid: Grid) -> BottleneckClaim:
    """Claim 2 for one audit, read from what :func:`mine_setting` kept in ``store`` (no model):
    the bottleneck MLP of its reachable-not-realized set (chosen on the discovery half within
    the grid's break bound), its held-out repair beside the null (an arbitrary block's
    silencing, an unablated re-run), and the verdict (:func:`rnr_lens.judge.verdicts.bottleneck_verdict`).
    With ``exhaustive``, the sweep of every block decides (its pick, and against only from it);
    the screen's pick is compared with it. It draws nothing: the page draws the screen's sweep
    (:data:`SCREEN_SWEEP`) where the claim has a failure set (``mined``)."""
    probe = result.probe_name(grid.sampling)
    n_fail = len(result.reachable_not_realized(probe))
    chance = failure_set_chance(result, probe)
    if n_fail < failures.MIN_FAILURES:
        reason = Reason("bottleneck:no-set", {"failures": n_fail, "probe": probe})
        return BottleneckClaim(setting_of(result), n_fail, verdicts.Verdict(verdicts.UNINFORMATIVE, reason), chance=chance)
    fs = failures.load(result, store, REPORT_SET)
    sweep = SweepResult.load(store, SCREEN_SWEEP, audit=result.id)
    agreement, judged = None, sweep
    if store.get_artifact(result.id, Artifact.SWEEP, EXHAUSTIVE_SWEEP) is not None:  # kept where the grid swept every block
        full = SweepResult.load(store, EXHAUSTIVE_SWEEP, audit=result.id)
        done = ranked(sweep.table)
        picked = sweep.bottleneck.layer if sweep.bottleneck else int(done.iloc[0]["layer"])
        agreement, judged = screen_agreement(full, picked), full  # every block generated: the full sweep decides
    null = load_null(store, result.id, REPORT_SET)  # kept where the set has a held-out half
    decided = judged.verdict(null, break_bound=grid.break_bound, chance=chance)
    kept = decided.layer
    order = ([kept] if kept is not None else []) + [int(r) for r in ranked(judged.table)["layer"] if int(r) != kept]
    blocks = [_block_rates(judged, b) for b in order[:2]]
    # one interval: the kept block's held-out repair as the verdict read it (at the tie's Holm level)
    if kept is not None and decided.heldout is not None:
        blocks[0] = replace(blocks[0], repair_heldout=decided.heldout)
    # without a bottleneck (no generated block repairs within the bound) the best other block is shown as second
    picked_rates, rest = (blocks[0], blocks[1:]) if kept is not None else (None, blocks)
    return BottleneckClaim(
        setting_of(result),
        n_fail,
        decided.verdict,
        mined=_failure_set_size(result, fs),
        break_bound=grid.break_bound,
        null=null,
        screen_vs_exhaustive=agreement,
        bottleneck=picked_rates,
        second=rest[0] if rest else None,
        versus_null=dict(decided.versus_null),
        tie=decided.tie,
        chance=chance,
    )


def failure_set_chance(result: AuditResult, probe: str) -> verdicts.FailureSetChance:
    """Claim 2's precondition for one audit: its reachable-not-realized set under ``probe``
    against the size its tries give by chance (:func:`rnr_lens.judge.verdicts.failure_set_vs_chance`),
    over the questions complete under the probe."""
    q, mask = _setting_columns(result, (probe,))
    return verdicts.failure_set_vs_chance(
        q[result.column(probe)].to_numpy(float), q["realized"].to_numpy(float), result.chance(probe)[mask], q["prompt"].tolist()
    )


def _failure_set_size(result: AuditResult, fs: Any) -> FailureSetSize:
    """A failure set's halves and control set, and how many of its questions fail only by
    format (the default answer states the gold, read as another number): a repair there may be a
    repair of the format."""
    stated = set(result.format_misses()["question_id"])
    n = sum(q.id in stated for q in fs.failures)
    note = f"{n} of {len(fs.failures)} failures state the gold but read as another number: a repair may fix the format" if n else None
    control = len(fs.control) if fs.control is not None else 0
    return FailureSetSize(len(fs.discovery), len(fs.heldout), control, n, result.config.extractor, note)


def _block_rates(sweep: Any, layer: int) -> BlockRates:
    """One generated block's rates its claim keeps: repair on each half (the held-out one tested
    against most) and break on the held-out controls (the ones that did not admit it)."""
    held, broken = sweep.repaired(layer, "heldout"), sweep.broken(layer, half="heldout")
    return BlockRates(
        layer,
        repair_discovery=rate(sweep.repaired(layer, "discovery")),
        repair_heldout=rate(held, null=verdicts.MOST),
        break_heldout=rate(broken),
    )


def screen_agreement(full: SweepResult, picked: int) -> ScreenAgreement:
    """Does the screen's pick (``picked``, confirmed among its top candidates) agree with the
    block an exhaustive sweep (``full``) picks by the same rule: the best discovery repair
    within the break bound (:attr:`SweepResult.bottleneck`), or, where no block is within it,
    the best generated block, as the screen's pick is then too.

    ``regret`` is the discovery repair the screen's pick gives up against that block (0: it
    found it, or a tied one); a pick outside the bound gives up all of it. ``spearman`` is the
    rank correlation of the log-prob screen with the generated repair rates over every block.
    """

    table = ranked(full.table)
    best = full.bottleneck.layer if full.bottleneck is not None else int(table.iloc[0]["layer"])
    repair = {int(r["layer"]): float(r["repair_discovery"]) for _, r in table.iterrows()}
    within = {int(layer) for layer in within_bound(table, full.break_bound)["layer"]}
    given_up = repair[best] - (repair[picked] if full.bottleneck is None or picked in within else 0.0)
    return ScreenAgreement(
        screen_block=picked,
        exhaustive_block=best,
        exhaustive_repair_discovery=repair[best],
        same_block=best == picked,
        regret=given_up,
        spearman=(full.agreement.get("screen_logprob") or {}).get("spearman"),
    )


def claim_training(a: AuditResult, b: AuditResult, grid: Grid | None = None) -> TrainingClaim:
    """Claim 3 for one trained pair on one task: did training realize or expand? Per probe,
    over the questions complete in both audits (:func:`rnr_lens.judge.verdicts.training_verdict`)."""
    margin = grid.margin if grid is not None else verdicts.MARGIN
    c = compare(a, b)
    out = []
    for row in c.deltas.to_dict("records"):
        probe = row["probe"]
        decided = c.verdict(probe, margin)
        out.append(
            TrainingProbe(
                probe=probe,
                questions=int(row["n"]),
                excluded=int(c.excluded[probe]),
                delta_realized=decided.delta_realized,
                delta_reachable=decided.delta_reachable,
                ceiling_vs_margin=decided.ceiling_vs_margin,
                contrast=decided.ceiling_vs_gain,
                margin=margin,
                verdict=decided.verdict,
                above_chance_base=decided.above_chance_base,
                above_chance_trained=decided.above_chance_trained,
                transitions={str(k): {str(s): int(n) for s, n in v.items()} for k, v in c.transition_counts(probe).to_dict().items()},
            )
        )
    return TrainingClaim(a.info.task, (a.id, b.id), a.info.model, b.info.model, tuple(out))
