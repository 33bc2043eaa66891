"""Provenance records what ran; nothing in it decides a verdict. Guards against a claims.json
that cannot say which code and weights it speaks for, and a re-derivation that hides a code
difference."""

import json
from dataclasses import fields, replace

from rnr_lens.core.provenance import Code, Provenance, RunSpan, Weights, code_differences
from rnr_lens.trained_pair.dapo import CLI_FIELDS, TrainConfig


def test_a_run_span_records_the_code_and_the_machine():
    span = RunSpan.begin()
    assert span.start == span.end and span.code.libraries["torch"] and span.machine.torch_threads >= 1 and span.machine.cpu
    assert RunSpan.from_dict(json.loads(json.dumps(span.to_dict()))) == span
    assert span.machine.cpu_capability, "the vector instructions torch's kernels use move float sums (docs/reproducibility.md)"


def test_a_machine_recorded_before_its_cpu_capability_reads_and_writes_as_it_was():
    """Guards against re-derived provenance of older evidence gaining a key (claims.json would
    no longer re-derive byte for byte)."""
    from rnr_lens.core.provenance import Machine

    old = {"cpu": "AMD EPYC", "platform": "Linux", "cores": 2, "torch_threads": 2}
    assert Machine.from_dict(old).cpu_capability is None and Machine.from_dict(old).to_dict() == old


def test_provenance_keeps_one_span_per_run_and_every_distinct_weights():
    span = RunSpan.begin()
    p = Provenance().with_run(span).with_run(replace(span, end="2099-01-01T00:00:00+00:00"))
    assert len(p.runs) == 1 and p.runs[0].end.startswith("2099"), "a run's span is brought up to date, not repeated"
    w = Weights("m", "m", "abc", "cpu", "float32")
    p = p.with_model(w).with_model(w).with_model(replace(w, fingerprint="def"))
    assert [m.fingerprint for m in p.models] == ["abc", "def"], "other weights under one spec stay visible"
    assert Provenance.from_dict(json.loads(json.dumps(p.to_dict()))) == p


def test_code_differences_name_the_code_libraries_and_uncommitted_changes():
    machine = RunSpan.begin().machine
    here = Code("0.1.0", "a" * 40, False, "3.11", {"torch": "2", "scipy": "1.17"}, tree="t1")

    def ran(code: Code) -> Provenance:
        return Provenance((RunSpan("s", "e", code, machine),))

    assert code_differences(ran(here), here) == []
    assert code_differences(ran(replace(here, commit="b" * 40)), here) == [], "a commit that changed no code is the same code"
    lines = code_differences(ran(replace(here, commit="b" * 40, tree="t2", dirty=True)), here)
    assert "ran the code of commit bbbbbbbbbbbb; this is the code of commit aaaaaaaaaaaa" in lines[0] and "uncommitted" in lines[1]
    assert (
        "ran other library versions: scipy 1.17 (was 1.16)"
        in code_differences(ran(replace(here, libraries={"torch": "2", "scipy": "1.16"})), here)[0]
    )
    assert "may differ" in code_differences(ran(replace(here, commit=None, tree=None)), here)[0]
    assert code_differences(ran(here), replace(here, dirty=True)) == ["this checkout has uncommitted changes to its code"]


def test_the_training_command_gives_back_the_config():
    from rnr_lens.cli import build_parser

    config = TrainConfig(steps=30, layers="15-29", lr=3e-5, seed=2)
    args = build_parser().parse_args(["train", "--task", "add-two-digit", "--out", "x", *config.command_flags().split()])
    rebuilt = TrainConfig(**{f: getattr(args, f) for f in CLI_FIELDS})
    assert rebuilt == config
    # CLI_FIELDS are exactly the TrainConfig fields `rnr-lens train` has a flag for
    flags = {a.dest for a in build_parser()._subparsers._group_actions[0].choices["train"]._actions}
    assert set(CLI_FIELDS) == flags & {f.name for f in fields(TrainConfig)}
    assert "set through the API: clip_high=0.3" in TrainConfig(clip_high=0.3).command_flags()


def test_a_process_without_torch_records_none_and_reads_it_again_once_torch_loads():
    """The provenance floor never loads torch (a referee's re-derivation has none): a machine
    read before torch records no thread count, round-trips through its record, and a span
    brought up to date after torch loaded reads it then."""
    import subprocess
    import sys

    code = (
        "import sys\nfrom rnr_lens.core.provenance import Machine, RunSpan\n"
        "m = Machine.here()\nassert m.torch_threads is None and m.cpu_capability is None and 'torch' not in sys.modules\n"
        "assert Machine.from_dict(m.to_dict()) == m\n"
        "span = RunSpan.begin()\nimport torch\n"
        "assert span.touched().machine.torch_threads == torch.get_num_threads()\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr[-2000:]


def test_the_version_has_one_owner_the_projects_metadata():
    """Issue 74: the version was written in pyproject.toml and in the package's top, and
    provenance read it from the top (an import the architecture test cannot see)."""
    from importlib import metadata
    from pathlib import Path

    import tomllib

    import rnr_lens as R

    declared = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["project"]["version"]
    assert Code.here().version == R.__version__ == metadata.version("rnr-lens") == declared


def test_the_commit_is_found_from_the_package_wherever_the_module_lies(tmp_path):
    """Issue 74: the checkout was ``Path(__file__).parent.parent``, so moving provenance.py
    into a subfolder would silently stop recording the commit. A copy of the package in a fresh
    repository, its provenance module moved a folder down, records that repository's commit;
    the same copy outside any repository records none."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    import rnr_lens.core.provenance

    for folder, repository in ((tmp_path / "repo", True), (tmp_path / "plain", False)):
        package = folder / "rnr_lens"
        (package / "core").mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "core" / "__init__.py").write_text("")
        shutil.copy(rnr_lens.core.provenance.__file__, package / "core" / "provenance.py")
        head = None
        if repository:
            git = ["git", "-C", str(folder), "-c", "user.name=t", "-c", "user.email=t@t"]
            subprocess.run([*git, "init", "-q"], check=True)
            subprocess.run([*git, "add", "-A"], check=True)
            subprocess.run([*git, "commit", "-q", "-m", "x"], check=True)
            head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
        code = "from rnr_lens.core.provenance import Code, checkout; print(checkout(), Code.here().commit)"
        run = subprocess.run(
            [sys.executable, "-c", code],
            cwd=folder,
            capture_output=True,
            text=True,
            check=True,
            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(folder)},
        )
        assert run.stdout.split() == ([str(folder.resolve()), head] if repository else ["None", "None"])
    assert rnr_lens.core.provenance.checkout() == Path(__file__).resolve().parents[2]
