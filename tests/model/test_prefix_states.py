"""The prefix store's own rules: a memory budget that moves time, never a result, and no
state kept across a change of weights or interventions (a stale state would give a row
another model's bits)."""

from __future__ import annotations

import torch

import rnr_lens as R
from rnr_lens.model.prefix_states import PrefixState, PrefixStates


def _state(n: int = 3) -> PrefixState:
    return PrefixState(torch.zeros(n, 8), torch.zeros(2, n, 4), torch.zeros(2, n, 4))


def test_the_store_keeps_states_within_its_budget():
    store = PrefixStates(max_bytes=2 * _state().nbytes)
    for block in range(3):
        store.put(((1, 2, 3), tuple(range(block + 1))), _state())
    assert len(store) == 2 and store.nbytes == 2 * _state().nbytes
    assert store.get(((1, 2, 3), (0,))) is not None and store.get(((1, 2, 3), (0, 1, 2))) is None
    assert store.hits == 1


def test_a_new_validity_empties_the_store():
    store = PrefixStates()
    store.validate("weights v1")
    store.put(((1,), (0,)), _state())
    store.validate("weights v1")
    assert len(store) == 1
    store.validate("weights v2")
    assert len(store) == 0 and store.nbytes == 0


def test_an_ablation_between_forwards_empties_the_models_store(tiny):
    """Guards the engine's validity key: a state computed without an ablation must not serve a
    forward with one (the ablated block's output differs)."""
    n = tiny.n_layers
    routes = [R.Route.skip(n, 2), R.Route.repeat(n, 1)]
    prompts = ["What is 2 + 3?", "What is 7 + 1?"]
    with tiny.engine.prefix_states() as store, tiny.engine.reuses.forced("prefix-store", True):  # on wherever this CPU's check stands
        tiny.generate(prompts, route=routes, max_new_tokens=2)
        held = len(store)
        tiny.generate(prompts, route=routes, max_new_tokens=2)
        assert held > 0 and store.hits > 0
        hits = store.hits
        with tiny.intervene(ablations=[R.Ablation(0, "mlp")]):
            tiny.generate(prompts, route=routes, max_new_tokens=2)
        assert store.hits == hits, "no state from before the ablation serves a forward under it"


def test_the_search_runs_on_a_model_with_sliding_layers_and_keeps_every_bit(tmp_path):
    """Gemma-3 (sliding and global layers) once crashed in the route search: with the reuse
    ``prefix-store`` on, its per-layer-kind attention masks did not fit the store's rows
    (Gemma-3-270M and this tiny Gemma-3 alike). Such a model runs without the store, and its
    tries are those of a run with the store off."""
    from rnr_lens.measure.store import RunStore
    from rnr_lens.questions import tasks
    from tests.model.test_adapters import _build

    model = _build("gemma3_text", tmp_path / "gemma3")
    task = tasks.get("add-small", n=3)

    def tries(store_on: bool):
        with model.engine.reuses.forced("prefix-store", store_on):
            result = R.audit(model, task, ["search:k=3"], store=RunStore(":memory:"), progress=False)
        return result.tries[["question_id", "try_index", "route", "text", "mean_logprob"]].to_dict("records")

    assert tries(True) == tries(False)
    assert model.engine.reuses.used["prefix-store"] == 0, "no store on a model with sliding layers"
