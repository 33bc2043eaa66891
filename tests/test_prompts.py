"""Prompts: raw text as it is, a chat prompt through the tokenizer's own template (earlier turns
in order, the assistant prefix after the generation prompt), and one line where a tokenizer
has no template."""

import pytest

from rnr_lens.errors import RnrLensError
from rnr_lens.prompts import ChatPrompt, render
from rnr_lens.tiny import tiny_tokenizer


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
