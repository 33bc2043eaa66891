"""Ablation methods as registered entries: the built-in three, the registry's refusals, and a
method registered from outside the package run through Python and through the command line
(issue 74: adding a method touched about ten files)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import rnr_lens as R
from rnr_lens.bottleneck.attribution import attribution_patching
from rnr_lens.core import ablation_methods
from rnr_lens.core.ablation_methods import AblationMethod, ablation_method, register
from rnr_lens.questions.deploy import deployment_for
from tests.conftest import prompts_for

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = """
from rnr_lens.core.ablation_methods import AblationMethod


def _halve(activations):
    return lambda x: 0.5 * x


HALVED = AblationMethod("halved", "halved", 0, _halve)
"""
"""A method of one's own, in a module outside the package: the output scaled by one half."""


@pytest.fixture
def registry(monkeypatch):
    """The registry as it is, restored after the test (a registration is for the process)."""
    monkeypatch.setattr(ablation_methods, "_REGISTRY", dict(ablation_methods._REGISTRY))
    return ablation_methods


def test_the_built_in_methods_and_what_each_takes():
    assert ablation_methods.names(installed=False)[:3] == ("zero", "mean", "resample")
    assert [ablation_method(m).prompts(("a", "b", "c")) for m in ("zero", "mean", "resample")] == [(), ("a", "b", "c"), ("a",)]
    assert [ablation_method(m).needs_reference for m in ("zero", "mean", "resample")] == [False, True, True]


def test_the_registry_refuses_in_one_line(registry):
    with pytest.raises(R.RnrLensError, match=r"unknown ablation method 'smear'; use one of zero, mean, resample"):
        ablation_method("smear")
    with pytest.raises(R.RnrLensError, match="'zero' is registered already; a name fixes what it computes"):
        register(AblationMethod("zero", "zeroed", 0, lambda acts: torch.zeros_like))
    with pytest.raises(R.RnrLensError, match="must be lower case letters"):
        AblationMethod("mlp4:zero", "x", 0, lambda acts: torch.zeros_like)  # ':' ends a label's method
    with pytest.raises(R.RnrLensError, match="references must be a count"):
        AblationMethod("some", "x", -1, lambda acts: torch.zeros_like)
    with pytest.raises(R.RnrLensError, match="unknown ablation component 'ffn'"):
        R.Ablation(1, "ffn")


def test_a_method_registered_from_outside_runs_through_python(tiny, tmp_path, registry, monkeypatch):
    """Registered in one call from a module of one's own: an ablation silences by it (against a
    hand-written hook), the audit's ablation probe stores its tries under its label, and the
    screen estimates it to first order as it does every method: halving an output moves the
    metric half as far as zeroing it."""
    (tmp_path / "halved_plugin.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    from halved_plugin import HALVED  # type: ignore[import-not-found]

    register(HALVED)
    ids = torch.tensor([tiny.encode(prompts_for(tiny)[0])])
    with torch.no_grad():
        reference = tiny.bridge.run_with_hooks(ids, fwd_hooks=[("blocks.1.hook_mlp_out", lambda x, hook: 0.5 * x)])
        with tiny.intervene(ablations=[R.Ablation(1, "mlp", "halved")]):
            ours = tiny.bridge(ids)
        clean = tiny.bridge(ids)
    assert torch.allclose(ours, reference, atol=1e-5) and not torch.allclose(ours, clean, atol=1e-3)

    result = R.audit(tiny, R.tasks.get("add-small", n=2), ["ablation:method=halved,layers=0+1"], progress=False)
    tries = result.tries[result.tries.probe == "ablation:component=mlp,method=halved,layers=0+1"]
    assert sorted(set(tries.ablation)) == ["mlp0:halved", "mlp1:halved"] and len(tries) == 4

    task = R.tasks.get("add-small", n=3)
    questions, config = list(task), deployment_for(tiny, task.answer_type)
    atp = attribution_patching(tiny, questions, config, ("mlp",), None, ("zero", "halved")).pivot(
        index="layer", columns="method", values="atp_estimate"
    )
    assert torch.allclose(torch.tensor(atp["halved"].values), 0.5 * torch.tensor(atp["zero"].values), rtol=1e-5, atol=1e-7)
    with pytest.raises(R.RnrLensError, match="a mean ablation needs reference prompts"):
        attribution_patching(tiny, questions, config, ("mlp",), None, ("mean",))  # once estimated as zeroing, silently


def test_an_installed_method_is_read_from_its_entry_point_by_the_command_line(tmp_path):
    """A package installs a method under the ``rnr_lens.ablation_methods`` entry point; the
    command line finds it on first lookup: an audit's ablation probe runs it, and ``mine``
    names it among the methods where a method is unknown (before any store is read)."""
    site = tmp_path / "site"
    info = site / "halved_plugin-0.1.dist-info"
    info.mkdir(parents=True)
    (site / "halved_plugin.py").write_text(PLUGIN)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: halved-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[rnr_lens.ablation_methods]\nhalved = halved_plugin:HALVED\n")
    folder = R.tiny_model(n_layers=2, seed=0).save_pretrained(tmp_path / "tiny")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{site}:{ROOT}", "RNR_LENS_CACHE": str(tmp_path / "cache"), "HOME": str(tmp_path)}

    def cli(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "rnr_lens", *argv], cwd=tmp_path, env=env, capture_output=True, text=True, check=False)

    audit = cli("audit", "--model", str(folder), "--task", "add-small", "--n", "2", "--probe", "ablation:method=halved", "--out", "run.db", "--json")
    assert audit.returncode == 0, audit.stderr[-2000:]
    assert json.loads(audit.stdout)["status"] == "complete"
    with sqlite3.connect(tmp_path / "run.db") as db:
        labels = {row[0] for row in db.execute("SELECT ablation FROM tries WHERE probe LIKE 'ablation:%'")}
    assert labels == {"mlp0:halved", "mlp1:halved"}
    refused = cli("mine", "nowhere.db", "--method", "smear")
    assert refused.returncode == 2 and refused.stderr.strip() == (
        "error: unknown ablation method 'smear'; use one of zero, mean, resample, halved (a new one is registered with rnr_lens.core.ablation_methods.register)"
    )
