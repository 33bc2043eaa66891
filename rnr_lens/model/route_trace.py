"""Route traces: every pass of the residual stream through a route's blocks, by route step.

Under a route a block may run twice or not at all. TransformerLens' cache is keyed by block
(``blocks.10.hook_resid_post``), so it keeps only a repeated block's last pass and has no entry
for a skipped one. A :class:`RouteTrace` is keyed by route **step** instead: step ``i`` runs
block ``route[i]``; its ``resid_pre`` is the stream entering that pass and its ``resid_post``
the stream leaving it (after any ablation of the pass).

Invariant: every pass is recorded, in route order, and step ``i``'s ``resid_pre`` holds the
bits of step ``i - 1``'s ``resid_post`` (one pass's output is the next pass's input; nothing
stands between them), which ``tests/model/test_route_trace.py`` checks on every tiny architecture. A
plain block name is answered only where it names one pass (the block runs exactly once); a
skipped or repeated block is refused in one line that names the route and what to ask instead.

Example:
    >>> with model.intervene(route=Route.skip(30, 3).then_repeat(10)):  # doctest: +SKIP
    ...     trace = model.route_trace(ids)
    >>> trace["steps.10.hook_resid_post"].shape  # doctest: +SKIP
    torch.Size([1, 7, 576])
    >>> trace["blocks.3.hook_resid_post"]  # doctest: +SKIP
    RnrLensError: blocks.3 is skipped by route 30:0-2,4-10,10-29; it has no pass to read
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from jaxtyping import Float, Int

from rnr_lens.errors import RnrLensError
from rnr_lens.model import adapters
from rnr_lens.model.engine import Engine
from rnr_lens.model.routes import Route

Tensor = torch.Tensor

HOOKS = ("hook_resid_pre", "hook_resid_post")
"""What a trace holds for each step."""

_NAME = re.compile(r"(steps|blocks)\.(\d+)\.(\w+)")


class TracedModel(Protocol):
    """What a trace needs from a model (:class:`rnr_lens.model.lens.LensModel`, which sits above)."""

    engine: Engine
    bridge: Any

    @property
    def route(self) -> Route: ...

    @property
    def tokenizer(self) -> Any: ...

    def forward_tokens(self, input_ids: Tensor, attention_mask: Tensor | None = None, *, logits_to_keep: int = 0) -> Tensor: ...


@dataclass(frozen=True, eq=False)
class RouteTrace:
    """The residual stream around every pass of one forward under ``route``.

    Attributes:
        route: The route the forward ran.
        resid_pre: Per step, the stream entering its block.
        resid_post: Per step, the stream leaving it.
        logits: The forward's own logits at the last position.
        graph: The graph it ran on (``"twin"``, or ``"bridge"`` under a user's hook).
    """

    route: Route
    resid_pre: tuple[Float[Tensor, "batch pos d_model"], ...]
    resid_post: tuple[Float[Tensor, "batch pos d_model"], ...]
    logits: Float[Tensor, "batch d_vocab"]
    graph: str

    def steps_of(self, block: int) -> tuple[int, ...]:
        """The route steps at which ``block`` runs (empty where the route skips it)."""
        return tuple(i for i, b in enumerate(self.route.layers) if b == block)

    def names(self) -> list[str]:
        """Every name :meth:`__getitem__` answers: each step's, then each block's that runs once."""
        steps = [f"steps.{i}.{hook}" for i in range(len(self.route)) for hook in HOOKS]
        once = [b for b in range(self.route.n_layers) if len(self.steps_of(b)) == 1]
        return steps + [f"blocks.{b}.{hook}" for b in once for hook in HOOKS]

    def __getitem__(self, name: str) -> Float[Tensor, "batch pos d_model"]:
        """``steps.{i}.hook_resid_pre`` / ``hook_resid_post``, or the TransformerLens name
        ``blocks.{b}.…`` where block ``b`` runs exactly once under the route."""
        match = _NAME.fullmatch(name)
        if match is None or match.group(3) not in HOOKS:
            raise RnrLensError(
                f"a route trace holds steps.I.hook_resid_pre and steps.I.hook_resid_post (or blocks.B.… for a block that runs once), "
                f"not {name[:80]!r}; read other hooks with model.bridge.run_with_cache inside model.intervene"
            )
        kind, index, hook = match.group(1), int(match.group(2)), match.group(3)
        if kind == "steps":
            if index >= len(self.route):
                raise RnrLensError(f"route {self.route} has {len(self.route)} steps (0 to {len(self.route) - 1}); there is no step {index}")
            step = index
        else:
            if index >= self.route.n_layers:
                raise RnrLensError(f"blocks.{index} is not a block of this {self.route.n_layers}-block model")
            steps = self.steps_of(index)
            if not steps:
                raise RnrLensError(f"blocks.{index} is skipped by route {self.route}; it has no pass to read")
            if len(steps) > 1:
                raise RnrLensError(
                    f"blocks.{index} runs {len(steps)} times under route {self.route} (steps {', '.join(map(str, steps))}); "
                    f"name one pass, e.g. steps.{steps[-1]}.{hook}"
                )
            step = steps[0]
        return (self.resid_pre if hook == "hook_resid_pre" else self.resid_post)[step]

    def norms(self, position: int = -1) -> Float[Tensor, "batch steps"]:
        """The L2 norm of the stream leaving each step, at ``position``."""
        return torch.stack([post[:, position].float().norm(dim=-1) for post in self.resid_post], dim=-1)


def trace(model: TracedModel, input_ids: Int[Tensor, "batch pos"], attention_mask: Int[Tensor, "batch pos"] | None = None) -> RouteTrace:
    """One forward of ``input_ids`` under the model's current route and interventions, with the
    residual stream around every pass recorded (:class:`RouteTrace`)."""
    route, graph = model.route, model.engine.path().graph
    entering: dict[int, list[Tensor]] = {b: [] for b in set(route.layers)}
    leaving: dict[int, list[Tensor]] = {b: [] for b in set(route.layers)}
    handles = []
    try:  # copies: a later in-place hook must not change a recorded pass
        for b in sorted(entering):  # each pass of a block fires its hooks once, in route order
            handles.append(model.engine.block_input(b).read(_recorder(entering[b])))
            handles.append(model.engine.component(b, "block").read(_recorder(leaving[b])))
        with torch.no_grad():
            logits = model.forward_tokens(input_ids, attention_mask, logits_to_keep=1)[:, -1]
    finally:
        for handle in handles:
            handle.remove()
    counts = Counter(route.layers)
    fired = {b: (len(entering[b]), len(leaving[b])) for b in counts if (len(entering[b]), len(leaving[b])) != (counts[b], counts[b])}
    if fired:  # e.g. inside another routing of the rows (the route search's batches)
        b, (n_in, n_out) = next(iter(fired.items()))
        raise RnrLensError(
            f"block {b} ran {n_in} time(s) (output {n_out}) where route {route} runs it {counts[b]}; trace a forward under intervene(route=...) alone"
        )
    seen: Counter[int] = Counter()
    pre, post = [], []
    for b in route.layers:
        pre.append(entering[b][seen[b]])
        post.append(leaving[b][seen[b]])
        seen[b] += 1
    return RouteTrace(route, tuple(pre), tuple(post), logits.detach(), graph)


def _recorder(passes: list[Tensor]) -> Callable[[Tensor], None]:
    """A hook body that keeps a copy of each pass's tensor in ``passes``."""

    def record(x: Tensor) -> None:
        passes.append(x.detach().clone())

    return record


def answer_token(model: TracedModel, answer: str) -> Int[Tensor, " 1"]:
    """The first token of ``answer`` written after the prompt, tokenized as teacher forcing
    tokenizes a gold continuation (:func:`rnr_lens.bottleneck.attribution.gold_batch`: no special tokens;
    pass ``config.gold_continuation(question)``): the token whose logit the logit lens follows."""
    ids = model.tokenizer(str(answer), add_special_tokens=False)["input_ids"]
    if not ids:
        raise RnrLensError(f"answer {str(answer)[:40]!r} has no tokens; give a non-empty answer")
    return torch.tensor(ids[:1])


def logit_lens(model: TracedModel, route_trace: RouteTrace, token_ids: Int[Tensor, " batch"], position: int = -1) -> Float[Tensor, "batch steps"]:
    """Each row's logit of ``token_ids[row]`` read from the stream leaving every step at
    ``position``, through the model's own readout (``rnr_lens.model.adapters.readout``: final
    norm, unembedding, soft-capping): the logit lens. After the last step it is the model's logit."""
    if len(token_ids) != route_trace.logits.shape[0]:
        raise RnrLensError(f"give one token id per row of the trace: {len(token_ids)} for {route_trace.logits.shape[0]} rows")
    if model.engine.path().graph != route_trace.graph:
        raise RnrLensError(
            f"the trace ran on the {route_trace.graph} graph and this forward would run on the other; read its lens under the same hooks"
        )
    read = adapters.readout(model.bridge, model.engine.module() if route_trace.graph == "twin" else None)
    rows = torch.arange(len(token_ids))
    with torch.no_grad():
        return torch.stack([read(post[:, position])[rows, token_ids].float() for post in route_trace.resid_post], dim=-1)
