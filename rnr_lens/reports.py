"""The claims report: the paper's three questions, answered over a grid of models and tasks.

A :class:`Grid` names models, tasks and one budget ``k``; :func:`report` runs (or resumes) every
setting into one run store and answers, per setting, with intervals:

1. **Random routes against structured search at a matched budget.** Random routes drawn from
   the search's own move set (``routes:k,edits=d``) against the search (``search:k``, its
   answer-blind confidence reward), both greedy, ``k`` evaluations each, the default answer
   counted by neither; the paired difference in reachability (random - search) per question,
   and each answer-blind selector's retention of the gain, ``(blind - realized) / (oracle -
   realized)``.
2. **One MLP block.** Per model and task, the failure set (reachable-not-realized under
   sampling), its bottleneck MLP chosen on the discovery half, the held-out repair rate and the
   control break rate (Wilson intervals) beside the second-best block; with ``exhaustive:
   true``, also whether the screen's pick agrees with an exhaustive sweep of every block.
3. **Training.** Per trained pair (base, trained), delta realized and delta reachable per
   probe with paired intervals, and the per-question transitions.

Each setting's verdict on each claim is ``support``, ``against``, ``unresolved`` or
``uninformative`` (:mod:`rnr_lens.verdicts`): an interval and its exact test agree at 5%, with
margins stated in the grid, beside the null (chance level; an arbitrary block's silencing), and
an unresolved verdict says what ``n`` would decide it. Nothing is tuned toward the paper's
answers: where a claim does not hold on a model, the report says so. ``claims.json`` holds every number;
``report.html`` renders them (self-contained, readable offline). Rerunning resumes: audits and
sweep evaluations already in the store are reused. The audits run through
:func:`rnr_lens.executors.run_audit`: in shards here, or on Ray workers (``executor="ray"``),
while the driver keeps the store and mines the failure sets.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rnr_lens import evidence as evidence_  # the module; `evidence` names a file in this one
from rnr_lens import failures, selectors, tasks, verdicts, viz
from rnr_lens.ceiling import Ceiling
from rnr_lens.claims import (
    BlockRates,
    BottleneckClaim,
    Claims,
    FailureSetSize,
    FormatMisses,
    Progress,
    RoutesClaim,
    ScreenAgreement,
    Setting,
    TrainingClaim,
    TrainingProbe,
)
from rnr_lens.comparison import compare, compare_ceiling
from rnr_lens.deploy import DeploymentConfig, deployment_for_task
from rnr_lens.errors import RnrLensError, arg
from rnr_lens.evidence import EVIDENCE_FILE, MINED, SettingRecord
from rnr_lens.failures import check_weights
from rnr_lens.files import lock_file, write_atomic
from rnr_lens.phases import phase
from rnr_lens.probe_specs import budget_label
from rnr_lens.probes import parse_probe
from rnr_lens.provenance import Provenance, RunSpan, Weights
from rnr_lens.records import check_seed
from rnr_lens.regrade import REGRADING_FILE, Regrading
from rnr_lens.regrade import regrade as regrade_document
from rnr_lens.report_page import render_html
from rnr_lens.results import FORMAT_MISS_WARN, AuditResult
from rnr_lens.routes import Route
from rnr_lens.stats import Estimate, paired_difference, rate
from rnr_lens.store import Artifact, RunStore
from rnr_lens.sweep_results import SweepResult, load_null, save_null
from rnr_lens.sweeps import ranked, within_bound
from rnr_lens.tasks import lm_eval
from rnr_lens.untrusted import MAX_NAME_CHARS, load_yaml, quoted, read_small

CEILING_FIELDS = ("ceiling_k", "ceiling_n")
"""The grid fields of claim 3 at large k: a report may be resumed with them added (its finished
settings stay what they were; the ceiling's audits are new ones)."""


@dataclass(frozen=True)
class Grid:
    """The settings a report covers.

    Attributes:
        models: Model specs (known names, folders, ``.gguf`` files, hub ids).
        tasks: Built-in task names or task files.
        n: Questions per task, at most: a task with fewer is used whole (built-ins draw from
            their test split with ``task_seed``; files use their first ``n``). The number each
            setting actually holds is in its claims (``questions``).
        k: The matched budget of every probe.
        temperature: Sampling temperature of the sampling probe.
        edits: Single-block edits of the random routes (the search's move set, at this depth).
        seed: The audits' seed.
        pairs: Trained pairs for claim 3, each ``{"base": spec, "trained": spec}``.
        mine: Run claim 2 (a sweep per model and task).
        exhaustive: Also sweep every block with full generation (blocks x questions greedy
            generations per setting) and report whether the screen's pick agrees.
        config: A deployment config file for every setting (default: each task's default).
        margin: The non-inferiority margin of claim 1 and the equivalence margin of claim 3
            (default :data:`rnr_lens.verdicts.MARGIN`, with its reason there).
        retention_margin: What "retains almost none of the gain" means (claim 1's second half;
            :data:`rnr_lens.verdicts.RETENTION_MARGIN`).
        break_bound: The largest control break rate a bottleneck may have (claim 2;
            :data:`rnr_lens.verdicts.BREAK_BOUND`).
        ceiling_k: Claim 3 at large k (:mod:`rnr_lens.ceiling`): after every setting, audit each
            model of a trained pair again with :attr:`ceiling_probe` (this many samples per
            question) and compare each pair's curves; None (the default): not measured.
        ceiling_n: The ceiling audits' questions per task, at most (the first of the task's,
            as ``n`` takes them; default: ``n``).
    """

    models: tuple[str, ...]
    tasks: tuple[str, ...]
    n: int = 40
    k: int = 8
    temperature: float = 0.7
    edits: int = 2
    seed: int = 0
    task_seed: int = 0
    pairs: tuple[dict[str, str], ...] = ()
    mine: bool = True
    exhaustive: bool = False
    config: str | None = None
    margin: float = verdicts.MARGIN
    retention_margin: float = verdicts.RETENTION_MARGIN
    break_bound: float = verdicts.BREAK_BOUND
    ceiling_k: int | None = None
    ceiling_n: int | None = None

    def __post_init__(self) -> None:
        for key in ("margin", "retention_margin", "break_bound"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
                raise RnrLensError(f"grid field {key} must be a number between 0 and 1 (exclusive), got {quoted(value)}")
        if not self.models or not self.tasks:
            raise RnrLensError("a grid needs at least one model and one task (keys models: and tasks:)")
        for key in ("n", "k", "edits"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise RnrLensError(f"grid field {key} must be a whole number of at least 1, got {quoted(value)}")
        for key in ("ceiling_k", "ceiling_n"):
            value = getattr(self, key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise RnrLensError(f"grid field {key} must be a whole number of at least 1, got {quoted(value)}")
        if self.ceiling_n is not None and self.ceiling_k is None:
            raise RnrLensError("grid field ceiling_n sizes the ceiling's audits: add ceiling_k (e.g. ceiling_k: 128)")
        if self.ceiling_k is not None and not self.pairs:
            raise RnrLensError("grid field ceiling_k compares trained pairs at large k: add pairs: (base: and trained:)")
        for key in ("mine", "exhaustive"):
            if not isinstance(getattr(self, key), bool):
                raise RnrLensError(f"grid field {key} must be true or false, got {quoted(getattr(self, key))}")
        for pair in self.pairs:
            if not isinstance(pair, dict) or set(pair) != {"base", "trained"}:
                raise RnrLensError(f"each grid pair needs exactly base: and trained:, got {quoted(pair)}")
        for key in ("seed", "task_seed"):  # the probes' and seeds' own checks, before any model loads
            try:
                check_seed(getattr(self, key))
            except RnrLensError as exc:
                raise RnrLensError(f"grid field {key}: {exc}") from None
        for spec in self.probe_specs:
            try:
                parse_probe(spec)
            except RnrLensError as exc:
                raise RnrLensError(f"grid fields k, temperature and edits make the probe {quoted(spec)}: {exc}") from None

    def mines(self, spec: str) -> bool:
        """Whether the setting of model ``spec`` has claim 2's stage (a grid model, with ``mine``)."""
        return self.mine and spec in self.models

    @property
    def probe_specs(self) -> tuple[str, str, str]:
        """The three probes as the grid's fields write them (``sampling:k=8,t=0.7``; what
        ``claims.json`` and the page show); :attr:`probes` names them canonically."""
        return (f"sampling:k={self.k},t={self.temperature}", f"routes:k={self.k},edits={self.edits}", f"search:k={self.k}")

    @property
    def probes(self) -> list[str]:
        """Sampling, random routes over the search's move set, and the search, all at ``k``
        (canonical names: :attr:`rnr_lens.probes.Probe.name`, as an audit stores them)."""
        return [self.sampling, self.random, self.search]

    @property
    def sampling(self) -> str:
        """The sampling probe: ``k`` samples at the grid's temperature (claim 2's failure sets)."""
        return parse_probe(self.probe_specs[0]).name

    @property
    def random(self) -> str:
        """Random routes of exactly ``edits`` single-block edits: the search's move set."""
        return parse_probe(self.probe_specs[1]).name

    @property
    def search(self) -> str:
        """The route search at the same budget."""
        return parse_probe(self.probe_specs[2]).name

    @property
    def ceiling_probe(self) -> str | None:
        """The ceiling's probe: ``ceiling_k`` samples at the grid's temperature, drawn by inverse
        CDF (``records.DRAWS``; canonical name). None without ``ceiling_k``."""
        if self.ceiling_k is None:
            return None
        return parse_probe(f"sampling:k={self.ceiling_k},t={self.temperature},draw=inverse-cdf").name

    def to_dict(self) -> dict[str, Any]:
        """The grid as the grid file's fields (a JSON record: ``claims.json`` and the manifest
        hold it). The ceiling's fields appear only where set, so a grid without them writes
        the record it always wrote."""
        fields = {k: getattr(self, k) for k in Grid.__dataclass_fields__}
        return json.loads(json.dumps({k: v for k, v in fields.items() if not (k in CEILING_FIELDS and v is None)}))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Grid:
        """The inverse of :meth:`to_dict`."""
        data = dict(d)
        for key in ("models", "tasks"):
            data[key] = tuple(data[key])
        data["pairs"] = tuple(dict(p) for p in data.get("pairs") or ())
        return cls(**data)

    @classmethod
    def load(cls, path: str | Path) -> Grid:
        """Read a grid from YAML (or JSON); relative task and model paths resolve against its folder."""
        path = Path(path)
        if not path.is_file():
            raise RnrLensError(f"grid file {path} does not exist")
        data = load_yaml(read_small(path, "grid file"), path)
        if not isinstance(data, dict):
            raise RnrLensError(f"{path} must hold a mapping with models: and tasks:")
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise RnrLensError(f"unknown grid field {unknown[0]!r} in {path}; known fields: {', '.join(sorted(known))}")

        def local(spec: object, key: str) -> str:
            if not isinstance(spec, (str, int, float)) or isinstance(spec, bool) or len(str(spec)) > MAX_NAME_CHARS:
                raise RnrLensError(f"grid field {key} holds {quoted(spec)}; give a name or a path of at most {MAX_NAME_CHARS} characters")
            spec = str(spec)
            if lm_eval.is_spec(spec):
                return lm_eval.rebase(spec, path.parent)
            candidate = path.parent / spec
            try:  # a path written as relative (./, ../) is one even where it is absent, so a
                # grid names the same checkpoint on a machine that lacks it (--keep-absent)
                here = not Path(spec).is_absolute() and (candidate.exists() or spec.startswith(("./", "../")))
            except OSError:  # a component too long to be a file name: a name, not a path
                here = False
            return str(candidate) if here else spec

        for key in ("models", "tasks", "pairs"):
            if not isinstance(data.get(key) or [], list):
                raise RnrLensError(f"grid field {key} in {path} must be a list, got {quoted(data[key])}")
        data["models"] = tuple(local(m, "models") for m in data.get("models") or ())
        data["tasks"] = tuple(local(t, "tasks") for t in data.get("tasks") or ())
        data["pairs"] = tuple({k: local(v, "pairs") for k, v in p.items()} if isinstance(p, dict) else p for p in data.get("pairs") or ())
        if data.get("config"):
            data["config"] = local(data["config"], "config")
        return cls(**data)


@dataclass
class Report:
    """What :func:`report` found: every claim's numbers (``claims``) and where they were written."""

    claims: Claims
    store: Path
    files: dict[str, Path] = field(default_factory=dict)
    regrading: Regrading | None = None
    """What a re-graded re-derivation moved (:func:`rederive` with ``regrade``)."""


def _load_task(spec: str, grid: Grid, trust_code: bool = False) -> Any:

    if spec in tasks.BUILTINS:
        return tasks.get(spec, n=min(grid.n, tasks.split_size(spec)), seed=grid.task_seed)
    task = tasks.get(spec, trust_code=trust_code)
    return task.first(min(grid.n, len(task)))


def _setting_columns(result: AuditResult, probes: Sequence[str]) -> tuple[pd.DataFrame, np.ndarray]:
    """The questions complete under every probe of ``probes`` (and the mask that picks them)."""
    mask = np.ones(len(result.questions), dtype=bool)
    for probe in probes:
        mask &= result.complete_mask(probe).to_numpy()
    return result.questions[mask], mask


def claim_routes(result: AuditResult, grid: Grid) -> RoutesClaim:
    """Claim 1 for one audit: random routes against search at the matched budget, with the
    verdict (:func:`rnr_lens.verdicts.routes_vs_search`) and each answer-blind selector's
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
    depth = [Route.parse(str(r)).n_edits for r in routes]
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
    the greedy share passes :data:`~rnr_lens.results.FORMAT_MISS_WARN` or the lenient verdict
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


REPORT_SET = "report"
"""The name of the failure set a report freezes in each audit (and of the null kept beside it)."""
SCREEN_SWEEP, EXHAUSTIVE_SWEEP = "report:screen+confirm", "report:exhaustive"
"""The names a report keeps its two sweeps under (so the exhaustive one never hides the screen)."""


def _mine_where_audited() -> str:
    """The fix-it hint of a report whose mining model is not its audit's
    (:func:`rnr_lens.failures.check_weights`), naming the argument as the caller spells it."""
    return (
        "a grid mines with the weights it audited, and Ray workers load their own (on GPUs in bfloat16): "
        f"run it with {arg('executor', 'local')} (its audits then run here, with the weights that mine them)"
    )


def mine_setting(model: Any, result: AuditResult, store: RunStore, grid: Grid, progress: bool) -> None:
    """Claim 2's computation for one audit, every result kept in ``store`` (nothing returned:
    :func:`claim_bottleneck` reads them back): the reachable-not-realized set frozen, the
    screen+confirm sweep, with ``exhaustive`` the sweep of every block, and the null beside the
    block the deciding sweep picks."""
    from rnr_lens.miner import mine, null_beside  # the model floor: only where a run mines

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


def claim_bottleneck(result: AuditResult, store: RunStore, grid: Grid, figures: list[tuple[str, Any]] | None = None) -> BottleneckClaim:
    """Claim 2 for one audit, read from what :func:`mine_setting` kept in ``store`` (no model):
    the bottleneck MLP of its reachable-not-realized set (chosen on the discovery half within
    the grid's break bound), its held-out repair beside the null (an arbitrary block's
    silencing, an unablated re-run), and the verdict (:func:`rnr_lens.verdicts.bottleneck_verdict`).
    With ``exhaustive``, the sweep of every block decides (its pick, and against only from it);
    the screen's pick is compared with it. Its repair/break figure is appended to ``figures``."""

    figures = figures if figures is not None else []
    probe = result.probe_name(grid.sampling)
    n_fail = len(result.reachable_not_realized(probe))
    if n_fail < failures.MIN_FAILURES:
        text = f"only {n_fail} question(s) reachable but not realized under {probe}: no failure set to mine"
        return BottleneckClaim(setting_of(result), n_fail, verdicts.Verdict(verdicts.UNINFORMATIVE, text))
    fs = failures.load(result, store, REPORT_SET)
    sweep = SweepResult.load(store, SCREEN_SWEEP, audit=result.id)
    figures.append((f"{result.info.model} / {result.info.task}", viz.repair_break(sweep)))
    agreement, judged = None, sweep
    if store.get_artifact(result.id, Artifact.SWEEP, EXHAUSTIVE_SWEEP) is not None:  # kept where the grid swept every block
        full = SweepResult.load(store, EXHAUSTIVE_SWEEP, audit=result.id)
        done = ranked(sweep.table)
        picked = sweep.bottleneck.layer if sweep.bottleneck else int(done.iloc[0]["layer"])
        agreement, judged = screen_agreement(full, picked), full  # every block generated: the full sweep decides
    null = load_null(store, result.id, REPORT_SET)  # kept where the set has a held-out half
    decided = judged.verdict(null, break_bound=grid.break_bound)
    kept = decided.layer
    order = ([kept] if kept is not None else []) + [int(r) for r in ranked(judged.table)["layer"] if int(r) != kept]
    blocks = [_block_rates(judged, b) for b in order[:2]]
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
    """One generated block's repair on each half and its break on the held-out controls (the
    ones that did not admit it), as estimates."""
    held, broken = sweep.repaired(layer, "heldout"), sweep.broken(layer, half="heldout")
    return BlockRates(
        layer,
        rate(sweep.repaired(layer, "discovery")).value,
        rate(held, null=verdicts.MOST) if len(held) else None,
        rate(broken) if len(broken) else None,
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
    over the questions complete in both audits (:func:`rnr_lens.verdicts.training_verdict`)."""
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
                transitions={str(k): {str(s): int(n) for s, n in v.items()} for k, v in c.transition_counts(probe).to_dict().items()},
            )
        )
    return TrainingClaim(a.info.task, (a.id, b.id), a.info.model, b.info.model, tuple(out))


def report(
    grid: Grid,
    out: str | Path,
    *,
    progress: bool = True,
    batch_size: int | None = None,
    executor: str = "local",
    shards: int = 1,
    address: str | None = None,
    num_cpus: int | None = None,
    evidence: str | Path | None = None,
    trust_code: bool = False,
    keep_absent: bool = False,
) -> Report:
    """Run (or resume) every setting of ``grid`` into ``out/runs.db`` and write
    ``out/claims.json``, ``out/report.html`` and ``out/evidence.json.gz``.

    Each setting runs in stages (its audit; for a grid model with ``mine``, claim 2's failure
    set, sweeps and null, :func:`mine_setting`), every result kept in the store and each stage
    recorded in the store's manifest; after each stage the evidence is brought up to date, and
    once a setting is done its claims are derived from the store (:class:`_Draft`), the same
    way :func:`rederive` derives them from the evidence alone.

    Args:
        grid: The settings.
        out: The report folder (rerun with the same folder to resume).
        progress: Show tqdm bars.
        batch_size: Rows per forward (default: from free memory).
        executor, shards, address, num_cpus: Where each audit's shards run, as for
            :func:`rnr_lens.executors.run_audit`. With ``"ray"`` the workers load the models;
            this process loads a model only to mine its failure sets (claim 2).
        evidence: Resume from this evidence file on a machine without the run's store: the
            store is rebuilt from it into ``out`` (which must hold no store yet), then the grid
            continues.
        trust_code: Run the grid's lm-eval task YAMLs of the user's, which are code
            (:func:`rnr_lens.tasks.lm_eval.load`); off, such a task is refused before any model loads.
        keep_absent: A model whose weights are not on this machine (a trained checkpoint made
            on another) keeps its settings as the store or evidence records them, neither loaded
            nor audited again, where every one of them is finished; off, such a model is refused
            before any work. Its deployment is the recorded one: with no weights here, the
            default it would get today cannot be checked.

    Example:
        >>> r = report(Grid(models=("smollm2-135m-instruct",), tasks=("add-small",)), "report")  # doctest: +SKIP
        >>> r.claims.routes_vs_search[0].verdict  # doctest: +SKIP
    """
    from rnr_lens.executors import check_executor, run_audit
    from rnr_lens.models import load_model, load_tokenizer

    check_executor(executor, shards)
    out = Path(out)
    document, configs, tasks_, model_specs, kept = _prepare(grid, out, evidence, trust_code, keep_absent)
    run = _ReportRun(grid, _open_store(out, document, evidence), _report_files(out))
    run.stage_done()
    for spec in kept:  # said even under --json (stderr): what this run did not redo
        print(f"kept as recorded: every setting of {spec!r}, all finished (its weights are not here)", file=sys.stderr)

    def audited(model_or_spec: Any, task: Any, probes: list[str], cfg: DeploymentConfig) -> AuditResult:
        return run_audit(
            model_or_spec,
            task,
            probes,
            cfg,
            store=run.store,
            seed=grid.seed,
            shards=shards,
            executor=executor,
            address=address,
            num_cpus=num_cpus,
            batch_size=batch_size,
            progress=progress,
        )

    for spec in model_specs:
        # the driver needs the weights to audit here, or to mine; Ray workers load their own
        with phase("load model"):
            model = load_model(spec) if executor == "local" or grid.mines(spec) else None
        for task_spec, task in tasks_.items():
            cfg = configs[task_spec] if configs else deployment_for_task(model if model is not None else load_tokenizer(spec), task)
            result = audited(model if executor == "local" and model is not None else spec, task, grid.probes, cfg)
            run.finish_setting(spec, task_spec, model if executor == "local" else None, model, result, progress)
        del model
    for spec in (m for m in _ceiling_order(grid) if m not in kept):  # claim 3 at large k, once every setting is done
        with phase("load model"):
            model = load_model(spec) if executor == "local" else None
        for task_spec, task in tasks_.items():
            record = run.manifest.setting(spec, task_spec)
            assert record is not None and grid.ceiling_probe is not None, "every setting is audited before the ceiling"
            cfg = AuditResult.load(run.store, record.audit).config  # the setting's own deployment
            result = audited(model if model is not None else spec, _ceiling_task(task, grid), [grid.ceiling_probe], cfg)
            run.finish_ceiling(record, result)
        del model
    return Report(run.stage_done(), out / "runs.db", run.draft.files)


def mine_again(out: str | Path, *, progress: bool = True) -> Report:
    """Mine every setting of the report in ``out`` that was audited but not mined: the stages
    :func:`rederive` with ``regrade`` dropped. Only those settings' models are loaded (each
    checked to be the audited weights), every kept evaluation is read back instead of
    generated, and the claims and evidence are written again, with this run in the provenance.

    Example:
        >>> r = mine_again("regraded/grid-default")  # doctest: +SKIP
    """
    from rnr_lens.models import load_model

    out = Path(out)
    if not (out / "runs.db").is_file():
        raise RnrLensError(f"{out} holds no report store (runs.db); give the {arg('out')} folder of a report or a re-derivation")
    store = RunStore(out / "runs.db")
    try:
        manifest = evidence_.Manifest.load(store)
        if manifest is None:
            raise RnrLensError(f"{out / 'runs.db'} holds no report (no manifest); give the {arg('out')} folder of a report or a re-derivation")
        grid = Grid.from_dict(manifest.grid)
        run = _ReportRun(grid, store, _report_files(out))
        pending = [r for r in run.manifest.settings if not r.done(grid.mines(r.model))]
        for spec in dict.fromkeys(r.model for r in pending):
            with phase("load model"):
                model = load_model(spec)
            for record in (r for r in pending if r.model == spec):
                run.finish_setting(spec, record.task, model, model, AuditResult.load(store, record.audit), progress)
            del model
        return Report(run.stage_done(), out / "runs.db", run.draft.files)
    finally:
        store.close()


def _ceiling_order(grid: Grid) -> list[str]:
    """The models the ceiling audits (every model of a trained pair), in the report's run order."""
    members = {m for p in grid.pairs for m in p.values()}
    return [m for m in _run_order(grid) if m in members] if grid.ceiling_k is not None else []


def _ceiling_task(task: Any, grid: Grid) -> Any:
    """The ceiling's questions: the first ``ceiling_n`` of the setting's (all of them without it)."""
    return task if grid.ceiling_n is None or grid.ceiling_n >= len(task) else task.first(grid.ceiling_n)


def _prepare(
    grid: Grid, out: Path, evidence: str | Path | None, trust_code: bool = False, keep_absent: bool = False
) -> tuple[Any, dict[str, DeploymentConfig] | None, dict[str, Any], list[str], list[str]]:
    """Everything a report checks before hours of work, in one pass: the evidence to resume
    from (read, and of this grid), the config, every task, every model and checkpoint, and
    that ``out`` holds no other grid's report. Returns the evidence document (or None), the
    grid's config fitted to each task by spec (None: each model's default), its tasks by spec,
    the models to run in run order, and the absent models kept as recorded (``keep_absent``)."""
    from rnr_lens.models import check_spec

    if evidence is not None and (out / "runs.db").exists():
        raise RnrLensError(
            f"{out / 'runs.db'} already exists, so the report resumes from it: drop {arg('evidence')} (or choose a new {arg('out')} folder)"
        )
    document = evidence_.read(evidence) if evidence is not None else None
    if document is not None:
        _check_same_grid(document["manifest"]["grid"], grid, f"{evidence} is the evidence of another grid", "resume it with the grid it ran")
    config = DeploymentConfig.load(grid.config) if grid.config else None
    tasks_ = {spec: _load_task(spec, grid, trust_code) for spec in grid.tasks}
    # the grid's config fitted to each task before any store or model: bad shots are refused now
    configs = {spec: config.for_task(task) for spec, task in tasks_.items()} if config is not None else None
    stored = evidence_.Manifest.from_dict(document["manifest"]) if document is not None else None
    # each recorded audit's task fingerprint and config hash, to check a kept model's settings
    recorded = {a["audit"]["id"]: (a["audit"]["task_fingerprint"], a["audit"]["config_hash"]) for a in document["audits"]} if document else {}
    if (out / "runs.db").exists():
        here = RunStore(out / "runs.db", mode="read")
        stored = evidence_.Manifest.load(here)
        recorded = {a.id: (a.task_fingerprint, a.config_hash) for a in here.audits()}
        here.close()
        if stored is not None:
            _check_same_grid(stored.grid, grid, f"{out} holds the report of another grid", f"use a new {arg('out')} folder, or the grid it ran")
    model_specs, kept = [], []
    for spec in _run_order(grid):  # before hours of work: a missing checkpoint fails now
        try:
            check_spec(spec)
        except RnrLensError as exc:
            if not keep_absent or Path(spec).exists():  # a folder with broken weights is not absent
                fix = (
                    f"; or pass {arg('keep_absent')} to keep its settings as recorded, where every one is finished" if not Path(spec).exists() else ""
                )
                raise RnrLensError(f"grid model {spec!r}: {exc} (a trained pair's checkpoint must exist before the report runs{fix})") from None
            why = _not_keepable(stored, recorded, grid, spec, tasks_, configs)
            if why is not None:
                raise RnrLensError(
                    f"grid model {spec!r} is not here and {arg('keep_absent')} cannot keep it: {why}; run it where its weights are"
                ) from None
            kept.append(spec)
            continue
        model_specs.append(spec)
    return document, configs, tasks_, model_specs, kept


def _not_keepable(
    manifest: Any,
    recorded: Mapping[str, tuple[str, str]],
    grid: Grid,
    spec: str,
    tasks_: Mapping[str, Any],
    configs: Mapping[str, DeploymentConfig] | None,
) -> str | None:
    """Why an absent model's recorded settings cannot stand for this grid (None: they can):
    a setting not finished (audited, mined where the grid mines it, its ceiling audited where
    the grid asks for one), or audited on other questions than the grid's task gives, or under
    another deployment than the grid's config. (Without the model's weights, the default
    deployment it would get today cannot be checked: the recorded one stands.)"""
    ceiling = spec in _ceiling_order(grid)
    for task_spec, task in tasks_.items():
        r = manifest.setting(spec, task_spec) if manifest is not None else None
        if r is None:
            return f"its setting on {task_spec} is not in this report"
        if not r.done(grid.mines(spec)) or (ceiling and r.ceiling is None):
            return f"its setting on {task_spec} is not finished ({'not mined' if not r.done(grid.mines(spec)) else 'no ceiling audit'})"
        task_fingerprint, config_hash = recorded.get(r.audit, (None, None))
        if task_fingerprint != task.fingerprint():
            return f"its setting on {task_spec} was audited on other questions than this grid's task gives"
        if configs is not None and config_hash != configs[task_spec].hash():
            return f"its setting on {task_spec} ran under another deployment than the grid's config"
    return None


def _open_store(out: Path, document: Any, evidence: str | Path | None) -> RunStore:
    """The report's store in ``out``: rebuilt from the evidence ``document`` where the run
    resumes on a machine that never had it, else the one there (or a new one)."""

    out.mkdir(parents=True, exist_ok=True)
    if document is not None:
        evidence_.rebuild(document, out / "runs.db", source=str(evidence))
    return RunStore(out / "runs.db")


class _ReportRun:
    """One run of a report: its store and manifest, the claims derived so far (:class:`_Draft`)
    and this run's span in the provenance. After every stage :meth:`stage_done` keeps the
    manifest, derives a finished setting and writes the claims and the evidence."""

    def __init__(self, grid: Grid, store: RunStore, files: dict[str, Path]) -> None:

        self.grid, self.store = grid, store
        # this run's grid: the recorded one, or it with the ceiling's fields added (_check_same_grid)
        self.manifest = replace(evidence_.Manifest.load(store) or evidence_.Manifest(grid.to_dict()), grid=grid.to_dict())
        self.span = RunSpan.begin()
        self.draft = _derived(self.manifest, store, files)  # what earlier runs finished, as rederive derives it

    def stage_done(self, finished: SettingRecord | None = None) -> Claims:
        """Keep the manifest, derive a finished setting, write the claims and the evidence."""

        self.manifest = replace(self.manifest, provenance=self.manifest.provenance.with_run(self.span.touched()))
        self.manifest.save(self.store)
        if finished is not None:
            if self.manifest.settings[-1] == finished and (finished.model, finished.task) not in self.draft.derived:
                self.draft.derive(finished)
            else:  # a setting redone (its task file changed): derive again in the manifest's order
                self.draft = _derived(self.manifest, self.store, self.draft.files)
        claims = self.draft.write(self.manifest.provenance)
        evidence_.write(self.store, self.manifest, self.draft.files["evidence"])
        return claims

    def finish_setting(self, spec: str, task_spec: str, audited_here: Any, model: Any, result: AuditResult, progress: bool) -> None:
        """After a setting's audit: its weights into the provenance (``audited_here``: the
        model that audited it in this process, None where Ray workers did), its record into
        the manifest, claim 2's stage where the grid mines it, then its claims."""
        from rnr_lens.checkpoints import training_record

        mined = self.grid.mines(spec)
        record = self.manifest.setting(spec, task_spec)
        if record is not None and record.audit == result.id and record.done(mined):
            return  # finished by an earlier run and derived when this run began
        trained = training_record(spec) if Path(spec).is_dir() else None
        weights = (
            Weights.of(spec, audited_here, trained)
            if audited_here is not None
            else Weights(spec, result.info.model, result.info.model_fingerprint, "ray workers", "unrecorded", spec if trained else None, trained)
        )
        self.manifest = replace(self.manifest, provenance=self.manifest.provenance.with_model(weights))
        record = record if record is not None and record.audit == result.id else evidence_.SettingRecord(spec, task_spec, result.id)
        self.manifest = self.manifest.with_setting(record)
        if not record.done(mined):
            self.stage_done()  # the audit is in the evidence before claim 2's hours start
            check_weights(model, result.info.model_fingerprint, result.id, fix=_mine_where_audited())
            mine_setting(model, result, self.store, self.grid, progress)
            record = replace(record, stages=(*record.stages, MINED))
            self.manifest = self.manifest.with_setting(record)
        self.stage_done(finished=record)

    def finish_ceiling(self, record: SettingRecord, result: AuditResult) -> None:
        """After a setting's ceiling audit: its id into the setting's record, then the pair's
        ceiling claim once both of its models' ceiling audits are here."""
        if record.ceiling == result.id:
            return  # finished by an earlier run and derived when this run began
        record = replace(record, ceiling=result.id)
        self.manifest = self.manifest.with_setting(record)
        self.draft.add_ceiling(record)
        self.stage_done()


def _check_same_grid(recorded: Mapping[str, Any], grid: Grid, what: str, fix: str) -> None:
    """Refuse to continue a report under another grid than the one it ran (one line: the
    first field that differs, with both values)."""
    here = grid.to_dict()
    differs = [k for k in dict.fromkeys([*here, *recorded]) if recorded.get(k) != here.get(k)]
    if all(k in CEILING_FIELDS and k not in recorded for k in differs):
        return  # the ceiling added to a report that ran without it: what it finished stands
    if differs:
        k = differs[0]
        raise RnrLensError(f"{what} (its {k} is {recorded.get(k)!r}, this grid's {here.get(k)!r}); {fix}")


def rederive(evidence: str | Path, out: str | Path, *, regrade: bool | DeploymentConfig = False) -> Report:
    """Re-derive a report from its evidence alone (no model, no task file): the store rebuilt
    into ``out/runs.db`` (``out`` must hold no store yet), then every finished setting's claims
    derived from it as the run derived them, and ``claims.json`` and ``report.html`` written
    (byte for byte the run's own under the same rules and code). The evidence is copied beside
    them, so ``out`` is a whole report folder; on any error nothing is left in ``out``.

    ``regrade``: read every try again first (:func:`rnr_lens.regrade.regrade`), under this
    config or (True) each task's default today; the re-reading joins the provenance as a run
    (its code and machine), the re-graded evidence is written in place of the copy, and
    ``regrading.json`` says what moved and which mined stages must be mined again
    (:func:`mine_again`).

    Example:
        >>> r = rederive("assets/results/grid-default/evidence.json.gz", "rederived")  # doctest: +SKIP
        >>> r.claims.provenance.runs[0].code.commit  # doctest: +SKIP
    """

    out = Path(out)
    document = evidence_.read(evidence)
    regrading = None
    if regrade is not False:
        try:
            grid = Grid.from_dict(document["manifest"]["grid"])  # its sampling probe chooses the failure sets
            regrading = regrade_document(document, None if regrade is True else regrade, mined_probe=grid.sampling)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            raise RnrLensError(
                f"{evidence} could not be re-graded ({type(exc).__name__}: {quoted(str(exc))}); it is damaged or was not written by rnr_lens"
            ) from None
        recorded = Provenance.from_dict(regrading.document["manifest"].get("provenance", {}))
        provenance = recorded.with_run(RunSpan.begin().touched()).to_dict()
        document = {
            **regrading.document,
            "manifest": {**regrading.document["manifest"], "provenance": provenance},
        }  # the re-reading is a run: its code and machine
    files = _report_files(out)
    same = regrading is None and files["evidence"].exists() and files["evidence"].resolve() == Path(evidence).resolve()
    store_files = (out / "runs.db", Path(f"{out / 'runs.db'}-wal"), Path(f"{out / 'runs.db'}-shm"), lock_file(out / "runs.db"))
    written = (files["claims"], files["html"], *((files["evidence"], out / REGRADING_FILE) if regrading is not None else ()))
    for path in (*store_files, *files.values(), *written):
        if (path.exists() or path.is_symlink()) and not (path == files["evidence"] and same):
            raise RnrLensError(f"{path} already exists; re-derive into a new {arg('out')} folder")
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    made = [*store_files, *written]
    try:
        manifest = evidence_.rebuild(document, out / "runs.db", source=str(evidence))
        store = RunStore(out / "runs.db", mode="read")
        try:
            draft = _derived(manifest, store, files)
            if regrading is not None:
                evidence_.write(store, manifest, files["evidence"])
        finally:
            store.close()
        claims = draft.write(manifest.provenance)
        if regrading is not None:
            write_atomic(out / REGRADING_FILE, (json.dumps(regrading.to_dict(), indent=1) + "\n").encode())
        elif not same:
            write_atomic(files["evidence"], Path(evidence).read_bytes())
    except BaseException as exc:
        for path in made:
            path.unlink(missing_ok=True)
        if created:
            with contextlib.suppress(OSError):
                out.rmdir()  # only when empty: a folder this call made and nothing else wrote to
        if isinstance(exc, (KeyError, TypeError, ValueError, AttributeError, IndexError, OverflowError, RecursionError, UnicodeError, sqlite3.Error)):
            raise RnrLensError(
                f"{evidence} could not be re-derived ({type(exc).__name__}: {quoted(str(exc))}); it is damaged or was not written by rnr_lens"
            ) from None
        raise
    return Report(claims, out / "runs.db", files, regrading)


def _derived(manifest: Any, store: RunStore, files: dict[str, Path]) -> _Draft:
    """The claims of every finished setting of ``manifest``, derived from ``store`` in the
    manifest's order: how a report starts (what earlier runs finished) and all :func:`rederive` does."""
    grid = Grid.from_dict(manifest.grid)
    draft = _Draft(grid, store, files)
    for record in manifest.settings:
        if record.done(grid.mines(record.model)):
            draft.derive(record)
    for record in manifest.settings:  # the ceiling's audits run after every setting
        if record.ceiling is not None:
            draft.add_ceiling(record)
    return draft


def _report_files(out: Path) -> dict[str, Path]:

    return {"claims": out / "claims.json", "html": out / "report.html", "evidence": out / EVIDENCE_FILE}


@dataclass
class _Draft:
    """The claims of a report in progress: each finished setting derived from the store alone
    (:meth:`derive`, in the order the settings finished), and written whole (``claims.json``
    and ``report.html``) after each stage, so a report stopped midway says what it has
    answered and that it is partial."""

    grid: Grid
    store: RunStore
    files: dict[str, Path]
    audits: dict[tuple[str, str], AuditResult] = field(default_factory=dict)
    configs: dict[str, dict[str, Any]] = field(default_factory=dict)
    routes: list[RoutesClaim] = field(default_factory=list)
    bottleneck: list[BottleneckClaim] = field(default_factory=list)
    training: dict[tuple[int, str], TrainingClaim] = field(default_factory=dict)
    ceiling_audits: dict[tuple[str, str], AuditResult] = field(default_factory=dict)
    ceilings: dict[tuple[int, str], Ceiling] = field(default_factory=dict)
    figures: dict[str, list[tuple[str, Any]]] = field(default_factory=lambda: {"routes": [], "bottleneck": []})

    @property
    def derived(self) -> set[tuple[str, str]]:
        """The ``(model spec, task)`` settings derived so far."""
        return set(self.audits)

    @property
    def total(self) -> int:
        return len(_run_order(self.grid)) * len(self.grid.tasks)

    def derive(self, record: SettingRecord) -> None:
        """One finished setting's claims, from the store: its audit, claim 1 and claim 2 for a
        grid model, claim 3 once a trained pair's two audits are here, and a model's routes
        figure once all its tasks are."""
        grid = self.grid
        with phase("report:claims"):
            result = AuditResult.load(self.store, record.audit)
            self.add_audit(record.model, record.task, result)
            if record.model in grid.models:
                self.routes.append(claim_routes(result, grid))
                if grid.mines(record.model):
                    self.bottleneck.append(claim_bottleneck(result, self.store, grid, self.figures["bottleneck"]))
                if all((record.model, t) in self.audits for t in grid.tasks):
                    self.add_routes_figure(record.model)

    def add_audit(self, spec: str, task_spec: str, result: AuditResult) -> None:
        """A finished audit; a trained pair's claim as soon as both of its audits are here."""
        self.audits[(spec, task_spec)] = result
        self.configs[result.info.config_hash] = result.config.to_dict()
        for i, pair in enumerate(self.grid.pairs):
            for t in self.grid.tasks:
                a, b = self.audits.get((pair["base"], t)), self.audits.get((pair["trained"], t))
                if a is not None and b is not None and (i, t) not in self.training:
                    self.training[(i, t)] = claim_training(a, b, self.grid)

    def add_ceiling(self, record: SettingRecord) -> None:
        """A setting's ceiling audit; a trained pair's ceiling as soon as both of its are here."""

        assert record.ceiling is not None
        with phase("report:claims"):
            self.ceiling_audits[(record.model, record.task)] = AuditResult.load(self.store, record.ceiling)
            for i, pair in enumerate(self.grid.pairs):
                for t in self.grid.tasks:
                    a, b = self.ceiling_audits.get((pair["base"], t)), self.ceiling_audits.get((pair["trained"], t))
                    if a is not None and b is not None and (i, t) not in self.ceilings:
                        probe = self.grid.ceiling_probe or a.probes[0]
                        self.ceilings[(i, t)] = compare_ceiling(a, b, probe, margin=self.grid.margin)

    def add_routes_figure(self, spec: str) -> None:

        results = [self.audits[(spec, t)] for t in self.grid.tasks]
        self.figures["routes"].append((str(results[0].info.model), viz.realized_vs_reachable(results)))

    def claims(self, provenance: Provenance | None = None) -> Claims:
        grid = self.grid
        training = tuple(self.training[(i, t)] for i in range(len(grid.pairs)) for t in grid.tasks if (i, t) in self.training)
        ceiling = tuple(self.ceilings[(i, t)] for i in range(len(grid.pairs)) for t in grid.tasks if (i, t) in self.ceilings)
        complete = len(self.audits) == self.total and len(training) == len(grid.pairs) * len(grid.tasks)
        if grid.ceiling_k is not None:
            complete = complete and len(ceiling) == len(grid.pairs) * len(grid.tasks)
        claims = Claims(
            grid=grid.to_dict(),
            probes=grid.probe_specs,
            routes_vs_search=tuple(self.routes),
            bottleneck=tuple(self.bottleneck),
            training=training,
            ceiling=ceiling,
            configs=dict(self.configs),
            progress=Progress(len(self.audits), self.total, complete),
            provenance=provenance,
        )
        return replace(claims, summary=summary_lines(claims))

    def write(self, provenance: Provenance | None = None) -> Claims:
        """Write what is answered so far (atomically) and return it."""

        claims = self.claims(provenance)
        write_atomic(self.files["claims"], claims_json(claims))
        write_atomic(self.files["html"], render_html(claims, self.figures))
        return claims


def claims_json(claims: Claims) -> str:
    """The text of ``claims.json`` (the one serialisation: the run and :func:`rederive` both write it)."""
    return json.dumps(claims.to_dict(), indent=2, default=str)


def _run_order(grid: Grid) -> list[str]:
    """Every model spec once: each grid model followed by the checkpoints trained from it, so
    a partial report answers claim 3 for a pair as soon as its two audits are done."""
    order: list[str] = []
    for model in list(grid.models) + [p["base"] for p in grid.pairs]:
        order += [model] + [p["trained"] for p in grid.pairs if p["base"] == model]
    return list(dict.fromkeys(order))


def _counts_text(vs: list[verdicts.Verdict]) -> str:
    c = verdicts.counts(vs)
    return ", ".join(f"{status} {c[status]}" for status in verdicts.STATUSES) + f" (of {len(vs)})"


def summary_lines(claims: Claims) -> dict[str, str]:
    """Per claim, how many settings are decided which way (never "not below in N of M" alone).
    A tally, not a test: each verdict is at its own level, with no correction across settings."""
    grid = claims.grid
    routes, bottleneck, trained = claims.routes_vs_search, claims.bottleneck, claims.training_probes
    both = [c.screen_vs_exhaustive for c in bottleneck if c.screen_vs_exhaustive is not None]
    agree = (
        f"; the screen's pick repaired as much as the exhaustive sweep's best in {sum(a.regret <= 0 for a in both)} of {len(both)} settings where both ran"
        if both
        else ""
    )
    with_set = sum(1 for c in bottleneck if c.failures >= 2)

    def line(decided: list[verdicts.Verdict], what: str) -> str:
        return f"{what}: " + (_counts_text(decided) if decided else "not evaluated in this grid")

    at_budget = [v.verdict for c in claims.ceiling for k, v in c.verdicts if k == c.budget]
    ceiling = {"ceiling": line(at_budget, f"the same at the ceiling's budget, k = {grid['ceiling_k']}, comparisons")} if claims.ceiling else {}
    return {
        "routes_vs_search": line(
            [c.verdict for c in routes],
            f"random routes reach as much as the search (margin {grid['margin']:.2f}) and keep half of its gain, settings",
        ),
        "retention": line(
            [c.retention_verdict for c in routes],
            f"answer-blind selectors keep under {grid['retention_margin']:.2f} of the random routes' gain, settings",
        ),
        "bottleneck": line(
            [c.verdict for c in bottleneck], f"one MLP repairs most held-out failures ({with_set} settings with a failure set), settings"
        )
        + agree,
        "training": line(
            [p.verdict for p in trained],
            f"realized rose while the ceiling rose by less than {grid['margin']:.2f} and less than half of it, or fell, comparisons",
        ),
    } | ceiling
