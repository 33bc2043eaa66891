"""Write the pages' rendered blocks, and print one report's claims as Markdown tables: the
plumbing around :mod:`rnr_lens.present.claims_markdown` and :mod:`rnr_lens.present.claims_compared`.

The tables and sentences themselves are the package's (``from rnr_lens import
claims_markdown``); this script only says which committed files feed which block of README.md,
docs/results.md, docs/shots.md and docs/performance.md (and where git history holds an earlier
version), reads them, and writes the blocks. It also renders the scripts' own measurements
that the pages cite (lm-eval parity, the search's speedup, each reuse's verdict per CPU, the
GPU check), whose files those scripts write. Nothing is recomputed here.

    python scripts/claims_tables.py report/claims.json [--model smollm2] [--profile report/profile.json [--stages mine:]]
    python scripts/claims_tables.py report/claims.json --changes-from OLD/claims.json   # the verdicts that changed
    python scripts/claims_tables.py --render   # the rendered blocks into README.md and the docs pages
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rnr_lens.core.stats import wilson  # noqa: E402
from rnr_lens.judge.claims import Claims  # noqa: E402
from rnr_lens.model.reuse import REUSES  # noqa: E402
from rnr_lens.present import claims_compared as compared  # noqa: E402
from rnr_lens.present import claims_markdown as md  # noqa: E402

SIDE_BY_SIDE: dict[str, tuple[str, str | None]] = {
    "SmolLM2-135M-Instruct": ("grid-deep", "grid-seeds"),
    "Gemma-3-270M": ("grid-deep-gemma", "grid-dapo-gemma"),
}
"""Issue 56's two architectures: per model, the grid behind claims 1 and 2 (the deep grid's
design) and the grid behind claim 3 (the seeds grid's design; its first pair, seed 0)."""


SIDE_BY_SIDE_HISTORIES = {"SmolLM2-135M-Instruct": "grid-deep/dapo-history.jsonl", "Gemma-3-270M": "grid-dapo-gemma/dapo-history.jsonl"}
"""Each model's first DAPO run (the seeds grids' seed 0), whose kept groups the preconditions show."""


def parity_table(parity: dict[str, Any]) -> str:
    """lm-eval parity, from ``scripts/lm-eval-parity``'s ``parity.json``: per question, whether
    the prompt, the greedy text and each filter's correctness are alike in both tools, then the
    realized rate each filter gives (Wilson)."""
    t, n = parity["totals"], parity["totals"]["n"]
    filters = [f for f in t if isinstance(t[f], dict)]
    rows = [["prompt (few-shot context)", "", "", f"{t['same_prompt']} of {n}"], ["greedy text", "", "", f"{t['same_text']} of {n}"]]
    rows += [
        [f"`{f}` correct (realized)", str(t[f]["lm_eval_correct"]), str(t[f]["rnr_lens_correct"]), f"{t[f]['same_correctness']} of {n}"]
        for f in filters
    ]
    shown = md.table([f"per question, {n} questions", "`lm_eval`", "`rnr-lens audit`", "alike"], rows)
    said = "; ".join(
        f"`{f}`: `lm_eval` {t[f]['lm_eval_correct']} of {n} ({md.estimate(wilson(t[f]['lm_eval_correct'], n))}), "
        f"`rnr-lens audit` {t[f]['rnr_lens_correct']} of {n} ({md.estimate(wilson(t[f]['rnr_lens_correct'], n))})"
        for f in filters
    )
    return f"{shown}\n\nRealized (Wilson 95%) under each filter: {said}."


def search_speedup(bench: dict[str, Any]) -> str:
    """The prompt-state reuse's measured speedup on the search, from ``benchmarks``' JSON (the
    ratio of the baseline's to the new code's time in the same run, its interval, and whether
    every try came out identical)."""
    low, high = bench["speedup_interval"]
    same = "every try identical" if bench["identical"] == bench["tries"] else f"{bench['identical']} of {bench['tries']} tries identical"
    return f"The search ran {bench['speedup']:.3f}x [{low:.3f}, {high:.3f}] as fast as the code before it, {same}."


def reuse_verdicts(runs: Sequence[dict[str, Any]]) -> str:
    """Each reuse's verdict per CPU and model, from ``scripts/reuse_verdicts.py``'s JSON files
    (one per CPU kind): on or off, and why, as the check said it."""

    def kind(flags: str) -> str:
        have = flags.split()
        return ", ".join(n for n, f in (("AMX", "amx_tile"), ("AVX-512", "avx512f"), ("AVX2", "avx2")) if f in have) or "no vector flags read"

    rows = [
        [f"{run['cpu']['model']} ({kind(run['cpu']['flags'])}; {run['threads']} threads; {run['date']})", model]
        + [f"{'on' if verdicts[r]['on'] else 'off'}: {verdicts[r]['why']}" for r in REUSES]
        for run in runs
        for model, verdicts in run["models"].items()
    ]
    return md.table(["CPU", "model", *REUSES], rows)


def gpu_summary(check: dict[str, Any]) -> str:
    """What ``scripts/gpu-check`` found on a GPU, from its ``gpu-check.json``."""
    s = check["summary"]
    said = [f"passed {md.counted(s['pass'], 'check')}", f"{s['fail']} failed"]
    for status, word in (("fail", "failed"), ("skip", "skipped")):
        named = [f"{c['name']} ({c['detail']})" if c.get("detail") else c["name"] for c in check["checks"] if c["status"] == status]
        if named:
            said.append(f"{word}: {'; '.join(named)}")
    return f"On one {check['gpu'].removeprefix('NVIDIA ')} it {', '.join(said)}."


def _history(path: Path) -> list[dict[str, Any]]:
    """A training run's history file (``*history.jsonl``): its steps, one JSON line each."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _audits_of(folder: Path) -> set[str]:
    """Every audit a report folder's evidence holds for its settings (their ceilings too)."""
    with gzip.open(folder / "evidence.json.gz", "rt") as f:
        settings = json.load(f)["manifest"]["settings"]
    return {a for s in settings for a in (s["audit"], s.get("ceiling")) if a}


FEW_SHOT_FROM = "3bceda4"
"""The commit whose ``grid-default`` holds Gemma-3-270M's zero-shot rows, before issue 55 re-ran
them under its few-shot default (the table of what the re-run changed)."""

CHANGES_FROM = {"grid-default": ("c6d78ee", ""), "grid-deep": ("a58fef3^", "grid-deep-training")}
"""Where git history holds each grid's version-1 claims (the deep grid kept claim 3 in a folder
of its own then), for the tables of verdicts that verdict rules version 2 changed."""

REGRADED_FROM = "825a24b"
"""The commit whose committed claims were read under config version 3, before issue 54's re-grade."""

RULES_2_LAST = "90166fe"
"""The last commit whose committed claims were decided by verdict rules version 2 (before issue
72's version 3): the tables of what version 2 and the re-grade changed compare against it, and
the sentence of what version 3 moved compares with it."""


BLOCK = r"( *)<!-- ({name}) -->.*?<!-- /\2 -->"
PAGES = (ROOT / "README.md", ROOT / "docs" / "results.md", ROOT / "docs" / "shots.md", ROOT / "docs" / "performance.md")
"""The pages whose blocks :func:`render` fills."""
"""A rendered block in a page: ``<!-- NAME -->`` ... ``<!-- /NAME -->``, indented as its marker."""


def rendered_blocks() -> dict[str, str]:
    """Every block name the pages may hold, with its text from the committed claims: the
    k = 128 summary of each grid with a ceiling (``ceiling-summary:GRID``), the lm-eval parity table
    (``lm-eval-parity``), the search's measured speedup (``search-speedup``), the GPU check
    (``gpu-check``), every grid's verdict counts (``grids-summary``), the few-shot measurement (``shots-study``), each grid's findings, every verdict's reason and the report's summary
    (``findings:GRID``, ``reasons:GRID``, ``summary:GRID``), what re-grading moved
    (``regrading-table``) and, where git history holds the earlier claims, which verdicts the
    re-grade moved (``regrade-verdicts``), which verdict rules version 2 changed
    (``changes:GRID``) and what re-running Gemma's rows few-shot changed (``few-shot-rerun``)."""
    results = ROOT / "assets" / "results"

    def claims(grid: str) -> Claims:
        return Claims.from_dict(json.loads((results / grid / "claims.json").read_text()))

    blocks: dict[str, str] = {}

    def committed(grid: str | None) -> Claims | None:  # None: that grid has not run yet
        return claims(grid) if grid and (results / grid / "claims.json").exists() else None

    columns = {model: (committed(deep), committed(trained)) for model, (deep, trained) in SIDE_BY_SIDE.items()}
    blocks["grids-summary"] = compared.grids_table({p.parent.name: claims(p.parent.name) for p in sorted(results.glob("grid-*/claims.json"))})
    blocks["side-by-side"] = compared.side_by_side(columns)
    blocks["side-by-side-reading"] = compared.side_by_side_reading(columns)
    histories = {model: results / path for model, path in SIDE_BY_SIDE_HISTORIES.items() if model in columns}
    blocks["side-by-side-preconditions"] = compared.preconditions_table(
        columns, {model: _history(path) for model, path in histories.items() if path.exists()}
    )
    blocks["lm-eval-parity"] = parity_table(json.loads((results / "lm-eval-parity" / "parity.json").read_text()))
    blocks["search-speedup"] = search_speedup(json.loads((results / "bench-prefix-store" / "search-rounds.json").read_text()))
    blocks["reuse-verdicts"] = reuse_verdicts([json.loads(f.read_text()) for f in sorted((results / "reuse-verdicts").glob("*.json"))])
    blocks["gpu-check"] = gpu_summary(json.loads((results / "gpu-h200" / "gpu-check.json").read_text()))
    study = _shots_study()
    table, n = study.decide(json.loads((results / "shots-study" / "study.json").read_text()))
    blocks["shots-on-test"] = study.on_test_sentence(json.loads((results / "shots-study" / "add-small-test.json").read_text()))
    blocks["shots-study"] = f"{table}\n\nBy the rule, a base model's default deployment gets {n} worked example{'s' if n != 1 else ''}."
    for path in sorted(results.glob("grid-*/claims.json")):
        grid, read = path.parent.name, claims(path.parent.name)
        blocks[f"findings:{grid}"] = md.findings(read)
        blocks[f"reasons:{grid}"] = md.reasons(read)
        blocks[f"summary:{grid}"] = md.summary_lines(read)
        if read.ceiling:  # claim 3 at large k
            blocks[f"ceiling-summary:{grid}"] = md.ceiling_summary(read)
        if any(path.parent.glob("*history.jsonl")):  # the training runs behind its pairs
            said = [md.training_history(h.name, _history(h)) for h in sorted(path.parent.glob("*history.jsonl"))]
            blocks[f"training-history:{grid}"] = " ".join(said)
    regraded = sorted(p.parent.name for p in results.glob("*/regrading.json"))
    blocks["regrading-table"] = compared.regrading_table(
        {g: (json.loads((results / g / "regrading.json").read_text())["audits"], _audits_of(results / g)) for g in regraded}
    )
    for grid, (rev, training) in CHANGES_FROM.items():  # which verdicts version 2's rules changed, where history holds versions 1 and 2
        before = _claims_at(rev, grid)
        before_training = _claims_at(rev, training) if training else before
        version_2 = _claims_at(RULES_2_LAST, grid)
        if before is not None and before_training is not None and version_2 is not None:
            blocks[f"changes:{grid}"] = compared.changes_table(dataclasses.replace(before, training=before_training.training), version_2)
    grids = sorted(p.parent.name for p in results.glob("grid-*/claims.json"))
    version_2_claims = {g: _claims_at(RULES_2_LAST, g) for g in grids}
    if all(c is not None for c in version_2_claims.values()):  # git history holds them
        blocks["rules-3-verdicts"] = compared.rules_3_moved(
            {g: c for g, c in version_2_claims.items() if c is not None}, {g: claims(g) for g in grids}
        )
    zero_shot = _claims_at(FEW_SHOT_FROM, "grid-default")
    few_shot = _claims_at(RULES_2_LAST, "grid-default")  # the re-run as decided then, under the same rules as the zero-shot rows
    if zero_shot is not None and few_shot is not None:  # git history holds both
        blocks["few-shot-rerun"] = compared.rerun_table(zero_shot, few_shot, "gemma3-270m")
    earlier = {g: _claims_at(REGRADED_FROM, g) for g in regraded}
    if all(c is not None for c in earlier.values()) and zero_shot is not None:  # git history holds them (a bare export does not)
        # the re-grade's own result: the default grid as re-graded, before issue 55 re-ran its Gemma rows
        regraded_claims = {g: zero_shot if g == "grid-default" else _claims_at(RULES_2_LAST, g) or claims(g) for g in regraded}
        blocks["regrade-verdicts"] = compared.regrade_verdicts({g: c for g, c in earlier.items() if c is not None}, regraded_claims)
    return blocks


def _shots_study() -> Any:
    """``scripts/shots_study.py``, the owner of the few-shot measurement's table and rule."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("shots_study", ROOT / "scripts" / "shots_study.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _claims_at(rev: str, grid: str) -> Claims | None:
    """A grid's committed claims at an earlier commit (None: git history does not hold it).
    ``rev`` is any revision git reads (``a58fef3^``)."""
    import subprocess

    shown = subprocess.run(["git", "show", f"{rev}:assets/results/{grid}/claims.json"], cwd=ROOT, capture_output=True, text=True)
    return Claims.from_dict(json.loads(shown.stdout)) if shown.returncode == 0 else None


def blocks_in(text: str) -> list[tuple[str, str]]:
    """The rendered blocks of a page as ``(name, text)``, the text's lines joined (what
    :func:`render` wrote, read back)."""
    import re

    return [
        (m.group(2), " ".join(m.group(0).split("-->", 1)[1].rsplit("<!--", 1)[0].split()))
        for m in re.finditer(BLOCK.format(name=r"[\w:.-]+"), text, flags=re.S)
    ]


def render() -> None:
    """Write the sentences rendered from the committed claims into the marked blocks of
    README.md and docs/results.md (:func:`rendered_blocks`, wrapped at 92 columns)."""
    import re
    import textwrap

    blocks = rendered_blocks()
    for page in PAGES:
        text = page.read_text()

        def fill(match: re.Match[str], page: Path = page) -> str:
            indent, name = match.group(1), match.group(2)
            if name not in blocks:
                raise SystemExit(f"{page}: block {name!r} has no rendering; known: {', '.join(blocks)}")
            if blocks[name].startswith(("|", "- ")):  # a table or a list, as printed
                wrapped = textwrap.indent(blocks[name], indent)
            else:
                wrapped = textwrap.fill(blocks[name], width=92, initial_indent=indent, subsequent_indent=indent, break_on_hyphens=False)
            return f"{indent}<!-- {name} -->\n{wrapped}\n{indent}<!-- /{name} -->"

        page.write_text(re.sub(BLOCK.format(name=r"[\w:.-]+"), fill, text, flags=re.S))


def main() -> None:
    if sys.argv[1:] == ["--render"]:
        render()
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("claims", type=Path)
    parser.add_argument("--model", default="", help="only settings whose model name contains this")
    parser.add_argument("--profile", type=Path, help="the run's profile.json: print its time per stage too")
    parser.add_argument("--stages", default="", help="only the profile's stages whose name starts with this (e.g. mine:)")
    parser.add_argument("--changes-from", type=Path, help="an earlier claims.json of the grid: print only the verdicts that changed since")
    args = parser.parse_args()
    claims = Claims.from_dict(json.loads(args.claims.read_text()))
    if args.changes_from:
        print(compared.changes_table(Claims.from_dict(json.loads(args.changes_from.read_text())), claims))
        return
    print(md.routes_table(claims, args.model), end="\n\n")
    print(md.bottleneck_table(claims, args.model), end="\n\n")
    if claims.training:  # a grid without trained pairs has no claim 3 table
        print(md.training_table(claims), end="\n\n")
    if across := md.across_runs_table(claims):
        print(across, end="\n\n")
    if claims.ceiling:
        print(md.ceiling_table(claims), end="\n\n")
    print(md.summary_lines(claims))
    if args.profile:
        print("", md.profile_table(json.loads(args.profile.read_text()), args.stages), sep="\n")


if __name__ == "__main__":
    main()
