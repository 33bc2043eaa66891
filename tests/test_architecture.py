"""The package's shape: concept folders on floors, one-way imports between them, and the
README's picture of it.

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

FLOORS: list[tuple[str, ...]] = [
    ("errors",),
    ("core",),
    ("model", "judge"),
    ("questions",),
    ("measure",),
    ("bottleneck", "trained_pair"),
    ("present",),
    ("grids",),
    ("cli",),
]
"""The package's folders, bottom to top: a folder imports only its own modules and the folders
on the floors beneath it (never a folder on its own floor), and no two modules import each
other in a cycle. ``errors`` is the one module at the top beside ``__init__`` and ``__main__``."""

FLOOR = {folder: i for i, folders in enumerate(FLOORS) for folder in folders}
TOP = {"__init__", "__main__", "errors"}


def folder_of(module: str) -> str:
    """``rnr_lens.judge.verdicts`` -> ``judge``; ``rnr_lens.errors`` -> ``errors``; the package
    itself (its lazy public names) -> ``rnr_lens``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "rnr_lens"


def modules() -> dict[str, Path]:
    """Every module of the package by its dotted name (a package by its ``__init__``'s)."""
    out = {}
    for path in sorted((ROOT / "rnr_lens").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def import_graph() -> dict[str, set[str]]:
    """Module -> the rnr_lens modules it imports (``from rnr_lens.judge import verdicts`` names
    ``rnr_lens.judge.verdicts``; a name that is not a module names its package)."""
    known = modules()
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        deps = graph.setdefault(name, set())
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "rnr_lens":
                for a in node.names:
                    sub = f"{node.module}.{a.name}"
                    deps.add(sub if sub in known else node.module)
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names if a.name.startswith("rnr_lens"))
    return {m: {d for d in deps if d != m} for m, deps in graph.items()}


def test_the_package_is_its_folders():
    """At most a handful of modules at the top; every folder has a floor, and every floor's
    folder is there, its ``__init__`` listing exactly its modules."""
    import importlib

    top = {p.stem for p in (ROOT / "rnr_lens").glob("*.py")}
    folders = {p.name for p in (ROOT / "rnr_lens").iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert top == TOP, f"move {sorted(top - TOP)} into the folder of its concept"
    assert folders == set(FLOOR) - {"errors"}, "give the new folder a floor in FLOORS (and the README picture)"
    for folder in folders - {"cli"}:
        package = importlib.import_module(f"rnr_lens.{folder}")
        here = {p.stem for p in (ROOT / "rnr_lens" / folder).glob("*.py")} - {"__init__"}
        here |= {p.name for p in (ROOT / "rnr_lens" / folder).iterdir() if (p / "__init__.py").exists()}
        assert set(package.MODULES) == here, f"rnr_lens/{folder}/__init__.py lists its modules"


def wrong_imports(graph: dict[str, set[str]]) -> list[str]:
    """The imports that point up a floor or across one (a folder's own modules aside; the
    package's lazy API and ``python -m rnr_lens`` sit on top of every floor)."""
    wrong = []
    for m, deps in graph.items():
        for d in deps:
            here, there = folder_of(m), folder_of(d)
            if here == there or here in ("rnr_lens", "__main__"):
                continue
            if there == "rnr_lens" or FLOOR[there] >= FLOOR[here]:
                wrong.append(f"{m} -> {d}")
    return wrong


def test_imports_point_down_and_never_cycle():
    graph = import_graph()
    wrong = wrong_imports(graph)
    assert not wrong, f"imports that point up, or across one floor: {wrong}"
    planted = {"rnr_lens.core.stats": {"rnr_lens.model.engine"}, "rnr_lens.model.engine": {"rnr_lens.judge.claims"}}
    assert wrong_imports(planted) == ["rnr_lens.core.stats -> rnr_lens.model.engine", "rnr_lens.model.engine -> rnr_lens.judge.claims"]
    seen: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(m: str, path: tuple[str, ...]) -> None:
        if seen.get(m) == 1:
            raise AssertionError(f"import cycle: {' -> '.join(path + (m,))}")
        if seen.get(m) == 2:
            return
        seen[m] = 1
        for d in sorted(graph.get(m, ())):
            if folder_of(d) != "rnr_lens" and not d.endswith(tuple(f".{f}" for f in FLOOR)):  # a folder's __init__ imports nothing
                visit(d, path + (m,))
        seen[m] = 2

    for m in graph:
        visit(m, ())


def picture() -> list[tuple[str, list[str]]]:
    """The folders top to bottom, each with its modules, as the README and docs draw them."""
    import importlib

    rows = []
    for folders in reversed(FLOORS):
        for folder in folders:
            if folder == "errors":
                mods = ["errors"]  # a module of its own, at the top
            elif folder == "cli":
                mods = sorted(p.stem for p in (ROOT / "rnr_lens" / "cli").glob("*.py") if p.stem != "__init__")
            else:
                mods = list(importlib.import_module(f"rnr_lens.{folder}").MODULES)
            rows.append((folder, mods))
    return rows


def test_the_readme_picture_matches_the_folders():
    text = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- layers -->\n```\n(.*?)```", text, re.S)
    assert block, "README.md needs the folder picture between <!-- layers --> and a fenced block"
    drawn = [line.split(":", 1) for line in block.group(1).strip().splitlines()]
    got = [(name.strip().rstrip("/").removesuffix(".py"), mods.split()) for name, mods in drawn]
    assert got == picture()


def test_every_module_stays_reachable_as_a_module():
    """``import rnr_lens.audit as A`` once gave the function ``audit``, which the package
    re-exported under its module's name; no public name may shadow a module. Every module is
    an attribute of the package by its own name (``R.viz``), loaded on first use."""
    import importlib

    import rnr_lens

    for name in modules():
        parts = name.split(".")
        if len(parts) != 3 or parts[1] == "cli":
            continue
        module = importlib.import_module(name)
        assert getattr(rnr_lens, parts[2]) is module, f"rnr_lens.{parts[2]} is not the module {name}: rename what shadows it"


def test_the_docs_layout_page_shows_the_same_floors():
    """docs/architecture.md's table of folders is the picture the imports are checked against."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    rows = re.findall(r"^\| `(\w+)/?` \| ((?:`[\w/]+` ?)+) \|$", page, flags=re.M)
    shown = [(folder, [m.rstrip("/") for m in re.findall(r"`([\w/]+)`", mods)]) for folder, mods in rows]
    assert shown == picture(), "update docs/architecture.md's folders"


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
    """Tests mirror the source tree: ``rnr_lens/FOLDER/NAME.py`` is tested in
    ``tests/FOLDER/test_NAME.py``, a package ``rnr_lens/FOLDER/NAME/`` in ``tests/FOLDER/NAME/``,
    ``rnr_lens/errors.py`` in ``tests/test_errors.py`` (issue 57: six modules had none)."""
    missing = []
    for name in modules():
        parts = name.split(".")
        if len(parts) < 3 or parts[1] == "cli":
            continue  # the package, its top modules (errors: below) and the command line (tests/cli/)
        mirror = ROOT / "tests" / Path(*parts[1:-1]) / f"test_{parts[-1]}.py"
        if not mirror.is_file() and not (ROOT / "tests" / Path(*parts[1:])).is_dir():
            missing.append(name)
    assert not missing, f"add tests/FOLDER/test_NAME.py for: {missing}"
    assert (ROOT / "tests" / "test_errors.py").is_file() and (ROOT / "tests" / "cli").is_dir()


def test_the_values_floor_and_the_cli_parser_load_no_torch():
    """Each values module, the readers of stored audits and failure sets, the package itself and
    ``rnr-lens --help`` (every command's parser: their defaults are read from below torch) run
    in a fresh interpreter without torch (the package loads its public names on first use; a
    probe loads the model floor when it runs). A module that pulls torch in is named: the
    imports run one by one and the first that loads it fails."""
    import importlib

    values = [f"core.{m}" for m in importlib.import_module("rnr_lens.core").MODULES]
    values += [f"judge.{m}" for m in importlib.import_module("rnr_lens.judge").MODULES]
    values += ["model.routes", "model.prompts", "questions.answers", "measure.probe_specs", "trained_pair.dapo", "errors"]
    code = f"""
import contextlib, importlib, io, sys
readers = ["measure.probes", "measure.results", "trained_pair.comparison", "bottleneck.failures", "bottleneck.sweep_results", "grids.regrade", "grids.grid", "grids.setting_claims", "grids.reports", "cli"]  # a probe's name, a stored audit, a failure set: read without a model
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
