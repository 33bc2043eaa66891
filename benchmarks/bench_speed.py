"""Speed-ups against the code before them, in the same run: wall time and identical tries.

Runs the same audit twice, each in a fresh subprocess on this machine: once with the package
as it was at ``--baseline`` (a git revision, checked out into a temporary worktree) and once
with the working tree. Reports each wall time, their ratio, and the share of tries whose text,
extracted answer and route are identical (a speed-up that keeps every try the same must show
1.000). ``--order`` sets which runs first, to average out a machine that warms up; ``--rounds N`` runs
both arms N times, alternating their order each round, and reports the geometric mean of the
rounds' ratios with a 95% t interval (a change of a few percent needs several rounds on a
shared machine: one round's arms have differed by 5-10% with no change between them).
``--probes`` replaces the audit's probes (to time one probe alone).

``--part audit100`` (the default): ``bench_audit.py``'s ``audit100``, 100 ``add-two-digit``
questions with sampling, random routes and the search at k=8 on SmolLM2-135M-Instruct (about 7
minutes an arm on two cores). ``--part setting``: one setting of the default grid reported
whole (``rnr-lens report``: the audit, then the bottleneck mined by screen and confirm and by
the exhaustive sweep, and the null), ``--task add-small`` at ``--n 40`` by default; its two
``claims.json`` must be identical. ``--part sampler``: the sampling probe alone on the working
tree, its draw the multinomial one (``draw=multinomial``, the default) in one arm and the named
fast draw (``draw=inverse-cdf``) in the other, on the same questions and seeds (``--n 200`` by
default): the two draws give other tokens by design, so their tries are compared in
distribution, not one by one (each arm's share of correct tries; the paired difference of reach
per question, Tango's interval and the exact McNemar test; the paired t-test of the per-question
share of correct tries).

    python benchmarks/bench_speed.py [--part audit100|setting|sampler] [--baseline REV] [--task T] [--n N] [--rounds N] [--probes SPEC ...]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

RUN = """
import json, sys, time
import torch
import rnr_lens as R
model = R.load_model(sys.argv[1])
task = R.tasks.get(sys.argv[2], n=int(sys.argv[3]))
probes = json.loads(sys.argv[5])
start = time.perf_counter()
result = R.audit(model, task, probes, store=sys.argv[4], progress=False)
print(json.dumps({"seconds": time.perf_counter() - start, "tries": len(result.tries), "threads": torch.get_num_threads(),
                  "package": R.__file__}))
"""


SETTING = """
import json, sys, time
from pathlib import Path
import torch
import rnr_lens as R
grid = R.Grid(models=(sys.argv[1],), tasks=(sys.argv[2],), n=int(sys.argv[3]), k=int(sys.argv[5]), exhaustive=True)
start = time.perf_counter()
R.report(grid, Path(sys.argv[4]), progress=False)
print(json.dumps({"seconds": time.perf_counter() - start, "tries": 0, "threads": torch.get_num_threads(), "package": R.__file__}))
"""


def run(package: Path, store: Path, args: argparse.Namespace, probes: list[str]) -> dict:
    """One audit (or one reported setting) in a fresh interpreter that imports rnr_lens from ``package``."""
    env = {"PYTHONPATH": str(package), "PATH": "/usr/bin:/bin", **_keep_env()}
    script, last = (SETTING, str(args.k)) if args.part == "setting" else (RUN, json.dumps(probes))
    out = subprocess.run(
        [sys.executable, "-c", script, args.model, args.task, str(args.n), str(store), last],
        env=env,
        capture_output=True,
        text=True,
        cwd=package,
    )
    if out.returncode != 0:
        raise SystemExit(f"the audit under {package} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _keep_env() -> dict[str, str]:
    import os

    keep = ("HOME", "HF_HOME", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "RNR_LENS_CACHE", "XDG_CACHE_HOME")
    return {k: os.environ[k] for k in keep if k in os.environ}


def tries(store: Path) -> dict[tuple[str, str, int], tuple]:
    """Per try: (text, extracted, route, correct) and (mean log-prob, mean entropy, reward)."""
    with sqlite3.connect(store) as c:
        rows = c.execute(
            "SELECT question_id, probe, try_index, text, extracted, route, correct, mean_logprob, mean_entropy, reward FROM tries"
        ).fetchall()
    return {(q, p, i): ((t, e, r, ok), (lp, ent, rw)) for q, p, i, t, e, r, ok, lp, ent, rw in rows}


def largest_difference(a: dict, b: dict) -> float:
    """The largest difference of a stored score (log-prob, entropy, reward) between the arms."""
    gaps = [abs(x - y) for k in a.keys() & b.keys() for x, y in zip(a[k][1], b[k][1]) if x is not None and y is not None]
    return max(gaps, default=0.0)


def sampler(args: argparse.Namespace) -> None:
    """The two draws of the sampling probe in one run on the working tree (see the docstring)."""
    import numpy as np
    from scipy import stats as scipy_stats

    from rnr_lens.core.stats import paired_difference

    arms = [("multinomial", f"sampling:k={args.k},t=0.7,draw=multinomial"), ("inverse-cdf", f"sampling:k={args.k},t=0.7,draw=inverse-cdf")]
    if args.order == "new-first":
        arms.reverse()
    got, per_question = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, probe in arms:
            started = time.strftime("%H:%M:%S")
            got[name] = run(ROOT, Path(tmp) / f"{name}.db", args, [probe])
            print(f"{name}: {got[name]['seconds']:.1f} s for {got[name]['tries']} tries (started {started})", flush=True)
            with sqlite3.connect(Path(tmp) / f"{name}.db") as c:
                rows = c.execute(
                    "SELECT question_id, AVG(correct), MAX(correct) FROM tries WHERE probe != 'default' GROUP BY question_id ORDER BY question_id"
                ).fetchall()
            per_question[name] = {q: (share, reach) for q, share, reach in rows}
    ids = sorted(per_question["multinomial"].keys() & per_question["inverse-cdf"].keys())
    share = {n: np.array([per_question[n][q][0] for q in ids], float) for n in per_question}
    reach = {n: np.array([per_question[n][q][1] for q in ids], float) for n in per_question}
    ratio = got["multinomial"]["seconds"] / got["inverse-cdf"]["seconds"]
    reach_diff = paired_difference(reach["inverse-cdf"], reach["multinomial"])
    t = scipy_stats.ttest_rel(share["inverse-cdf"], share["multinomial"])
    ci = t.confidence_interval()
    print(f"speed-up {ratio:.2f}x (multinomial / inverse-cdf wall time of the sampling probe, {len(ids)} questions of {args.task}, k={args.k})")
    print(
        f"share of correct tries: multinomial {share['multinomial'].mean():.3f}, inverse-cdf {share['inverse-cdf'].mean():.3f}; "
        f"paired difference {share['inverse-cdf'].mean() - share['multinomial'].mean():+.3f} [{ci.low:+.3f}, {ci.high:+.3f}], t-test p {t.pvalue:.2g}"
    )
    print(
        f"reach: multinomial {reach['multinomial'].mean():.3f}, inverse-cdf {reach['inverse-cdf'].mean():.3f}; paired difference {reach_diff.text()} (p {reach_diff.p:.2g})"
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "arms": got,
                    "speedup": ratio,
                    "questions": len(ids),
                    "share_correct": {n: float(v.mean()) for n, v in share.items()},
                    "share_difference": {
                        "value": float(share["inverse-cdf"].mean() - share["multinomial"].mean()),
                        "low": float(ci.low),
                        "high": float(ci.high),
                        "p": float(t.pvalue),
                    },
                    "reach": {n: float(v.mean()) for n, v in reach.items()},
                    "reach_difference": reach_diff.to_dict(),
                    "args": vars(args) | {"json": str(args.json)},
                },
                indent=2,
            )
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", default="audit100", choices=["audit100", "setting", "sampler"])
    parser.add_argument("--baseline", default="HEAD", help="git revision of the code before the speed-ups")
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--task", help="default: add-two-digit (audit100), add-small (setting)")
    parser.add_argument("--n", type=int, help="default: 100 (audit100), 40 (setting)")
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--order", choices=["baseline-first", "new-first"], default="baseline-first")
    parser.add_argument("--rounds", type=int, default=1, help="run both arms this many times, alternating their order")
    parser.add_argument("--probes", nargs="+", help="probe specs of the audit (default: sampling, routes and search at --k)")
    parser.add_argument("--json", type=Path, help="write the result here")
    args = parser.parse_args()
    args.task = args.task or ("add-small" if args.part == "setting" else "add-two-digit")
    args.n = args.n or {"audit100": 100, "setting": 40, "sampler": 200}[args.part]
    if args.part == "sampler":
        sampler(args)
        return
    probes = args.probes or [f"sampling:k={args.k},t=0.7", f"routes:k={args.k}", f"search:k={args.k}"]
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "baseline"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(base), args.baseline], check=True)
        try:
            packages = {"baseline": base, "new": ROOT}
            got: dict[str, list[dict]] = {"baseline": [], "new": []}
            for order in round_orders(args.order, args.rounds):
                for name in order:
                    started = time.strftime("%H:%M:%S")
                    got[name].append(run(packages[name], Path(tmp) / f"{name}{len(got[name])}.db", args, probes))
                    print(
                        f"{name}: {got[name][-1]['seconds']:.1f} s for {got[name][-1]['tries']} tries (started {started}; {got[name][-1]['package']})",
                        flush=True,
                    )
            stores = {name: [Path(tmp) / f"{name}{i}.db" for i in range(args.rounds)] for name in got}
            if args.part == "setting":
                stores = {name: [folder / "runs.db" for folder in folders] for name, folders in stores.items()}
                claims = [json.loads((Path(tmp) / f"{arm}{i}.db" / "claims.json").read_text()) for arm in got for i in range(args.rounds)]
                for c in claims:  # the folders differ; nothing else may
                    c.pop("grid", None)
                print(f"claims.json identical (but for the folder names): {all(c == claims[0] for c in claims)}")
            a, b = tries(stores["baseline"][0]), tries(stores["new"][0])
            repeat_same = all(tries(path) == tries(paths[0]) for paths in stores.values() for path in paths[1:])
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], check=False)
    same = sum(k in b and a[k][0] == b[k][0] for k in a)
    gap = largest_difference(a, b)
    ratio = speedup([r["seconds"] for r in got["baseline"]], [r["seconds"] for r in got["new"]])
    print(f"speed-up {ratio.text()} (baseline / new wall time, {args.n} questions of {args.task}, probes {', '.join(probes)})")
    print(f"identical tries (text, answer, route): {same} of {len(a)} ({same / len(a):.3f}); tries only in one arm: {len(set(a) ^ set(b))}")
    print(f"largest difference of a stored log-prob, entropy or reward: {gap:.2e}")
    if args.rounds > 1:
        print(f"every round of an arm stored the same tries, scores to the bit: {repeat_same}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "arms": got,
                    "speedup": ratio.value,
                    "speedup_interval": [ratio.low, ratio.high],
                    "identical": same,
                    "tries": len(a),
                    "largest_score_difference": gap,
                    "rounds_identical": repeat_same,
                    "args": vars(args) | {"json": str(args.json)},
                },
                indent=2,
            )
        )


def round_orders(first: str, rounds: int) -> list[tuple[str, str]]:
    """The arms' order in each round, alternating from ``first`` (baseline-first: B N, N B, B N,
    ...), so a machine that drifts over the run weighs on both arms alike."""
    pair = ("baseline", "new") if first == "baseline-first" else ("new", "baseline")
    return [pair if i % 2 == 0 else pair[::-1] for i in range(rounds)]


@dataclass(frozen=True)
class Speedup:
    """The geometric mean of the rounds' baseline / new ratios, with a 95% t interval on their
    logarithms (none from one round)."""

    value: float
    low: float | None
    high: float | None

    def text(self) -> str:
        if self.low is None or self.high is None:
            return f"{self.value:.2f}x"
        return f"{self.value:.2f}x [{self.low:.2f}, {self.high:.2f}]"


def speedup(baseline: list[float], new: list[float]) -> Speedup:
    """Pair each round's arms (baseline / new) and summarize the log ratios."""
    import numpy as np
    from scipy import stats as scipy_stats

    logs = np.log(np.array(baseline) / np.array(new))
    if len(logs) < 2:
        return Speedup(float(np.exp(logs.mean())), None, None)
    low, high = scipy_stats.t.interval(0.95, len(logs) - 1, loc=logs.mean(), scale=scipy_stats.sem(logs))
    return Speedup(float(np.exp(logs.mean())), float(np.exp(low)), float(np.exp(high)))


if __name__ == "__main__":
    main()
