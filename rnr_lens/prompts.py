"""Prompts: raw text, or a user message rendered with the model's chat template.

A :class:`ChatPrompt` carries an optional system prompt, earlier turns (worked examples: a user
message and the assistant's answer each, lm-eval's ``--fewshot_as_multiturn``) and an optional
assistant prefix (for instance ``"The answer is "``) that is appended after the template's
generation prompt, so the model continues the assistant's turn from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union

from rnr_lens.errors import RnrLensError, arg


@dataclass(frozen=True)
class ChatPrompt:
    """A user message to render with the model's chat template.

    Example:
        >>> ChatPrompt("What is 2 + 3?", assistant_prefix="The answer is ")
        ChatPrompt(user='What is 2 + 3?', system=None, assistant_prefix='The answer is ', turns=())
    """

    user: str
    system: str | None = None
    assistant_prefix: str = ""
    turns: tuple[tuple[str, str], ...] = ()
    """Earlier ``(user, assistant)`` turns, oldest first, before ``user``."""


PromptLike = Union[str, ChatPrompt]  # noqa: UP007  # a runtime alias: `|` on a class needs 3.10 semantics at import


def render(tokenizer: Any, prompt: PromptLike) -> tuple[str, bool]:
    """Render a prompt to text.

    Returns:
        ``(text, add_special_tokens)``: raw text is tokenized with the tokenizer's own
        special tokens (a BOS where the model uses one); template output already holds them.
    """
    if isinstance(prompt, str):
        return prompt, True
    if not isinstance(prompt, ChatPrompt):
        raise RnrLensError(f"a prompt must be a str or a ChatPrompt, not {type(prompt).__name__}")
    if not getattr(tokenizer, "chat_template", None):
        raise RnrLensError(
            "this model's tokenizer has no chat template; use raw-text prompts: a deployment config with chat: false "
            f"({arg('config')}), or leave the config out, which then picks raw text for such a model"
        )
    messages = []
    if prompt.system is not None:
        messages.append({"role": "system", "content": prompt.system})
    for asked, answered in prompt.turns:
        messages += [{"role": "user", "content": asked}, {"role": "assistant", "content": answered}]
    messages.append({"role": "user", "content": prompt.user})
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return text + prompt.assistant_prefix, False
