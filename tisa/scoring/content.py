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

Cost: the term is a dense (B, H, Lq, Lk) float added to the attention mask, so attention
takes the backends' float-mask path and the memory of one Lq x Lk logit matrix per head;
the positional table itself stays as cheap as before. With ``"clip"`` the term is two
gathers from (B, H, L, 2K + 1) products (their backward: scatter-adds over Lq x Lk); with
``"zero"`` it is computed on its band of 2K + 1 diagonals and laid into a zero matrix,
and its backward reads the band back out of the gradient, so everything but that zero
fill and copy is O(Lq * K).

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
        rk = self.key_vectors.to(q.dtype)
        rq = self.query_vectors.to(k.dtype)
        if self.beyond == "zero":
            return _band_term(q, k, rk, rq, scale)
        index = clipped_offset_index(lq, lk, self.max_offset, q.device, self.beyond)  # (Lq, Lk)
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


def _band_term(q: Tensor, k: Tensor, rk: Tensor, rq: Tensor, scale: float) -> Tensor:
    """The term with no term beyond +-K, built from its band: (B, H, Lq, Lk).

    Query i (at position s = Lk - Lq + i) meets key s + m - K in column m of the band,
    m = 0 .. 2K: q_i . rk[m] + k_(s + m - K) . rq[m], both (B, H, Lq, 2K + 1). The band is
    then laid along the diagonals of the (Lq, Lk) term. Everything but the term's zero
    fill is O(Lq * K), and the backward reads the band back out of the term's gradient,
    where the gathers of the clipped term need scatter-adds over (Lq, Lk).
    """
    by_query = torch.matmul(q, rk.transpose(-1, -2))  # (B, H, Lq, 2K + 1)
    by_key = _KeyDiagonals.apply(torch.matmul(k, rq.transpose(-1, -2)), q.shape[-2])
    return _BandToDense.apply((by_query + by_key) * scale, k.shape[-2])


class _KeyDiagonals(torch.autograd.Function):
    """(B, H, Lk, W) -> (B, H, Lq, W): row i, column m reads key row s + m - K (s = Lk - Lq
    + i, K = (W - 1) / 2), or 0 where that key does not exist. A strided view of the rows
    with K zero rows above and below; its adjoint writes the gradient back the same way."""

    @staticmethod
    def forward(ctx, by_key: Tensor, lq: int) -> Tensor:
        b, h, lk, width = by_key.shape
        margin = width // 2
        padded = by_key.new_zeros(b, h, lk + 2 * margin, width)
        padded[:, :, margin : margin + lk] = by_key
        ctx.shape = by_key.shape
        return _key_diagonals(padded, lq, lk).contiguous()

    @staticmethod
    def backward(ctx, grad: Tensor):
        b, h, lk, width = ctx.shape
        margin = width // 2
        padded = grad.new_zeros(b, h, lk + 2 * margin, width)
        _key_diagonals(padded, grad.shape[-2], lk).copy_(grad)
        return padded[:, :, margin : margin + lk], None


def _key_diagonals(padded: Tensor, lq: int, lk: int) -> Tensor:
    """The (B, H, Lq, W) view of a contiguous (B, H, Lk + 2K, W) tensor whose row i,
    column m is its element (Lk - Lq + i + m, m): query i's key s + m - K, K rows of margin
    above it."""
    b, h, rows, width = padded.shape
    plane = rows * width
    return padded.as_strided(
        (b, h, lq, width), (h * plane, plane, width, width + 1), (lk - lq) * width
    )


class _BandToDense(torch.autograd.Function):
    """(B, H, Lq, W) band -> (B, H, Lq, Lk) with row i, column s + m - K = band[i, m]
    (s = Lk - Lq + i, K = (W - 1) / 2) and 0 elsewhere. Written along the diagonals of a
    (Lq, Lk + 2K) tensor whose K margin columns on each side take the keys that do not
    exist; the term is its middle Lk columns (a view). The adjoint gathers the band back."""

    @staticmethod
    def forward(ctx, band: Tensor, lk: int) -> Tensor:
        b, h, lq, width = band.shape
        ctx.width = width
        laid = band.new_zeros(b, h, lq, lk + width - 1)
        _diagonals(laid, lq, width, lk - lq).copy_(band)
        return laid[..., width // 2 : width // 2 + lk]

    @staticmethod
    def backward(ctx, grad: Tensor):
        b, h, lq, lk = grad.shape
        width = ctx.width
        # the band read straight out of the gradient: key s + m - K of row i, 0 where that
        # key does not exist (an O(Lq * K) gather, no pass over the (Lq, Lk) gradient)
        key = torch.arange(lk - lq, lk, device=grad.device)[:, None] + torch.arange(
            -(width // 2), width // 2 + 1, device=grad.device)
        inside = (key >= 0) & (key < lk)  # (Lq, W)
        band = grad.gather(-1, key.clamp(0, lk - 1).expand(b, h, lq, width))
        return band * inside.to(band.dtype), None


def _diagonals(laid: Tensor, lq: int, width: int, start: int) -> Tensor:
    """The (B, H, Lq, W) view of a contiguous (B, H, Lq, C) tensor whose row i, column m
    is its element (i, start + i + m)."""
    b, h, _, cols = laid.shape
    return laid.as_strided((b, h, lq, width), (h * lq * cols, lq * cols, cols + 1, 1), start)
