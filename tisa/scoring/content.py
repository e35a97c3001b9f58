"""Relative content terms: attention logits that depend on a token's content and on the
offset j - i, next to the positional scoring function f_h(j - i).

A scoring function gives every query the same bias for a key k tokens away. In a model
trained with an absolute position table, how far a query looks also depends on what the
query is (its content meets the keys' positions in q . k), and f_h cannot carry that part.
:class:`RelativeContent` adds it back in translation-invariant form, the content-to-position
term of Shaw et al. (2018) and the content-to-position and position-to-content terms of
DeBERTa (He et al., 2021), with one learned vector per head and clipped offset::

    logit[b, h, i, j] += scale * (q[b, h, i] . rk[h, c(j - i)] + k[b, h, j] . rq[h, c(j - i)])
    c(d) = clamp(d, -K, K)

Both depend on the two tokens' contents and on j - i only, so the model stays translation
invariant and reads any length. What offsets beyond +-K get is ``beyond``: ``"clip"``
(Shaw et al.'s choice) reads the vectors of +-K there, so every distant key gets the same
content-dependent term, whose total weight grows with the number of distant keys; ``"zero"``
gives them no term, so the term acts on the 2K + 1 keys around each query alone, whatever
the input length. The vectors start at zero, so adding the term leaves a model's outputs
unchanged until it trains.

Cost: the term is a dense (B, H, Lq, Lk) float added to the attention mask (two gathers
from (B, H, L, 2K + 1) products), so attention takes the backends' float-mask path and the
memory of one Lq x Lk logit matrix per head; the positional table itself stays as cheap as
before.

Letters: B batch, H heads, Lq queries, Lk keys, D head size, K the largest offset kept.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from tisa._validate import check_int

__all__ = ["BEYOND", "RelativeContent", "clipped_offset_index"]

#: what offsets beyond +-K read: the vectors of +-K, or no term
BEYOND = ("clip", "zero")


def clipped_offset_index(
    lq: int, lk: int, max_offset: int, device=None, beyond: str = "clip"
) -> Tensor:
    """(Lq, Lk) long: the row of offset j - i for query i at position Lk - Lq + i (the
    queries are the last Lq of the Lk keys, as everywhere in :mod:`tisa.attention`):
    clamp(j - i, -K, K) + K; with ``beyond="zero"`` offsets beyond +-K read row 2K + 1
    instead (the zero row)."""
    queries = torch.arange(lk - lq, lk, device=device)[:, None]
    keys = torch.arange(lk, device=device)[None, :]
    offset = keys - queries
    index = offset.clamp(-max_offset, max_offset) + max_offset
    if beyond == "zero":
        index = index.masked_fill(offset.abs() > max_offset, 2 * max_offset + 1)
    return index


class RelativeContent(nn.Module):
    """Content-to-position and position-to-content logits over offsets clipped to +-K.

    Args:
        num_heads: H.
        head_dim: D, the size of each head's queries and keys.
        max_offset: K >= 1.
        beyond: what offsets beyond +-K read: ``"clip"`` the vectors of +-K, ``"zero"``
            no term.

    Parameters ``key_vectors`` (rk) and ``query_vectors`` (rq), each (H, 2K + 1, D), row
    K + d for offset d, zero at the start.
    """

    def __init__(
        self, num_heads: int, head_dim: int, max_offset: int, beyond: str = "clip"
    ) -> None:
        super().__init__()
        check_int(num_heads, "num_heads")
        check_int(head_dim, "head_dim")
        check_int(max_offset, "content_offsets")
        if beyond not in BEYOND:
            raise ValueError(f"content_beyond must be one of {BEYOND}, got {beyond!r}")
        self.num_heads, self.head_dim, self.max_offset = num_heads, head_dim, max_offset
        self.beyond = beyond
        shape = (num_heads, 2 * max_offset + 1, head_dim)
        self.key_vectors = nn.Parameter(torch.zeros(shape))
        self.query_vectors = nn.Parameter(torch.zeros(shape))

    def config(self) -> dict[str, int | str]:
        return {"num_heads": self.num_heads, "head_dim": self.head_dim,
                "max_offset": self.max_offset, "beyond": self.beyond}

    def num_positional_parameters(self) -> int:
        return self.key_vectors.numel() + self.query_vectors.numel()

    def reset_parameters(self) -> None:
        with torch.no_grad():
            self.key_vectors.zero_()
            self.query_vectors.zero_()

    def forward(self, q: Tensor, k: Tensor, scale: float) -> Tensor:
        """The term for queries q (B, H, Lq, D) and keys k (B, H, Lk, D): (B, H, Lq, Lk),
        in q's dtype."""
        if q.dim() != 4 or k.dim() != 4 or q.shape[1] != self.num_heads or (
            q.shape[-1] != self.head_dim or k.shape[1] != self.num_heads
            or k.shape[-1] != self.head_dim
        ):
            raise ValueError(
                f"RelativeContent: q and k must be (B, {self.num_heads}, L, {self.head_dim}), "
                f"got {tuple(q.shape)} and {tuple(k.shape)}"
            )
        b, h, lq, _ = q.shape
        lk = k.shape[-2]
        index = clipped_offset_index(lq, lk, self.max_offset, q.device, self.beyond)  # (Lq, Lk)
        rk = self.key_vectors.to(q.dtype)
        rq = self.query_vectors.to(k.dtype)
        if self.beyond == "zero":  # row 2K + 1: no term
            rk = torch.cat([rk, rk.new_zeros(h, 1, self.head_dim)], dim=1)
            rq = torch.cat([rq, rq.new_zeros(h, 1, self.head_dim)], dim=1)
        # query i with each offset's key vector, then each (i, j) reads its offset's column
        by_query = torch.matmul(q, rk.transpose(-1, -2))  # (B, H, Lq, 2K + 1)
        c2p = by_query.gather(-1, index.expand(b, h, lq, lk))
        # key j with each offset's query vector; (j, i) reads column j - i
        by_key = torch.matmul(k, rq.transpose(-1, -2))  # (B, H, Lk, 2K + 1)
        p2c = by_key.gather(-1, index.t().expand(b, h, lk, lq)).transpose(-1, -2)
        return (c2p + p2c) * scale

    def extra_repr(self) -> str:
        return (f"num_heads={self.num_heads}, head_dim={self.head_dim}, "
                f"max_offset={self.max_offset}, beyond={self.beyond!r}")
