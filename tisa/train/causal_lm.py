"""Causal language models for pretraining: a GPT-2-style decoder of a named size.

``tisa pretrain --arch gpt2`` trains one of these with next-token loss on the same corpus
and tokenizer as the masked LMs, with the same sizes (:data:`tisa.train.masked_lm.SIZES`)
and position schemes (:func:`tisa.train.masked_lm.apply_position_scheme`, through
:func:`tisa.hf.add_tisa`, which supports GPT-2). The model is the stock
``GPT2LMHeadModel`` (pre-LayerNorm blocks, learned absolute positions ``wpe``, tied input
and output embeddings); only its config is chosen here. Length extrapolation of such runs
is the next-token loss at each length (:func:`next_token_loss`, used by
``tisa extrapolate``).

Letters: B batch, L sequence length, V vocabulary.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from transformers import GPT2Config, PreTrainedModel

from tisa._validate import check_int

__all__ = [
    "CAUSAL_MODEL_TYPES",
    "build_causal_config",
    "is_causal_model_dir",
    "load_causal_lm",
    "next_token_loss",
]

#: ``config.model_type`` of the causal LMs this module builds and loads.
CAUSAL_MODEL_TYPES: tuple[str, ...] = ("gpt2", "tisa_gpt2")


def build_causal_config(
    *,
    size: str = "small",
    vocab_size: int = 30000,
    max_positions: int = 512,
    pad_token_id: int = 0,
    **overrides: Any,
) -> GPT2Config:
    """GPT-2 config of a named size (hidden size, layers, heads and feed-forward width of
    :data:`tisa.train.masked_lm.SIZES`).

    No dropout (as the ALBERT masked LMs, so the two settings differ in their objective and
    attention direction, not in regularisation); the tanh-approximated GELU of GPT-2
    (``gelu_new``) computed by the fused ``gelu_pytorch_tanh``.

    Args:
        size: one of :data:`tisa.train.masked_lm.SIZES`.
        vocab_size: V, from the tokenizer.
        max_positions: rows of the absolute position table ``wpe`` (``n_positions``).
        pad_token_id: the tokenizer's padding id.
        **overrides: any other config field (``bos_token_id``, ``n_layer``, ...).

    Raises:
        ValueError: unknown size, or a non-positive vocab_size / max_positions.
    """
    from tisa.train.masked_lm import SIZES

    if size not in SIZES:
        raise ValueError(f"size must be one of {tuple(SIZES)}, got {size!r}")
    check_int(vocab_size, "vocab_size")
    check_int(max_positions, "max_positions")
    s = SIZES[size]
    params: dict[str, Any] = dict(
        vocab_size=vocab_size,
        n_embd=s.hidden_size,
        n_layer=s.num_layers,
        n_head=s.num_heads,
        n_inner=s.intermediate_size,
        n_positions=max_positions,
        activation_function="gelu_pytorch_tanh",
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        pad_token_id=pad_token_id,
    )
    params.update(overrides)
    return GPT2Config(**params)


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
    from transformers import AutoModelForCausalLM

    import tisa.hf  # noqa: F401  (registers TISA models with the Auto classes)
    from tisa.analysis.loading import load_pretrained

    model = load_pretrained(AutoModelForCausalLM, str(path))
    return model.to(device).eval()
