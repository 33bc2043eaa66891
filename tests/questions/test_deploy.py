import pytest

from rnr_lens import ChatPrompt, RnrLensError
from rnr_lens.questions import tasks
from rnr_lens.questions.deploy import DeploymentConfig


def test_hash_is_stable_and_content_sensitive(tmp_path):
    cfg = DeploymentConfig()
    assert cfg.hash() == DeploymentConfig().hash()
    assert cfg.hash() != cfg.with_(assistant_prefix="Answer: ").hash()
    for name in ("cfg.json", "cfg.yaml"):
        cfg.with_(max_new_tokens=9).save(tmp_path / name)
        assert DeploymentConfig.load(tmp_path / name).hash() == cfg.with_(max_new_tokens=9).hash()


def test_prompt_rendering_modes():
    q = tasks.get("add-small", n=1)[0]
    chat = DeploymentConfig(instruction="Answer briefly. ").prompt(q)
    assert chat == ChatPrompt(f"Answer briefly. {q.prompt}", None, "The answer is ")
    raw = DeploymentConfig(chat=False, system_prompt="Be exact.").prompt(q)
    assert raw == f"Be exact.\n\n{q.prompt}\nThe answer is "


def test_grading_reads_prefix_and_continuation():
    q = tasks.get("add-small", n=1)[0]
    cfg = DeploymentConfig()
    assert cfg.grade(f"{q.answer}.", q, "number") == (q.answer, True)
    assert cfg.grade("nothing", q, "number") == (None, False)


def test_defaults_per_answer_type():
    assert DeploymentConfig.default_for("choice").extractor == "choice-letter"
    assert DeploymentConfig.default_for("string").extractor == "answer-is-string"
    with pytest.raises(RnrLensError, match="no default deployment"):
        DeploymentConfig.default_for("image")


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: DeploymentConfig(extractor="magic"), "unknown extractor 'magic'"),
        (lambda: DeploymentConfig(max_new_tokens=0), "max_new_tokens"),
        (lambda: DeploymentConfig.from_dict({"prefix": "x"}), "unknown deployment config field 'prefix'"),
    ],
)
def test_bad_configs(make, message):
    with pytest.raises(RnrLensError, match=message):
        make()


def test_bad_config_file(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("- a\n- b\n")
    with pytest.raises(RnrLensError, match="must hold a mapping"):
        DeploymentConfig.load(f)
    with pytest.raises(RnrLensError, match="does not exist"):
        DeploymentConfig.load(tmp_path / "none.yaml")


def test_earlier_config_versions_read_as_they_always_did():
    """Versions 2, 3 and 4 changed the default extractor; a file of an earlier version that names
    none meant its own default. Parity: each keeps the hash old stores hold (494b6cc75e41221e,
    the README's example audit under version 1; bb23c11aa238eaee under version 2;
    96c082f09104ef35, the committed grids', under version 3), so resuming them still finds them."""
    old = DeploymentConfig.from_dict({"version": 1})
    assert old.extractor == "number" and old.hash() == "494b6cc75e41221e"
    two = DeploymentConfig.from_dict({"version": 2})
    assert two.extractor == "concluding-number" and two.hash() == "bb23c11aa238eaee"
    three = DeploymentConfig.from_dict({"version": 3})
    assert three.extractor == "concluding-token" and three.hash() == "96c082f09104ef35"
    assert DeploymentConfig.from_dict({}).extractor == "concluding-exact"
    assert DeploymentConfig.from_json(old.to_json()) == old and DeploymentConfig.from_json(two.to_json()) == two
    assert DeploymentConfig().hash() == "02e2413a34ed9454", "version 4's zero-shot default (SmolLM2's audit ids) keeps its hash"
    with pytest.raises(RnrLensError, match="version must be one of"):
        DeploymentConfig.from_dict({"version": 6})
