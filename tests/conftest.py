"""Shared fixtures: a tiny random Llama (fast) and the real SmolLM2-135M-Instruct (slow)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import torch

import rnr_lens as R
from rnr_lens.core.records import AuditRecord
from rnr_lens.model.reuse import ReuseVerdict
from rnr_lens.model.reuse_check import stored_bits

torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def reuse_holds(
    model: R.LensModel, name: str, workload: Callable[[], Sequence[Any]], bits: Callable[[Sequence[Any]], list] = stored_bits
) -> ReuseVerdict:
    """Reuse ``name`` (:mod:`rnr_lens.model.reuse`) on ``model`` as its check decided on this machine:
    where on, ``workload`` ran it and every bit equals the workload without it; where off, the
    workload never ran it. Both branches assert, so the test holds on every CPU and skips on
    none (issue 58)."""
    reuses = model.engine.reuses
    reuses.decide([name])
    verdict = reuses.verdict(name)
    assert verdict.why != "not checked yet"
    before = reuses.used[name]
    got = workload()
    ran = reuses.used[name] - before
    with reuses.forced(name, False):
        want = workload()
    if verdict.on:
        assert ran > 0, f"the workload exercises {name}"
        assert bits(got) == bits(want), f"{name} is on ({verdict.why}), yet moved a bit in this workload"
    else:
        assert ran == 0, f"{name} is off ({verdict.why}), yet it ran"
        assert bits(got) == bits(want)
    return verdict


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tests that read a child process (tests/background.py) run last, so the child runs
    beside the others and is done, or nearly, when they ask."""
    from tests.background import reads_a_child

    items.sort(key=lambda item: reads_a_child(item.nodeid))  # stable: each part keeps its order


def pytest_collection_finish(session: pytest.Session) -> None:
    from tests.background import Lane, selected

    if session.config.option.collectonly:
        return
    children = selected({item.nodeid for item in session.items})
    if children:
        session.config.stash[_LANE] = lane = Lane(children)
        lane.start()


def pytest_sessionfinish(session: pytest.Session) -> None:
    lane = session.config.stash.get(_LANE, None)
    if lane is not None:
        lane.stop()


_LANE = pytest.StashKey["Lane"]()


@pytest.fixture(scope="session")
def tiny() -> R.LensModel:
    return R.tiny_model(n_layers=4, seed=0)


@pytest.fixture(scope="session")
def smol() -> R.LensModel:
    return R.load_model("smollm2-135m-instruct")


AUDIT_PROBES = ["sampling:k=4,t=1.0", "routes:k=3,edit_rate=0.6", "search:k=3,reward=oracle,protect=0"]


@pytest.fixture(scope="module")
def tiny_audit(tiny) -> R.AuditResult:
    """Eight add-small questions on the tiny model under one probe of each family."""
    return R.audit(tiny, R.tasks.get("add-small", n=8), AUDIT_PROBES, progress=False, seed=1)


IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty model cache of this test's own ($RNR_LENS_CACHE)."""
    monkeypatch.setenv("RNR_LENS_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real benchmark files in ``../shared/data``: CI has them (a missing copy fails
    there); a user's bare clone does not, and the tests that read them skip, while small files
    in the same formats, written by the loader tests themselves, cover the same code."""
    if not SHARED_DATA.is_dir():
        reason = f"real benchmark data not found at {SHARED_DATA} (only CI and a checkout beside ../shared have it)"
        if IN_CI:
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    return SHARED_DATA


def require_chromium() -> str:
    """Debian's Chromium, which figure export (kaleido) and the JupyterLab browser test drive.

    ``scripts/dev-setup`` (part of the README's test command) installs it. Without it these
    tests fail with the fix instead of skipping, so a missing install step can never pass
    unnoticed.
    """
    path = os.environ.get("BROWSER_PATH") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        pytest.fail("Chromium not found: run 'bash scripts/dev-setup' (installs Debian's chromium) or set BROWSER_PATH", pytrace=False)
    return path


@pytest.fixture(params=["tiny", pytest.param("smol", marks=pytest.mark.slow)])
def model(request) -> R.LensModel:
    """Each engine test runs on the tiny model and, marked slow, on SmolLM2."""
    return request.getfixturevalue(request.param)


def prompts_for(model: R.LensModel) -> list:
    """A few prompts of different lengths, chat-rendered where the model has a template."""
    texts = ["What is 3 + 4?", "Tom has 3 apples and buys 5 more. How many apples does he have now?", "What is 12 - 5?"]
    return [R.ChatPrompt(t, assistant_prefix="The answer is ") for t in texts]


def stored_record(aid: str, probes: tuple[str, ...], n_questions: int, config_json: str = "{}") -> AuditRecord:
    """An audit record for tests that write a run store by hand (no model behind it)."""
    return AuditRecord(
        id=aid, model="m", model_fingerprint="f", task="t", task_fingerprint="tf", answer_type="number",
        config_hash="c", config_json=config_json, probes=probes, seed=0, n_questions=n_questions,
    )  # fmt: skip


@pytest.fixture(scope="session")
def tiny_base_folder(tmp_path_factory) -> Path:
    """A saved tiny model whose tokenizer has no chat template: a base model, as Gemma-3-270M is."""
    folder = R.tiny_model(n_layers=4, seed=0).save_pretrained(tmp_path_factory.mktemp("base") / "tiny-base")
    (folder / "chat_template.jinja").unlink(missing_ok=True)
    return folder


def format_miss_rows(model: R.LensModel, n: int = 12) -> list[dict]:
    """Question records whose golds are planted from the model's own greedy text: for even
    rows a number it states but not the one the default extractor reads (format misses), for
    odd rows the number it reads (realized). JSON-lines records with ``id``."""
    from rnr_lens.questions.answers import numbers_in

    config = R.deployment_for(model, "number")
    base = list(R.tasks.get("add-two-digit", n=60, seed=3))
    gens = model.generate([config.prompt(q) for q in base], max_new_tokens=config.max_new_tokens, stop=config.stop)
    rows: list[dict] = []
    for q, g in zip(base, gens):
        read = config.extract(g.text)
        stated = [x for x in numbers_in(g.text) if x != read]
        if read is None or not stated:
            continue
        rows.append({"id": q.id, "question": q.prompt, "answer": stated[0] if len(rows) % 2 == 0 else read})
    assert len(rows) >= n, "the tiny model states numbers on most questions"
    return rows[:n]
