"""A grid: the models, tasks and one budget a claims report covers (:mod:`rnr_lens.grids.reports`).

A :class:`Grid` is a frozen value read from a grid file (YAML or JSON, hostile until checked:
each field is checked here, before any model loads) and written back as its fields
(:meth:`Grid.to_dict`, the record ``claims.json`` and the evidence's manifest hold). It owns
what follows from its fields alone: the probes at its budget, the order its models run in,
each task's questions and the ceiling's. A report refuses to resume under another grid than
the one it ran, except one that only adds to it (:meth:`Grid.cannot_continue`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rnr_lens.core.records import check_seed
from rnr_lens.core.untrusted import MAX_NAME_CHARS, load_yaml, quoted, read_small
from rnr_lens.errors import RnrLensError
from rnr_lens.judge import verdicts
from rnr_lens.measure.probes import parse_probe
from rnr_lens.questions import tasks
from rnr_lens.questions.tasks import Task, lm_eval

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
            (default :data:`rnr_lens.judge.verdicts.MARGIN`, with its reason there).
        retention_margin: What "retains almost none of the gain" means (claim 1's second half;
            :data:`rnr_lens.judge.verdicts.RETENTION_MARGIN`).
        break_bound: The largest control break rate a bottleneck may have (claim 2;
            :data:`rnr_lens.judge.verdicts.BREAK_BOUND`).
        ceiling_k: Claim 3 at large k (:mod:`rnr_lens.judge.ceiling`): after every setting, audit each
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
        seen: set[tuple[str, str]] = set()  # a set: the check is linear in the pairs a file names (issue 73)
        for pair in self.pairs:
            if not isinstance(pair, dict) or set(pair) != {"base", "trained"}:
                raise RnrLensError(f"each grid pair needs exactly base: and trained:, got {quoted(pair)}")
            named = (repr(pair["base"]), repr(pair["trained"]))
            if named in seen:  # one checkpoint would count as two runs in claim 3's tallies
                raise RnrLensError(
                    f"grid pair (base: {quoted(pair['base'])}, trained: {quoted(pair['trained'])}) is given twice; give each pair once"
                )
            seen.add(named)
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
        if self.ceiling_k is not None:  # the ceiling's probe too, before any audit runs (issue 73: it was refused after them)
            try:
                parse_probe(self._ceiling_spec)
            except RnrLensError as exc:
                raise RnrLensError(f"grid fields ceiling_k and temperature make the ceiling's probe: {exc}") from None

    def cannot_continue(self, recorded: Mapping[str, Any]) -> str | None:
        """Why this grid cannot continue a report that ran the grid ``recorded`` (its
        :meth:`to_dict`): the first field that differs, with both values; None where it is that
        grid or only adds to it. Two additions leave everything the report finished as it was,
        since each adds audits of its own and changes none: the ceiling's fields
        (:data:`CEILING_FIELDS`) where the report ran without them, and trained pairs appended
        after the recorded ones (a seed's checkpoint trained later; the recorded pairs keep
        their order, so their claims come first as before).

        Example:
            >>> seed0 = {"base": "m", "trained": "m-seed0"}
            >>> ran = Grid(("m",), ("add-small",), pairs=(seed0,)).to_dict()
            >>> Grid(("m",), ("add-small",), pairs=(seed0, {"base": "m", "trained": "m-seed1"})).cannot_continue(ran) is None
            True
            >>> Grid(("m",), ("add-small",), pairs=(seed0,), k=4).cannot_continue(ran)
            "its k is 8, this grid's 4"
        """
        here = self.to_dict()
        before, now = list(recorded.get("pairs") or ()), list(here.get("pairs") or ())
        appended = len(now) > len(before) and now[: len(before)] == before
        for key in dict.fromkeys([*here, *recorded]):
            if recorded.get(key) == here.get(key) or (key in CEILING_FIELDS and key not in recorded) or (key == "pairs" and appended):
                continue
            return f"its {key} is {recorded.get(key)!r}, this grid's {here.get(key)!r}"
        return None

    def mines(self, spec: str) -> bool:
        """Whether the setting of model ``spec`` has claim 2's stage (a grid model, with ``mine``)."""
        return self.mine and spec in self.models

    def run_order(self) -> list[str]:
        """Every model spec once: each grid model followed by the checkpoints trained from it, so
        a partial report answers claim 3 for a pair as soon as its two audits are done."""
        order: list[str] = []
        for model in list(self.models) + [p["base"] for p in self.pairs]:
            order += [model] + [p["trained"] for p in self.pairs if p["base"] == model]
        return list(dict.fromkeys(order))

    def ceiling_order(self) -> list[str]:
        """The models the ceiling audits (every model of a trained pair), in :meth:`run_order`."""
        members = {m for p in self.pairs for m in p.values()}
        return [m for m in self.run_order() if m in members] if self.ceiling_k is not None else []

    def load_task(self, spec: str, trust_code: bool = False) -> Task:
        """The questions of the grid's task ``spec``: at most ``n`` (a built-in drawn from its test
        split with ``task_seed``, a file's first ``n``)."""
        if spec in tasks.BUILTINS:
            return tasks.get(spec, n=min(self.n, tasks.split_size(spec)), seed=self.task_seed)
        task = tasks.get(spec, trust_code=trust_code)
        return task.first(min(self.n, len(task)))

    def ceiling_task(self, task: Task) -> Task:
        """The ceiling's questions: the first ``ceiling_n`` of the setting's (all of them without it)."""
        return task if self.ceiling_n is None or self.ceiling_n >= len(task) else task.first(self.ceiling_n)

    @property
    def probe_specs(self) -> tuple[str, str, str]:
        """The three probes as the grid's fields write them (``sampling:k=8,t=0.7``; what
        ``claims.json`` and the page show); :attr:`probes` names them canonically."""
        return (f"sampling:k={self.k},t={self.temperature}", f"routes:k={self.k},edits={self.edits}", f"search:k={self.k}")

    @property
    def probes(self) -> list[str]:
        """Sampling, random routes over the search's move set, and the search, all at ``k``
        (canonical names: :attr:`rnr_lens.measure.probes.Probe.name`, as an audit stores them)."""
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
        return None if self.ceiling_k is None else parse_probe(self._ceiling_spec).name

    @property
    def _ceiling_spec(self) -> str:
        """The ceiling's probe as its fields write it (checked when the grid is read)."""
        return f"sampling:k={self.ceiling_k},t={self.temperature},draw=inverse-cdf"

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
