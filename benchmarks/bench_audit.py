"""Audit throughput: question-tries per second against naive baselines, and peak memory.

Parts (``--part``; ``all`` runs the first three):

``throughput``

- rnr_lens: ``audit`` with a sampling and a random-routes probe on SmolLM2 (batched, the
  prompt's KV cache shared across samples of the same prompt, results streamed to SQLite);
- baseline, same run: one Hugging Face ``generate`` call per question and try, batch size 1,
  on a separately loaded copy of the weights (routes need no special handling there: the
  baseline generates plainly, which only flatters it).

Target: >= 5x the baseline. Then, in a fresh subprocess, peak resident memory of an audit of
``--mem-questions`` questions at k = ``--mem-k`` on the tiny model (results streamed to the
store, not held in memory), against the same process's resident memory before the audit.

``search``
  Route search in lockstep (every question's tree picks a route, all picks generated in one
  batched call with one route per row) against random routes (drawn per question, one route
  per row), random routes drawn once and shared by every question (``shared=true``: the
  per-question draw must cost the same), and the search one question at a time (batch size 1, as before lockstep;
  timed on ``--per-question`` questions), on ``--search-questions`` questions at k =
  ``--search-k``. Targets: lockstep search >= 0.8x the per-try throughput of random routes
  and >= 3x the per-question search. Also: the share of tries the two searches store alike
  (same route and text), achieved forward FLOP/s beside a torch matmul of the same run, the
  share of time spent on prompt prefill, and how much prefix reuse (starting a route from the
  identity's cached state up to its first edit) could save at most on these routes.

``audit100``
  Wall time of one audit of 100 questions with sampling, random routes and route search at
  k=8 (target: under 5 minutes on two CPU cores).

``search64``
  Wall time of ``search:k=64`` on 200 questions (not in ``all``: about half an hour on two cores).

    python benchmarks/bench_audit.py [--part all] [--questions 16] [--k 8] [--baseline-tries 24]
    python benchmarks/bench_audit.py --part search --model llama-0.5b --device cuda --search-questions 128   # random Qwen2.5-0.5B widths
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

import rnr_lens as R
from rnr_lens.core.phases import synchronize
from rnr_lens.measure.audits import audit
from rnr_lens.measure.probes import Default, Probe, ProbeContext, RandomRoutes, RouteSearch
from rnr_lens.model.model_cache import ensure_cached
from rnr_lens.model.tiny import LLAMA_SHAPES
from rnr_lens.questions import tasks
from rnr_lens.questions.deploy import DeploymentConfig

sys.path.insert(0, str(Path(__file__).parent))
from bench_engine import load_pair, matmul_flops

MEMORY_SCRIPT = """
import resource, sys, tempfile, os
import rnr_lens as R
from rnr_lens.questions import tasks
from rnr_lens.measure.audits import audit
from rnr_lens.questions.deploy import DeploymentConfig
model = R.tiny_model(n_layers=4)
task = tasks.get("add-two-digit", n=int(sys.argv[1]))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
with tempfile.TemporaryDirectory() as d:
    audit(model, task, [f"sampling:k={sys.argv[2]},t=1.0"], DeploymentConfig(max_new_tokens=4), store=os.path.join(d, "m.db"), progress=False)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(before, after)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", default="all", choices=["all", "throughput", "search", "audit100", "search64"])
    parser.add_argument("--questions", type=int, default=16)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--baseline-tries", type=int, default=24, help="tries timed for the baseline's rate")
    parser.add_argument("--mem-questions", type=int, default=1000)
    parser.add_argument("--mem-k", type=int, default=64)
    parser.add_argument("--search-questions", type=int, default=48)
    parser.add_argument("--search-k", type=int, default=8)
    parser.add_argument("--per-question", type=int, default=6, help="questions the per-question search is timed on")
    parser.add_argument("--model", default="smollm2", choices=["smollm2", *LLAMA_SHAPES], help="search part only")
    parser.add_argument("--device", default="auto", help="search part only: auto (a GPU when present), cpu or cuda")
    args = parser.parse_args()
    print(f"{torch.get_num_threads()} threads")
    if args.part in ("all", "throughput"):
        throughput(args)
    if args.part in ("all", "search"):
        search(args)
    if args.part in ("all", "audit100"):
        timed_audit(100, ["sampling:k=8,t=0.7", "routes:k=8", "search:k=8"])
    if args.part == "search64":
        timed_audit(200, ["search:k=64"])


def throughput(args: argparse.Namespace) -> None:
    model = R.load_model("smollm2-135m-instruct")
    reference = AutoModelForCausalLM.from_pretrained(ensure_cached("smollm2-135m-instruct"), dtype=torch.float32).eval()
    task = tasks.get("add-small", n=args.questions)
    config = DeploymentConfig()
    probes = [f"sampling:k={args.k},t=0.7", f"routes:k={args.k}"]

    with tempfile.TemporaryDirectory() as d:
        start = time.perf_counter()
        result = audit(model, task, probes, config, store=Path(d) / "b.db", progress=False)
        ours_s = time.perf_counter() - start
    ours_tries = len(result.tries)
    ours_rate = ours_tries / ours_s

    tok = model.tokenizer
    eos = sorted(model.eos_token_ids)
    done, start = 0, time.perf_counter()
    with torch.no_grad():
        while done < args.baseline_tries:
            q = task[done % len(task)]
            text, special = model.render(config.prompt(q))
            ids = tok(text, add_special_tokens=special, return_tensors="pt")
            sample = done % 2 == 0  # alternate: a sampling try, a greedy (route-like) try
            torch.manual_seed(done)
            reference.generate(
                **ids,
                max_new_tokens=config.max_new_tokens,
                do_sample=sample,
                temperature=0.7 if sample else None,
                top_p=None,
                top_k=None,
                eos_token_id=eos,
                pad_token_id=tok.pad_token_id,
                stop_strings=list(config.stop),
                tokenizer=tok,
            )
            done += 1
    base_rate = done / (time.perf_counter() - start)

    print(f"SmolLM2-135M, {args.questions} questions, probes {probes} (+ default)")
    print(f"rnr_lens audit : {ours_tries} tries in {ours_s:.1f} s = {ours_rate:.2f} tries/s")
    print(f"naive baseline : {done} tries, batch 1, HF generate = {base_rate:.2f} tries/s")
    print(f"speed-up       : {ours_rate / base_rate:.1f}x (target >= 5x): {'met' if ours_rate / base_rate >= 5 else 'NOT met'}")

    proc = subprocess.run([sys.executable, "-c", MEMORY_SCRIPT, str(args.mem_questions), str(args.mem_k)], capture_output=True, text=True, check=True)
    before, after = (int(x) for x in proc.stdout.split()[-2:])
    print(
        f"peak memory, tiny model, {args.mem_questions} questions x k={args.mem_k} ({args.mem_questions * args.mem_k} tries):"
        f" {after / 1024:.0f} MiB peak RSS ({(after - before) / 1024:.0f} MiB above the loaded model)"
    )


def search(args: argparse.Namespace) -> None:
    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available() else "cpu" if args.device == "auto" else args.device)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    model, _, _ = load_pair(args.model, device, dtype)
    config = DeploymentConfig()
    task = tasks.get("add-two-digit", n=args.search_questions)
    questions = list(task)
    ctx = ProbeContext(model, config, task.answer_type, seed=0)
    ctx.defaults = {t.question_id: t for batch in Default().run(ctx, questions, {}) for t in batch}
    k = args.search_k

    def timed(probe: Probe, chunks: list[list]) -> tuple[list, float]:
        synchronize(device)
        start = time.perf_counter()
        tries = [t for chunk in chunks for batch in probe.run(ctx, chunk, {}) for t in batch]
        synchronize(device)
        return tries, time.perf_counter() - start

    routes, routes_s = timed(RandomRoutes(k=k), [questions])
    one_draw, one_draw_s = timed(RandomRoutes(k=k, shared=True), [questions])
    lockstep, lockstep_s = timed(RouteSearch(k=k), [questions])
    alone, alone_s = timed(RouteSearch(k=k), [[q] for q in questions[: args.per_question]])
    rate = {
        name: len(tries) / s
        for name, (tries, s) in {
            "routes": (routes, routes_s),
            "shared": (one_draw, one_draw_s),
            "lockstep": (lockstep, lockstep_s),
            "alone": (alone, alone_s),
        }.items()
    }

    stored = {(t.question_id, t.try_index): (t.route, t.text) for t in lockstep}
    same = sum(stored.get((t.question_id, t.try_index)) == (t.route, t.text) for t in alone)

    # forward FLOPs: 2 x parameters touched per token; blocks scale with the route's length
    hf = model.bridge.original_model
    n = model.n_layers
    block_params = sum(p.numel() for name, p in hf.named_parameters() if ".layers." in name)
    head_params = hf.get_output_embeddings().weight.numel()
    prompt_len = {q.id: len(model.encode(config.prompt(q))) for q in questions}

    def flops(tries: list) -> float:
        return sum(2 * (block_params * len(R.Route.parse(t.route)) / n + head_params) * (prompt_len[t.question_id] + t.n_tokens + 1) for t in tries)

    peak = matmul_flops(device=device, dtype=dtype)
    # the model's own MLP product at the lockstep batch (one row per question): what its forwards multiply
    width = hf.config.hidden_size, hf.config.intermediate_size
    shaped = matmul_flops(device=device, dtype=dtype, shape=(len(questions), *width))

    # where the time goes: one prefill of every question's prompt against one full generation
    ids, mask = model.pad([model.encode(config.prompt(q)) for q in questions])
    with torch.no_grad():
        synchronize(device)
        start = time.perf_counter()
        model.forward_tokens(ids, mask, cache=model.new_cache(), logits_to_keep=1)
        synchronize(device)
        prefill_s = time.perf_counter() - start
        start = time.perf_counter()
        model.generate([config.prompt(q) for q in questions], max_new_tokens=config.max_new_tokens, stop=config.stop)
        synchronize(device)
        generate_s = time.perf_counter() - start
    # prefix reuse would skip the prompt's blocks before a route's first edit (paying one
    # identity prefill per question instead, which the default probe already runs)
    searched = [R.Route.parse(t.route) for t in lockstep]
    shared = [_identity_prefix(route) / len(route) for route in searched]
    prefill_share = prefill_s / generate_s
    saving = prefill_share * (sum(shared) / len(shared))

    print(f"\nroute search, {model.name} on {device} ({dtype}), {len(questions)} questions, k={k}")
    print(
        f"random routes (drawn per question): {len(routes)} tries in {routes_s:6.1f} s = {rate['routes']:.2f} tries/s, {flops(routes) / routes_s / 1e9:.1f} GFLOP/s"
    )
    print(
        f"search, lockstep (batched)       : {len(lockstep)} tries in {lockstep_s:6.1f} s = {rate['lockstep']:.2f} tries/s, {flops(lockstep) / lockstep_s / 1e9:.1f} GFLOP/s"
    )
    print(
        f"random routes, one draw shared   : {len(one_draw)} tries in {one_draw_s:6.1f} s = {rate['shared']:.2f} tries/s, {flops(one_draw) / one_draw_s / 1e9:.1f} GFLOP/s"
    )
    print(
        f"per-question / shared routes     : {rate['routes'] / rate['shared']:.2f}x per try, {flops(routes) / routes_s / (flops(one_draw) / one_draw_s):.2f}x per FLOP"
        " (target ~1: routes drawn per question cost what one shared draw costs)"
    )
    print(f"search, one question at a time   : {len(alone)} tries in {alone_s:6.1f} s = {rate['alone']:.2f} tries/s ({args.per_question} questions)")
    print(f"torch matmul                     : {peak / 1e9:.1f} GFLOP/s (1024 x 1024 squares)")
    print(
        f"torch matmul at the model's shape: {shaped / 1e9:.1f} GFLOP/s ({len(questions)} x {width[0]} times {width[0]} x {width[1]}, the MLP at this batch)"
    )
    print(
        f"forwards / matmul at that shape  : {flops(routes) / routes_s / shaped:.2f} (random routes), {flops(lockstep) / lockstep_s / shaped:.2f} (search); target >= 0.70"
    )
    print(
        f"lockstep / random routes         : {rate['lockstep'] / rate['routes']:.2f}x (target >= 0.8): {'met' if rate['lockstep'] >= 0.8 * rate['routes'] else 'NOT met'}"
    )
    print(
        f"lockstep / one question at a time: {rate['lockstep'] / rate['alone']:.1f}x (target >= 3): {'met' if rate['lockstep'] >= 3 * rate['alone'] else 'NOT met'}"
    )
    print(f"same route and text, both searches: {same} of {len(alone)} tries")
    print(
        f"prefill share of a generation    : {prefill_share:.2f}; routes run the identity for {sum(shared) / len(shared):.2f} of their blocks before the first edit"
    )
    print(f"prefix reuse could save at most  : {saving:.2f} of the search's time (before its bookkeeping and one identity state per question)")


def _identity_prefix(route: R.Route) -> int:
    """How many leading blocks of ``route`` are the identity's."""
    count = 0
    for position, block in enumerate(route.layers):
        if block != position:
            break
        count += 1
    return count


def timed_audit(n_questions: int, probes: list[str]) -> None:
    model = R.load_model("smollm2-135m-instruct")
    task = tasks.get("add-two-digit", n=n_questions)
    with tempfile.TemporaryDirectory() as d:
        start = time.perf_counter()
        result = audit(model, task, probes, DeploymentConfig(), store=Path(d) / "a.db", progress=False)
        seconds = time.perf_counter() - start
    print(f"\naudit of {n_questions} questions, {' '.join(probes)} (+ default), SmolLM2-135M: {len(result.tries)} tries in {seconds / 60:.1f} min")
    for probe in probes:
        name = result.probe_name(probe)
        print(f"  {name}: reachable {result.questions[result.column(name)].mean():.2f}, realized {result.questions['realized'].mean():.2f}")


if __name__ == "__main__":
    main()
