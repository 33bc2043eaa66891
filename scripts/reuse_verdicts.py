"""Each reuse's check, run afresh on this machine, for the models docs/performance.md tabulates.

Writes one JSON file per run (the CPU, torch's build and each model's verdicts with the check's
cost), so the table in docs/performance.md ("Reuse only where every bit is kept") is read from
committed evidence per CPU kind rather than typed by hand. Run it alone on the machine (the
costs are wall times):

    python scripts/reuse_verdicts.py --out assets/results/reuse-verdicts/intel-xeon-amx.json

It never reads or writes the remembered verdicts (``reuse_check.check``, not
``remembered_check``), so what it prints is this process's measurement.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import torch

import rnr_lens as R
from rnr_lens.model.reuse import REUSES
from rnr_lens.model.reuse_check import check

MODELS = ("smollm2-135m-instruct", "gemma3-270m", "tiny")


def _cpu() -> dict[str, str]:
    """The CPU's model name and its vector flags (Linux), or what the platform says."""
    try:
        lines = Path("/proc/cpuinfo").read_text(errors="replace").splitlines()
    except OSError:
        return {"model": platform.processor() or platform.machine(), "flags": ""}
    name = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "unknown")
    flags = next((line.split(":", 1)[1].split() for line in lines if line.startswith("flags")), [])
    vector = [f for f in flags if f in ("avx", "avx2", "fma") or f.startswith(("avx512", "amx"))]
    return {"model": name, "flags": " ".join(vector)}


def _load(name: str) -> R.LensModel:
    return R.tiny_model(n_layers=4, seed=0) if name == "tiny" else R.load_model(name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the JSON file to write")
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    args = parser.parse_args(argv)
    result: dict[str, object] = {
        "cpu": _cpu(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "models": {},
    }
    for name in args.models:
        model = _load(name)
        verdicts = {}
        for reuse in REUSES:
            start = time.perf_counter()
            verdict = check(model, reuse)
            verdicts[reuse] = {"on": verdict.on, "why": verdict.why, "seconds": round(time.perf_counter() - start, 1)}
            print(f"{name}: {verdict} ({verdicts[reuse]['seconds']} s)", file=sys.stderr)
        result["models"][name] = verdicts  # type: ignore[index]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
