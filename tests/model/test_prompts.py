"""Prompts: raw text as it is, a chat prompt through the tokenizer's own template (earlier turns
in order, the assistant prefix after the generation prompt), and one line where a tokenizer
has no template."""

import pytest

from rnr_lens.errors import RnrLensError
from rnr_lens.model.prompts import ChatPrompt, render
from rnr_lens.model.tiny import tiny_tokenizer


def test_raw_text_is_its_own_rendering_and_keeps_the_tokenizers_special_tokens():
    assert render(tiny_tokenizer(), "What is 2 + 3?") == ("What is 2 + 3?", True)


def test_a_chat_prompt_renders_its_turns_in_order_and_ends_in_the_assistant_prefix():
    tok = tiny_tokenizer()
    prompt = ChatPrompt("What is 2 + 3?", system="Be brief.", assistant_prefix="The answer is ", turns=(("What is 1 + 1?", "The answer is 2."),))
    text, special = render(tok, prompt)
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is 1 + 1?"},
        {"role": "assistant", "content": "The answer is 2."},
        {"role": "user", "content": "What is 2 + 3?"},
    ]
    assert text == tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True) + "The answer is "
    assert special is False, "the template already holds the special tokens"
    assert text.index("Be brief.") < text.index("What is 1 + 1?") < text.index("The answer is 2.") < text.index("What is 2 + 3?")


def test_a_chat_prompt_without_a_template_is_one_line_naming_the_fix():
    tok = tiny_tokenizer()
    tok.chat_template = None
    with pytest.raises(RnrLensError, match="no chat template; use raw-text prompts") as err:
        render(tok, ChatPrompt("What is 2 + 3?"))
    assert "\n" not in str(err.value)
    with pytest.raises(RnrLensError, match="a prompt must be a str or a ChatPrompt, not int"):
        render(tok, 3)


@pytest.mark.parametrize(
    ("template", "said"),
    [
        ("{% set r = range(100000) %}{% for i in r %}{% for j in r %}{% endfor %}{% endfor %}", "over the cap of 1 seconds"),
        ("{{ 'x' * 1200000000 }}", "over the cap of 256 MB"),
        ("{% for i in range(100000) %}{{ 'x' * 100 }}{% endfor %}", "a rendered chat prompt is over the cap of 4,000,000 characters"),
        ("{{ raise_exception('this template takes no system role') }}", r"failed \(TemplateError: 'this template takes no system role'\)"),
        ("{{ ''.__class__.__mro__[1].__subclasses__() }}", "failed .*(SecurityError|UndefinedError)"),
        ("{% for %}", r"failed \(TemplateSyntaxError"),
    ],
    ids=["ten-billion-steps", "a-gigabyte-string", "a-ten-million-character-prompt", "raise-exception", "sandbox", "syntax"],
)
def test_a_chat_template_from_outside_is_bounded_in_time_memory_and_length_and_fails_in_one_line(monkeypatch, template, said):
    """Issue 73: a model folder's template looped 10**10 times, rendered 1.2 GB, called
    raise_exception or tripped Jinja's sandbox: each a traceback or a hang. Each is one line,
    and the process's limits are as they were after it."""
    import resource
    import signal

    monkeypatch.setenv("RNR_LENS_MAX_TEMPLATE_SECONDS", "1")
    tok = tiny_tokenizer()
    plain = tok.chat_template
    limits, handler = resource.getrlimit(resource.RLIMIT_AS), signal.getsignal(signal.SIGALRM)
    tok.chat_template = template
    with pytest.raises(RnrLensError, match=said) as refused:
        render(tok, ChatPrompt("What is 2 + 3?"))
    assert "\n" not in str(refused.value)
    assert resource.getrlimit(resource.RLIMIT_AS) == limits and signal.getsignal(signal.SIGALRM) == handler
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    tok.chat_template = plain
    assert "What is 2 + 3?" in render(tok, ChatPrompt("What is 2 + 3?"))[0]
