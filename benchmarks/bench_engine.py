"""Engine throughput: batched greedy generation on SmolLM2 against plain Hugging Face generate.

Measures, in one run and on the same prompts and batch:

- baseline: ``generate`` of a separately loaded copy of the same weights, no TransformerLens;
- (a) rnr_lens generation through the TransformerBridge, identity route;
- (b) a route with two skips and two repeats (same depth);
- (c) one zeroed MLP;

and reports each as a ratio to the baseline (target: >= 0.9), plus achieved forward FLOP/s
against a plain torch matmul measured in the same run. Also reports the cold and warm load
times of the offline model.

    python benchmarks/bench_engine.py [--batch 8] [--new-tokens 32] [--repeats 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
from transformers import AutoModelForCausalLM

import rnr_lens as R
from rnr_lens.models import ensure_cached


def best_of(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def matmul_flops(seconds: float = 2.0, size: int = 1024) -> float:
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        a @ b
        count += 1
    return 2 * size**3 * count / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    torch.set_num_threads(torch.get_num_threads())

    start = time.perf_counter()
    folder = ensure_cached("smollm2-135m-instruct")
    model = R.load_model("smollm2-135m-instruct")
    load_s = time.perf_counter() - start
    reference = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()

    prompts = [R.ChatPrompt(f"What is {a} + {b}?", assistant_prefix="The answer is ") for a, b in zip(range(1, 99, 7), range(3, 99, 5))][: args.batch]
    ids, mask = model.pad([model.encode(p) for p in prompts])
    n_tokens = args.batch * args.new_tokens
    n = model.n_layers

    def hf_generate() -> None:
        with torch.no_grad():
            reference.generate(
                ids, attention_mask=mask, max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens,
                do_sample=False, pad_token_id=model.tokenizer.pad_token_id,
            )

    def ours(**kw):
        return lambda: model.generate(prompts, max_new_tokens=args.new_tokens, batch_size=args.batch, ignore_eos=True, **kw)

    route = R.Route.skip(n, 5, 20).then_repeat(10).then_repeat(15)
    cases = {
        "hf_generate (baseline)": hf_generate,
        "(a) bridge, identity route": ours(),
        "(b) route: 2 skips + 2 repeats": ours(route=route),
        "(c) zeroed MLP": ours(ablations=[R.Ablation(n // 2)]),
    }
    results = {name: n_tokens / best_of(fn, args.repeats) for name, fn in cases.items()}
    base = results["hf_generate (baseline)"]

    # forward FLOPs per generated token: 2 * parameters touched (blocks + unembedding)
    params = sum(p.numel() for p in reference.parameters())
    embed = reference.get_input_embeddings().weight.numel()
    flops_per_token = 2 * (params - embed + reference.lm_head.weight.numel() if reference.config.tie_word_embeddings else params - embed)
    peak = matmul_flops()

    print(f"SmolLM2-135M, batch {args.batch}, {args.new_tokens} new tokens, best of {args.repeats}, {torch.get_num_threads()} threads")
    print(f"load (cached safetensors -> bridge): {load_s:.2f} s")
    print(f"{'case':34s} {'tok/s':>8s} {'ratio':>7s} {'GFLOP/s':>8s} {'of matmul':>9s}")
    for name, tps in results.items():
        achieved = tps * flops_per_token
        print(f"{name:34s} {tps:8.1f} {tps / base:7.2f} {achieved / 1e9:8.1f} {achieved / peak:9.1%}")
    print(f"torch matmul 1024x1024: {peak / 1e9:.1f} GFLOP/s")
    worst = min(v / base for k, v in results.items() if k != "hf_generate (baseline)")
    print(f"lowest ratio: {worst:.2f} (target >= 0.90): {'met' if worst >= 0.9 else 'NOT met'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"tokens_per_s": results, "ratios": {k: v / base for k, v in results.items()},
                       "matmul_flops": peak, "flops_per_token": flops_per_token, "load_s": load_s}, f, indent=2)


if __name__ == "__main__":
    main()
