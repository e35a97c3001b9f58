"""Offset profiles of the attention logits a model computes on real text.

For every layer and head, the logits of blocks of real text are centred per query row
(adding a constant to a row does not change its softmax, so only differences within a row
carry information), averaged over the blocks, and projected onto Toeplitz matrices: the
mean along each diagonal, a function of the offset k = j - i. Content varies from block to
block and averages out; what stays is the part of the logits that depends on where the
tokens are, plus whatever text statistics make depend on distance (adjacent words are
related in any text). Comparing the profile of a model with its position table and of the
same model without it isolates the first (see :mod:`tisa.convert.convert`).

The first and last token of each block ([CLS] and [SEP] for BERT-style models) are left
out: attention to them is about which token they are, not where.

Letters: B blocks, L block length, Y layers, H heads, K = 2 (L - 2) - 1 interior offsets.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from tisa._validate import check_int
from tisa.hf.attention_fn import eager_attention
from tisa.metrics import offset_profile, translation_invariance

__all__ = ["AttentionProfiles", "attention_profiles", "row_centred_batches"]


@dataclass(frozen=True)
class AttentionProfiles:
    """Per layer and head: the Toeplitz profile of row-centred attention logits.

    Attributes:
        offsets: (K,) offsets k = j - i.
        mean: (Y, H, K) diagonal means of the block-averaged, row-centred logits.
        count: (K,) entries on each diagonal (the least-squares weights).
        ti: (Y, H) translation invariance of the block-averaged matrices.
        length: L, tokens per block (with the two special tokens).
    """

    offsets: Tensor
    mean: Tensor
    count: Tensor
    ti: Tensor
    length: int


@torch.no_grad()
def row_centred_batches(model: nn.Module, blocks: Tensor, *, batch_size: int = 4):
    """Per batch of ``blocks``, per layer, the row-centred logits (b, H, L-2, L-2) float64,
    the first and last token left out (see the module docstring).

    The logits are recovered from the attention probabilities the model returns with
    ``output_attentions=True`` (log p = logit - logsumexp(row); row-centring removes the
    second term), so the model runs an implementation that returns them (``eager`` or
    ``tisa_eager``; this function switches to it and back).
    """
    check_int(batch_size, "batch_size")
    base = getattr(model, "base_model", model)
    was_training = base.training
    base.eval()
    try:
        with eager_attention(base):
            for s in range(0, blocks.shape[0], batch_size):
                batch = blocks[s : s + batch_size].to(next(base.parameters()).device)
                out = base(input_ids=batch, output_attentions=True)
                logs = []
                for probs in out.attentions:  # (b, H, L, L) per layer
                    inner = probs[:, :, 1:-1, 1:-1].double().clamp_min(1e-38).log()
                    logs.append(inner - inner.mean(-1, keepdim=True))
                yield logs
    finally:
        base.train(was_training)


@torch.no_grad()
def attention_profiles(
    model: nn.Module, blocks: Tensor, *, batch_size: int = 4, layers: Sequence[int] | None = None
) -> AttentionProfiles:
    """Offset profiles of ``model``'s attention logits on ``blocks`` (see the module doc).

    The logits are recovered from the attention probabilities the model returns with
    ``output_attentions=True`` (log p = logit - logsumexp(row); row-centring removes the
    second term), so the model must run an implementation that returns them (``eager``
    or ``tisa_eager``; this function switches to it and back).

    Args:
        model: a Hugging Face encoder (any head; the base model is run).
        blocks: (B, L) token ids without padding (:func:`tisa.data.text_blocks.text_blocks`).
        batch_size: blocks per forward pass.
        layers: which layers to keep (default all).

    Returns:
        :class:`AttentionProfiles` (float64).
    """
    if blocks.dim() != 2 or blocks.shape[1] < 4:
        raise ValueError(f"blocks must be (B, L) with L >= 4, got {tuple(blocks.shape)}")
    total: list[Tensor] | None = None
    for logs in row_centred_batches(model, blocks, batch_size=batch_size):
        sums = [x.sum(0) for x in logs]  # (H, L-2, L-2) per layer
        total = sums if total is None else [t + x for t, x in zip(total, sums)]
    assert total is not None
    keep = range(len(total)) if layers is None else layers
    matrices = torch.stack([total[i] / blocks.shape[0] for i in keep])  # (Y, H, L-2, L-2)
    prof = offset_profile(matrices)
    return AttentionProfiles(
        offsets=prof.offsets,
        mean=prof.mean,
        count=prof.count,
        ti=translation_invariance(matrices),
        length=int(blocks.shape[1]),
    )
