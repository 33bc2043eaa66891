"""Each reuse of computed prompt states keeps every stored bit where its check passed, and does
not run where it failed (issue 58: on an Intel Xeon the prefix store moved a try's
log-probability in its seventh digit, and a golden tolerance of 1e-3 hid it).

Each test takes the model's own verdict, runs a real workload other than the check's (a
task's deployed prompts, the routes probe, the search), counts whether the reuse ran, and
compares every bit against the same workload with the reuse off. Both branches assert: on
this CPU one holds, on another the other; neither skips.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import pytest

import rnr_lens as R
from rnr_lens.measure.probes import ProbeContext, RandomRoutes
from rnr_lens.model import reuse_check
from rnr_lens.questions import tasks
from rnr_lens.questions.deploy import deployment_for
from tests.conftest import reuse_holds


def _deployed_prompts(model: R.LensModel, task: str, n: int) -> list[Any]:
    config = deployment_for(model, "number")
    return [config.prompt(q) for q in tasks.get(task, n=n)]


def _routes_probe(model: R.LensModel, n: int) -> Callable[[], list[Any]]:
    def run() -> list[Any]:
        ctx = ProbeContext(model, R.DeploymentConfig(max_new_tokens=6), "number", seed=0)
        return [t for batch in RandomRoutes(k=4, edits=2).run(ctx, list(tasks.get("add-two-digit", n=n)), {}) for t in batch]

    return run


def _try_bits(tries: Sequence[Any]) -> list[tuple]:
    return [(t.question_id, t.try_index, t.route, t.text, t.mean_logprob, t.mean_entropy) for t in tries]


def test_the_shared_opening_keeps_every_bit_where_its_check_passed(tiny):
    reuse_holds(tiny, "shared-prefix", lambda: tiny.generate([reuse_check.OPENING + q for q in reuse_check.EVEN[::-1]], max_new_tokens=6))


def test_a_questions_routes_share_their_prefix_bit_for_bit_where_the_check_passed(tiny):
    reuse_holds(tiny, "shared-identity", _routes_probe(tiny, 6), _try_bits)


@pytest.mark.slow
def test_smollm2_keeps_every_bit_under_each_reuse_its_check_allows(smol):
    """On the real model and a task's chat-template prompts: the shared opening on 12
    ``add-small`` questions, a question's shared route prefix under the routes probe. (The
    prefix store: ``tests/measure/test_probes.py``, on the search itself.)"""
    prompts = _deployed_prompts(smol, "add-small", 12)
    reuse_holds(smol, "shared-prefix", lambda: smol.generate(prompts, max_new_tokens=8))
    reuse_holds(smol, "shared-identity", _routes_probe(smol, 4), _try_bits)


def test_a_check_that_finds_a_moved_bit_turns_its_reuse_off(tiny, monkeypatch):
    """The check's own failure branch, on a real model: a reuse whose runs differ from the
    runs without it by one bit is off, and says where."""
    real = reuse_check.RUNS["shared-prefix"]

    def nudged(model: R.LensModel) -> list[Any]:
        gens = real[0][1](model)
        if model.engine.reuses.verdict("shared-prefix").on:  # the arm with the reuse: one last bit moved
            gens[1].logprobs[0] = math.nextafter(gens[1].logprobs[0], 0.0)
        return gens

    monkeypatch.setitem(reuse_check.RUNS, "shared-prefix", (("2 rows", nudged),))
    monkeypatch.setattr(reuse_check, "_MOVED", {})
    monkeypatch.setattr(reuse_check, "rows_move_with_batch", lambda model: None)  # this test reads the generations alone
    verdict = reuse_check.check(tiny, "shared-prefix")
    assert not verdict.on
    assert verdict.why.startswith("moves bits on this machine: 2 rows: row 1's log-probs differ at step 1:")


def test_a_reuse_the_check_cannot_exercise_stays_off(tiny, monkeypatch):
    """A check whose prompts never let the reuse run cannot speak for it: off, saying why
    (here the shared opening's prompts differ in length, so no batch shares its opening)."""
    uneven = [reuse_check.OPENING + q for q in reuse_check.MIXED[:3]]
    monkeypatch.setitem(reuse_check.RUNS, "shared-prefix", (("3 uneven rows", lambda model: model.generate(uneven, max_new_tokens=2)),))
    monkeypatch.setattr(reuse_check, "_MOVED", {})
    monkeypatch.setattr(reuse_check, "rows_move_with_batch", lambda model: None)
    verdict = reuse_check.check(tiny, "shared-prefix")
    assert not verdict.on and verdict.why == "its check could not exercise it on this model (3 uneven rows)"


def test_rows_that_move_with_a_products_size_turn_every_reuse_off(tiny):
    """Guards the ladder (issue 58: on an Intel Xeon with AMX a 12-row chat batch moved bits
    under the shared opening though the check's generations had not): each layer shape of the
    model's blocks is recomputed here at every rung, and the prompt in each batch it names, and
    the reading's answer must agree with that recomputation; where a row moves, every reuse is
    off and says where."""
    import re

    import torch

    top = tiny.engine.bridge.original_model
    layers = [m for m in top.modules() if isinstance(m, torch.nn.Linear) and m is not top.lm_head]
    moved = reuse_check.rows_move_with_batch(tiny)
    x = torch.randn(reuse_check.LADDER[-1], max(m.in_features for m in layers), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        differs = {
            (m.in_features, m.out_features, rows)
            for m in layers
            for rows in reuse_check.LADDER[1:]
            if not torch.equal(m(x[:rows, : m.in_features])[:2], m(x[:2, : m.in_features]))
        }
    layer = re.fullmatch(r"a (\d+)-to-(\d+) block layer's rows differ between products of 2 and (\d+) rows", moved or "")
    placed = re.fullmatch(r"a prompt's logits differ between a batch of 2 rows and one of (\d+) rows with (\d+) pads before it", moved or "")
    if moved is None:
        assert not differs, f"the ladder found no moved row, yet {sorted(differs)[:3]} differ"
    elif layer:
        d_in, d_out, rows = map(int, layer.groups())
        assert any(d[:2] == (d_in, d_out) and d[2] <= rows for d in differs), f"the ladder says {moved!r}; here: {sorted(differs)[:5]}"
    else:
        assert placed, moved
        assert not differs, "the forward is read only where every layer kept its rows"
        rows, pads = map(int, placed.groups())
        prompt = tiny.encode(reuse_check.OPENING + reuse_check.MIXED[0])
        longer = (prompt * (pads // len(prompt) + 2))[: len(prompt) + pads]
        with torch.no_grad():
            ids, mask = tiny.pad([prompt] + [longer] * (rows - 1))
            two, two_mask = tiny.pad([prompt, prompt])
            assert not torch.equal(tiny.forward_tokens(ids, mask)[0, -1], tiny.forward_tokens(two, two_mask)[0, -1])
    for name in reuse_check.RUNS:
        verdict = reuse_check.check(tiny, name)
        if moved is not None:
            assert verdict == reuse_check.ReuseVerdict(name, False, f"moves bits on this machine: {moved}")
        else:
            assert not verdict.why.startswith("moves bits on this machine: a "), verdict.why


def test_the_rows_are_read_once_per_model_however_many_reuses_are_checked(tiny, monkeypatch):
    """Issue 75: every reuse's check read the model's rows again (the ladder and the placements:
    the costliest part of a check); the reading is one of the model's kernels, not of a reuse,
    so checking every reuse reads it once, and another model reads its own."""
    real, reads = reuse_check.rows_move_with_batch, []

    def counted(model):
        reads.append(model)
        return real(model)

    monkeypatch.setattr(reuse_check, "_MOVED", {})
    monkeypatch.setattr(reuse_check, "rows_move_with_batch", counted)
    verdicts = [reuse_check.check(tiny, name) for name in reuse_check.RUNS]
    assert reads == [tiny] and len(verdicts) == len(reuse_check.RUNS) > 1
    other = R.tiny_model(seed=1, n_layers=3)
    reuse_check.check(other, "shared-prefix")
    assert reads == [tiny, other], "a model of other shapes reads its own rows"


def test_a_moved_row_turns_every_reuse_off_before_any_generation(tiny, monkeypatch):
    """The ladder's failure branch on every CPU (on one whose products keep their rows, the
    test above never reaches it): every reuse is off with the reading's words, and the check
    generates nothing."""
    monkeypatch.setattr(reuse_check, "_MOVED", {})  # read afresh under the stand-in reading
    monkeypatch.setattr(reuse_check, "rows_move_with_batch", lambda model: "a 64-to-64 block layer's rows differ between products of 2 and 3 rows")
    before = dict(tiny.engine.reuses.used)
    for name in reuse_check.RUNS:
        assert reuse_check.check(tiny, name) == reuse_check.ReuseVerdict(
            name, False, "moves bits on this machine: a 64-to-64 block layer's rows differ between products of 2 and 3 rows"
        )
    assert tiny.engine.reuses.used == before


def test_a_questions_shared_route_prefix_lands_in_each_row_when_forced_on(tiny):
    """The shared identity prefix's placement, tested on every CPU whatever its check says
    (where the check turns it off, ``reuse_holds`` compares a computation with itself): forced
    on, it runs, and every try keeps its text and its log-probability within 1e-5 (to the bit
    where the check passed, tested above)."""
    reuses = tiny.engine.reuses
    plain = _try_bits(_routes_probe(tiny, 6)())
    before = reuses.used["shared-identity"]
    with reuses.forced("shared-identity", True):
        shared = _try_bits(_routes_probe(tiny, 6)())
    assert reuses.used["shared-identity"] > before, "the routes probe's batches share a prefix"
    assert [t[:4] for t in shared] == [t[:4] for t in plain]
    assert [v for t in shared for v in t[4:]] == pytest.approx([v for t in plain for v in t[4:]], abs=1e-5)


def test_a_reuse_that_is_off_never_runs(tiny):
    """The off branch of every reuse, on a real model: where a reuse's check failed (forced off
    here, as on a CPU whose kernels move its bits), its workload never runs it."""
    reuses = tiny.engine.reuses
    even = [reuse_check.OPENING + q for q in reuse_check.EVEN[:3]]
    before = dict(reuses.used)
    with reuses.forced("shared-prefix", False), reuses.forced("shared-identity", False), reuses.forced("prefix-store", False):
        tiny.generate(even, max_new_tokens=2)
        _routes_probe(tiny, 3)()
        reuse_check.RUNS["prefix-store"][0][1](tiny)
    assert reuses.used == before


def test_a_verdict_is_remembered_for_the_same_machine_and_model_only(tiny, cache):
    """Guards the verdict cache: a later process reads a verdict checked under the same key,
    and anything the kernels depend on (here the thread count) checks again; a damaged or
    oversized file is ignored, not trusted and not fatal."""
    import torch

    first = reuse_check.remembered_check(tiny, "shared-prefix")
    path = cache / reuse_check.CACHE_FILE
    assert path.is_file()
    again = reuse_check.remembered_check(tiny, "shared-prefix")
    assert (again.on, again.why) == (first.on, f"{first.why}; remembered from an earlier check here")
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1 if threads != 1 else 2)
        other = reuse_check.remembered_check(tiny, "shared-prefix")
        assert "remembered" not in other.why, "another thread count is checked again"
    finally:
        torch.set_num_threads(threads)
    path.write_text('{"verdicts": {"x": {"on": "yes"}}')
    assert "remembered" not in reuse_check.remembered_check(tiny, "shared-prefix").why


def test_the_code_a_verdict_depends_on_is_read_from_each_modules_own_file():
    """Issue 74: the seven files were read relative to reuse_check.py's folder, so a module
    moved to another folder would fail to read or, worse, read a stale file left behind. Each
    is named as imported and read from the file it is loaded from."""
    import hashlib
    import importlib
    from pathlib import Path

    hashes = reuse_check._code_hashes()
    files = [Path(importlib.import_module(name).__file__) for name in reuse_check._CODE]
    assert "rnr_lens.model.reuse_check" in reuse_check._CODE and len(set(files)) == len(files) == len(hashes)
    assert list(hashes) == [hashlib.sha256(f.read_bytes()).hexdigest() for f in files]
