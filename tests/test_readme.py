"""The README's two commands are what CI and the fresh-clone check run (guards against the
README and .ci/run drifting apart, so CI always tests what a user is told to type)."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def readme_commands() -> list[str]:
    return re.findall(r"^```bash\n(.+?)\n```$", (REPO / "README.md").read_text(), flags=re.M)[:2]


def test_ci_runs_the_readme_test_command():
    main_job, test_command = readme_commands()
    assert main_job.startswith("pip install -e . && rnr-lens audit ")
    assert test_command == "bash scripts/dev-setup && python -m pytest -ra"
    ci = [line for line in (REPO / ".ci" / "run").read_text().splitlines() if line and not line.startswith("#")]
    assert ci[-1] == test_command


def test_setup_scripts_are_executable_bash():
    for name in ("dev-setup", "fresh-clone-check", "build-docs"):
        script = REPO / "scripts" / name
        assert script.read_text().startswith("#!/usr/bin/env bash\n") and script.stat().st_mode & 0o111
