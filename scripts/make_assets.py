"""Make the figures in assets/ from a real run (the README and the docs show them).

On SmolLM2-135M-Instruct (offline) and the built-in ``add-small`` task (40 questions): an
audit with sampling, random routes and route search at k=8, its realized-against-reachable
figure; the bottleneck sweep of its reachable-not-realized questions under sampling and the
repair/break figure; and a screenshot of the layer explorer in JupyterLab (headless Chromium).
Everything is seeded, so a rerun draws the same figures. About five minutes on two cores.

With ``--report DIR`` it draws from a finished ``rnr-lens report`` instead (no model is
loaded): realized against reachable for every mined model's settings, and each setting's
repair/break per block from its latest sweep (the exhaustive one where the grid had
``exhaustive: true``), named ``PREFIX_MODEL_realized_vs_reachable.svg`` and
``PREFIX_MODEL_repair_break_TASK.svg``; and each trained pair's pass@k curves where the grid
ran the ceiling, ``PREFIX_ceiling_TASK_runI.svg`` (I in the grid's pair order).

    python scripts/make_assets.py [--out assets] [--store runs/assets.db]
    python scripts/make_assets.py --report report-deep/ --prefix deep
    python scripts/make_assets.py --screens assets/screens --store runs/assets.db

With ``--screens DIR`` (after a run that kept its ``--store``) it draws, from that store and
without generating, every figure of the audit and its sweep as PNG at a 1280 px browser width
and at a paper column's print size, and screenshots each widget in JupyterLab at 1280 px: what
issue 59 asks to be looked at before a figure or widget counts as fixed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import rnr_lens as R  # noqa: E402
from rnr_lens.bottleneck import failures  # noqa: E402
from rnr_lens.measure.store import RunStore  # noqa: E402
from rnr_lens.present import viz  # noqa: E402

PROBES = ["sampling:k=8,t=0.7", "routes:k=8", "search:k=8"]
FAILURE_PROBE = "sampling:k=8,t=0.7"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "assets")
    parser.add_argument("--store", type=Path, help="run store to write (and resume); default: a temporary one")
    parser.add_argument("--report", type=Path, help="draw from this finished report folder instead of running")
    parser.add_argument("--prefix", default="report", help="file name prefix of the --report figures")
    parser.add_argument("--screens", type=Path, help="draw every figure and widget from --store into this folder instead")
    args = parser.parse_args()
    if args.screens:
        if args.store is None or not args.store.is_file():
            raise SystemExit("--screens draws from a kept store: give --store, the one a run of this script wrote")
        for path in screens(args.store, args.screens):
            print(f"{path}: {path.stat().st_size / 1024:.0f} KiB")
        return
    if args.report:
        for path in report_figures(args.report, args.out, args.prefix):
            print(f"{path}: {path.stat().st_size / 1024:.0f} KiB")
        return
    with tempfile.TemporaryDirectory() as scratch:
        store_path = args.store or Path(scratch) / "assets.db"
        model = R.load_model()
        result = R.audit(model, R.tasks.get("add-small"), PROBES, store=store_path, resume=True)
        viz.save(viz.realized_vs_reachable(result), args.out / "realized_vs_reachable.svg", size="column")
        store = RunStore(store_path)
        sweep = R.mine(model, failures.freeze(result, store, probe=FAILURE_PROBE, name="assets"), store=store)
        viz.save(viz.repair_break(sweep), args.out / "repair_break.svg", size="full")
        print(result.summary()[["probe", "realized", "reachable", "chance"]].to_string(index=False))
        print(sweep.bottleneck)
        layer_explorer_screenshot(store_path, Path(scratch), args.out / "layer_explorer.png")
    for name in ("realized_vs_reachable.svg", "repair_break.svg", "layer_explorer.png"):
        print(f"{args.out / name}: {(args.out / name).stat().st_size / 1024:.0f} KiB")


def report_figures(folder: Path, out: Path, prefix: str) -> list[Path]:
    """The figures of a finished report's mined settings, from its store and claims: per mined
    model, realized against reachable over its tasks and each task's repair/break per block."""
    import json

    from rnr_lens.bottleneck.sweep_results import SweepResult
    from rnr_lens.grids.reports import STORE_FILE
    from rnr_lens.grids.setting_claims import EXHAUSTIVE_SWEEP, REPORT_SET, SCREEN_SWEEP
    from rnr_lens.judge.claims import Claims
    from rnr_lens.measure.store import Artifact

    claims = Claims.from_dict(json.loads((folder / "claims.json").read_text()))
    store = RunStore(folder / STORE_FILE, mode="read")
    mined: dict[str, list[tuple[str, str]]] = {}
    for b in claims.bottleneck:
        mined.setdefault(b.setting.model, []).append((b.setting.audit, b.setting.task))
    if not mined and not claims.ceiling:
        raise SystemExit(f"{folder / 'claims.json'} has no mined setting and no ceiling yet; draw after the report has one")
    written = []
    for i, (c, label) in enumerate(zip(claims.ceiling, claims.run_labels(claims.ceiling))):  # claim 3 at large k, from the claims alone
        tasks = len(claims.grid.get("tasks") or ()) or 1
        written.append(out / f"{prefix}_ceiling_{Path(c.task).stem.split('[')[0]}_run{i // tasks + 1}.svg")
        viz.save(viz.ceiling_curves(c, trained=label), written[-1], size="full")
    for model, settings in mined.items():
        stem = f"{prefix}_{Path(model).name}"
        written.append(out / f"{stem}_realized_vs_reachable.svg")
        viz.save(viz.realized_vs_reachable([R.AuditResult.load(store, audit) for audit, _ in settings]), written[-1], size="full")
        for audit, task in settings:
            # the exhaustive sweep where the grid swept every block, else the screen's; "report" in stores before evidence
            kept = [n for n in (EXHAUSTIVE_SWEEP, SCREEN_SWEEP, REPORT_SET) if store.get_artifact(audit, Artifact.SWEEP, n) is not None]
            if not kept:  # a setting with no failure set to mine
                continue
            sweep = SweepResult.load(store, name=kept[0], audit=audit)
            written.append(out / f"{stem}_repair_break_{Path(task).stem.split('[')[0]}.svg")
            viz.save(viz.repair_break(sweep), written[-1], size="full")
    return written


FIGURES = ("realized_vs_reachable", "pass_at_k", "repair_break", "repair_heatmap", "screen_vs_repair")
WIDGETS = {"audit_explorer": ("result", ".rnr-share"), "question_explorer": ("result", ".rnr-question"), "layer_explorer": ("sweep", ".rnr-layer")}
"""Each widget, what it explores and a selector that shows it has drawn."""


def screens(store_path: Path, out: Path) -> list[Path]:
    """Every figure at 1280 px wide and at column size, and every widget at 1280 px (JupyterLab),
    from the audit and the sweep of failure set ``assets`` in the store."""
    from rnr_lens.bottleneck.sweep_results import SweepResult

    out.mkdir(parents=True, exist_ok=True)
    store = RunStore(store_path, mode="read")
    result = R.AuditResult.load(store)
    sweep = SweepResult.load(store, name="assets")
    made = {n: getattr(viz, n)(result if n in ("realized_vs_reachable", "pass_at_k") else sweep) for n in FIGURES}
    written = []
    for name, fig in made.items():
        written.append(viz.save(fig, out / f"{name}_1280px.png", width=1280))
        written.append(viz.save(fig, out / f"{name}_column.png", size="column", scale=2))
    with tempfile.TemporaryDirectory() as scratch:
        for name, (what, ready) in WIDGETS.items():
            written.append(
                _widget_screenshot(_widget_cells(store_path, f"widgets.{name}({what})"), Path(scratch) / name, ready, out / f"{name}_1280px.png")
            )
    return written


def _widget_cells(store_path: Path, call: str) -> list[str]:
    """A notebook that loads the audit and the sweep of failure set ``assets`` from the store
    (stored, so no model loads), then runs ``call``."""
    return [
        f"import sys; sys.path.insert(0, {str(ROOT)!r})",
        "import rnr_lens as R\nfrom rnr_lens import widgets\nfrom rnr_lens.bottleneck.sweep_results import SweepResult\nfrom rnr_lens.measure.store import RunStore\n"
        f"store = RunStore({str(store_path.resolve())!r}, mode='read')\nresult = R.AuditResult.load(store)\n"
        "sweep = SweepResult.load(store, name='assets')",
        call,
    ]


def _widget_screenshot(cells: list[str], lab: Path, ready: str, out: Path, width: int = 1280) -> Path:
    """The last cell's output in JupyterLab at ``width`` px, as a PNG, once ``ready`` shows."""
    from playwright.sync_api import sync_playwright

    from tests.conftest import require_chromium
    from tests.jupyterlab import CHROMIUM_ARGS, jupyterlab, run_all

    lab.mkdir()
    with jupyterlab(lab, cells) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=require_chromium(), args=CHROMIUM_ARGS)
        page = browser.new_page(
            viewport={"width": width, "height": 2600}, device_scale_factor=1
        )  # taller than any widget: JupyterLab scrolls its panel, not the page
        page.goto(url)
        run_all(page)
        stderr = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
        for _ in range(600):  # a cell's traceback ends the wait at once (a warning alone does not)
            if page.locator(ready).count():
                break
            raised = [t for t in stderr.all_inner_texts() if "Traceback" in t or "Error" in t]
            if raised:
                raise SystemExit(f"a notebook cell failed before {ready} showed:\n{raised[0][-3000:]}")
            page.wait_for_timeout(1000)
        else:
            raise SystemExit(f"{ready} did not show within 10 minutes")
        page.wait_for_timeout(1500)  # plotly's figure widget lays out after its first paint
        page.locator(".jp-OutputArea-output").filter(has=page.locator(ready)).last.screenshot(path=str(out))
        browser.close()
    return out


def layer_explorer_screenshot(store_path: Path, folder: Path, out: Path) -> None:
    """The layer explorer over the sweep just stored, in JupyterLab, as a PNG."""
    _widget_screenshot(_widget_cells(store_path, "widgets.layer_explorer(sweep)"), folder / "lab", ".rnr-layer", out, width=1500)


if __name__ == "__main__":
    main()
