"""Widgets on real results: controls drive what is shown."""

import pytest

from rnr_lens import failures, tasks, widgets
from rnr_lens.audit import audit
from rnr_lens.miner import mine
from tests.test_miner import PLANTED, build_planted


@pytest.fixture(scope="module")
def sweep(tiny, tmp_path_factory):
    result, store = build_planted(tiny, tmp_path_factory.mktemp("w") / "w.db")
    return mine(tiny, failures.freeze(result, store, probe="ablation"), strategy="exhaustive", break_bound=1.0, progress=False)


def test_layer_explorer_follows_the_slider(sweep):
    box = widgets.layer_explorer(sweep)
    slider, info = box.children[0], box.children[-1]
    assert slider.value == PLANTED.layer and f"data-layer='{PLANTED.layer}'" in info.value
    assert "repair 1.00" in info.value
    slider.value = 0
    assert "data-layer='0'" in info.value and "repair 0.00" in info.value


def test_audit_explorer_updates_with_k(tiny):
    result = audit(tiny, tasks.get("add-small", n=4), ["sampling:k=3,t=1.0"], progress=False)
    box = widgets.audit_explorer(result)
    probe, selector, k = box.children[0].children
    table = box.children[-1]
    assert k.max == 3 and "reached within k=1" in table.value
    k.value = 3
    assert "reached within k=3" in table.value
    selector.value = "majority"
    assert "majority pick" in table.value
