"""Direct logit attribution (rnr_lens/bottleneck/attribution.py) on the tiny model."""

import pytest

from rnr_lens.bottleneck.attribution import direct_logit_attribution
from rnr_lens.questions.tasks import get
from tests.planted import CONFIG


def test_direct_logit_attribution_adds_up(tiny):
    """Each question's total logit of its answer is the sum of the embedding's, every
    attention's and every MLP's contributions."""
    dla = direct_logit_attribution(tiny, list(get("add-small", n=2)), CONFIG)
    for _qid, group in dla.groupby("question_id"):
        total = group[group.component == "total"].contribution.item()
        parts = group[group.component != "total"].contribution.sum()
        assert parts == pytest.approx(total, abs=1e-3 * max(1.0, abs(total)))
        assert set(group.component) == {"embed", "attn", "mlp", "total"}
