"""The tiny models every fast test stands on: real architecture code with seeded random
weights, a tokenizer built in memory, and the uncached greedy reference that the cached
generation paths are checked against."""

import torch

import rnr_lens as R
from rnr_lens.model.tiny import greedy_without_cache, tiny_tokenizer


def test_a_tiny_model_is_the_real_llama_code_with_seeded_weights():
    a, b, other = R.tiny_model(n_layers=3, seed=0), R.tiny_model(n_layers=3, seed=0), R.tiny_model(n_layers=3, seed=1)
    assert type(a.bridge.original_model).__name__ == "LlamaForCausalLM" and a.n_layers == 3
    assert a.fingerprint() == b.fingerprint() != other.fingerprint()
    ids = torch.tensor([a.encode("What is 2 + 3?")])
    with torch.no_grad():
        assert torch.equal(a.forward_tokens(ids), b.forward_tokens(ids))


def test_the_tiny_tokenizer_round_trips_printable_text_and_has_a_chat_template():
    tok = tiny_tokenizer()
    text = "Tom has 3 apples and buys 5 more. How many?"
    assert tok.decode(tok.encode(text)) == text
    assert tok.chat_template and tok.eos_token == "<|im_end|>"


def test_the_uncached_reference_agrees_with_cached_greedy_generation(tiny):
    prompt = "What is 2 + 3?"
    (cached,) = tiny.generate([prompt], max_new_tokens=6)
    assert list(cached.token_ids) == greedy_without_cache(tiny, prompt, 6)
