"""A referee's spot-check (issue 73): tries drawn from committed evidence are generated again from
the audited weights and agree; a try whose text was fabricated (its reading and flag kept
consistent, so re-derivation cannot tell) is caught, by the library and by the command line."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from rnr_lens.deploy import DeploymentConfig
from rnr_lens.errors import RnrLensError
from rnr_lens.regrade import check_readings
from rnr_lens.spot_check import draw, verify
from rnr_lens.tasks import Question

ROOT = Path(__file__).resolve().parents[1]
EVIDENCE = ROOT / "assets" / "results" / "grid-default" / "evidence.json.gz"


def _one_audit(tmp_path: Path) -> tuple[Path, dict, int]:
    """grid-default's evidence cut to SmolLM2's add-small audit, and a seed whose one drawn try
    is that audit's greedy default answer (one generation to repeat)."""
    document = json.loads(gzip.decompress(EVIDENCE.read_bytes()))
    setting = next(s for s in document["manifest"]["settings"] if (s["model"], s["task"]) == ("smollm2-135m-instruct", "add-small"))
    document["manifest"]["settings"] = [setting]
    document["audits"] = [a for a in document["audits"] if a["audit"]["id"] == setting["audit"]]
    seed = next(s for s in range(200) if draw(document, 1, s)[0][1][1] == "default")
    path = tmp_path / "evidence.json.gz"
    path.write_bytes(gzip.compress(json.dumps(document).encode()))
    return path, document, seed


def _fabricated(document: dict, seed: int) -> dict:
    """``document`` with the drawn try's text replaced by one the model did not write, read the
    same way (so every flag, reading and count still re-derives)."""
    record, row = draw(document, 1, seed)[0]
    payload = document["audits"][0]
    config = DeploymentConfig.from_json(record.config_json)
    question = next(Question(q[0], q[2], q[3]) for q in payload["questions"] if q[0] == row[0])
    for text in (f"The answer is {row[4]}.", f"{row[4]}", f"{row[4]} (checked twice)"):
        if text != row[3] and config.read_with(config.extractor, text, question, record.answer_type) == (row[4], bool(row[5])):
            target = next(t for t in payload["tries"] if t[:3] == row[:3])
            target[3] = text
            return document
    raise AssertionError("no fabricated text reads as the stored one")


@pytest.mark.slow
def test_a_spot_check_repeats_drawn_tries_and_catches_a_fabricated_text(tmp_path, smol, capsys):
    from rnr_lens.cli import main

    path, document, seed = _one_audit(tmp_path)
    honest = verify(path, 1, seed=seed, model=smol, progress=False)
    assert (honest.texts_agree, honest.answers_agree, len(honest.drawn)) == (1, 1, 1), honest.summary()
    assert f"(seed {seed})" in honest.summary()

    forged = tmp_path / "forged.json.gz"
    forged.write_bytes(gzip.compress(json.dumps(_fabricated(document, seed)).encode()))
    check_readings(json.loads(gzip.decompress(forged.read_bytes())))  # re-derivation cannot tell: it is consistent
    caught = verify(forged, 1, seed=seed, model=smol, progress=False)
    assert caught.texts_agree == 0 and "differs: audit" in caught.summary()
    assert caught.drawn[0].again_text == honest.drawn[0].again_text == honest.drawn[0].text

    assert main(["report", "--from-evidence", str(forged), "--verify", "1", "--verify-seed", str(seed)]) == 1
    assert "0 of 1 texts agree" in capsys.readouterr().out


def test_a_spot_check_is_refused_in_one_line_before_any_model_loads(tmp_path, capsys):
    from rnr_lens.cli import main

    path, document, _ = _one_audit(tmp_path)
    with pytest.raises(RnrLensError, match="takes 1 to 1000 tries for this evidence, not 5000"):
        verify(path, 5000)
    document["audits"][0]["audit"]["model"] = "someone/not-a-model"  # a hub id a file names is never fetched
    stranger = tmp_path / "stranger.json.gz"
    stranger.write_bytes(gzip.compress(json.dumps(document).encode()))
    with pytest.raises(RnrLensError, match="names the model 'someone/not-a-model', which this machine does not load by name; pass"):
        verify(stranger, 1)
    for argv in (
        ["report", "--verify", "2", "--out", str(tmp_path / "o")],
        ["report", "--from-evidence", str(path), "--verify", "2", "--out", str(tmp_path / "o")],
        ["report", "--from-evidence", str(path), "--model", "x"],
        ["report", "--from-evidence", str(path), "--verify", "5000"],
    ):
        assert main(argv) == 2
        assert capsys.readouterr().err.count("\n") == 1
    assert not (tmp_path / "o").exists()
