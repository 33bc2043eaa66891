"""The failure-set miner: which single block, silenced, repairs the most of a failure set?

For every block and each requested component and ablation method, the **repair rate** (share of
the failure set the default deployment now answers correctly) and the **break rate** (share
of the control set it now gets wrong), each with a 95% Wilson interval, and the questions
repaired and broken with their answers before and after.

The exhaustive sweep costs blocks x components x methods greedy generations over the whole set.
``strategy="screen+confirm"`` gets the same answer far cheaper:

1. **screen** every candidate without generating: the change in the gold answer's
   teacher-forced log-probability on the discovery failures, computed from the clean run's
   residual stream at the ablated block onward (the blocks before it are not recomputed);
2. a second, cheaper screen: attribution patching (gradient x activation, one forward and one
   backward pass for all candidates);
3. **confirm** with full generation only the top ``top_m`` candidates of the first screen.

The **bottleneck** is the confirmed candidate with the highest repair rate on the discovery
half whose break rate stays under ``break_bound``; its repair rate is then reported on the
held-out half too. Every evaluation is stored in the run store (when one is given) and reused
on resume.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd
import torch

from rnr_lens.bottleneck.attribution import attribution_patching, gold_batch
from rnr_lens.bottleneck.failures import FailureSet
from rnr_lens.bottleneck.sweep_results import SweepKey as SweepKey  # re-exported: where mine's callers look
from rnr_lens.bottleneck.sweep_results import SweepResult as SweepResult
from rnr_lens.bottleneck.sweep_results import load_null as load_null
from rnr_lens.bottleneck.sweep_results import save_null as save_null
from rnr_lens.core.ablation_methods import ablation_method, check_component
from rnr_lens.core.display import progress_bar
from rnr_lens.core.phases import phase
from rnr_lens.core.records import Outcome
from rnr_lens.core.shards import Shard, complete_split
from rnr_lens.core.stats import rate
from rnr_lens.errors import RnrLensError
from rnr_lens.judge.sweeps import (
    NULL_BLOCKS,
    SWEEP_COMPONENTS,
    SWEEP_METHODS,
    TOP_M,
    Bottleneck,
    NullRepair,
    bottleneck_of,
    rates,
)
from rnr_lens.judge.sweeps import STRATEGIES as STRATEGIES  # re-exported beside mine
from rnr_lens.judge.verdicts import BREAK_BOUND
from rnr_lens.measure.store import Artifact, RunStore
from rnr_lens.model.interventions import Ablation
from rnr_lens.model.lens import LensModel
from rnr_lens.model.routes import Route
from rnr_lens.questions.tasks.core import Question, Task


def _reference(failure_set: FailureSet, model: LensModel) -> tuple[str, ...]:
    """Reference prompts for the methods that take them (mean, resample): the control set's rendered prompts."""
    source = failure_set.control if failure_set.control is not None else failure_set.failures  # no realized question: the failures
    return tuple(model.render(failure_set.config.prompt(q))[0] for q in list(source)[:16])


def screen_logprob(
    model: LensModel, questions: Sequence[Question], failure_set: FailureSet, candidates: list[Ablation], bar: Any = None
) -> dict[Ablation, float]:
    """Mean change of the gold answer's log-probability under each candidate ablation,
    recomputing only the blocks from the ablated one onward (from the clean residual stream);
    ``bar`` (a tqdm bar) advances once per candidate."""
    config = failure_set.config
    rows = gold_batch(model, questions, config)
    ids, mask, keep = rows.input_ids, rows.attention_mask, rows.keep
    position_ids = (mask.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        with phase("teacher-forced"):
            clean = rows.logprobs(model.forward_tokens(ids, mask, logits_to_keep=keep)).sum(-1)
            resid = model.residual_stream(ids, mask)
        out: dict[Ablation, float] = {}
        for ablation in candidates:
            start = ablation.layer
            route = Route(range(start, model.n_layers), model.n_layers)
            with model.intervene(route=route, ablations=[ablation]), phase("teacher-forced"):
                logits = model.forward_tokens(ids, mask, position_ids=position_ids, inputs_embeds=resid[start], logits_to_keep=keep)
            out[ablation] = float((rows.logprobs(logits).sum(-1) - clean).mean())
            if bar is not None:
                bar.update(1)
    return out


def _evaluate(
    model: LensModel, failure_set: FailureSet, ablation: Ablation | None, batch_size: int | None, shard: Shard | None = None
) -> list[Outcome]:
    """Greedy default-deployment answers on every failure and control question (of ``shard``)."""
    config = failure_set.config
    questions = [(g, q) for g, task in failure_set.groups for q in task if shard is None or shard.contains(q.id)]
    if not questions:
        return []
    gens = model.generate(
        [config.prompt(q) for _, q in questions],
        max_new_tokens=config.max_new_tokens,
        stop=config.stop,
        ablations=[ablation] if ablation else (),
        batch_size=batch_size,
    )
    rows = []
    for (group, q), gen in zip(questions, gens):
        extracted, correct = config.grade(gen.text, q, failure_set.discovery.answer_type)
        rows.append(Outcome(q.id, gen.text, extracted, correct, group))
    return rows


def mine(
    model: LensModel,
    failure_set: FailureSet,
    control_set: Sequence[Question] | None = None,
    *,
    components: Sequence[str] = SWEEP_COMPONENTS,
    methods: Sequence[str] = SWEEP_METHODS,
    strategy: str = STRATEGIES[0],
    top_m: int = TOP_M,
    break_bound: float = BREAK_BOUND,
    store: RunStore | None = None,
    batch_size: int | None = None,
    progress: bool = True,
    shard: str | Shard | None = None,
    name: str | None = None,
) -> SweepResult:
    """Sweep single-block ablations over a failure set and name the bottleneck.

    Args:
        model: The model the failure set was mined from.
        failure_set: A frozen :class:`~rnr_lens.bottleneck.failures.FailureSet`.
        control_set: Realized questions for the break rate (default: the set's own control).
        components: Any of ``mlp``, ``attn``, ``block``.
        methods: Registered ablation methods (:mod:`rnr_lens.core.ablation_methods`): ``zero``,
            ``mean``, ``resample`` (statistics from the control prompts), or one of one's own.
        strategy: ``screen+confirm`` or ``exhaustive``.
        top_m: Candidates the screen sends to full generation.
        break_bound: Largest break rate a bottleneck may have.
        store: Run store for resumable evaluations (keyed by the audit and failure set).
        batch_size: Rows per forward.
        progress: Show a tqdm progress bar.
        shard: Generate only for shard ``"i/n"`` of the questions (the screen, which does not
            generate, always covers the whole discovery set, so every shard confirms the same
            candidates). A shard's table covers its own questions; once the shards' stores are
            merged (:func:`rnr_lens.measure.store.merge`), ``mine`` on the merged store assembles the
            whole sweep from them without generating again.
        name: The name the sweep is kept under in ``store`` (default: its failure set's, the
            latest sweep of that set; a report keeps its screen and exhaustive sweeps apart).

    Example:
        >>> sweep = mine(model, failure_set, strategy="screen+confirm")  # doctest: +SKIP
        >>> sweep.bottleneck.layer  # doctest: +SKIP
    """
    if strategy not in STRATEGIES:
        raise RnrLensError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    for c in components:
        check_component(c)
    needs_reference = {k: ablation_method(k).needs_reference for k in methods}
    if top_m < 1:
        raise RnrLensError(f"top_m must be at least 1, got {top_m}")
    failure_set.check_model(model)
    if control_set is not None:
        failure_set = replace(failure_set, control=Task(f"{failure_set.name}:control", tuple(control_set), failure_set.discovery.answer_type))
    reference = _reference(failure_set, model) if any(needs_reference.values()) else ()
    candidates = [
        Ablation(layer, comp, method, reference if needs_reference[method] else ())
        for comp in components
        for method in methods
        for layer in range(model.n_layers)
    ]

    started = time.perf_counter()
    with phase("mine:screen"):
        scores, atp = screen(model, failure_set, candidates, components, methods, progress)
    screen_seconds = time.perf_counter() - started
    chosen = candidates if strategy == "exhaustive" else sorted(candidates, key=lambda a: -scores[a])[:top_m]
    part = Shard.parse(shard) if shard is not None else None
    with phase("mine:exhaustive" if strategy == "exhaustive" else "mine:confirm"):
        before, results = confirm(
            model, failure_set, chosen, SweepKey.base(model, failure_set, reference), store, part, batch_size, progress, strategy
        )
    table, details = _tabulate(failure_set, candidates, scores, atp, before, results)
    bottleneck = bottleneck_of(table, break_bound)
    agreement = _screen_agreement(table, bottleneck) if strategy == "exhaustive" else {}
    sweep = SweepResult(table, details, bottleneck, agreement, strategy, failure_set.name, {"screen_s": screen_seconds}, break_bound, part)
    if store is not None and part is None:
        sweep.save(store, failure_set.audit_id, name)
    return sweep


def screen(
    model: LensModel, failure_set: FailureSet, candidates: list[Ablation], components: Sequence[str], methods: Sequence[str], progress: bool = False
) -> tuple[dict[Ablation, float], dict[Ablation, float]]:
    """Stage 1 of mining: score every candidate without generating, on the discovery half:
    the change of the gold answer's teacher-forced log-probability (:func:`screen_logprob`) and
    attribution patching's linear estimate of it, each keyed by the candidate."""
    bar = progress_bar(progress, len(candidates) + 1, f"mine: screen {len(candidates)} blocks on {len(failure_set.discovery)} failures", "block")
    try:
        scores = screen_logprob(model, list(failure_set.discovery), failure_set, candidates, bar)
        by_key = {(a.layer, a.component, a.method): a for a in candidates}
        atp = attribution_patching(model, list(failure_set.discovery), failure_set.config, components, by_key, methods)
        if bar is not None:
            bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return scores, {by_key[key]: r.atp_estimate for r in atp.itertuples() if (key := (r.layer, r.component, r.method)) in by_key}


def confirm(
    model: LensModel,
    failure_set: FailureSet,
    chosen: Sequence[Ablation],
    base: SweepKey,
    store: RunStore | None,
    part: Shard | None,
    batch_size: int | None,
    progress: bool = False,
    strategy: str = "screen+confirm",
) -> tuple[dict[str, Outcome], dict[Ablation, list[Outcome]]]:
    """Stage 2 of mining: the greedy answers on every failure and control question (of
    ``part``) before any ablation and under each chosen one, each read from the store where
    it was kept (``base`` names them) or generated and kept. The audit's own default answers
    are the "before" answers when it has them all (same model, config, greedy decoding)."""
    bar = progress_bar(progress, len(chosen) + 1, f"mine: generate {len(chosen)} ablations + the clean run ({strategy})", "run")

    def evaluated(ablation: Ablation | None) -> list[Outcome]:
        outcomes = _stored_evaluation(model, failure_set, ablation, store, base, part, batch_size)
        if bar is not None:
            bar.update(1)
        return outcomes

    try:
        wanted = [q.id for _, task in failure_set.groups for q in task if part is None or part.contains(q.id)]
        if all(i in failure_set.before for i in wanted):
            before = {i: failure_set.before[i] for i in wanted}
            if bar is not None:
                bar.update(1)
        else:
            before = {o.question_id: o for o in evaluated(None)}
        return before, {a: evaluated(a) for a in chosen}
    finally:
        if bar is not None:
            bar.close()


def _tabulate(
    failure_set: FailureSet,
    candidates: Sequence[Ablation],
    scores: dict[Ablation, float],
    atp: dict[Ablation, float],
    before: dict[str, Outcome],
    results: dict[Ablation, list[Outcome]],
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Stage 3 of mining: one table row per candidate (screen scores, and for the generated
    ones their rates), and one detail row per generated candidate and question."""
    prompts = {q.id: q.prompt for _, task in failure_set.groups for q in task}
    rows, details = [], []
    for a in candidates:
        row: dict[str, Any] = {
            "layer": a.layer,
            "component": a.component,
            "method": a.method,
            "screen_logprob": scores[a],
            "screen_atp": atp.get(a),
        }
        if a in results:
            after = results[a]
            row.update(rates(a.layer, after, before, failure_set.heldout_controls).columns())
            for o in after:
                b = before[o.question_id]
                details.append(
                    {
                        "layer": a.layer,
                        "component": a.component,
                        "method": a.method,
                        "question_id": o.question_id,
                        "prompt": prompts.get(o.question_id, ""),
                        "set": o.set,
                        "half": ("heldout" if o.question_id in failure_set.heldout_controls else "discovery") if o.set == "control" else o.set,
                        "before_text": b.text,
                        "before_answer": b.extracted,
                        "before_correct": b.correct,
                        "after_text": o.text,
                        "after_answer": o.extracted,
                        "after_correct": o.correct,
                    }
                )
        rows.append(row)
    return pd.DataFrame(rows), pd.DataFrame(details)


def _screen_agreement(table: pd.DataFrame, bottleneck: Bottleneck | None) -> dict[str, Any]:
    """Stage 4, after an exhaustive sweep: each screen's rank correlation with the generated
    discovery repair, and whether its top block is the bottleneck."""
    agreement = {}
    for col in ("screen_logprob", "screen_atp"):
        sub = table.dropna(subset=[col])
        agreement[col] = {
            "spearman": float(sub[col].rank().corr(sub["repair_discovery"].rank()))
            if sub[col].nunique() > 1 and sub["repair_discovery"].nunique() > 1
            else None,
            "same_top": bool(bottleneck is not None and _top(sub, col) == (bottleneck.layer, bottleneck.component, bottleneck.method)),
        }
    return agreement


def _stored_evaluation(
    model: LensModel,
    failure_set: FailureSet,
    ablation: Ablation | None,
    store: RunStore | None,
    base: SweepKey,
    part: Shard | None,
    batch_size: int | None,
) -> list[Outcome]:
    """One candidate's evaluation: read back from the store (or its merged shards), else
    generated and stored."""
    key = base.of(ablation, part)
    stored = store.get_artifact(failure_set.audit_id, Artifact.SWEEP_EVAL, str(key)) if store is not None else None
    if stored is None and part is None and store is not None:
        stored = _from_shards(store, failure_set, key)
    if stored is not None:
        return [Outcome.from_dict(r) for r in stored]
    outcomes = _evaluate(model, failure_set, ablation, batch_size, part)
    if store is not None:
        store.put_artifact(failure_set.audit_id, Artifact.SWEEP_EVAL, str(key), [o.to_dict() for o in outcomes], overwrite=True)
    return outcomes


def null_repair(
    model: LensModel,
    failure_set: FailureSet,
    *,
    component: str = "mlp",
    blocks: int = NULL_BLOCKS,
    exclude: int | None = None,
    store: RunStore | None = None,
    batch_size: int | None = None,
    progress: bool = False,
) -> NullRepair:
    """The null of a repair rate on ``failure_set``'s held-out half: ``blocks`` blocks drawn
    uniformly (seeded by the failure set's name) from every block but ``exclude`` (the
    bottleneck it stands beside), each silenced, and an unablated re-run; evaluations are
    stored and reused like a sweep's."""
    failure_set.check_model(model)
    base = SweepKey.base(model, failure_set, ())
    pool = [b for b in range(model.n_layers) if b != exclude]
    drawn = tuple(sorted(random.Random(f"null:{failure_set.name}:{exclude}").sample(pool, min(blocks, len(pool)))))
    heldout = {q.id for q in failure_set.heldout}
    before = failure_set.before

    def repaired(outcomes: list[Outcome]) -> dict[str, float]:
        return {
            o.question_id: float(o.correct and not (before[o.question_id].correct if o.question_id in before else False))
            for o in outcomes
            if o.question_id in heldout
        }

    bar = progress_bar(progress, len(drawn) + 1, f"mine: null ({len(drawn)} arbitrary blocks + an unablated re-run)", "run")
    try:
        per_block, rerun = [], {}
        for ablation in [Ablation(b, component, "zero") for b in drawn] + [None]:
            with phase("mine:null"):
                got = repaired(_stored_evaluation(model, failure_set, ablation, store, base, None, batch_size))
            if ablation is None:
                rerun = got
            else:
                per_block.append(got)
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    ids = sorted(heldout)
    shares = np.array([np.mean([r.get(i, 0.0) for r in per_block]) for i in ids]) if per_block else np.array([])
    again = np.array([rerun.get(i, 0.0) for i in ids])
    per_question = {"random block": dict(zip(ids, shares.tolist())), "unablated re-run": dict(zip(ids, again.tolist()))}
    return NullRepair(drawn, rate(shares), rate(again), per_question if per_block else {"unablated re-run": per_question["unablated re-run"]})


def null_beside(
    model: LensModel,
    failure_set: FailureSet,
    sweep: SweepResult,
    *,
    blocks: int = NULL_BLOCKS,
    store: RunStore | None = None,
    batch_size: int | None = None,
    progress: bool = False,
) -> NullRepair | None:
    """The null that ``sweep``'s bottleneck stands beside in its verdict: :func:`null_repair`
    with ``blocks`` blocks other than the bottleneck (any ``blocks`` when there is none). None
    where it would measure nothing: ``blocks=0``, no held-out failures, or a shard's sweep
    (the null is drawn once the shards are merged). ``rnr-lens mine`` and a report both call
    this, so both judge a bottleneck beside the same null.

    Example:
        >>> sweep = mine(model, failure_set, store=store)  # doctest: +SKIP
        >>> sweep.verdict(null_beside(model, failure_set, sweep, store=store)).verdict  # doctest: +SKIP
    """
    if not blocks or not len(failure_set.heldout) or sweep.shard is not None:
        return None
    exclude = sweep.bottleneck.layer if sweep.bottleneck is not None else None
    return null_repair(model, failure_set, blocks=blocks, exclude=exclude, store=store, batch_size=batch_size, progress=progress)


def _from_shards(store: RunStore, failure_set: FailureSet, key: SweepKey) -> list[dict[str, Any]] | None:
    """One candidate's evaluation assembled from merged shard evaluations, when some ``i/n``
    split is complete; rows in the failure set's own order."""
    found = {SweepKey.shard_of(name): body for name, body in store.artifacts(failure_set.audit_id, Artifact.SWEEP_EVAL, key.shards_prefix).items()}
    count = complete_split(found)
    if count is None:
        return None
    rows = {r["question_id"]: r for shard, body in found.items() if shard.count == count for r in body}
    order = [q.id for _, task in failure_set.groups for q in task]
    return [rows[i] for i in order if i in rows]


def _top(table: pd.DataFrame, column: str) -> tuple[int, str, str]:
    best = table.sort_values([column, "layer"], ascending=[False, True]).iloc[0]
    return int(best.layer), best.component, best.method
