"""The fault campaign's quick subset: kill -9, SIGINT/SIGTERM, a full disk, two runs at once and
malformed inputs against the real command line (``scripts/fault-campaign --quick``).

Guards against a change that loses work after a crash, ends a refused write in a traceback or lets
two processes write one store; the full campaign's table is docs/faults.md.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_quick_fault_campaign_keeps_every_promise(tmp_path):
    """Runs in the suite's turn, not as a child (tests/background.py): its signal cases time an exit."""
    table = tmp_path / "table.md"
    ran = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "fault-campaign"), "--quick", "--table", str(table)],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    failed = [line for line in ran.stdout.splitlines() if line.startswith("[FAIL]")]
    assert ran.returncode == 0 and not failed, "\n".join(failed) or ran.stderr[-3000:]
    text = table.read_text()
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| #")]
    kinds = {row.split(" | ")[1] for row in rows}
    assert {"kill -9", "signal", "disk full", "two at once", "bad input"} <= kinds
    assert "Totals: 5 kills at 5 points, 5 identical after resume" in text and ", 0 tracebacks in all" in text


def test_the_readme_states_the_last_full_campaigns_totals():
    """The README's promise quotes the table in docs/faults.md, not an older run's."""
    page = (ROOT / "docs" / "faults.md").read_text()
    totals = [line for line in page.splitlines() if line.startswith("Totals: ")]
    assert len(totals) == 1, "docs/faults.md holds the last full campaign's table and its Totals line"
    assert "quick subset" not in page, "the page shows a full campaign"
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert totals[0].removeprefix("Totals: ").rstrip(".") in readme
