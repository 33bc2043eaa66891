"""Prompts: raw text, or a user message rendered with the model's chat template.

A :class:`ChatPrompt` carries an optional system prompt, earlier turns (worked examples: a user
message and the assistant's answer each, lm-eval's ``--fewshot_as_multiturn``) and an optional
assistant prefix (for instance ``"The answer is "``) that is appended after the template's
generation prompt, so the model continues the assistant's turn from it.

A chat template comes with the model, from outside: transformers renders it in Jinja's
immutable sandbox, and :func:`render` bounds what one rendering may cost (issue 73): its time
(:data:`TEMPLATE_SECONDS`), the memory it may take (:data:`TEMPLATE_MB`) and the prompt's length
(:data:`PROMPT_CHARS`); a template that fails (``raise_exception``, a sandbox violation, a loop of
10**10 steps) is one line naming the cap or the failure.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Union

from rnr_lens.core.untrusted import Limit, quoted
from rnr_lens.errors import RnrLensError, arg

TEMPLATE_SECONDS = Limit("rendering the chat template", 10, "RNR_LENS_MAX_TEMPLATE_SECONDS", unit="seconds")
"""How long one prompt's rendering may take (every supported template takes under a millisecond)."""
TEMPLATE_MB = Limit("the memory rendering the chat template takes", 256, "RNR_LENS_MAX_TEMPLATE_MB")
"""How much more memory the process may map while a template renders one prompt (a template of
a few bytes asked for 1.2 GB)."""
PROMPT_CHARS = Limit("a rendered chat prompt", 4_000_000, "RNR_LENS_MAX_PROMPT_CHARS", unit="characters")
"""Twenty questions of the longest a task may hold (:data:`~rnr_lens.core.untrusted.QUESTION_CHARS`)."""


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
    with _bounded():
        try:
            text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        except (_Overtime, MemoryError, RecursionError) as exc:
            over = {_Overtime: TEMPLATE_SECONDS, MemoryError: TEMPLATE_MB}.get(type(exc))
            raise (over.refusal("the model's chat template") if over else RnrLensError("the model's chat template nests too deeply")) from None
        except Exception as exc:  # the template's own error (raise_exception), a sandbox violation, a Jinja syntax error
            raise RnrLensError(
                f"the model's chat template failed ({type(exc).__name__}: {quoted(str(exc))}); fix the template or pass a chat: false config"
            ) from None
    if not isinstance(text, str) or len(text) > PROMPT_CHARS.value:
        raise PROMPT_CHARS.refusal("the model's chat template")
    return text + prompt.assistant_prefix, False


class _Overtime(Exception):
    """Rendering passed :data:`TEMPLATE_SECONDS`."""


def _on_alarm(signum: int, frame: Any) -> None:
    raise _Overtime


@contextlib.contextmanager
def _bounded() -> Iterator[None]:
    """Bound the block's time (a real-time alarm) and the memory the process may add (its
    address-space limit, :data:`TEMPLATE_MB` past what it maps now), then restore both. Only in
    the main thread: an alarm reaches no other, and a limit there would bind the main thread's
    work too."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return
    seconds, headroom = TEMPLATE_SECONDS.value, TEMPLATE_MB.value
    limits = resource.getrlimit(resource.RLIMIT_AS)
    try:
        with open("/proc/self/statm") as f:
            mapped = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        mapped = None
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        if mapped is not None and (limits[1] == resource.RLIM_INFINITY or mapped + headroom < limits[1]):
            resource.setrlimit(resource.RLIMIT_AS, (mapped + headroom, limits[1]))
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, limits)
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
