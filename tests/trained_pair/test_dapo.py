"""DAPO's config and reward arithmetic (rnr_lens/trained_pair/dapo.py): a run's settings checked on
construction, the blocks it trains read from text, the soft overlong punishment. No torch: the
tensor formulas and the loop are tests/trained_pair/test_training.py's."""

import subprocess
import sys

import pytest

from rnr_lens.errors import RnrLensError
from rnr_lens.trained_pair.dapo import TrainConfig, overlong_penalty, parse_layers


def test_parse_layers():
    assert parse_layers(None, 4) == [0, 1, 2, 3]
    assert parse_layers("2-3,0", 4) == [0, 2, 3]
    with pytest.raises(RnrLensError, match="outside 0..3"):
        parse_layers("2-9", 4)
    with pytest.raises(RnrLensError, match="cannot parse layers"):
        parse_layers("two", 4)


def test_overlong_penalty_is_soft_then_full():
    assert overlong_penalty(12, 16, 4) == 0.0
    assert overlong_penalty(14, 16, 4) == -0.5
    assert overlong_penalty(16, 16, 4) == -1.0
    assert overlong_penalty(17, 16, 4) == -1.0


def test_train_config_rejects_bad_values():
    with pytest.raises(RnrLensError, match="group_size"):
        TrainConfig(group_size=1)
    with pytest.raises(RnrLensError, match="components"):
        TrainConfig(components="head")
    with pytest.raises(RnrLensError, match="minibatches"):
        TrainConfig(prompts_per_step=2, minibatches=3)


def test_a_config_is_read_and_checked_without_torch():
    code = "import sys; from rnr_lens.trained_pair.dapo import TrainConfig; TrainConfig(steps=3); assert 'torch' not in sys.modules"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
