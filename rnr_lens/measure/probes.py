"""Probes: named ways to look for a correct answer within a fixed budget of model evaluations.

Every probe spends its budget ``k`` in model evaluations (one greedy or sampled generation
each), so budgets can be matched across probes:

- :class:`Default` - the realized answer: one greedy generation under the deployment.
- :class:`Sampling` - ``k`` samples at temperature ``t`` (top-p configurable); sample ``i``
  of a question uses seed :func:`question_seed` ``(seed, question id) + i``, so questions that
  repeat a prompt get independent draws.
- :class:`RandomRoutes` - ``k`` routes drawn by :func:`draw_route` (segments) or, with
  ``edits=d``, by :func:`draw_edits` (the search's own move set), greedy under each. Each
  question draws its own ``k`` distinct, non-identity routes from ``(seed, question id)``, as
  sampling does, so an interval over questions is not conditional on one draw of ``k`` routes;
  the first ``k`` routes of a larger budget are the same routes. ``shared=true`` draws one set
  of ``k`` routes from ``seed`` alone for every question (for batching studies).
- :class:`RouteSearch` - a structured search over routes per question: Monte Carlo tree
  search over skip/repeat edits as in CoLa (UCB with a route-length penalty, an epsilon chance
  of a random unexplored child), or greedy hill-climbing over single edits. Its reward is
  answer-aware (``oracle``: correct or not) or answer-blind (``confidence``: the geometric
  mean token probability of the answer).
- :class:`AblationProbe` - one try per block, that block's component silenced.

Probes share one interface (:meth:`Probe.run`), so a notebook can define its own.

**A resume computes a clean run's batches.** A row's last bits depend on the rows beside it
(docs/performance.md), so a probe never batches only the tries its store lacks: each batch is
fixed by the questions it is given, regenerated whole where any of its tries is missing, and
only the missing ones are yielded (:func:`unstored`). A resumed run therefore stores the bits a
clean run stores whatever part of it the store holds; a crash costs at most one batch again.

**A probe's name fixes its tries.** The canonical name (:attr:`Probe.name`, the store's key and
part of the audit's id) carries every choice that decides a try, the algorithm included: the
sampler's draw (``draw=multinomial``), the random routes' draw (``shared=false``: per question)
and the search's expansion rule (``expand=distinct``). A change of algorithm is a new value of
one of these, never a silent change under an old name; ``tests/test_golden_tries.py`` keeps
each name's tries equal to the committed ones (``tests/fixtures/golden_tries.json``).
"""

from __future__ import annotations

import hashlib
import itertools
import math
import random
from abc import ABC, abstractmethod
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from rnr_lens.core.ablation_methods import ablation_method, check_component
from rnr_lens.core.records import DEFAULT_PROBE, DRAWS, Try
from rnr_lens.errors import RnrLensError
from rnr_lens.measure.probe_specs import ProbeSpec, family_of
from rnr_lens.model.routes import KEEP, MAX_BLOCKS, REPEAT, SKIP, Route, distinct_edit_routes, draw_edits, draw_route
from rnr_lens.questions.deploy import DeploymentConfig
from rnr_lens.questions.tasks.core import Question

if TYPE_CHECKING:  # the model floor loads when a probe runs, not when a name is read
    from rnr_lens.model.generation import Generation
    from rnr_lens.model.lens import LensModel


@dataclass
class ProbeContext:
    """What a probe needs to run: the model, the deployment and the audit's seed."""

    model: LensModel
    config: DeploymentConfig
    answer_type: str
    seed: int = 0
    batch_size: int | None = None
    defaults: dict[str, Try] = field(default_factory=dict)  # realized tries, by question id

    def generate(self, questions: Sequence[Question], **kwargs: Any) -> list[Generation]:
        cfg = self.config
        return self.model.generate(
            [cfg.prompt(q) for q in questions],
            max_new_tokens=cfg.max_new_tokens,
            stop=cfg.stop,
            batch_size=self.batch_size,
            **kwargs,
        )

    @property
    def rows_per_call(self) -> int:
        """Rows a probe may put into one generate call: the batch size, or the automatic
        batch's ceiling."""
        from rnr_lens.model.lens import MAX_AUTO_BATCH

        return self.batch_size or MAX_AUTO_BATCH

    def make_try(self, question: Question, probe: str, index: int, gen: Generation, **extra: Any) -> Try:
        extracted, correct = self.config.grade(gen.text, question, self.answer_type)
        return Try(
            question.id,
            probe,
            index,
            gen.text,
            extracted,
            correct,
            len(gen.token_ids),
            mean_logprob=gen.mean_logprob,
            mean_entropy=gen.mean_entropy,
            **extra,
        )


def _flag(text: str) -> bool:
    return text.lower() in ("1", "true", "yes")


def setting(default: Any, *, parse: Callable[[str], Any] | None = None, what: str | None = None, was: str | None = None) -> Any:
    """A probe's setting, declared once: its default and how its text in a probe name is read
    (by the default's type unless ``parse`` is given; ``what`` names the expected text in an
    error). Its key in the name is the field's own name; ``was`` is the key it had in names
    stored before a rename, read as this one so that a stored audit's probes still read (a
    name is written with the new key only). :func:`parse_probe` reads every setting by its
    declaration (a plain dataclass field, as a notebook's own probe may have, reads as
    ``setting(its default)``)."""
    return field(default=default, metadata={"parse": parse, "what": what, "was": was})


def _reading(f: Any) -> tuple[Callable[[str], Any], str]:
    """How a setting's text is read, and what an error calls that text."""
    meta = f.metadata
    default = f.default
    parse = meta.get("parse") or (_flag if isinstance(default, bool) else type(default))
    return parse, meta.get("what") or type(default).__name__


class Probe(ABC):
    """A way to spend ``budget`` model evaluations per question looking for a correct answer."""

    family: ClassVar[str]
    """The probe's family (``sampling``, ``routes``, ``search``, ``ablation``): the part of its
    name before the colon, the key of :data:`PROBES`."""
    independent_draws: ClassVar[bool] = False
    """Are a question's tries independent draws from one distribution (so that pass@k at any k
    up to the budget is estimated from them, as the ceiling does)? Sampling's are; random
    routes are drawn distinct, and a search's depend on its earlier tries."""
    rewarded: ClassVar[bool] = False
    """Does each try carry the probe's own reward (read by the ``reward`` selector)?"""

    @property
    @abstractmethod
    def budget(self) -> int | None:
        """Model evaluations per question (None: one per block, so it depends on the model)."""

    def budget_for(self, n_layers: int) -> int:
        """Model evaluations per question on an ``n_layers``-block model."""
        return n_layers if self.budget is None else self.budget

    @abstractmethod
    def params(self) -> dict[str, Any]:
        """The parameters that define the probe (its spec)."""

    @abstractmethod
    def run(self, ctx: ProbeContext, questions: Sequence[Question], done: dict[tuple[str, int], Try]) -> Iterator[list[Try]]:
        """Yield batches of finished tries for ``questions``, skipping keys in ``done``; each
        batch computed as a clean run computes it (:func:`unstored`)."""

    rows_per_question: ClassVar[int] = 1  # rows one question adds to a generate call

    def check(self, n_layers: int) -> None:  # noqa: B027  # optional hook: most probes run on any model
        """Refuse settings this model cannot run (called before an audit touches its store)."""

    @property
    def spec(self) -> ProbeSpec:
        """The canonical name as a :class:`~rnr_lens.measure.probe_specs.ProbeSpec`."""
        return ProbeSpec(self.family, tuple((k, str(v)) for k, v in self.params().items()))

    @property
    def name(self) -> str:
        """Canonical spec string, e.g. ``'sampling:k=8,t=0.7,top_p=1.0'``; the store's key."""
        return str(self.spec)

    def __repr__(self) -> str:
        return f"Probe({self.name})"


class Default(Probe):
    """The realized answer: greedy decoding under the deployment config, identity route."""

    family = DEFAULT_PROBE

    @property
    def budget(self) -> int:
        return 1

    def params(self) -> dict[str, Any]:
        return {}

    @property
    def name(self) -> str:
        return DEFAULT_PROBE

    def run(self, ctx: ProbeContext, questions: Sequence[Question], done: dict[tuple[str, int], Try]) -> Iterator[list[Try]]:
        if not stored(done, [(q.id, 0) for q in questions]):
            gens = ctx.generate(questions)
            yield unstored(done, [ctx.make_try(q, self.name, 0, g) for q, g in zip(questions, gens)])


SAMPLER_DRAWS = DRAWS
"""How a sample's next token is drawn, on the CPU over the (top-p filtered) distribution at
temperature ``t``, one generator per sample seeded :func:`question_seed` ``+ i``:
``multinomial`` (``torch.multinomial``, the default) or ``inverse-cdf`` (one uniform per sample
and step against the cumulative distribution, all rows at once: the same distribution, other
tokens for a seed; :func:`rnr_lens.model.generation.draw_tokens`)."""

SEARCH_EXPANSIONS = ("distinct", "tree")
"""How the route search expands a node. ``distinct`` (since 2026-12-01, fad12eb): an untried edit
is skipped where its route was already reached through another path of the tree (skip 3 then 5,
or 5 then 3), so every try is a new route; ``tree``: every untried edit of the node, as before
(two paths may try one route twice). Names written before the rule was named (no ``expand``)
are ambiguous: both rules ran under them (:func:`legacy_name_note`)."""


PROBES: dict[str, type[Probe]] = {}
"""Every probe family by its name, in the order registered (:func:`register_probe`)."""

P = TypeVar("P", bound=type[Probe])


def register_probe(cls: P) -> P:
    """Register probe class ``cls`` under its ``family`` (a class decorator); a family already
    registered is refused, since a name fixes what it computes."""
    if not (isinstance(cls, type) and issubclass(cls, Probe)) or not isinstance(getattr(cls, "family", None), str):
        raise RnrLensError(f"register_probe takes a Probe subclass with a family name, got {cls!r}")
    if cls.family in PROBES:
        raise RnrLensError(f"probe family {cls.family!r} is registered already; a name fixes what it computes, so choose another")
    PROBES[cls.family] = cls
    return cls


def probe_class(name: str) -> type[Probe]:
    """The class of the family probe ``name`` belongs to, or one line naming the families.

    Example:
        >>> probe_class("sampling:k=8,t=0.7").independent_draws
        True
    """
    family = family_of(name)
    if family not in PROBES:
        raise RnrLensError(f"unknown probe {family!r} in {name!r}; choose one of {', '.join(PROBES)}")
    return PROBES[family]


@register_probe
@dataclass(repr=False)
class Sampling(Probe):
    """``k`` samples at temperature ``t``, each token drawn by ``draw``."""

    k: int = setting(8)
    t: float = setting(0.7)
    top_p: float = setting(1.0)
    draw: str = setting("multinomial")
    family: ClassVar[str] = "sampling"
    independent_draws: ClassVar[bool] = True

    def __post_init__(self) -> None:
        _check_k(self)
        _check_range(self, "t", self.t, 0.0, MAX_TEMPERATURE, low_open=True, hint="for greedy decoding use the default deployment")
        _check_range(self, "top_p", self.top_p, 0.0, 1.0, low_open=True)
        _check_choice(self, "draw", SAMPLER_DRAWS)

    @property
    def budget(self) -> int:
        return self.k

    @property
    def rows_per_question(self) -> int:  # type: ignore[override]  # a property where the base has a class attribute
        return self.k

    def params(self) -> dict[str, Any]:
        return {"k": self.k, "t": self.t, "top_p": self.top_p, "draw": self.draw}

    def run(self, ctx: ProbeContext, questions: Sequence[Question], done: dict[tuple[str, int], Try]) -> Iterator[list[Try]]:
        if not stored(done, [(q.id, i) for q in questions for i in range(self.k)]):
            seeds = [question_seed(ctx.seed, q.id) for q in questions]
            gens = ctx.generate(questions, n=self.k, temperature=self.t, top_p=self.top_p, seed=seeds, draw=self.draw)
            yield unstored(done, [ctx.make_try(questions[g.prompt_index], self.name, g.sample_index, g, seed=g.seed) for g in gens])


def question_seed(seed: int, question_id: str) -> int:
    """The base seed of one question's samples (sample ``i`` uses it ``+ i``): a hash of the
    audit's seed and the question id, so questions that repeat a prompt draw independent
    samples, and each sample is still reproducible alone.

    Example:
        >>> question_seed(0, "add-small-3-4") == question_seed(0, "add-small-3-4") != question_seed(0, "add-small-4-3")
        True
    """
    return int.from_bytes(hashlib.sha256(f"sampling:{seed}:{question_id}".encode()).digest()[:4], "big")


def stored(done: dict[tuple[str, int], Try], keys: Sequence[tuple[str, int]]) -> bool:
    """Whether the store holds every try of a batch (keys ``(question id, try index)``), so the
    batch is skipped; where it lacks any, the batch is generated whole (:func:`unstored`)."""
    return all(key in done for key in keys)


def unstored(done: dict[tuple[str, int], Try], tries: Sequence[Try]) -> list[Try]:
    """The tries of a batch generated whole that the store lacks: a resume regenerates the
    batch a clean run computes, never a batch of only its missing rows, since a row's last bits
    (and a token, where two were within them) depend on the rows beside it.

    Example:
        >>> t = Try("q1", "default", 0, "4", "4", True, 1)
        >>> unstored({("q1", 0): t}, [t, Try("q2", "default", 0, "5", "5", True, 1)])[0].question_id
        'q2'
    """
    return [t for t in tries if (t.question_id, t.try_index) not in done]


@register_probe
@dataclass(repr=False)
class RandomRoutes(Probe):
    """``k`` random routes, greedy decoding under each, from one of two distributions named in
    the spec:

    - segments (``routes:k=8``, the default): :func:`draw_route`, each 1..``max_segment``-block
      segment skipped or repeated with probability ``edit_rate`` (about seven blocks edited on
      a 30-block model);
    - the route search's own move set (``routes:k=8,edits=d``): :func:`draw_edits`, ``d``
      distinct single-block skip/repeat edits of the identity, uniform over unprotected
      blocks, the neighbourhood :class:`RouteSearch` explores at depth ``d``; compare random
      and structured search over the same moves with this one.
    """

    k: int = setting(8)
    edit_rate: float = setting(0.25)
    max_segment: int = setting(4)
    protect: int = setting(1)
    edits: int = setting(0)
    shared: bool = setting(False)
    family: ClassVar[str] = "routes"

    def __post_init__(self) -> None:
        _check_k(self)
        _check_range(self, "edit_rate", self.edit_rate, 0.0, 1.0, low_open=True, hint="edit_rate=0 draws only the identity route, the default answer")
        # bounded by the largest model a route can name, so a file's 10**12 is refused before any work (issue 73)
        _check_range(self, "max_segment", self.max_segment, 1, MAX_BLOCKS)
        _check_range(self, "protect", self.protect, 0, MAX_BLOCKS)
        _check_range(self, "edits", self.edits, 0, MAX_BLOCKS)

    def check(self, n_layers: int) -> None:
        _check_protect(self, n_layers)
        if self.edits > n_layers - 2 * self.protect:
            raise RnrLensError(
                f"probe {self.name}: edits={self.edits} needs that many unprotected blocks; a {n_layers}-block model "
                f"with protect={self.protect} has {n_layers - 2 * self.protect}"
            )
        if self.edits and self.k > (space := distinct_edit_routes(n_layers, self.edits, self.protect)):
            raise RnrLensError(
                f"probe {self.name}: k={self.k} distinct routes asked for, but a {n_layers}-block model has only {space} routes {self.edits} edits away; lower k"
            )

    @property
    def budget(self) -> int:
        return self.k

    def params(self) -> dict[str, Any]:
        # the draw is always named: audits made before routes were drawn per question (whose
        # names lack it) keep their own ids instead of resuming under another draw
        draw = {"shared": "true" if self.shared else "false"}
        if self.edits:
            return {"k": self.k, "edits": self.edits, "protect": self.protect, **draw}
        return {"k": self.k, "edit_rate": self.edit_rate, "max_segment": self.max_segment, "protect": self.protect, **draw}

    def routes(self, n_layers: int, seed: int, question_id: str) -> list[Route]:
        """The ``k`` distinct non-identity routes of one question (of every question when
        ``shared``), drawn in order from ``(seed, question id)`` (``seed`` alone when shared)."""
        rng = random.Random(f"routes:{seed}" if self.shared else f"routes:{seed}:{question_id}")
        out: list[Route] = []
        for _ in range(1000 * self.k):
            if len(out) == self.k:
                return out
            if self.edits:
                route = draw_edits(n_layers, rng, self.edits, protect=self.protect)
            else:
                route = draw_route(n_layers, rng, edit_rate=self.edit_rate, max_segment=self.max_segment, protect=self.protect)
            if route not in out:  # never two of one question's tries on one route
                out.append(route)
        raise RnrLensError(f"probe {self.name}: could not draw {self.k} distinct routes on a {n_layers}-block model; lower k or raise edit_rate")

    def run(self, ctx: ProbeContext, questions: Sequence[Question], done: dict[tuple[str, int], Try]) -> Iterator[list[Try]]:
        """Generate every question's routes, one route per row, as many rows per batched
        call as fit (a row's route is its own: the engine schedules per-row routes)."""
        n = ctx.model.n_layers
        rows = [(q, i, route) for q in questions for i, route in enumerate(self.routes(n, ctx.seed, q.id))]
        for start in range(0, len(rows), ctx.rows_per_call):
            chunk = rows[start : start + ctx.rows_per_call]
            if stored(done, [(q.id, i) for q, i, _ in chunk]):
                continue
            gens = ctx.generate([q for q, _, _ in chunk], route=[route for _, _, route in chunk])
            yield unstored(done, [ctx.make_try(q, self.name, i, g, route=str(route)) for (q, i, route), g in zip(chunk, gens)])


# ---------------------------------------------------------------------------------------------
# Route search
# ---------------------------------------------------------------------------------------------


@dataclass
class _Node:
    edits: tuple[int, ...]
    parent: _Node | None = None
    children: dict[tuple[int, int], _Node] = field(default_factory=dict)
    visits: int = 0
    total: float = 0.0


@register_probe
@dataclass(repr=False)
class RouteSearch(Probe):
    """Per-question search over routes, ``k`` evaluations.

    Args:
        k: Evaluations (greedy generations under a candidate route) per question.
        reward: ``"confidence"`` (answer-blind) or ``"oracle"`` (answer-aware).
        algo: ``"mcts"`` or ``"greedy"`` (hill-climbing over single edits).
        c: UCB exploration constant.
        length_penalty: Subtracted from UCB per unit of route length / depth.
        epsilon: Chance of expanding a random unexplored child instead of descending.
        protect: First and last blocks never edited.
        expand: ``distinct`` or ``tree`` (:data:`SEARCH_EXPANSIONS`): whether MCTS skips an
            untried edit whose route another path of the tree already reached.
    """

    k: int = setting(8)
    reward: str = setting("confidence")
    algo: str = setting("mcts")
    c: float = setting(1.0)
    length_penalty: float = setting(0.1)
    epsilon: float = setting(0.1)
    protect: int = setting(1)
    expand: str = setting("distinct")
    family: ClassVar[str] = "search"
    rewarded: ClassVar[bool] = True

    def __post_init__(self) -> None:
        _check_k(self)
        _check_range(self, "c", self.c, 0.0, None)
        _check_range(self, "length_penalty", self.length_penalty, None, None)
        _check_range(self, "epsilon", self.epsilon, 0.0, 1.0)
        _check_range(self, "protect", self.protect, 0, None)
        if self.reward not in ("confidence", "oracle"):
            raise RnrLensError(f"search reward must be 'confidence' or 'oracle', not {self.reward!r}")
        if self.algo not in ("mcts", "greedy"):
            raise RnrLensError(f"search algo must be 'mcts' or 'greedy', not {self.algo!r}")
        _check_choice(self, "expand", SEARCH_EXPANSIONS)

    def check(self, n_layers: int) -> None:
        _check_protect(self, n_layers)

    @property
    def budget(self) -> int:
        return self.k

    def params(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "reward": self.reward,
            "algo": self.algo,
            "c": self.c,
            "length_penalty": self.length_penalty,
            "epsilon": self.epsilon,
            "protect": self.protect,
            "expand": self.expand,
        }

    def score(self, t: Try) -> float:
        if self.reward == "oracle":
            return 1.0 if t.correct else 0.0
        return math.exp(t.mean_logprob) if t.mean_logprob is not None and t.n_tokens else 0.0

    def _actions(self, edits: tuple[int, ...]) -> list[tuple[int, int]]:
        n = len(edits)
        return [(layer, e) for layer in range(self.protect, n - self.protect) if edits[layer] == KEEP for e in (SKIP, REPEAT)]

    def run(self, ctx: ProbeContext, questions: Sequence[Question], done: dict[tuple[str, int], Try]) -> Iterator[list[Try]]:
        """Search every question's routes in lockstep: each question's own tree (seeded by the
        audit's seed and its id) picks its next candidate, and all picks are generated in one
        batched call with one route per row. The trees make the same decisions as when
        searched one question at a time, so the stored tries are the same; tries already in
        ``done`` (a resumed run) are read back, and a step that lacks any is generated whole, as
        a clean run generates it (:func:`unstored`). A question's prompt states
        are kept from step to step (:meth:`~rnr_lens.model.engine.Engine.prefix_states`), so each
        candidate's prompt runs only the blocks after those it shares with an earlier one."""
        with ctx.model.engine.prefix_states():
            yield from self._lockstep(ctx, questions, done)

    def _lockstep(self, ctx: ProbeContext, questions: Sequence[Question], done: dict[tuple[str, int], Try]) -> Iterator[list[Try]]:
        n = ctx.model.n_layers
        searches: dict[str, tuple[Question, Generator[tuple[int, tuple[int, ...]], float, None]]] = {}
        for q in questions:  # every question, its tries all stored or not: each is a row of a clean run's steps
            rng = random.Random(f"search:{ctx.seed}:{q.id}")
            default = ctx.defaults.get(q.id)
            base = self.score(default) if default is not None else 0.0
            searches[q.id] = (q, self._greedy(n, rng, base) if self.algo == "greedy" else self._mcts(n, rng, base))
        requests = {qid: _advance(search, None) for qid, (_, search) in searches.items()}
        while picks := [(searches[qid][0], index, Route.from_edits(edits)) for qid, (index, edits) in _live(requests)]:
            # one step: every live question's next pick, generated together as a clean run does;
            # a resumed run reads back the picks it stored and answers them with their rewards
            step = {j: t for j, (q, index, route) in enumerate(picks) if (t := _stored_pick(done, q.id, index, route, self.name)) is not None}
            missing = [j for j in range(len(picks)) if j not in step]
            if missing:
                gens = ctx.generate([q for q, _, _ in picks], route=[route for _, _, route in picks])
                for j in missing:
                    q, index, route = picks[j]
                    step[j] = t = ctx.make_try(q, self.name, index, gens[j], route=str(route))
                    t.reward = self.score(t)
            for j, (q, _, _) in enumerate(picks):
                t = step[j]
                requests[q.id] = _advance(searches[q.id][1], t.reward if t.reward is not None else self.score(t))
            if missing:
                yield [step[j] for j in missing]

    def _greedy(self, n: int, rng: random.Random, base: float) -> Generator[tuple[int, tuple[int, ...]], float, None]:
        """Hill-climbing over single edits: yields ``(try index, edits)``, is sent the reward."""
        current, value = tuple([KEEP] * n), base
        tried: set[tuple[int, ...]] = set()
        for i in range(self.k):
            options = [a for a in self._actions(current) if _apply(current, a) not in tried]
            if not options:
                break
            candidate = _apply(current, rng.choice(options))
            tried.add(candidate)
            score = yield i, candidate
            if score > value:
                current, value = candidate, score

    def _mcts(self, n: int, rng: random.Random, base: float) -> Generator[tuple[int, tuple[int, ...]], float, None]:
        """Monte Carlo tree search over edits: yields ``(try index, edits)``, is sent the reward."""
        root = _Node(tuple([KEEP] * n), visits=1, total=base)
        seen = {root.edits}  # routes already tried: with expand=distinct two paths to one route (skip 3 then 5, 5 then 3) are tried once
        distinct = self.expand == "distinct"
        for i in range(self.k):
            node = root
            while True:
                untried = [a for a in self._actions(node.edits) if a not in node.children and not (distinct and _apply(node.edits, a) in seen)]
                if untried and (not node.children or rng.random() < self.epsilon or len(node.children) < 2):
                    action = rng.choice(untried)
                    child = _Node(_apply(node.edits, action), parent=node)
                    node.children[action] = child
                    seen.add(child.edits)
                    node = child
                    break
                if not node.children:
                    break  # nothing left to expand below: re-evaluate is pointless; stop
                node = max(node.children.values(), key=lambda ch: self._ucb(ch, node.visits, n))
            if node is root:
                break
            value = yield i, node.edits
            back: _Node | None = node
            while back is not None:
                back.visits += 1
                back.total += value
                back = back.parent

    def _ucb(self, child: _Node, parent_visits: int, n: int) -> float:
        if child.visits == 0:
            return float("inf")
        length = len(Route.from_edits(child.edits)) / n
        return child.total / child.visits + self.c * math.sqrt(math.log(parent_visits + 1) / child.visits) - self.length_penalty * length


def _live(requests: dict[str, tuple[int, tuple[int, ...]] | None]) -> list[tuple[str, tuple[int, tuple[int, ...]]]]:
    """The questions whose search has a pick waiting, with it."""
    return [(qid, request) for qid, request in requests.items() if request is not None]


def _stored_pick(done: dict[tuple[str, int], Try], qid: str, index: int, route: Route, name: str) -> Try | None:
    """A search's pick as a resumed run stored it; None where it is not stored. A try stored
    under another route is refused: the store holds another search under this name (a name
    fixes its tries), and continuing would mix two trees in one question's tries."""
    cached = done.get((qid, index))
    if cached is not None and cached.route != str(route):
        raise RnrLensError(
            f"probe {name}: the store holds try {index} of question {qid!r} on route {cached.route}, where this search picks {route}; "
            "it holds another search under this name: audit into a new store"
        )
    return cached


def _advance(search: Generator[tuple[int, tuple[int, ...]], float, None], reward: float | None) -> tuple[int, tuple[int, ...]] | None:
    """Send a search its last reward (None to start it); its next pick, or None when done."""
    try:
        return next(search) if reward is None else search.send(reward)
    except StopIteration:
        return None


def _apply(edits: tuple[int, ...], action: tuple[int, int]) -> tuple[int, ...]:
    layer, edit = action
    out = list(edits)
    out[layer] = edit
    return tuple(out)


@register_probe
@dataclass(repr=False)
class AblationProbe(Probe):
    """One try per block with that block's ``component`` silenced by ``method`` (``kind`` in
    names stored before 0.2.0, read as ``method``). Only a method that takes no reference
    prompts (``zero``): mean and resample take their activations from reference prompts, which
    the miner has and a probe does not."""

    component: str = setting("mlp")
    method: str = setting("zero", was="kind")
    layers: tuple[int, ...] | None = setting(None, parse=lambda text: tuple(int(x) for x in text.split("+")), what="list of blocks, e.g. 3+4+12")
    family: ClassVar[str] = "ablation"

    def __post_init__(self) -> None:
        try:
            check_component(self.component)
            method = ablation_method(self.method)
        except RnrLensError as unknown:
            raise RnrLensError(f"ablation probe: {unknown}") from None
        if method.needs_reference:  # a probe has no reference prompts to take a mean or a donor from
            raise RnrLensError(
                f"ablation probe: method={self.method} needs reference prompts, which a probe is not given; use method=zero, "
                f"or 'rnr-lens mine --method {self.method}' (it takes them from the failure set's control questions)"
            )
        if self.layers is not None and (not self.layers or len(set(self.layers)) != len(self.layers)):
            raise RnrLensError(f"ablation probe: layers {self.layers} must name each block once, e.g. layers=3+4+12")

    def check(self, n_layers: int) -> None:
        bad = [i for i in self.layers or () if not 0 <= i < n_layers]
        if bad:
            raise RnrLensError(f"probe {self.name}: block {bad[0]} does not exist in a {n_layers}-block model (valid: 0..{n_layers - 1})")

    @property
    def budget(self) -> int | None:
        return len(self.layers) if self.layers is not None else None  # every block of the model

    def params(self) -> dict[str, Any]:
        out: dict[str, Any] = {"component": self.component, "method": self.method}
        if self.layers is not None:
            out["layers"] = "+".join(map(str, self.layers))
        return out

    def run(self, ctx: ProbeContext, questions: Sequence[Question], done: dict[tuple[str, int], Try]) -> Iterator[list[Try]]:
        from rnr_lens.model.interventions import Ablation

        layers = self.layers if self.layers is not None else tuple(range(ctx.model.n_layers))
        for index, layer in enumerate(layers):
            if stored(done, [(q.id, index) for q in questions]):
                continue
            ablation = Ablation(layer, self.component, self.method)
            gens = ctx.generate(questions, ablations=[ablation])
            yield unstored(done, [ctx.make_try(q, self.name, index, g, ablation=str(ablation)) for q, g in zip(questions, gens)])


MAX_BUDGET = 100_000
MAX_TEMPERATURE = 100.0


def _check_k(probe: Probe) -> None:
    k = getattr(probe, "k", None)
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_BUDGET:
        raise RnrLensError(f"{probe.family} probe: the budget k must be an integer from 1 to {MAX_BUDGET}, got {k!r}")


def _check_range(probe: Probe, key: str, value: object, low: float | None, high: float | None, *, low_open: bool = False, hint: str = "") -> None:
    """Refuse a setting that is not a finite number within ``[low, high]`` (``(low, high]``)."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    number = float(value) if ok else 0.0  # type: ignore[arg-type]  # an int or float here (checked on the line above)
    if ok and low is not None:
        ok = number > low if low_open else number >= low
    if ok and high is not None:
        ok = number <= high
    if not ok:
        lo = "-inf" if low is None else f"{low}"
        span = f"{'(' if low_open else '['}{lo}, {'inf' if high is None else high}]"
        raise RnrLensError(f"{probe.family} probe: {key}={value!r} must be a finite number in {span}" + (f"; {hint}" if hint else ""))


def _check_choice(probe: Probe, key: str, choices: Sequence[str]) -> None:
    value = getattr(probe, key)
    if value not in choices:
        raise RnrLensError(f"probe {probe.family}: {key}={value!r} is not known; choose one of {', '.join(choices)}")


def legacy_name_note(name: str) -> str | None:
    """Why a stored probe name written before its algorithm was named cannot be resumed
    exactly, or None for a name this version writes: a search name without ``expand`` ran the
    ``tree`` rule before 2026-12-01 12:30 UTC (fad12eb) and the ``distinct`` rule after it; a
    sampling name without ``draw`` seeded every question's sample ``i`` alike (``seed + i``)
    before 2026-12-01 00:22 UTC (6b624c3) and per question after it
    (``scripts/probe_history.py`` found both).

    Example:
        >>> legacy_name_note("search:k=8,reward=confidence,algo=mcts,c=1.0,length_penalty=0.1,epsilon=0.1,protect=1") is not None
        True
    """
    spec = ProbeSpec.parse(name)
    family, keys = spec.family, spec.keys
    if family == "search" and "expand" not in keys:
        return (
            f"{name} was written before search names carried their expansion rule: rnr_lens before 2026-12-01 12:30 UTC "
            "(commit fad12eb) ran expand=tree under it, later versions expand=distinct, so its tries cannot be resumed exactly; "
            "its stored tries read as they are; audit again with search:...,expand=distinct (the default) or expand=tree"
        )
    if family == "sampling" and "draw" not in keys:
        return (
            f"{name} was written before sampling names carried their draw: rnr_lens before 2026-12-01 00:22 UTC (commit 6b624c3) "
            "seeded sample i of every question with seed + i, later versions per question (question_seed), under one name, so its "
            "tries cannot be resumed exactly; its stored tries read as they are; audit again (sampling:...,draw=multinomial)"
        )
    return None


def _check_protect(probe: Probe, n_layers: int) -> None:
    protect: int = getattr(probe, "protect", 0)
    if 2 * protect >= n_layers:
        raise RnrLensError(f"probe {probe.name}: protect={protect} keeps every block of a {n_layers}-block model fixed; lower it")


def shortest_form(name: str, names: Sequence[str]) -> str:
    """The shortest spec that names probe ``name`` among an audit's ``names`` (as
    :meth:`rnr_lens.measure.results.AuditResult.probe_name` reads one): its family where the audit ran
    one probe of it, else the fewest of its settings whose parse, defaults filled in, is
    ``name`` itself (``sampling:t=0.5`` beside ``sampling:k=8,t=0.7``; never a text prefix,
    which the parse would read with another setting's default).

    Example:
        >>> names = ["sampling:k=8,t=0.5,top_p=1.0,draw=multinomial", "sampling:k=8,t=0.7,top_p=1.0,draw=multinomial"]
        >>> shortest_form(names[0], names)
        'sampling:t=0.5'
    """
    spec = ProbeSpec.parse(name)
    if [family_of(n) for n in names].count(spec.family) == 1:
        return spec.family
    for size in range(1, len(spec.settings) + 1):  # a bare family names no one of several
        for keys in itertools.combinations(spec.keys, size):
            candidate = str(spec.subset(keys))
            try:
                if parse_probe(candidate).name == name:
                    return candidate
            except RnrLensError:  # a name this version does not declare (a legacy or custom key)
                return name
    return name


def parse_probe(text: str) -> Probe:
    """Parse ``'sampling:k=8,t=0.7'``, ``'routes:k=8'``, ``'search:k=8,reward=oracle'`` or
    ``'ablation:component=mlp'``: each setting read by its declaration (:func:`setting`), the
    rest left at their defaults."""
    spec = ProbeSpec.parse(text)
    cls = probe_class(text)
    declared = {f.name: f for f in fields(cls)}  # type: ignore[arg-type]  # every probe class is a dataclass
    renamed = {f.metadata["was"]: f for f in declared.values() if f.metadata.get("was")}
    kwargs: dict[str, Any] = {}
    for key, value in spec.settings:
        f = declared.get(key) or renamed.get(key)
        if f is None:
            raise RnrLensError(f"probe {text!r}: unknown setting {key!r}; {spec.family} takes {', '.join(declared)}")
        if f.name in kwargs:  # the new key beside the old one
            raise RnrLensError(f"probe {text!r}: {f.name} is given twice ({key} is its name in probes stored before 0.2.0)")
        parse, what = _reading(f)
        try:
            kwargs[f.name] = parse(value)
        except ValueError:
            raise RnrLensError(f"probe {text!r}: {key}={value!r} is not a valid {what}") from None
    return cls(**kwargs)
