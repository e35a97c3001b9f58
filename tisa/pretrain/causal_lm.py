"""Causal language models for pretraining: a GPT-2-style decoder of a named size.

``tisa pretrain --arch gpt2`` trains one of these with next-token loss on the same corpus
and tokenizer as the masked LMs, with the same sizes and position schemes
(:mod:`tisa.pretrain.schemes`, built by :func:`tisa.pretrain.build.build_model` through
:func:`tisa.hf.add_tisa`, which supports GPT-2). The model is the stock
``GPT2LMHeadModel`` (pre-LayerNorm blocks, learned absolute positions ``wpe``, tied input
and output embeddings); only its config is chosen
(:func:`tisa.pretrain.build.build_causal_config`). Length extrapolation of such runs is
the next-token loss at each length (:func:`next_token_loss`, used by
``tisa extrapolate``).

Letters: B batch, L sequence length, V vocabulary.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor
from transformers import AutoModelForCausalLM, PreTrainedModel

from tisa.hf.architectures import CAUSAL_MODEL_TYPES
from tisa.hf.loading import load_pretrained  # also registers TISA models with the Auto classes

__all__ = [
    "CAUSAL_MODEL_TYPES",
    "is_causal_model_dir",
    "load_causal_lm",
    "next_token_loss",
]


def next_token_loss(model: PreTrainedModel, input_ids: Tensor) -> tuple[Tensor, int]:
    """Mean next-token cross-entropy of (B, L) blocks, and the number of predictions.

    Position t predicts token t + 1, so each block gives L - 1 predictions, all counted
    (the first tokens of a block are predicted from a short context, as in ALiBi's
    non-overlapping evaluation). The loss is computed in float32.

    Returns:
        (loss, B * (L - 1)); the loss is a 0-d tensor.

    Raises:
        ValueError: ``input_ids`` not (B, L) with L >= 2.
    """
    if input_ids.dim() != 2 or input_ids.shape[1] < 2:
        raise ValueError(
            f"input_ids must have shape (B, L) with L >= 2, got {tuple(input_ids.shape)}"
        )
    logits = model(input_ids=input_ids).logits  # (B, L, V)
    pred = logits[:, :-1].reshape(-1, logits.shape[-1]).float()  # (B*(L-1), V)
    target = input_ids[:, 1:].reshape(-1)  # (B*(L-1),)
    return F.cross_entropy(pred, target), int(target.numel())


def is_causal_model_dir(path: str | os.PathLike[str]) -> bool:
    """Whether the saved model in ``path`` (its ``config.json``) is a causal LM here."""
    config = Path(path) / "config.json"
    if not config.is_file():
        return False
    try:
        model_type = json.loads(config.read_text()).get("model_type")
    except json.JSONDecodeError:
        return False
    return model_type in CAUSAL_MODEL_TYPES


def load_causal_lm(path: str | os.PathLike[str], *, device: str | torch.device = "cpu"):
    """Loads a saved GPT-2 causal LM (stock or TISA) for evaluation, in eval mode.

    Raises:
        ValueError: ``path`` holds no loadable causal LM.
    """
    model = load_pretrained(AutoModelForCausalLM, str(path))
    return model.to(device).eval()
