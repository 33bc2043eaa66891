"""Batched, route-aware generation with a KV cache, and teacher-forced scoring.

The decoding loop is written out plainly: prefill each distinct prompt once, copy its cache
rows to every sample of that prompt, then decode one token per step for the rows still
running, dropping rows as they finish. The cache has one slot per route position
(:class:`rnr_lens.model.adapters.RouteCache`), so a repeated block keeps separate keys and values
for each visit and a routed step costs what a default step costs.

Sampling uses one ``torch.Generator`` per sample, seeded ``base + sample_index`` (one base
seed for all prompts, or one per prompt), so any sample can be reproduced alone with ``generate([prompt], n=1, seed=sample.seed, ...)``.
Log-probabilities are those of the model's untempered distribution.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

import torch
from jaxtyping import Float, Int
from tqdm.auto import tqdm

from rnr_lens.core.phases import phase
from rnr_lens.core.records import DRAWS as DRAWS  # the sampler's draws, named below torch
from rnr_lens.errors import RnrLensError
from rnr_lens.model.adapters import RouteCache, RowRouteCache, attention_window
from rnr_lens.model.engine import Engine
from rnr_lens.model.interventions import Ablation
from rnr_lens.model.prompts import PromptLike
from rnr_lens.model.routes import Route, as_route

RouteLike = Route | str | Sequence[int]


class ModelLike(Protocol):
    """What generation needs from a model: the structural type that
    :class:`rnr_lens.model.lens.LensModel` satisfies (this module sits below it, so
    ``LensModel.generate`` can call in without an import cycle)."""

    name: str
    tokenizer: Any
    engine: Engine

    @property
    def n_layers(self) -> int: ...

    @property
    def eos_token_ids(self) -> set[int]: ...

    def encode(self, prompt: PromptLike) -> list[int]: ...

    def pad(self, sequences: Sequence[Sequence[int]]) -> tuple[Int[torch.Tensor, "batch pos"], Int[torch.Tensor, "batch pos"]]: ...

    def auto_batch_size(self, seq_len: int) -> int: ...

    def new_cache(self) -> RouteCache: ...

    def intervene(
        self, route: Route | str | Sequence[int] | None = None, ablations: Sequence[Ablation | str] = ()
    ) -> AbstractContextManager[Any]: ...

    def forward_tokens(
        self,
        input_ids: Int[torch.Tensor, "batch pos"],
        attention_mask: Int[torch.Tensor, "batch total"] | None = None,
        *,
        position_ids: Int[torch.Tensor, "batch pos"] | None = None,
        cache: RouteCache | None = None,
        logits_to_keep: int = 0,
        inputs_embeds: Float[torch.Tensor, "batch pos d_model"] | None = None,
    ) -> Float[torch.Tensor, "batch kept d_vocab"]: ...


@dataclass
class Generation:
    """One generated sample."""

    text: str
    token_ids: list[int]
    logprobs: list[float]
    finish_reason: str  # "eos", "stop" or "length"
    prompt_index: int
    sample_index: int
    seed: int | None
    entropies: list[float] = field(default_factory=list)  # of each step's next-token distribution

    @property
    def mean_logprob(self) -> float:
        return sum(self.logprobs) / len(self.logprobs) if self.logprobs else 0.0

    @property
    def mean_entropy(self) -> float:
        return sum(self.entropies) / len(self.entropies) if self.entropies else 0.0


@dataclass
class ContinuationScore:
    """The teacher-forced log-probability of one continuation."""

    logprob: float
    token_logprobs: list[float] = field(default_factory=list)


def draw_tokens(probs: Float[torch.Tensor, "batch d_vocab"], generators: Sequence[torch.Generator], draw: str) -> Int[torch.Tensor, " batch"]:
    """One token per row of ``probs`` (CPU rows summing to 1), row ``b`` drawn by ``draw``
    (:data:`DRAWS`) from ``generators[b]``; the same tokens on any machine for the same seeds.

    Example:
        >>> probs = torch.tensor([[0.0, 0.25, 0.75], [1.0, 0.0, 0.0]])
        >>> draw_tokens(probs, [torch.Generator().manual_seed(s) for s in (1, 2)], "inverse-cdf").tolist()
        [1, 0]
    """
    if draw == "multinomial":
        return torch.stack([torch.multinomial(probs[b], 1, generator=g)[0] for b, g in enumerate(generators)])
    if draw != "inverse-cdf":
        raise RnrLensError(f"unknown draw {draw!r}; choose one of {', '.join(DRAWS)}")
    u = torch.cat([torch.rand(1, generator=g, dtype=torch.float64) for g in generators])
    cdf = probs.double().cumsum(-1)
    chosen = torch.searchsorted(cdf, (u * cdf[:, -1])[:, None], right=True)[:, 0]  # the first token whose cdf exceeds u
    # u * total can round up to the total itself: then the last token of positive probability
    last = probs.shape[-1] - 1 - (probs > 0).flip(-1).to(torch.int8).argmax(-1)
    return torch.minimum(chosen, last)


def _top_p_filter(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    if top_p >= 1.0:
        return probs
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    keep = sorted_probs.cumsum(-1) - sorted_probs < top_p
    sorted_probs = sorted_probs * keep
    filtered = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
    return filtered / filtered.sum(-1, keepdim=True)


def _check_decoding(max_new_tokens: int, n: int, temperature: float, top_p: float, draw: str, seed: int | Sequence[int] | None) -> bool:
    """Refuse settings :func:`generate` cannot run, in one line each; whether it decodes greedily."""
    if max_new_tokens < 1:
        raise RnrLensError(f"max_new_tokens must be at least 1, got {max_new_tokens}")
    if n < 1:
        raise RnrLensError(f"n must be at least 1, got {n}")
    if temperature < 0:
        raise RnrLensError(f"temperature must be >= 0, got {temperature}")
    if not 0 < top_p <= 1:
        raise RnrLensError(f"top_p must be in (0, 1], got {top_p}")
    if draw not in DRAWS:
        raise RnrLensError(f"unknown draw {draw!r}; choose one of {', '.join(DRAWS)}")
    greedy = temperature == 0
    if not greedy and seed is None:
        raise RnrLensError("sampling (temperature > 0) needs a seed so every sample can be reproduced; pass seed=")
    return greedy


def _base_seeds(seed: int | Sequence[int] | None, n_prompts: int) -> list[int] | None:
    """Each prompt's base seed (sample ``j`` uses base ``+ j``): one for all, or one per prompt."""
    if seed is None:
        return None
    bases = [int(seed)] * n_prompts if isinstance(seed, int) else [int(x) for x in seed]
    if len(bases) != n_prompts:
        raise RnrLensError(f"give one seed, or one per prompt: {len(bases)} seeds for {n_prompts} prompts")
    return bases


def _one_or_per_row(route: RouteLike | Sequence[RouteLike] | None, n_prompts: int, n_layers: int) -> tuple[Route | None, list[Route] | None]:
    """``(one route for every row, None)``, or ``(None, each prompt's route)`` where the prompts'
    routes differ (one route given per prompt, all alike, counts as one)."""
    per_row = _per_prompt_routes(route, n_prompts, n_layers)
    if per_row is not None and len(set(per_row)) == 1:
        return per_row[0], None
    if per_row is None:
        return as_route(route, n_layers), None  # type: ignore[arg-type]  # one route: not a per-prompt list (checked above)
    return None, per_row


def generate(
    model: ModelLike,
    prompts: Sequence[PromptLike],
    *,
    route: RouteLike | Sequence[RouteLike] | None = None,
    ablations: Sequence[Ablation | str] = (),
    max_new_tokens: int = 32,
    temperature: float = 0.0,
    top_p: float = 1.0,
    n: int = 1,
    seed: int | Sequence[int] | None = None,
    stop: Sequence[str] | None = None,
    batch_size: int | None = None,
    progress: bool = False,
    ignore_eos: bool = False,
    draw: str = "multinomial",
) -> list[Generation]:
    """Generate ``n`` samples for each prompt.

    Args:
        model: The model.
        prompts: Raw strings or :class:`~rnr_lens.model.prompts.ChatPrompt` s.
        route: Route to run under (default: the current one), or one route per prompt: rows
            with different routes then share each batched forward (on the twin graph; on the
            bridge, one forward per distinct route), and each row gets exactly the tokens it
            gets alone under its route.
        ablations: Ablations to apply.
        max_new_tokens: Most tokens to generate per sample.
        temperature: 0 for greedy decoding, otherwise the sampling temperature.
        top_p: Nucleus sampling threshold.
        n: Samples per prompt (greedy samples are computed once and copied).
        seed: Base seed, or one per prompt; sample ``j`` of a prompt uses its base ``+ j``.
            Required when sampling.
        stop: Stop strings; the text is cut before the first one.
        batch_size: Rows per forward; chosen from the machine's memory when None.
        progress: Show a tqdm progress bar over batches.
        ignore_eos: Keep generating past end-of-sequence tokens (for benchmarks).
        draw: How a sampled token is drawn (:data:`DRAWS`).

    Returns:
        ``len(prompts) * n`` generations, prompt-major.

    Example:
        >>> out = model.generate(["What is 2+3? The answer is"], max_new_tokens=4)  # doctest: +SKIP
        >>> out[0].text  # doctest: +SKIP
        ' 5.'
    """
    greedy = _check_decoding(max_new_tokens, n, temperature, top_p, draw, seed)
    if not prompts:
        return []
    bases = _base_seeds(seed, len(prompts))
    single, per_row = _one_or_per_row(route, len(prompts), model.n_layers)
    if model.engine.path().graph == "twin":  # the reuses run on the twin only: check those this call may run, once
        model.engine.reuses.decide(("shared-prefix",) if per_row is None else ("shared-identity", "prefix-store"))
    encoded = [model.encode(p) for p in prompts]
    n_distinct = 1 if greedy else n
    results: list[Generation | None] = [None] * (len(prompts) * n)
    with model.intervene(route=single, ablations=ablations), torch.no_grad():
        longest = max(len(e) for e in encoded) + max_new_tokens
        size = batch_size or model.auto_batch_size(longest)
        batches = _plan_batches(sorted(range(len(prompts)), key=lambda i: -len(encoded[i])), n_distinct, size)
        iterator = batches
        if progress:
            iterator = tqdm(batches, desc=f"generate ({model.name})", unit="batch")
        for prompt_ids, samples in iterator:

            def decode(ids: list[int], samples: list[int] = samples) -> list[_Decoded]:
                return _generate_batch(
                    model,
                    [encoded[i] for i in ids],
                    samples,
                    greedy=greedy,
                    temperature=temperature,
                    top_p=top_p,
                    draw=draw,
                    seeds=None if bases is None else [bases[i] for i in ids],
                    max_new_tokens=max_new_tokens,
                    stop=list(stop or []),
                    eos=set() if ignore_eos else model.eos_token_ids,
                )

            if per_row is None:
                outs = decode(prompt_ids)
            else:
                inputs = [tuple(encoded[i]) for i in prompt_ids]
                outs = _decode_routed(model, decode, prompt_ids, [per_row[i] for i in prompt_ids], len(samples), inputs)
            for k, (pi, si) in enumerate((pi, si) for pi in prompt_ids for si in samples):
                out = outs[k]
                sample_seed = None if greedy or bases is None else bases[pi] + si
                copies = range(n) if greedy else [si]
                for sj in copies:
                    results[pi * n + sj] = Generation(
                        out.text, list(out.token_ids), list(out.logprobs), out.finish_reason, pi, sj, sample_seed, list(out.entropies)
                    )
    return [r for r in results if r is not None]


def _per_prompt_routes(route: RouteLike | Sequence[RouteLike] | None, n_prompts: int, n_layers: int) -> list[Route] | None:
    """The routes of a list with one route per prompt; None when ``route`` is one route."""
    if not isinstance(route, (list, tuple)) or not route or isinstance(route[0], int):
        return None
    if len(route) != n_prompts:
        raise RnrLensError(f"give one route, or one per prompt: {len(route)} routes for {n_prompts} prompts")
    out = []
    for r in route:
        parsed = as_route(r, n_layers)
        if parsed is None:
            raise RnrLensError("a per-prompt route list cannot hold None; give the identity route for the default order")
        out.append(parsed)
    return out


def _decode_routed(
    model: ModelLike,
    decode: Callable[[list[int]], list[_Decoded]],
    prompt_ids: list[int],
    routes: list[Route],
    reps: int,
    inputs: list[tuple[int, ...]],
) -> list[_Decoded]:
    """Decode a batch whose prompts follow their own routes: in one batched forward where the
    engine can (:meth:`~rnr_lens.model.engine.Engine.routed_rows`; rows with the same tokens, a
    question's routes, compute their shared blocks before the first edit once), else one batch
    per distinct route; rows come back prompt-major either way."""
    if model.engine.can_route_rows():
        with model.engine.routed_rows([r.layers for r in routes], inputs):
            return decode(prompt_ids)
    outs: list[_Decoded | None] = [None] * (len(prompt_ids) * reps)
    for route in dict.fromkeys(routes):
        positions = [p for p, r in enumerate(routes) if r == route]
        with model.intervene(route=route):
            part = decode([prompt_ids[p] for p in positions])
        for j, p in enumerate(positions):
            outs[p * reps : (p + 1) * reps] = part[j * reps : (j + 1) * reps]
    return [o for o in outs if o is not None]


def _plan_batches(order: list[int], n_samples: int, size: int) -> list[tuple[list[int], list[int]]]:
    """Group prompts (with all their samples) into batches of about ``size`` rows; a prompt
    with more samples than ``size`` gets batches of its own."""
    plans: list[tuple[list[int], list[int]]] = []
    if n_samples >= size:
        for pi in order:
            for start in range(0, n_samples, size):
                plans.append(([pi], list(range(start, min(n_samples, start + size)))))
        return plans
    per = max(1, size // n_samples)
    for start in range(0, len(order), per):
        plans.append((order[start : start + per], list(range(n_samples))))
    return plans


class _Decoded(NamedTuple):
    """One decoded row of a batch, before it becomes a :class:`Generation`."""

    text: str
    token_ids: list[int]
    logprobs: list[float]
    entropies: list[float]
    finish_reason: str


def _generate_batch(
    model: ModelLike,
    prompt_ids: list[list[int]],
    samples: list[int],
    *,
    greedy: bool,
    temperature: float,
    top_p: float,
    seeds: list[int] | None,
    draw: str = "multinomial",
    max_new_tokens: int,
    stop: list[str],
    eos: set[int],
) -> list[_Decoded]:
    """Decode ``len(samples)`` samples for each prompt; rows are prompt-major; sample ``j`` of
    prompt ``i`` draws from a generator seeded ``seeds[i] + j``."""
    tok = model.tokenizer
    reps = len(samples)
    logits, mask, cache = _prefill(model, prompt_ids, max_new_tokens)
    if reps > 1:
        cache.batch_repeat_interleave(reps)
        logits = logits.repeat_interleave(reps, 0)
        mask = mask.repeat_interleave(reps, 0)
    n_rows = len(prompt_ids) * reps
    generators: list[torch.Generator] = []
    if not greedy:
        assert seeds is not None, "sampling needs seeds (generate checks this)"
        generators = [torch.Generator().manual_seed(seeds[r // reps] + samples[r % reps]) for r in range(n_rows)]
    out_ids: list[list[int]] = [[] for _ in range(n_rows)]
    out_lps: list[list[float]] = [[] for _ in range(n_rows)]
    out_ents: list[list[float]] = [[] for _ in range(n_rows)]
    reasons = ["length"] * n_rows
    active = list(range(n_rows))  # original row of each live batch row
    positions = mask.sum(-1, keepdim=True) - 1
    stop_window = max((len(s) for s in stop), default=0) + 8
    for step in range(max_new_tokens):
        logprobs = torch.log_softmax(logits.float(), dim=-1)
        if greedy:
            chosen = logprobs.argmax(-1)
        else:
            # sampled on the CPU with per-sample CPU generators: the same draws on any device
            probs = _top_p_filter(torch.softmax(logits.float() / temperature, dim=-1), top_p).cpu()
            chosen = draw_tokens(probs, [generators[row] for row in active], draw).to(logits.device)
        picked_lp = logprobs.gather(-1, chosen[:, None])[:, 0]
        entropy = -(logprobs.exp() * logprobs).sum(-1)
        # one host transfer per step for the whole batch, not three per row (the same values)
        tokens, lps, ents = chosen.tolist(), picked_lp.tolist(), entropy.tolist()
        keep: list[int] = []
        for b, row in enumerate(active):
            token = tokens[b]
            if token in eos:
                reasons[row] = "eos"
                continue
            out_ids[row].append(token)
            out_lps[row].append(lps[b])
            out_ents[row].append(ents[b])
            if stop and any(s in tok.decode(out_ids[row][-stop_window:]) for s in stop):
                reasons[row] = "stop"
                continue
            keep.append(b)
        if not keep or step == max_new_tokens - 1:
            break
        if len(keep) < len(active):
            index = torch.tensor(keep, device=mask.device)
            cache.select_rows(index)
            chosen, mask, positions = chosen[index], mask[index], positions[index]
            active = [active[b] for b in keep]
        mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
        positions = positions + 1
        with phase("decode"):
            logits = model.forward_tokens(chosen[:, None], mask, position_ids=positions, cache=cache, logits_to_keep=1)[:, -1]
    results = []
    for row in range(n_rows):
        text = tok.decode(out_ids[row], skip_special_tokens=True)
        if reasons[row] == "stop":
            cut = min((text.find(s) for s in stop if s in text), default=-1)
            text = text[:cut] if cut >= 0 else text
        results.append(_Decoded(text, out_ids[row], out_lps[row], out_ents[row], reasons[row]))
    return results


SHARED_PREFIX_MIN = 8
"""Prompts of one batch that open with at least this many identical tokens (a chat template's
system prompt and tags, mostly) prefill them once for the whole batch."""


def _shared_prefix(prompt_ids: Sequence[Sequence[int]]) -> int:
    """How many leading tokens every prompt shares, leaving each at least one token of its own."""
    shortest = min(len(p) for p in prompt_ids)
    first = prompt_ids[0]
    n = 0
    while n < shortest - 1 and all(p[n] == first[n] for p in prompt_ids):
        n += 1
    return n


def _prefill(
    model: ModelLike, prompt_ids: list[list[int]], max_new_tokens: int
) -> tuple[Float[torch.Tensor, "batch d_vocab"], Int[torch.Tensor, "batch total"], RouteCache]:
    """The prompts' KV cache and each prompt's next-token logits.

    Where the prompts are all alike long and share a prefix of :data:`SHARED_PREFIX_MIN` tokens
    or more, the prefix is computed once and its keys and values copied to every row; each
    prompt's own tokens follow it. Only where that changes nothing a row can see:

    - no row is padded: a pad between the prefix and a prompt's own tokens moves the prefix's
      keys within the attention's reductions, and so a row's last bits (seen on an AMD EPYC);
    - every row runs the same route, and the forward runs on the twin (on the bridge, a user's
      hooks see the whole prompt in one forward);
    - no sliding window is shorter than the sequence with its new tokens (kept from when pads
      could fall inside a window);
    - the reuse ``shared-prefix`` is on: its check found every row's bits kept at this model's
      shapes on this machine (:class:`~rnr_lens.model.reuse.Reuses`).

    Otherwise the prompts are left-padded and run whole."""
    cache = model.new_cache()
    shared = 0
    if (
        len(prompt_ids) > 1
        and len({len(p) for p in prompt_ids}) == 1
        and not isinstance(cache, RowRouteCache)
        and model.engine.path().graph == "twin"
    ):
        window = attention_window(model.engine.bridge)
        if window is None or max(len(p) for p in prompt_ids) + max_new_tokens <= window:
            shared = _shared_prefix(prompt_ids)
    if shared < SHARED_PREFIX_MIN or not model.engine.reuses.on("shared-prefix"):
        ids, mask = model.pad(prompt_ids)
        with phase("prefill"):
            return model.forward_tokens(ids, mask, cache=cache, logits_to_keep=1)[:, -1], mask, cache
    model.engine.reuses.ran("shared-prefix")
    head, head_mask = model.pad([prompt_ids[0][:shared]])
    own, own_mask = model.pad([p[shared:] for p in prompt_ids])
    mask = torch.cat([head_mask.expand(len(prompt_ids), -1), own_mask], dim=1)
    with phase("prefill"):
        model.forward_tokens(head, head_mask, cache=cache, logits_to_keep=1)
        cache.batch_repeat_interleave(len(prompt_ids))
        logits = model.forward_tokens(own, mask, cache=cache, logits_to_keep=1)[:, -1]
    return logits, mask, cache


@dataclass(frozen=True)
class Continuations:
    """Prompt + continuation token rows for teacher forcing: left-padded, so every continuation
    ends in the last column, with the continuation tokens right-aligned in ``targets``."""

    input_ids: Int[torch.Tensor, "batch pos"]
    attention_mask: Int[torch.Tensor, "batch pos"]
    targets: Int[torch.Tensor, "batch cont"]
    mask: Float[torch.Tensor, "batch cont"]  # 1 on a real continuation token, 0 on padding

    @property
    def keep(self) -> int:
        """How many final positions' logits :meth:`logprobs` needs (``logits_to_keep``)."""
        return self.targets.shape[1] + 1

    def logprobs(self, logits: Float[torch.Tensor, "batch kept d_vocab"], temperature: float = 1.0) -> Float[torch.Tensor, "batch cont"]:
        """Log-probability of each continuation token under ``softmax(logits / temperature)``
        (0 on padding), from logits covering at least the last :attr:`keep` positions.
        Differentiable."""
        # the logits at position j predict the token at position j + 1
        logprobs = torch.log_softmax(logits[:, -self.keep : -1].float() / temperature, dim=-1)
        return logprobs.gather(-1, self.targets[..., None])[..., 0] * self.mask


def continuations(model: ModelLike, prompts: Sequence[Sequence[int]], answers: Sequence[Sequence[int]]) -> Continuations:
    """Token rows of each prompt followed by its continuation (token ids), for teacher forcing."""
    if len(prompts) != len(answers):
        raise RnrLensError(f"give one continuation per prompt: {len(prompts)} prompts and {len(answers)} continuations")
    ids, attention = model.pad([list(p) + list(a) for p, a in zip(prompts, answers)])
    width = max(1, max(len(a) for a in answers))
    targets = torch.zeros((len(answers), width), dtype=torch.long, device=ids.device)
    mask = torch.zeros((len(answers), width), device=ids.device)
    for row, a in enumerate(answers):
        if len(a):
            targets[row, width - len(a) :] = torch.tensor(list(a), device=ids.device)
            mask[row, width - len(a) :] = 1
    return Continuations(ids, attention, targets, mask)


def token_logprobs(
    model: ModelLike, prompts: Sequence[Sequence[int]], answers: Sequence[Sequence[int]], temperature: float = 1.0
) -> tuple[Float[torch.Tensor, "batch cont"], Float[torch.Tensor, "batch cont"]]:
    """The one teacher-forced log-probability function: each continuation token's
    log-probability given its prompt and the tokens before it, right-aligned in a
    ``(batch, longest continuation)`` tensor, with its mask. One forward under the current
    interventions; differentiable (wrap in ``torch.no_grad()`` to only score)."""
    rows = continuations(model, prompts, answers)
    with phase("teacher-forced"):
        logits = model.forward_tokens(rows.input_ids, rows.attention_mask, logits_to_keep=rows.keep)
    return rows.logprobs(logits, temperature), rows.mask


def score(
    model: ModelLike,
    prompts: Sequence[PromptLike],
    continuations: Sequence[str],
    *,
    route: Route | str | Sequence[int] | None = None,
    ablations: Sequence[Ablation | str] = (),
    batch_size: int | None = None,
) -> list[ContinuationScore]:
    """Log-probability of each continuation given its prompt, under teacher forcing.

    One forward pass per batch; the unembedding runs only on the continuation positions.

    Example:
        >>> model.score(["What is 2+3? The answer is"], [" 5"])[0].logprob  # doctest: +SKIP
        -0.31
    """
    if len(prompts) != len(continuations):
        raise RnrLensError(f"score needs one continuation per prompt, got {len(prompts)} prompts and {len(continuations)} continuations")
    pairs = []
    for p, c in zip(prompts, continuations):
        c_ids = model.tokenizer(c, add_special_tokens=False)["input_ids"]
        if not c_ids:
            raise RnrLensError(f"continuation {c!r} has no tokens; score a non-empty string")
        pairs.append((model.encode(p), list(c_ids)))
    results: list[ContinuationScore | None] = [None] * len(pairs)
    order = sorted(range(len(pairs)), key=lambda i: -(len(pairs[i][0]) + len(pairs[i][1])))
    with model.intervene(route=route, ablations=ablations), torch.no_grad():
        size = batch_size or model.auto_batch_size(len(pairs[order[0]][0]) + len(pairs[order[0]][1]))
        for start in range(0, len(order), size):
            chunk = order[start : start + size]
            lp, _ = token_logprobs(model, [pairs[i][0] for i in chunk], [pairs[i][1] for i in chunk])
            for b, i in enumerate(chunk):
                tokens = lp[b, lp.shape[1] - len(pairs[i][1]) :]
                results[i] = ContinuationScore(float(tokens.sum()), [float(x) for x in tokens])
    return [r for r in results if r is not None]
