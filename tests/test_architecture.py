"""The package's shape: one-way imports, layer by layer, and the README's picture of it.

Guards against an import cycle or an upward import creeping back (a store module importing
shards that import the store, generation importing the model that imports generation) and
against the README's layer picture drifting from the code. Every import counts: module level,
inside functions and under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Bottom to top. A module imports only modules of its own layer or below, and never in a cycle.
LAYERS: list[tuple[str, list[str]]] = [
    (
        "values",
        [
            "errors",
            "faults",
            "files",
            "untrusted",
            "records",
            "ablation_methods",
            "probe_specs",
            "display",
            "stats",
            "verdict_words",
            "verdicts",
            "sweeps",
            "claims",
            "routes",
            "prompts",
            "answers",
            "shards",
            "dapo",
            "phases",
            "provenance",
            "passk_models",
            "ceiling",
        ],
    ),
    (
        "model",
        [
            "adapters",
            "prefix_states",
            "reuse",
            "engine",
            "interventions",
            "generation",
            "reuse_check",
            "route_trace",
            "lens",
            "gguf_header",
            "model_cache",
            "model_folder",
            "models",
            "tiny",
        ],
    ),
    ("questions", ["tasks", "shots", "deploy"]),
    ("store", ["store", "evidence"]),
    ("measurement", ["selectors", "probes", "results", "audits", "formats", "attribution", "checkpoints", "training"]),
    ("analysis", ["comparison", "failures", "sweep_results", "executors", "miner", "regrade", "spot_check", "grid", "setting_claims"]),
    ("people", ["viz_export", "viz", "claim_columns", "report_page", "claims_markdown", "claims_compared", "reports", "widgets", "cli"]),
]


def import_graph() -> dict[str, set[str]]:
    """Module -> the rnr_lens modules it imports (``tasks/`` counts as one module)."""
    graph: dict[str, set[str]] = {}
    for path in sorted((ROOT / "rnr_lens").rglob("*.py")):
        rel = path.relative_to(ROOT / "rnr_lens")
        name = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        if name in ("__init__", "__main__"):
            continue
        deps = graph.setdefault(name, set())
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "rnr_lens":
                parts = node.module.split(".")
                deps.update([parts[1]] if len(parts) > 1 else [a.name for a in node.names])
            elif isinstance(node, ast.Import):
                deps.update(a.name.split(".")[1] for a in node.names if a.name.startswith("rnr_lens."))
    return {m: {d for d in deps if d != m} for m, deps in graph.items()}


def test_every_module_has_a_layer():
    placed = [m for _, modules in LAYERS for m in modules]
    assert sorted(placed) == sorted(import_graph()), "add the new module to LAYERS (and the README picture)"


def test_imports_point_down_and_never_cycle():
    layer = {m: i for i, (_, modules) in enumerate(LAYERS) for m in modules}
    graph = import_graph()
    upward = [f"{m} -> {d}" for m, deps in graph.items() for d in deps if d in layer and layer[d] > layer[m]]
    assert not upward, f"imports that point up a layer: {upward}"
    seen: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(m: str, path: tuple[str, ...]) -> None:
        if seen.get(m) == 1:
            raise AssertionError(f"import cycle: {' -> '.join(path + (m,))}")
        if seen.get(m) == 2:
            return
        seen[m] = 1
        for d in sorted(graph.get(m, ())):
            visit(d, path + (m,))
        seen[m] = 2

    for m in graph:
        visit(m, ())


def test_the_readme_picture_matches_the_layers():
    text = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- layers -->\n```\n(.*?)```", text, re.S)
    assert block, "README.md needs the layer picture between <!-- layers --> and a fenced block"
    drawn = [line.split(":", 1) for line in block.group(1).strip().splitlines()]
    got = [(name.strip(), [m.strip().removesuffix(".py").rstrip("/") for m in mods.split()]) for name, mods in drawn]
    assert got == list(reversed(LAYERS))


def test_every_module_stays_reachable_as_a_module():
    """``import rnr_lens.audit as A`` once gave the function ``audit``, which the package
    re-exported under its module's name; no public name may shadow a module."""
    import importlib

    import rnr_lens

    for name in import_graph():
        module = importlib.import_module(f"rnr_lens.{name}")
        assert getattr(rnr_lens, name) is module, f"rnr_lens.{name} is not the module rnr_lens/{name}: rename what shadows it"


def test_the_docs_layout_page_shows_the_same_floors():
    """docs/architecture.md's table of floors is the picture the imports are checked against."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    rows = dict(re.findall(r"^\| (\w+) \| ((?:`[\w/]+` ?)+) \|$", page, flags=re.M))
    shown = {floor: [m.rstrip("/") for m in re.findall(r"`([\w/]+)`", mods)] for floor, mods in rows.items()}
    assert shown == {floor: modules for floor, modules in LAYERS}, "update docs/architecture.md's floors"


def test_every_test_file_the_package_names_exists():
    """A docstring that sends a reader to ``tests/...py`` names a file that is there (issue 57:
    two named files that had moved)."""
    root = Path(__file__).resolve().parents[1]
    named = {
        (source.relative_to(root), path)
        for source in (root / "rnr_lens").rglob("*.py")
        for path in re.findall(r"tests/[\w/]+\.py", source.read_text())
    }
    assert named, "the package names its tests somewhere"
    missing = sorted(f"{source}: {path}" for source, path in named if not (root / path).is_file())
    assert not missing, f"named but absent: {missing}"


def test_every_module_has_its_mirror_test_file():
    """Tests mirror the source tree: ``rnr_lens/NAME.py`` is tested in ``tests/test_NAME.py``,
    a package ``rnr_lens/NAME/`` in ``tests/NAME/`` (issue 57: six modules had none)."""
    root = Path(__file__).resolve().parents[1]
    missing = [m for m in import_graph() if not (root / "tests" / f"test_{m}.py").is_file() and not (root / "tests" / m).is_dir()]
    assert not missing, f"add tests/test_NAME.py for: {missing}"


def test_the_values_floor_and_the_cli_parser_load_no_torch():
    """Each values module, the readers of stored audits and failure sets, the package itself and
    ``rnr-lens --help`` (every command's parser: their defaults are read from below torch) run
    in a fresh interpreter without torch (the package loads its public names on first use; a
    probe loads the model floor when it runs). A module that pulls torch in is named: the
    imports run one by one and the first that loads it fails."""
    values = dict(LAYERS)["values"]
    code = f"""
import contextlib, importlib, io, sys
readers = ["probes", "results", "comparison", "failures", "sweep_results", "regrade", "grid", "setting_claims", "reports", "cli"]  # a probe's name, a stored audit, a failure set: read without a model
for name in ["rnr_lens", *("rnr_lens." + m for m in [*{values!r}, *readers])]:
    importlib.import_module(name)
    assert "torch" not in sys.modules, name + " loaded torch"
from rnr_lens.cli import build_parser
for command in [None, *build_parser()._subparsers._group_actions[0].choices]:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
        build_parser().parse_args(["--help"] if command is None else [command, "--help"])
    assert "torch" not in sys.modules, f"rnr-lens {{command or ''}} --help loaded torch"
"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
