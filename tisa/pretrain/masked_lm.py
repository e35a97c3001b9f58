"""Masked-LM models for pretraining: a masked-only MLM head, and loading saved masked LMs.

The masked-LM loss only looks at the ~15% of positions that were masked, yet the stock
``AlbertForMaskedLM`` / ``BertForMaskedLM`` project *every* position onto the full
vocabulary (a (B, L, V) logit tensor, V = 30000) before the loss throws 85% of it away.
:class:`AlbertForMaskedOnlyLM` and :class:`BertForMaskedOnlyLM` gather the masked
positions (``labels != -100``) first and run the prediction head on those rows only. Their
weights, configs and ``save_pretrained`` / ``from_pretrained`` are those of the stock
classes (they add no parameters), so a saved model reloads with
``AutoModelForMaskedLM`` and the loss is the same number (see the tests).

Named sizes and position schemes: :mod:`tisa.pretrain.schemes`; building a model of
either kind (ALBERT, BERT, GPT-2): :mod:`tisa.pretrain.build`.

Letters: B batch, L sequence length, D hidden size, E embedding size, V vocabulary,
N number of masked positions in the batch.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from transformers import AlbertForMaskedLM, AutoModelForMaskedLM, BertForMaskedLM, PreTrainedModel
from transformers.modeling_outputs import MaskedLMOutput

from tisa.hf.loading import load_pretrained  # also registers TISA models with the Auto classes

__all__ = [
    "MASKED_LM_CLASSES",
    "AlbertForMaskedOnlyLM",
    "BertForMaskedOnlyLM",
    "load_masked_lm",
    "masked_lm_forward",
    "mlm_parts",
]


class _MaskedOnlyMixin:
    """forward() that runs the vocabulary projection on masked positions only."""

    # The loss is a mean over this micro-batch's masked tokens; the Trainer scales it for
    # gradient accumulation itself (no ``num_items_in_batch`` handling here).
    accepts_loss_kwargs = False

    def forward(
        self,
        input_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        position_ids: Tensor | None = None,
        inputs_embeds: Tensor | None = None,
        labels: Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
    ) -> MaskedLMOutput:
        """Masked-LM forward pass.

        Args:
            input_ids: (B, L) token ids (or ``inputs_embeds`` (B, L, E)).
            attention_mask: optional (B, L), 1 for real tokens.
            token_type_ids: optional (B, L).
            position_ids: optional (B, L) or (1, L).
            inputs_embeds: optional (B, L, E) instead of ``input_ids``.
            labels: optional (B, L) target ids, -100 where no loss is computed.
            output_attentions: also return attention weights.
            output_hidden_states: also return hidden states.

        Returns:
            ``MaskedLMOutput``. With ``labels``: ``loss`` is the mean cross-entropy over
            the N masked positions (exactly the stock model's loss) and ``logits`` is
            (N, V), one row per masked position in row-major (batch, position) order,
            i.e. aligned with ``labels[labels != -100]``. Without ``labels``: ``logits``
            is the full (B, L, V) tensor, as in the stock model.
        """
        return masked_lm_forward(
            self,
            labels=labels,
            input_ids=input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
        )


class AlbertForMaskedOnlyLM(_MaskedOnlyMixin, AlbertForMaskedLM):
    """``AlbertForMaskedLM`` whose loss projects only the masked positions onto V."""


class BertForMaskedOnlyLM(_MaskedOnlyMixin, BertForMaskedLM):
    """``BertForMaskedLM`` whose loss projects only the masked positions onto V."""


MASKED_LM_CLASSES: dict[str, type[PreTrainedModel]] = {
    "albert": AlbertForMaskedOnlyLM,
    "bert": BertForMaskedOnlyLM,
}


def mlm_parts(model: nn.Module) -> tuple[nn.Module, nn.Module] | None:
    """(encoder, MLM head) of an ALBERT- or BERT-style masked LM, or None if not found.

    The head maps (..., D) hidden states to (..., V) logits: ``model.predictions`` for
    ALBERT, ``model.cls`` for BERT (and models derived from them).
    """
    base = getattr(model, "base_model", None)
    for name in ("predictions", "cls"):
        head = getattr(model, name, None)
        if isinstance(head, nn.Module) and base is not None and base is not model:
            return base, head
    return None


def masked_lm_forward(
    model: nn.Module, *, labels: Tensor | None = None, **inputs: Any
) -> MaskedLMOutput:
    """Masked-LM loss of any ALBERT/BERT-style model, projecting masked positions only.

    Works on the stock classes too (used to evaluate models reloaded with
    ``AutoModelForMaskedLM``). Models without a recognisable head fall back to their own
    forward.

    Args:
        model: an ALBERT- or BERT-style masked LM.
        labels: (B, L) targets with -100 at unmasked positions, or None.
        **inputs: encoder inputs (``input_ids`` (B, L), ``attention_mask``, ...).

    Returns:
        ``MaskedLMOutput`` as described in :meth:`_MaskedOnlyMixin.forward`. When no
        position is masked the loss is 0 (connected to the graph), not NaN.
    """
    inputs = {k: v for k, v in inputs.items() if v is not None}
    parts = mlm_parts(model)
    if parts is None:  # unknown layout: the model's own (full-vocabulary) forward
        return model(labels=labels, **inputs)
    encoder, head = parts
    out = encoder(**inputs, return_dict=True)
    hidden = out.last_hidden_state  # (B, L, D)
    if labels is None:
        logits = head(hidden)  # (B, L, V)
        return MaskedLMOutput(
            logits=logits, hidden_states=out.hidden_states, attentions=out.attentions
        )
    selected = (labels != -100).reshape(-1)  # (B*L,)
    index = selected.nonzero().squeeze(-1)  # (N,)
    rows = hidden.reshape(-1, hidden.shape[-1]).index_select(0, index)  # (N, D)
    targets = labels.reshape(-1).index_select(0, index)  # (N,)
    logits = head(rows)  # (N, V)
    if index.numel() == 0:
        loss = logits.sum() * 0.0
    else:
        loss = F.cross_entropy(logits.float(), targets)
    return MaskedLMOutput(
        loss=loss, logits=logits, hidden_states=out.hidden_states, attentions=out.attentions
    )


def load_masked_lm(path: str, *, device: str | torch.device = "cpu") -> PreTrainedModel:
    """Loads a saved masked LM (stock or TISA) for evaluation, in eval mode.

    TISA models load through the Auto classes (:mod:`tisa.hf` registers them). Use
    :func:`masked_lm_forward` on the result to score masked positions only.

    Raises:
        ValueError: ``path`` holds no loadable model.
    """
    model = load_pretrained(AutoModelForMaskedLM, str(path))
    return model.to(device).eval()
