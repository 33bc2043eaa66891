"""Shared fixtures: a tiny random Llama (fast) and the real SmolLM2-135M-Instruct (slow)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

import rnr_lens as R

torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture(scope="session")
def tiny() -> R.LensModel:
    return R.tiny_model(n_layers=4, seed=0)


@pytest.fixture(scope="session")
def smol() -> R.LensModel:
    return R.load_model("smollm2-135m-instruct")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.fail(f"benchmark data not found at {SHARED_DATA}; the repository must sit beside ../shared")
    return SHARED_DATA


@pytest.fixture(params=["tiny", pytest.param("smol", marks=pytest.mark.slow)])
def model(request) -> R.LensModel:
    """Each engine test runs on the tiny model and, marked slow, on SmolLM2."""
    return request.getfixturevalue(request.param)


def prompts_for(model: R.LensModel) -> list:
    """A few prompts of different lengths, chat-rendered where the model has a template."""
    texts = ["What is 3 + 4?", "Tom has 3 apples and buys 5 more. How many apples does he have now?", "What is 12 - 5?"]
    return [R.ChatPrompt(t, assistant_prefix="The answer is ") for t in texts]
