"""Attribution: which blocks push the model from the gold answer to its default answer.

- :func:`direct_logit_attribution`: each block's attention and MLP contribution to the logit
  difference between the gold answer's first token and the model's default first token at
  the answer position, through the final norm (its scale frozen at the clean value, so the
  contributions plus the embedding's add up to the actual logit difference).
- :func:`attribution_patching`: the first-order (gradient x activation) estimate of how much
  ablating each block's component would change a metric, from one forward and one backward
  pass.

Both read the residual stream as it is written: ``attn = resid_mid - resid_pre`` and
``mlp = resid_post - resid_mid`` (so architectures with extra norms around their sublayers,
like Gemma-3, attribute what actually enters the residual stream).
"""

from __future__ import annotations

from typing import Sequence

import pandas as pd
import torch
from jaxtyping import Float

from rnr_lens.deploy import DeploymentConfig
from rnr_lens.errors import RnrLensError
from rnr_lens.interventions import Ablation
from rnr_lens.lens import LensModel
from rnr_lens.tasks.core import Question


def _first_token(model: LensModel, text: str) -> int:
    ids = model.tokenizer(text, add_special_tokens=False)["input_ids"]
    if not ids:
        raise RnrLensError(f"answer {text!r} has no tokens")
    return ids[0]


def _final_norm_weight(model: LensModel) -> torch.Tensor | None:
    norm = model.bridge.ln_final
    original = getattr(norm, "original_component", norm)
    return getattr(original, "weight", None)


def direct_logit_attribution(
    model: LensModel, questions: Sequence[Question], config: DeploymentConfig
) -> pd.DataFrame:
    """Per question and block: attention and MLP contributions to ``logit[gold] - logit[default]``.

    Returns:
        A long DataFrame (question_id, layer, component in {embed, attn, mlp}, contribution)
        with one extra row per question, component ``total``, holding the actual logit
        difference; contributions sum to it up to the final norm's linearisation.
    """
    rows = []
    unembed = model.bridge.original_model.get_output_embeddings().weight.detach()
    weight = _final_norm_weight(model)
    weight = weight.detach() if weight is not None else None
    eps = getattr(model.bridge.original_model.config, "rms_norm_eps", 1e-6)
    for q in questions:
        ids = torch.tensor([model.encode(config.prompt(q))], device=model.device)
        names = ["hook_resid_pre", "hook_resid_mid", "hook_resid_post"]
        with torch.no_grad():
            logits, cache = model.bridge.run_with_cache(
                ids, names_filter=lambda n: any(n.endswith(x) for x in names) and n.startswith("blocks."))
        final = logits[0, -1]
        default_tok = int(final.argmax())
        gold_tok = _first_token(model, q.answer)
        direction = unembed[gold_tok] - unembed[default_tok]
        resid_final = cache[f"blocks.{model.n_layers - 1}.hook_resid_post"][0, -1]
        scale = (resid_final.pow(2).mean() + eps).rsqrt()
        effective = direction * (weight if weight is not None else 1.0) * scale

        def contrib(vec: torch.Tensor) -> float:
            return float(vec @ effective)

        rows.append({"question_id": q.id, "layer": -1, "component": "embed", "contribution": contrib(cache["blocks.0.hook_resid_pre"][0, -1])})
        for layer in range(model.n_layers):
            pre = cache[f"blocks.{layer}.hook_resid_pre"][0, -1]
            mid = cache[f"blocks.{layer}.hook_resid_mid"][0, -1]
            post = cache[f"blocks.{layer}.hook_resid_post"][0, -1]
            rows.append({"question_id": q.id, "layer": layer, "component": "attn", "contribution": contrib(mid - pre)})
            rows.append({"question_id": q.id, "layer": layer, "component": "mlp", "contribution": contrib(post - mid)})
        rows.append({"question_id": q.id, "layer": -1, "component": "total", "contribution": float(final[gold_tok] - final[default_tok]),
                     "gold_token": model.tokenizer.decode([gold_tok]), "default_token": model.tokenizer.decode([default_tok])})
    return pd.DataFrame(rows)


def gold_logprob_batch(
    model: LensModel, questions: Sequence[Question], config: DeploymentConfig
) -> tuple[torch.Tensor, torch.Tensor, list[tuple[int, list[int]]]]:
    """Token ids and mask of prompt+gold for ``questions`` (left-padded, so every gold answer
    ends in the last column), and per row (start column, gold ids)."""
    seqs, spans = [], []
    for q in questions:
        prompt = model.encode(config.prompt(q))
        gold = model.tokenizer(q.answer, add_special_tokens=False)["input_ids"]
        seqs.append(prompt + gold)
        spans.append((len(prompt), gold))
    ids, mask = model.pad(seqs)
    width = ids.shape[1]
    return ids, mask, [(width - len(s) + start, gold) for s, (start, gold) in zip(seqs, spans)]


def gold_keep(spans: list[tuple[int, list[int]]]) -> int:
    """How many final positions' logits :func:`gold_logprobs` needs (``logits_to_keep``)."""
    return max(len(gold) for _, gold in spans) + 1


def gold_logprobs(logits: Float[torch.Tensor, "batch kept vocab"], spans: list[tuple[int, list[int]]], seq_len: int) -> torch.Tensor:
    """Sum of the gold tokens' log-probabilities per row; ``logits`` cover the last positions
    of a ``seq_len``-long batch (all of them, or the last :func:`gold_keep`)."""
    logprobs = torch.log_softmax(logits.float(), dim=-1)
    offset = seq_len - logits.shape[1]
    out = []
    for row, (start, gold) in enumerate(spans):
        positions = torch.arange(start - 1 - offset, start - 1 - offset + len(gold), device=logits.device)
        out.append(logprobs[row, positions, torch.tensor(gold, device=logits.device)].sum())
    return torch.stack(out)


def attribution_patching(
    model: LensModel, questions: Sequence[Question], config: DeploymentConfig,
    components: Sequence[str] = ("mlp",), ablations: dict[tuple[int, str, str], Ablation] | None = None,
    kinds: Sequence[str] = ("zero",),
) -> pd.DataFrame:
    """Gradient x activation estimate of each ablation's effect on the mean gold log-probability.

    One forward and one backward pass over ``questions`` (clean model); the estimate for
    replacing activation ``a`` by ``r`` is ``sum((r - a) * dmetric/da)``.

    Returns:
        DataFrame (layer, component, kind, atp_estimate).
    """
    ids, mask, spans = gold_logprob_batch(model, questions, config)
    layers = model.block_modules()
    sites: dict[tuple[int, str], torch.Tensor] = {}
    handles = []
    from rnr_lens.adapters import component_module_names

    names = component_module_names(model.bridge)
    for i, layer in enumerate(layers):
        for comp in components:
            if comp == "block":
                def pre(mod: object, args: tuple, kwargs: dict, i: int = i) -> None:
                    sites[(i, "block_in")] = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]

                def post(mod: object, args: object, out: object, i: int = i) -> None:
                    sites[(i, "block_out")] = out[0] if isinstance(out, tuple) else out  # type: ignore[index]
                handles.append(layer.register_forward_pre_hook(pre, with_kwargs=True))
                handles.append(layer.register_forward_hook(post))
            else:
                module = getattr(layer, names[comp]) if model.runner() is model.twin else getattr(layer, comp)

                def keep(mod: object, args: object, out: object, i: int = i, comp: str = comp) -> None:
                    sites[(i, comp)] = out[0] if isinstance(out, tuple) else out  # type: ignore[index]
                handles.append(module.register_forward_hook(keep))
    try:
        with torch.enable_grad():
            logits = model.forward_tokens(ids, mask, logits_to_keep=gold_keep(spans))
            metric = gold_logprobs(logits, spans, ids.shape[1]).mean()
            keys = list(sites)
            grads = dict(zip(keys, torch.autograd.grad(metric, [sites[k] for k in keys], allow_unused=True)))
    finally:
        for h in handles:
            h.remove()
    rows = []
    valid = mask.bool()[..., None]
    for i in range(len(layers)):
        for comp in components:
            for kind in kinds:
                if comp == "block":
                    act = (sites[(i, "block_out")] - sites[(i, "block_in")]).detach()
                    grad = grads[(i, "block_out")]
                else:
                    act, grad = sites[(i, comp)].detach(), grads[(i, comp)]
                if grad is None:
                    continue
                replacement = torch.zeros_like(act)
                if kind != "zero" and ablations is not None and (i, comp, kind) in ablations:
                    replacement = ablations[(i, comp, kind)]._replacement(model)(act)
                estimate = float((((replacement - act) * grad) * valid).sum())
                rows.append({"layer": i, "component": comp, "kind": kind, "atp_estimate": estimate})
    return pd.DataFrame(rows)
