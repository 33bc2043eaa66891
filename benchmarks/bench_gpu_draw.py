"""Where the sampling probe's time goes on a GPU: the draw of each token against the whole probe.

A sampled token is drawn on the CPU from each row's own ``torch.Generator`` (so that one seed
gives the same tokens on any machine, :func:`rnr_lens.model.generation.draw_tokens`): every step
copies the batch's probabilities to the CPU and draws there. This measures, in one run on one
model, the sampling probe with each draw (``multinomial``, the default of older names, and
``inverse-cdf``) and random routes at the same k as the baseline with no draw, the share of each
probe's time spent in ``draw_tokens``, and the copy of one step's probabilities to the CPU.

On a CUDA machine it builds random weights of Qwen2.5-0.5B's shape in bfloat16 (as
``scripts/gpu-check`` does; no download). ``--tiny`` runs a tiny model on the CPU (the dry run).

    python benchmarks/bench_gpu_draw.py            # a CUDA machine, about a minute
    python benchmarks/bench_gpu_draw.py --tiny     # anywhere, seconds
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]

import gpu_check  # noqa: E402

import rnr_lens.model.generation as generation  # noqa: E402
from rnr_lens.core.phases import synchronize  # noqa: E402
from rnr_lens.measure.probes import Default, ProbeContext, parse_probe  # noqa: E402
from rnr_lens.questions import tasks  # noqa: E402
from rnr_lens.questions.deploy import DeploymentConfig  # noqa: E402

PROBES = ("sampling:k=8,t=0.7", "sampling:k=8,t=0.7,draw=inverse-cdf", "routes:k=8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="a tiny model on the CPU (the dry run)")
    parser.add_argument("--questions", type=int, default=32, help="add-two-digit questions (default 32)")
    args = parser.parse_args()
    device = torch.device("cpu") if args.tiny else torch.device("cuda", 0)
    spec = gpu_check.tiny_specs()[0] if args.tiny else gpu_check.real_specs()[0]
    model, _ = gpu_check.make_model(spec, device, torch.float32 if args.tiny else torch.bfloat16)

    spent = {"draw": 0.0}
    original = generation.draw_tokens

    def timed_draw(probs: torch.Tensor, generators: Sequence[torch.Generator], draw: str) -> torch.Tensor:
        start = time.perf_counter()
        out = original(probs, generators, draw)
        spent["draw"] += time.perf_counter() - start
        return out

    generation.draw_tokens = timed_draw  # the module global that generate() calls
    task = tasks.get("add-two-digit", n=4 if args.tiny else args.questions)
    questions = list(task)
    ctx = ProbeContext(model, DeploymentConfig(), task.answer_type, seed=0, batch_size=128)
    ctx.defaults = {t.question_id: t for batch in Default().run(ctx, questions, {}) for t in batch}
    rates = {}
    for spec_text in PROBES:
        spent["draw"] = 0.0
        synchronize(device)
        start = time.perf_counter()
        tries = [t for batch in parse_probe(spec_text).run(ctx, questions, {}) for t in batch]
        synchronize(device)
        seconds = time.perf_counter() - start
        rates[spec_text] = len(tries) / seconds
        print(
            f"{spec_text}: {len(tries)} tries in {seconds:.1f} s = {rates[spec_text]:.1f}/s; draw_tokens {spent['draw'] / seconds:.0%} of it",
            flush=True,
        )
    base = rates[PROBES[0]]
    print(f"inverse-cdf / multinomial: {rates[PROBES[1]] / base:.2f}x; routes (no draw) / multinomial: {rates[PROBES[2]] / base:.2f}x")
    logits = torch.randn(128, 1000 if args.tiny else spec.vocab_size, device=device)
    synchronize(device)
    start = time.perf_counter()
    for _ in range(20):
        torch.softmax(logits.float() / 0.7, -1).cpu()
    print(f"softmax and copy of 128 rows' probabilities to the CPU: {(time.perf_counter() - start) / 20 * 1e3:.1f} ms per step")


if __name__ == "__main__":
    main()
