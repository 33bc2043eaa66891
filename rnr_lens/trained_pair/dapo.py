"""DAPO's hyper-parameters and its reward arithmetic (Yu et al., 2025), apart from any model,
tensor or loop (this module loads no torch: a config is read and checked without it).

:class:`TrainConfig` holds one run's settings (validated on construction);
:func:`overlong_penalty` is DAPO's soft overlong punishment, a pure function of numbers, tested
alone (``tests/trained_pair/test_dapo.py``). The two tensor formulas of a step (group advantages and the
token-level clipped loss) and the loop that uses them are in :mod:`rnr_lens.trained_pair.training`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, fields
from typing import Any

from rnr_lens.errors import RnrLensError

#: What a run may train inside each chosen block.
TRAINABLE = ("block", "mlp", "attn")
"""What a DAPO fine-tune may train in each chosen block (not the ablation targets of
:data:`rnr_lens.core.records.COMPONENTS`)."""


CLI_FIELDS = ("steps", "prompts_per_step", "group_size", "temperature", "lr", "minibatches", "layers", "components", "save_every", "seed")
"""The :class:`TrainConfig` fields ``rnr-lens train`` sets, each as ``--field-name``."""


def parse_layers(spec: str | None, n_layers: int | None) -> list[int]:
    """Block indices from runs like ``"20-29"`` or ``"0,5-7"`` (None: all blocks); with
    ``n_layers`` None, only the spelling is checked (and the runs' blocks returned).

    Example:
        >>> parse_layers("2-3,0", 4)
        [0, 2, 3]
    """
    if spec is None or spec.strip() in ("", "all"):
        return list(range(n_layers or 0))
    layers: set[int] = set()
    for run in filter(None, (p.strip() for p in spec.split(","))):
        try:
            a, _, b = run.partition("-")
            lo, hi = int(a), int(b or a)
        except ValueError:
            raise RnrLensError(f"cannot parse layers {spec!r}: write runs like '20-29' or '0,5-7'") from None
        if lo < 0 or lo > hi:
            raise RnrLensError(f"layers {run!r} must run upwards from block 0 or above, like '20-29'")
        if n_layers is not None and hi >= n_layers:
            raise RnrLensError(f"layers {run!r} are outside 0..{n_layers - 1} for this {n_layers}-block model")
        layers.update(range(lo, hi + 1))
    return sorted(layers)


@dataclass(frozen=True)
class TrainConfig:
    """Hyper-parameters of a DAPO run (defaults follow the paper where a CPU allows).

    Attributes:
        steps: Policy-update steps (each with its own sampled batch).
        prompts_per_step: Groups kept per step after dynamic sampling.
        group_size: Answers sampled per prompt (G).
        temperature: Sampling temperature for the rollouts (the policy is ``softmax(logits / T)``).
        lr: AdamW learning rate.
        weight_decay: AdamW weight decay.
        clip_low: Lower clip range (ratio >= 1 - clip_low).
        clip_high: Upper clip range (ratio <= 1 + clip_high); DAPO's "clip-higher".
        minibatches: Policy updates per step (the kept groups split into this many minibatches).
        max_new_tokens: Answer budget; None: the deployment's.
        overlong_buffer: Tokens before the budget where the soft overlong punishment starts.
        max_rounds: Sampling rounds per step for dynamic sampling.
        layers: Blocks to train, as runs like ``"20-29"`` or ``"0,5-7"``; None: all blocks.
        components: ``"block"`` (everything in the block), ``"mlp"`` or ``"attn"``.
        grad_clip: Gradient-norm clip.
        save_every: Steps between resumable checkpoints.
        seed: Seed for the prompt order and the rollouts.
    """

    steps: int = 40
    prompts_per_step: int = 8
    group_size: int = 8
    temperature: float = 1.0
    lr: float = 1e-5
    weight_decay: float = 0.0
    clip_low: float = 0.2
    clip_high: float = 0.28
    minibatches: int = 2
    max_new_tokens: int | None = None
    overlong_buffer: int = 4
    max_rounds: int = 3
    layers: str | None = None
    components: str = "block"
    grad_clip: float = 1.0
    save_every: int = 10
    seed: int = 0

    def __post_init__(self) -> None:
        positive = ("steps", "prompts_per_step", "minibatches", "max_rounds", "save_every")
        for name in positive:
            if getattr(self, name) < 1:
                raise RnrLensError(f"TrainConfig.{name} must be at least 1, got {getattr(self, name)}")
        if self.group_size < 2:
            raise RnrLensError(f"TrainConfig.group_size must be at least 2 (advantages are relative within a group), got {self.group_size}")
        if self.temperature <= 0:
            raise RnrLensError(f"TrainConfig.temperature must be > 0 (rollouts are sampled), got {self.temperature}")
        if not 0 < self.clip_low < 1 or self.clip_high <= 0:
            raise RnrLensError(f"clip ranges must satisfy 0 < clip_low < 1 and clip_high > 0, got {self.clip_low}, {self.clip_high}")
        if self.lr <= 0:
            raise RnrLensError(f"TrainConfig.lr must be > 0, got {self.lr}")
        if self.components not in TRAINABLE:
            raise RnrLensError(f"TrainConfig.components must be one of {', '.join(TRAINABLE)}, not {self.components!r}")
        if self.max_new_tokens is not None and self.max_new_tokens <= self.overlong_buffer:
            raise RnrLensError(f"max_new_tokens ({self.max_new_tokens}) must exceed overlong_buffer ({self.overlong_buffer})")
        parse_layers(self.layers, None)  # the spelling now; the range once the model is known
        if self.minibatches > self.prompts_per_step:
            raise RnrLensError(
                f"minibatches ({self.minibatches}) cannot exceed prompts_per_step ({self.prompts_per_step}); each minibatch holds whole groups"
            )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def hash(self) -> str:
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()[:16]

    def command_flags(self) -> str:
        """The ``rnr-lens train`` flags that give this config (those that differ from the
        defaults); a field the CLI cannot set is named as such.

        Example:
            >>> TrainConfig(steps=30, layers="15-29", lr=3e-5).command_flags()
            '--steps 30 --lr 3e-05 --layers 15-29'
        """
        default = TrainConfig()
        flags, api_only = [], []
        for f in fields(self):
            value = getattr(self, f.name)
            if value == getattr(default, f.name):
                continue
            if f.name in CLI_FIELDS:
                flags.append(f"--{f.name.replace('_', '-')} {value}")
            else:
                api_only.append(f"{f.name}={value!r}")
        return " ".join(flags) + (f" (set through the API: {', '.join(api_only)})" if api_only else "")

    def with_(self, **changes: Any) -> TrainConfig:
        known = {f.name for f in fields(self)}
        unknown = set(changes) - known
        if unknown:
            raise RnrLensError(f"unknown TrainConfig field(s): {', '.join(sorted(unknown))}")
        return TrainConfig(**{**self.to_dict(), **changes})


def overlong_penalty(length: int, max_new_tokens: int, buffer: int) -> float:
    """DAPO's soft overlong punishment for an answer of ``length`` tokens (0 down to -1)."""
    expected = max_new_tokens - buffer
    if length <= expected:
        return 0.0
    if length <= max_new_tokens:
        return (expected - length) / buffer
    return -1.0
