"""Random models of the real architecture code, for fast tests, examples and checks.

:func:`random_causal_lm` is the one builder of random models (any architecture transformers
knows, any width, seeded without touching the global generator); :func:`tiny_model` is a
randomly initialised Llama (the same Hugging Face class SmolLM2 uses,
wrapped by the same code as every loaded model) with an in-memory byte-level BPE tokenizer and
a ChatML template: no download, a few milliseconds per forward. Its weights are drawn with a
large scale so that next-token distributions are peaked and greedy decoding is stable under
float reordering, which the engine's equivalence tests rely on. :func:`greedy_without_cache`
is the reference those tests and the GPU check compare cached generation with.
"""

from __future__ import annotations

from typing import Any

import torch

from rnr_lens.model.lens import LensModel
from rnr_lens.model.models import wrap_bridge

# ---------------------------------------------------------------------------------------------
# Tiny random models for fast tests
# ---------------------------------------------------------------------------------------------

_TINY_CORPUS = [
    "What is 3 + 4? The answer is 7.",
    "What is 12 - 5? The answer is 7.",
    "Tom has 3 apples and buys 5 more. How many apples does he have now? The answer is 8.",
    "The quick brown fox jumps over the lazy dog.",
    "0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 + - * / = ? . ,",
]
_TINY_CHAT_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def tiny_tokenizer() -> Any:
    """A small byte-level BPE tokenizer with a ChatML template, built in memory (no download)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    # Printable ASCII only (byte-level symbols: Ġ is the space, Ċ the newline), so whatever a
    # random model generates decodes to valid text.
    alphabet = [chr(b) for b in range(33, 127)] + ["\u0120", "\u010a"]
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=specials, initial_alphabet=alphabet, show_progress=False)
    tok.train_from_iterator(_TINY_CORPUS * 4, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", bos_token="<|im_start|>")
    fast.chat_template = _TINY_CHAT_TEMPLATE
    return fast


LLAMA_SHAPES: dict[str, dict[str, int]] = {
    "llama-0.5b": dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2),
    "llama-1.5b": dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12, num_key_value_heads=2),
}
"""Llama-architecture shapes of public models at these sizes (Qwen2.5-0.5B/1.5B-like widths),
for random models of real width (:func:`random_causal_lm`; the engine benchmark, the GPU check)."""


def random_causal_lm(model_type: str, *, seed: int = 0, device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32, **config: Any) -> Any:
    """A randomly initialised Hugging Face causal LM of ``model_type`` (``llama``, ``qwen2`` or
    any type transformers knows), built by the real architecture code from ``config``'s fields
    (``AutoConfig.for_model``), drawn in float32 on ``device`` from ``seed`` without touching the
    global generator, then cast to ``dtype``: the same weights for every dtype. The one builder
    of random models: :func:`tiny_model`, the architecture tests, the GPU check's real widths and
    the engine benchmark call it.

    Example:
        >>> hf = random_causal_lm("llama", hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        ...                       num_attention_heads=4, num_key_value_heads=2, vocab_size=400)
        >>> hf.config.num_hidden_layers
        2
    """
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = AutoConfig.for_model(model_type, **config)
    state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        with torch.device(device):
            model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    finally:
        torch.random.set_rng_state(state)
    return model.to(dtype).eval()


def tiny_model(n_layers: int = 4, *, d_model: int = 64, seed: int = 0, name: str = "tiny-llama") -> LensModel:
    """A randomly initialised Llama of the real architecture code, for fast unit tests.

    Weights are drawn with a larger scale than training would use so that next-token
    distributions are peaked: greedy decoding is then stable under float reordering, which
    the engine's equivalence tests rely on.
    """
    tokenizer = tiny_tokenizer()
    model = random_causal_lm(
        "llama",
        seed=seed,
        vocab_size=len(tokenizer),
        hidden_size=d_model,
        intermediate_size=2 * d_model,
        num_hidden_layers=n_layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        initializer_range=0.3,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        architectures=["LlamaForCausalLM"],
    )
    return LensModel(wrap_bridge(model, tokenizer, name), name=name, tokenizer=tokenizer)


def greedy_without_cache(model: LensModel, prompt: Any, max_new_tokens: int, **intervention: Any) -> list[int]:
    """The reference every cached generation path is checked against: greedy tokens with the
    whole sequence recomputed at every step, through the bridge (a no-op user hook sends every
    forward there), with the route's layer list rebuilt by ``intervene(**intervention)``."""
    ids = model.encode(prompt)
    out: list[int] = []
    noop = [("blocks.0.hook_resid_pre", lambda x, hook: None)]
    with torch.no_grad(), model.bridge.hooks(fwd_hooks=noop), model.intervene(**intervention):
        if model.engine.path().graph != "bridge":
            raise RuntimeError(f"the reference ran on the {model.engine.path()}, not the bridge")
        for _ in range(max_new_tokens):
            token = int(model.forward_tokens(torch.tensor([ids + out]))[0, -1].argmax())
            if token in model.eos_token_ids:
                break
            out.append(token)
    return out
