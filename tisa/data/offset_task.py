"""A synthetic task that needs position precisely: copy the token d positions back.

Each sequence is ``[O_d, x_1, ..., x_{L-1}]``: a marker token naming the offset d (one of
``offsets``), then uniformly random content tokens. At every position t with t - d >= 1
the target is the content token at t - d; the other positions are not scored. A causal
model (position t sees tokens 0 .. t) solves it exactly by attending to the key at offset
k = -d (read which d from the marker), whatever the sequence length, so training at one
length and testing at a longer one measures whether a position scheme keeps that precise
offset beyond the training length. Content carries no information about positions, so a
model without positions cannot do better than chance (1 / vocabulary).

Token ids: ``0 .. len(offsets) - 1`` are the markers (in the order of ``offsets``), the
content tokens follow: ``len(offsets) .. len(offsets) + vocab_size - 1``.

Letters: B batch, L sequence length.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from tisa._validate import check_int

__all__ = ["offset_batch", "total_vocab"]


def total_vocab(vocab_size: int, offsets: Sequence[int]) -> int:
    """Ids the task uses: the markers plus the content tokens."""
    return len(offsets) + vocab_size


def offset_batch(
    *,
    batch_size: int,
    length: int,
    vocab_size: int,
    offsets: Sequence[int],
    generator: torch.Generator,
) -> tuple[Tensor, Tensor]:
    """A batch of the task: inputs and targets.

    Args:
        batch_size: B.
        length: L, tokens per sequence (marker included).
        vocab_size: content tokens to draw from (>= 2).
        offsets: the offsets d a sequence may ask for (each >= 1 and < L - 1, distinct);
            each sequence draws one uniformly.
        generator: the random generator (seeded by the caller: the batches are a pure
            function of it).

    Returns:
        (input_ids, labels), (B, L) long each: labels[b, t] is input_ids[b, t - d_b] where
        t - d_b >= 1, and -100 elsewhere.

    Raises:
        ValueError: bad sizes or offsets.
    """
    check_int(batch_size, "batch_size")
    check_int(length, "length", minimum=3)
    check_int(vocab_size, "vocab_size", minimum=2)
    offsets = [check_int(d, "offsets") for d in offsets]
    if not offsets or len(set(offsets)) != len(offsets):
        raise ValueError(f"offsets must be distinct and non-empty, got {offsets}")
    if max(offsets) >= length - 1:
        raise ValueError(f"offsets must be < length - 1 = {length - 1}, got {max(offsets)}")
    which = torch.randint(len(offsets), (batch_size,), generator=generator)  # (B,)
    content = torch.randint(vocab_size, (batch_size, length - 1), generator=generator)
    inputs = torch.cat([which[:, None], content + len(offsets)], dim=1)  # (B, L)
    d = torch.tensor(offsets)[which][:, None]  # (B, 1)
    t = torch.arange(length)[None, :]  # (1, L)
    source = (t - d).clamp(min=0)  # (B, L)
    labels = torch.where(t - d >= 1, inputs.gather(1, source), torch.full_like(inputs, -100))
    return inputs, labels
