"""The eager backend: the attention formula written out with matmul and softmax.

Readable on its own and the oracle the tests compare every other backend with:

    out = softmax(q k^T * scale + F + M) v,     F[h, i, j] = f_h(j - i)

Letters: B batch, H heads, Lq queries, Lk keys, D head size, Dv value size.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from tisa import bias as bias_lib
from tisa.attention.masks import NEG_INF, additive, causal_keep, masked_softmax


def eager(q, k, v, tab, mask, causal, dropout_p, scale) -> tuple[Tensor, Tensor]:
    """The formula written out; returns the output and the attention probabilities."""
    lq, lk = q.shape[-2], k.shape[-2]
    scores = torch.matmul(q, k.transpose(-1, -2)) * scale  # (B, H, Lq, Lk)
    if tab is not None:
        scores = scores + bias_lib.expand(tab, lq, lk)  # + (H, Lq, Lk)
    add = additive(mask, q.dtype)
    if add is not None:
        scores = scores + add
    if causal:
        scores = scores.masked_fill(~causal_keep(lq, lk, q.device), NEG_INF)
    probs = masked_softmax(scores.float()).to(q.dtype)
    if dropout_p > 0:
        probs = F.dropout(probs, p=dropout_p)
    return torch.matmul(probs, v), probs  # (B, H, Lq, Dv), (B, H, Lq, Lk)
