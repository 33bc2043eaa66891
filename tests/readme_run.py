"""The README's Python block, run once per suite as a reader runs it: whole and unchanged, in a
fresh Python process, in a fresh folder whose ``assets`` is the repository's (the block's one
relative input) (issue 77).

It is a child (``tests/background.py``): ``python -m tests.readme_run FOLDER`` runs beside the
suite at the lowest priority, its torch on one thread, and leaves in ``FOLDER`` what the block
wrote (``run.db``, ``bottleneck.pdf``, ``rederived/``) and ``names.json``: what the block held
only in memory (the routed generation's tokens and the claims ``R.rederive`` returned), which
the store does not keep. ``tests/test_readme.py`` asserts on the store and files, and runs the
docs' blocks on copies of the store. A block that raised leaves ``error.txt``, with its
traceback.
"""

from __future__ import annotations

import json
import os
import re
import sys
import traceback
from pathlib import Path

from tests.background import Child, Finished, child

ROOT = Path(__file__).resolve().parents[1]


def python_blocks(text: str) -> list[str]:
    """The ```python blocks of a page, in order."""
    return re.findall(r"^```python\n(.+?)\n```$", text, flags=re.M | re.S)


def readme_child(tests: list[str]) -> Child:
    """The child for ``tests`` (the README's test and every docs page's, which read its store),
    first in the lane: the longest child, and the docs pages' tests wait for it."""
    return child(
        "readme-block",
        tests,
        lambda folder: [sys.executable, "-m", "tests.readme_run", str(folder)],
        env={"OMP_NUM_THREADS": "1"},
        first=True,
    )


def ran(finished: Finished) -> Path:
    """The folder the block ran in, once it ran whole (else the assertion says what it raised)."""
    error = finished.folder / "error.txt"
    assert not error.exists(), f"the README's block raised:\n{error.read_text()}"
    assert finished.returncode == 0, f"the README's block exited {finished.returncode}: {finished.stderr[-3000:]}"
    return finished.folder / "ran"


def main(folder: Path) -> int:
    """Run the block in ``folder/ran``; write ``names.json`` there, or ``error.txt`` beside it."""
    here = folder / "ran"
    here.mkdir()
    (here / "assets").symlink_to(ROOT / "assets")
    (block,) = python_blocks((ROOT / "README.md").read_text())
    space: dict = {}
    os.chdir(here)
    try:
        exec(compile(block, "README.md", "exec"), space)
    except BaseException:
        (folder / "error.txt").write_text(traceback.format_exc())
        return 1
    kept = {"out_token_ids": [list(g.token_ids) for g in space["out"]], "claims": space["claims"].to_dict()}
    (here / "names.json").write_text(json.dumps(kept))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
