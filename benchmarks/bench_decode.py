"""What bounds decoding: a decoding step's time against its rows, under the identity and under
one random route per row, beside a read of every weight once.

On SmolLM2-135M-Instruct (CPU), for each batch size: prompts of ``add-two-digit`` decoded for
``--new-tokens`` steps with end-of-sequence ignored (so every row runs every step), once under
the identity and once with each row on its own random route (``routes:k=8``'s draw), each
measured with the phase profile (:mod:`rnr_lens.core.phases`: decoding forwards only, prefill
apart). Reported per step: milliseconds, milliseconds per row, the ticks of the batched
schedule (:func:`rnr_lens.model.routes.schedule`: how many block forwards a step runs, each reading
that block's weights), milliseconds per tick, and each step's time as a ratio to the
baseline measured in the same run: one pass that reads every weight tensor once (a sum over
each), the least a step that multiplies by every weight must cost when the weights do not
fit in the CPU's caches. Last, whether a prompt's last hidden state and logits come out the
same to the bit in a batch of n copies as alone (what decides whether a change of batch keeps
every try identical).

    python benchmarks/bench_decode.py [--rows 1 8 16 64 128] [--new-tokens 12] [--repeats 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import torch

import rnr_lens as R
from rnr_lens.core.phases import profiling, timed_rounds
from rnr_lens.model.routes import draw_route, schedule


def decode_seconds(model: R.LensModel, prompts: list, routes: list[R.Route] | None, new_tokens: int) -> float:
    """Seconds spent in decoding forwards for one batch (prefill excluded)."""
    with profiling() as profile:
        model.generate(prompts, route=routes, max_new_tokens=new_tokens, ignore_eos=True, batch_size=len(prompts))
    return profile.seconds.get("decode", 0.0)


def batch_invariance(model: R.LensModel, prompt: object, sizes: tuple[int, ...] = (1, 2, 3, 4, 8, 16, 64)) -> dict[int, dict[str, bool]]:
    """Whether one prompt's last hidden state (after every block) and its logits come out to the
    bit the same in a batch of ``n`` copies as alone: what decides whether moving a row into a
    batch of another size can keep its tries identical."""
    ids, mask = model.pad([model.encode(prompt)])  # type: ignore[arg-type]
    captured: list[torch.Tensor] = []
    norm: torch.nn.Module = model.engine.module().get_decoder().norm  # type: ignore[operator]
    handle = norm.register_forward_hook(lambda module, args, out: captured.append(args[0][:, -1].clone()))
    try:
        out = {}
        with torch.no_grad():
            for n in sizes:
                logits = model.forward_tokens(ids.expand(n, -1), mask.expand(n, -1), logits_to_keep=1)[:, -1]
                out[n] = (captured[-1][0], logits[0])
        alone = out[sizes[0]]
        return {n: {"hidden": bool(torch.equal(h, alone[0])), "logits": bool(torch.equal(lg, alone[1]))} for n, (h, lg) in out.items()}
    finally:
        handle.remove()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 8, 16, 64, 128])
    parser.add_argument("--new-tokens", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    model = R.load_model("smollm2-135m-instruct")
    config = R.DeploymentConfig.default_for("number")
    questions = list(R.tasks.get("add-two-digit", n=max(args.rows)))
    weights = model.engine.all_parameters()

    def read_weights() -> float:
        with torch.no_grad():
            return float(sum(float(w.sum()) for w in weights))

    steps = args.new_tokens - 1  # the first token comes from the prefill's logits
    rows_out = []
    for rows in args.rows:
        prompts = [config.prompt(q) for q in questions[:rows]]
        rng = random.Random(f"bench-decode:{rows}")
        routes = [draw_route(model.n_layers, rng) for _ in range(rows)]
        ticks = len(schedule([r.layers for r in routes]))
        # rounds alternate the three cases, so the machine's drift weighs on each alike; best of each
        read_times, identity_times, routed_times = [], [], []
        decode_seconds(model, prompts, routes, args.new_tokens)  # warm-up
        for _ in range(args.repeats):
            read_times += timed_rounds({"weights": read_weights}, 1)["weights"]
            identity_times.append(decode_seconds(model, prompts, None, args.new_tokens) / steps)
            routed_times.append(decode_seconds(model, prompts, routes, args.new_tokens) / steps)
        read, identity, routed = min(read_times), min(identity_times), min(routed_times)
        row = {
            "rows": rows,
            "weights_read_ms": 1000 * read,
            "identity_ms_per_step": 1000 * identity,
            "identity_ms_per_row_step": 1000 * identity / rows,
            "identity_ticks": model.n_layers,
            "routes_ms_per_step": 1000 * routed,
            "routes_ms_per_row_step": 1000 * routed / rows,
            "routes_ticks": ticks,
            "routes_ms_per_tick": 1000 * routed / ticks,
            "identity_vs_weights_read": identity / read,
            "routes_vs_weights_read": routed / read,
        }
        rows_out.append(row)
        print(
            f"{rows:4d} rows: weights read {row['weights_read_ms']:.1f} ms | identity {row['identity_ms_per_step']:.1f} ms/step "
            f"({row['identity_ms_per_row_step']:.2f}/row, {row['identity_vs_weights_read']:.1f}x the read, {model.n_layers} ticks) | "
            f"routes {row['routes_ms_per_step']:.1f} ms/step ({row['routes_ms_per_row_step']:.2f}/row, {row['routes_vs_weights_read']:.1f}x the read, "
            f"{ticks} ticks, {row['routes_ms_per_tick']:.2f} ms/tick)",
            flush=True,
        )
    invariance = batch_invariance(model, config.prompt(questions[0]))
    for n, same in invariance.items():
        print(f"a prompt in a batch of {n} copies against alone: last hidden state identical {same['hidden']}, logits identical {same['logits']}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {"rows": rows_out, "batch_invariance": invariance, "threads": torch.get_num_threads(), "args": vars(args) | {"json": str(args.json)}},
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
