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

from collections.abc import Callable, Sequence

import pandas as pd
import torch

from rnr_lens.core.phases import phase
from rnr_lens.errors import RnrLensError
from rnr_lens.model.generation import Continuations, continuations
from rnr_lens.model.interventions import Ablation
from rnr_lens.model.lens import LensModel
from rnr_lens.questions.deploy import DeploymentConfig
from rnr_lens.questions.tasks.core import Question

RESID_HOOKS = ("hook_resid_pre", "hook_resid_mid", "hook_resid_post")


def _first_token(model: LensModel, text: str) -> int:
    ids = model.tokenizer(text, add_special_tokens=False)["input_ids"]
    if not ids:
        raise RnrLensError(f"answer {text!r} has no tokens")
    return ids[0]


def _final_norm_weight(model: LensModel) -> torch.Tensor | None:
    norm = model.bridge.ln_final
    original = getattr(norm, "original_component", norm)
    return getattr(original, "weight", None)


def direct_logit_attribution(model: LensModel, questions: Sequence[Question], config: DeploymentConfig) -> pd.DataFrame:
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
        with torch.no_grad():
            logits, cache = model.bridge.run_with_cache(ids, names_filter=lambda n: n.startswith("blocks.") and n.rsplit(".", 1)[-1] in RESID_HOOKS)
        final = logits[0, -1]
        default_tok = int(final.argmax())
        gold_tok = _first_token(model, config.gold_continuation(q))
        direction = unembed[gold_tok] - unembed[default_tok]
        resid_final = cache[f"blocks.{model.n_layers - 1}.hook_resid_post"][0, -1]
        scale = (resid_final.pow(2).mean() + eps).rsqrt()
        effective = direction * (weight if weight is not None else 1.0) * scale

        def contrib(vec: torch.Tensor, effective: torch.Tensor = effective) -> float:
            return float(vec @ effective)

        rows.append({"question_id": q.id, "layer": -1, "component": "embed", "contribution": contrib(cache["blocks.0.hook_resid_pre"][0, -1])})
        for layer in range(model.n_layers):
            pre = cache[f"blocks.{layer}.hook_resid_pre"][0, -1]
            mid = cache[f"blocks.{layer}.hook_resid_mid"][0, -1]
            post = cache[f"blocks.{layer}.hook_resid_post"][0, -1]
            rows.append({"question_id": q.id, "layer": layer, "component": "attn", "contribution": contrib(mid - pre)})
            rows.append({"question_id": q.id, "layer": layer, "component": "mlp", "contribution": contrib(post - mid)})
        rows.append(
            {
                "question_id": q.id,
                "layer": -1,
                "component": "total",
                "contribution": float(final[gold_tok] - final[default_tok]),
                "gold_token": model.tokenizer.decode([gold_tok]),
                "default_token": model.tokenizer.decode([default_tok]),
            }
        )
    return pd.DataFrame(rows)


def gold_batch(model: LensModel, questions: Sequence[Question], config: DeploymentConfig) -> Continuations:
    """Each question's rendered prompt followed by its gold answer's tokens, for teacher forcing."""
    prompts = [model.encode(config.prompt(q)) for q in questions]
    golds = [model.tokenizer(config.gold_continuation(q), add_special_tokens=False)["input_ids"] for q in questions]
    return continuations(model, prompts, golds)


def attribution_patching(
    model: LensModel,
    questions: Sequence[Question],
    config: DeploymentConfig,
    components: Sequence[str] = ("mlp",),
    ablations: dict[tuple[int, str, str], Ablation] | None = None,
    methods: Sequence[str] = ("zero",),
) -> pd.DataFrame:
    """Gradient x activation estimate of each ablation's effect on the mean gold log-probability.

    One forward and one backward pass over ``questions`` (clean model); the estimate for
    replacing activation ``a`` by ``r`` is ``sum((r - a) * dmetric/da)``, for every method: ``r``
    is what the ablation writes (:meth:`LensModel.replacement`). A method that takes reference
    prompts is estimated only where ``ablations`` gives its ablation with them.

    Returns:
        DataFrame (layer, component, method, atp_estimate).
    """
    batch = gold_batch(model, questions, config)
    sites: dict[tuple[int, str], torch.Tensor] = {}
    handles = []
    engine = model.engine

    def keep(key: tuple[int, str]) -> Callable[[torch.Tensor], None]:
        return lambda x: sites.__setitem__(key, x)

    for i in range(model.n_layers):
        for comp in components:
            if comp == "block":
                handles.append(engine.block_input(i).read(keep((i, "block_in"))))
                handles.append(engine.component(i, "block").read(keep((i, "block_out"))))
            else:
                handles.append(engine.component(i, comp).read(keep((i, comp))))
    try:
        with torch.enable_grad(), phase("teacher-forced"):  # the forward and its backward
            logits = model.forward_tokens(batch.input_ids, batch.attention_mask, logits_to_keep=batch.keep)
            metric = batch.logprobs(logits).sum(-1).mean()
            keys = list(sites)
            grads = dict(zip(keys, torch.autograd.grad(metric, [sites[k] for k in keys], allow_unused=True)))
    finally:
        for h in handles:
            h.remove()
    rows = []
    valid = batch.attention_mask.bool()[..., None]
    for i in range(model.n_layers):
        for comp in components:
            for method in methods:
                if comp == "block":
                    act = (sites[(i, "block_out")] - sites[(i, "block_in")]).detach()
                    grad = grads[(i, "block_out")]
                else:
                    act, grad = sites[(i, comp)].detach(), grads[(i, comp)]
                if grad is None:
                    continue
                ablation = (ablations or {}).get((i, comp, method)) or Ablation(i, comp, method)  # refused where it needs references
                replacement = model.replacement(ablation)(act)
                estimate = float((((replacement - act) * grad) * valid).sum())
                rows.append({"layer": i, "component": comp, "method": method, "atp_estimate": estimate})
    return pd.DataFrame(rows)
