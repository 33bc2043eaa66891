"""check_format: the same greedy answers read by every extractor of the answer type."""

from __future__ import annotations

import rnr_lens as R
from rnr_lens.measure.formats import check_format
from rnr_lens.questions import tasks
from rnr_lens.questions.answers import extractors_for, get_extractor


def test_every_extractor_reads_the_same_answers(tiny):
    task = tasks.get("add-small", n=6)
    check = check_format(tiny, task)
    assert check.n == 6 and check.extractor == R.DeploymentConfig.default_for("number").extractor
    assert [r.extractor for r in check.readings][0] == check.extractor, "the configured extractor first"
    assert {r.extractor for r in check.readings} == set(extractors_for("number"))
    configured = check.readings[0]
    assert configured.differs == 0
    assert check.extractable.value == configured.read / 6 and check.accuracy.value == configured.correct / 6
    for r in check.readings:
        assert 0 <= r.correct <= r.read <= 6 and 0 <= r.differs <= 6
    for d in check.disagreements:  # each listed answer is read two ways, as the extractors say
        assert len({d[r.extractor] for r in check.readings}) > 1
        assert all(d[r.extractor] == get_extractor(r.extractor)(d["text"]) for r in check.readings)
    assert check.to_dict()["readings"][0]["extractor"] == check.extractor
