"""Audit throughput: question-tries per second against a naive baseline, and peak memory.

- rnr_lens: ``audit`` with a sampling and a random-routes probe on SmolLM2 (batched, the
  prompt's KV cache shared across samples of the same prompt, results streamed to SQLite);
- baseline, same run: one Hugging Face ``generate`` call per question and try, batch size 1,
  on a separately loaded copy of the weights (routes need no special handling there: the
  baseline generates plainly, which only flatters it).

Target: >= 5x the baseline. Then, in a fresh subprocess, peak resident memory of an audit of
``--mem-questions`` questions at k = ``--mem-k`` on the tiny model (results streamed to the
store, not held in memory), against the same process's resident memory before the audit.

    python benchmarks/bench_audit.py [--questions 16] [--k 8] [--baseline-tries 24]
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
from rnr_lens import tasks
from rnr_lens.audit import audit
from rnr_lens.deploy import DeploymentConfig
from rnr_lens.model_cache import ensure_cached

MEMORY_SCRIPT = """
import resource, sys, tempfile, os
import rnr_lens as R
from rnr_lens import tasks
from rnr_lens.audit import audit
from rnr_lens.deploy import DeploymentConfig
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
    parser.add_argument("--questions", type=int, default=16)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--baseline-tries", type=int, default=24, help="tries timed for the baseline's rate")
    parser.add_argument("--mem-questions", type=int, default=1000)
    parser.add_argument("--mem-k", type=int, default=64)
    args = parser.parse_args()

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

    print(f"SmolLM2-135M, {args.questions} questions, probes {probes} (+ default), {torch.get_num_threads()} threads")
    print(f"rnr_lens audit : {ours_tries} tries in {ours_s:.1f} s = {ours_rate:.2f} tries/s")
    print(f"naive baseline : {done} tries, batch 1, HF generate = {base_rate:.2f} tries/s")
    print(f"speed-up       : {ours_rate / base_rate:.1f}x (target >= 5x): {'met' if ours_rate / base_rate >= 5 else 'NOT met'}")

    proc = subprocess.run([sys.executable, "-c", MEMORY_SCRIPT, str(args.mem_questions), str(args.mem_k)], capture_output=True, text=True, check=True)
    before, after = (int(x) for x in proc.stdout.split()[-2:])
    print(
        f"peak memory, tiny model, {args.mem_questions} questions x k={args.mem_k} ({args.mem_questions * args.mem_k} tries):"
        f" {after / 1024:.0f} MiB peak RSS ({(after - before) / 1024:.0f} MiB above the loaded model)"
    )


if __name__ == "__main__":
    main()
