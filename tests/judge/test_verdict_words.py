"""Verdicts stored as decisions, their words rendered when shown (issue 74: rewording a verdict
once meant re-deriving every committed claims.json)."""

import json
from pathlib import Path

import pytest

from rnr_lens.errors import RnrLensError
from rnr_lens.judge import verdict_words
from rnr_lens.judge.claims import Claims
from rnr_lens.judge.verdict_words import WRITTEN, Reason, render
from rnr_lens.judge.verdicts import Verdict

RESULTS = Path(__file__).resolve().parents[2] / "assets" / "results"
FOLDERS = sorted(p.parent for p in RESULTS.glob("*/claims.json"))


def verdict_records(d):
    """Every verdict record in a claims.json document."""
    if isinstance(d, dict):
        if "status" in d and "rules" in d:
            yield d
            return
        for v in d.values():
            yield from verdict_records(v)
    elif isinstance(d, list):
        for v in d:
            yield from verdict_records(v)


@pytest.mark.parametrize("folder", FOLDERS, ids=[f.name for f in FOLDERS])
def test_a_committed_claims_json_holds_decisions_and_no_prose(folder):
    """Each verdict is its status, the rule that decided it and what that rule read; its words
    render from that alone, and it reads back as itself."""
    document = json.loads((folder / "claims.json").read_text())
    records = list(verdict_records(document))
    assert records, folder.name
    for d in records:
        assert "text" not in d and "power" not in d and set(d["reason"]) == {"rule", "numbers", "estimates"}
        v = Verdict.from_dict(d)
        assert v.reason.rule != WRITTEN and v.text and Verdict.from_dict(v.to_dict()) == v


def test_a_rewording_changes_no_stored_file(monkeypatch):
    """The words are the registry's: a committed file read after a rewording prints the new
    words, with no re-derivation."""
    claims = Claims.from_dict(json.loads((RESULTS / "grid-deep" / "claims.json").read_text()))
    routes = next(c for c in claims.routes_vs_search if c.verdict.reason.rule == "routes:no-gain")
    before = routes.verdict.text
    monkeypatch.setitem(verdict_words.WORDS, "routes:no-gain", lambda r: f"reworded: search gain {r.estimates['search_gain'].text()}")
    assert routes.verdict.text.startswith("reworded: search gain ") and routes.verdict.text != before
    assert str(routes.verdict).startswith(f"{routes.verdict.status}: reworded")


def test_a_file_written_before_decisions_keeps_its_sentence():
    old = {"status": "unresolved", "text": "held-out repair not resolved above one half", "n_needed": 40, "detectable": 0.2, "rules": "2"}
    v = Verdict.from_dict(old)
    assert v.reason == Reason(WRITTEN, {"text": old["text"]}) and v.text == old["text"] and v.rules == "2"
    assert "about 40 questions would resolve" in v.power_text


@pytest.mark.parametrize(
    ("reason", "refusal"),
    [
        ({"rule": "routes:made-up", "numbers": {}, "estimates": {}}, "names rule 'routes:made-up', which this rnr_lens has no words for"),
        ({"rule": "routes:matched", "numbers": {"margin": {"x": 1}}, "estimates": {}}, "holds a dict among its numbers"),
        ({"rule": "routes:matched", "numbers": [], "estimates": {}}, "holds numbers and estimates as JSON objects"),
    ],
)
def test_a_reason_from_a_file_is_checked(reason, refusal):
    """A claims.json from elsewhere is data: a rule this version cannot word, or a number that is
    not a plain value, is refused in one line."""
    with pytest.raises(RnrLensError, match=refusal) as refused:
        Verdict.from_dict({"status": "support", "reason": reason, "rules": "3"})
    assert "\n" not in str(refused.value)


def test_an_unknown_rule_is_refused_when_rendered():
    with pytest.raises(RnrLensError, match="no words for verdict rule 'nowhere'"):
        render(Reason("nowhere"))
