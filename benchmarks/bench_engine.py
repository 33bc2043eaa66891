"""Engine throughput: batched greedy generation against plain Hugging Face generate.

On SmolLM2-135M (default), or on a randomly initialised Llama-architecture model of realistic
size (``--model llama-0.5b`` or ``llama-1.5b``, built from a config, no download), on the CPU
or on a GPU when one is present (``--device auto``, bfloat16 there).

Measures, in one run and on the same prompts and batch:

- baseline: ``generate`` of a separately loaded copy of the same weights, no TransformerLens;
- (a) rnr_lens generation, identity route;
- (b) a route with two skips and two repeats (same depth);
- (c) one zeroed MLP;

(a)-(c) run the product's default path: with no user hook on the bridge, the forward runs on
a plain HF twin that shares the bridge's weights (ablations as module hooks on it). For
transparency (a) is also measured on the bridge path (``model.engine.disable_twin(...)``: every bridge
component and hook point runs), as is a route under the bridge path.

and reports each as a ratio to the baseline (target: >= 0.9), plus achieved forward FLOP/s
against a plain torch matmul measured in the same run. Also reports the cold and warm load
times of the offline model.

    python benchmarks/bench_engine.py [--batch 8] [--new-tokens 32] [--repeats 3] [--json out.json]
    python benchmarks/bench_engine.py --model llama-1.5b --device cuda --batch 32 --new-tokens 128
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
from transformers import AutoModelForCausalLM

import rnr_lens as R
from rnr_lens.core.phases import synchronize, timed_rounds
from rnr_lens.model.model_cache import ensure_cached
from rnr_lens.model.tiny import LLAMA_SHAPES, random_causal_lm

CPU = torch.device("cpu")


def matmul_flops(
    seconds: float = 2.0, size: int = 1024, device: torch.device = CPU, dtype: torch.dtype = torch.float32, shape: tuple[int, int, int] | None = None
) -> float:
    """FLOP/s of a torch matmul: ``size`` x ``size`` squares, or ``shape`` = (rows, inner, outer),
    the shape a model's MLP multiplies at a given batch (the fair yardstick for its forwards)."""
    if device.type == "cuda" and shape is None:
        size = 8192
    m, k, n = shape or (size, size, size)
    a, b = torch.randn(m, k, device=device, dtype=dtype), torch.randn(k, n, device=device, dtype=dtype)
    a @ b
    synchronize(device)
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        a @ b
        count += 1
        if count % 16 == 0:
            synchronize(device)
    synchronize(device)
    return 2 * m * k * n * count / (time.perf_counter() - start)


def load_pair(name: str, device: torch.device, dtype: torch.dtype) -> tuple[R.LensModel, torch.nn.Module, float]:
    """The rnr_lens model, a separate plain HF copy of the same weights, and the load time."""
    start = time.perf_counter()
    if name == "smollm2":
        folder = ensure_cached("smollm2-135m-instruct")
        model = R.load_model("smollm2-135m-instruct", dtype=dtype, device=str(device))
        load_s = time.perf_counter() - start
        reference = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype).to(device).eval()
        return model, reference, load_s
    from transformers import AutoTokenizer

    from rnr_lens.model.models import wrap_bridge

    tokenizer = AutoTokenizer.from_pretrained(ensure_cached("smollm2-135m-instruct"))

    def build() -> torch.nn.Module:
        shape = LLAMA_SHAPES[name]
        return random_causal_lm(
            "llama", seed=0, device=device, dtype=dtype, vocab_size=151936, max_position_embeddings=4096, tie_word_embeddings=True, **shape
        )

    hf = build()
    model = R.LensModel(wrap_bridge(hf, tokenizer, name), name=name, tokenizer=tokenizer)
    load_s = time.perf_counter() - start
    return model, build(), load_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--model", default="smollm2", choices=["smollm2", *LLAMA_SHAPES])
    parser.add_argument("--device", default="auto", help="auto (a GPU when present), cpu or cuda")
    parser.add_argument("--dtype", help="default: bfloat16 on a GPU, float32 on the CPU")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available() else "cpu" if args.device == "auto" else args.device)
    dtype = getattr(torch, args.dtype) if args.dtype else (torch.bfloat16 if device.type == "cuda" else torch.float32)

    model, reference, load_s = load_pair(args.model, device, dtype)

    prompts = [R.ChatPrompt(f"What is {(1 + 7 * i) % 97} + {(3 + 5 * i) % 89}?", assistant_prefix="The answer is ") for i in range(args.batch)]
    ids, mask = model.pad([model.encode(p) for p in prompts])
    n_tokens = args.batch * args.new_tokens
    n = model.n_layers

    def hf_generate() -> None:
        with torch.no_grad():
            reference.generate(
                ids,
                attention_mask=mask,
                max_new_tokens=args.new_tokens,
                min_new_tokens=args.new_tokens,
                do_sample=False,
                pad_token_id=model.tokenizer.pad_token_id,
            )

    def ours(fast: bool = True, **kw):
        def run() -> None:
            if not fast:
                model.engine.disable_twin("benchmarking the bridge path")
            try:
                model.generate(prompts, max_new_tokens=args.new_tokens, batch_size=args.batch, ignore_eos=True, **kw)
            finally:
                model.engine.enable_twin()

        return run

    route = R.Route.skip(n, 5, 20).then_repeat(10).then_repeat(15)
    cases = {
        "hf_generate (baseline)": hf_generate,
        "(a) identity route": ours(),
        "(b) route: 2 skips + 2 repeats": ours(route=route),
        "(c) zeroed MLP": ours(ablations=[R.Ablation(n // 2)]),
        "(a') bridge path, identity route": ours(fast=False),
        "(b') bridge path, same route": ours(fast=False, route=route),
    }
    times = timed_rounds(cases, args.repeats, device)
    base_name = "hf_generate (baseline)"
    results = {name: n_tokens / min(t) for name, t in times.items()}
    # ratio: median over rounds of (baseline time / case time) within the same round
    ratios = {name: statistics.median(b / c for b, c in zip(times[base_name], t)) for name, t in times.items()}

    # forward FLOPs per generated token: 2 * parameters touched (blocks + unembedding)
    params = sum(p.numel() for p in reference.parameters())
    embed = reference.get_input_embeddings().weight.numel()
    flops_per_token = 2 * (params - embed + reference.lm_head.weight.numel() if reference.config.tie_word_embeddings else params - embed)
    peak = matmul_flops(device=device, dtype=dtype)

    where = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    print(
        f"{args.model} ({params / 1e9:.2f}B parameters, {dtype}), batch {args.batch}, {args.new_tokens} new tokens, best of {args.repeats}, {where}"
    )
    print(f"load (-> bridge): {load_s:.2f} s")
    print(f"{'case':36s} {'tok/s':>8s} {'ratio':>7s} {'GFLOP/s':>8s} {'of matmul':>9s}")
    for name, tps in results.items():
        achieved = tps * flops_per_token
        print(f"{name:36s} {tps:8.1f} {ratios[name]:7.2f} {achieved / 1e9:8.1f} {achieved / peak:9.1%}")
    print(f"torch matmul ({dtype}): {peak / 1e9:.1f} GFLOP/s")
    worst = min(v for k, v in ratios.items() if k.startswith(("(a)", "(b)", "(c)")))
    print(f"lowest ratio of (a)-(c): {worst:.2f} (target >= 0.90): {'met' if worst >= 0.9 else 'NOT met'}")
    print(
        f"route cost per token relative to identity: {ratios['(a) identity route'] / ratios['(b) route: 2 skips + 2 repeats']:.2f} (target <= 1.10)"
    )
    print("ratio = median over rounds of baseline time / case time in the same round; tok/s from each case's best round")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "model": args.model,
                    "device": str(device),
                    "dtype": str(dtype),
                    "tokens_per_s": results,
                    "ratios": ratios,
                    "matmul_flops": peak,
                    "flops_per_token": flops_per_token,
                    "load_s": load_s,
                },
                f,
                indent=2,
            )


if __name__ == "__main__":
    main()
