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
the positional table itself stays as cheap as before. Both modes compute the term on its
band of 2K + 1 diagonals (O(Lq * K)) and lay it into the dense matrix; the backward reads
the band back out of the gradient. With ``"zero"`` the rest of the matrix is zero; with
``"clip"`` it is a row constant plus a column constant on each side of the band (q_i . rk
and k_j . rq, both at offset -K left of it and +K right of it), filled by broadcast adds
in blocks of rows, whose backward is the gradient's row and column sums: elementwise
passes over Lq x Lk, no gathers or scatter-adds over it. When nothing trains,
:meth:`RelativeContent.band` gives the term without its matrix (the band, and with
``"clip"`` the sides' constants, :class:`ClippedBand`), and
:func:`tisa.attention.attention` (``band_term``) adds it to the sdpa backend's blocks of
query rows: no (B, H, Lq, Lk) term at all.

Letters: B batch, H heads, Lq queries, Lk keys, D head size, K the largest offset kept.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor, nn

from tisa._validate import check_int

__all__ = ["BEYOND", "ClippedBand", "RelativeContent", "band_to_dense", "to_dense"]

#: what offsets beyond +-K read: the vectors of +-K, or no term
BEYOND = ("clip", "zero")


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
        rk, rq = self._vectors(q, k)
        return _band_term(q, k, rk, rq, scale, clip=self.beyond == "clip")

    def band(self, q: Tensor, k: Tensor, scale: float) -> Tensor | ClippedBand:
        """The whole term without its (B, H, Lq, Lk) matrix. With ``beyond="zero"``, its
        band (B, H, Lq, 2K + 1): column m the logit of the key at offset m - K from each
        query, 0 where that key does not exist. With ``beyond="clip"``, a
        :class:`ClippedBand`: that band and the two sides' row and column constants.
        :func:`to_dense` lays either into the (B, H, Lq, Lk) term;
        :func:`tisa.attention.attention` takes either as ``band_term`` and adds it without
        building that term (in blocks of query rows, on the sdpa backend)."""
        rk, rq = self._vectors(q, k)
        band, by_query, by_key = _band(q, k, rk, rq, scale)
        band = band * keys_exist(q.shape[-2], k.shape[-2], band.shape[-1], q.device).to(
            band.dtype)
        if self.beyond == "zero":
            return band
        return ClippedBand(band, by_query[..., _ENDS] * scale, by_key[..., _ENDS] * scale)

    def _vectors(self, q: Tensor, k: Tensor) -> tuple[Tensor, Tensor]:
        """Checks q and k; the key and query vectors in their dtypes."""
        if q.dim() != 4 or k.dim() != 4 or q.shape[1] != self.num_heads or (
            q.shape[-1] != self.head_dim or k.shape[1] != self.num_heads
            or k.shape[-1] != self.head_dim
        ):
            raise ValueError(
                f"RelativeContent: q and k must be (B, {self.num_heads}, L, {self.head_dim}), "
                f"got {tuple(q.shape)} and {tuple(k.shape)}"
            )
        if q.shape[-2] > k.shape[-2]:
            raise ValueError(
                f"RelativeContent: more queries ({q.shape[-2]}) than keys ({k.shape[-2]}); "
                "the queries are the last of the keys' positions"
            )
        return self.key_vectors.to(q.dtype), self.query_vectors.to(k.dtype)

    def extra_repr(self) -> str:
        return (f"num_heads={self.num_heads}, head_dim={self.head_dim}, "
                f"max_offset={self.max_offset}, beyond={self.beyond!r}")


def _band_term(q: Tensor, k: Tensor, rk: Tensor, rq: Tensor, scale: float,
               clip: bool = False) -> Tensor:
    """The term built from its band: (B, H, Lq, Lk).

    Query i (at position s = Lk - Lq + i) meets key s + m - K in column m of the band,
    m = 0 .. 2K: q_i . rk[m] + k_(s + m - K) . rq[m], both (B, H, Lq, 2K + 1). The band is
    then laid along the diagonals of the (Lq, Lk) term. Beyond the band the term is 0, or
    with ``clip`` q_i . rk[0] + k_j . rq[0] left of it (offsets below -K) and
    q_i . rk[2K] + k_j . rq[2K] right of it. The backward reads the band back out of the
    term's gradient, where gathers of the clipped index would need scatter-adds over
    (Lq, Lk).
    """
    band, by_query, by_key = _band(q, k, rk, rq, scale)
    if not clip:
        return band_to_dense(band, k.shape[-2])
    return _ClippedToDense.apply(band, by_query[..., _ENDS] * scale, by_key[..., _ENDS] * scale)


#: the band columns of offsets -K and +K, whose products the clipped term's sides read
_ENDS = [0, -1]


class ClippedBand(NamedTuple):
    """A clipped content term (``beyond="clip"``) without its (B, H, Lq, Lk) matrix: on
    the band, ``band`` (B | 1, H, Lq, 2K + 1) as for ``"zero"``; off it, for query i and
    key j on side e (0 for offsets below -K, 1 above +K), by_query[i, e] + by_key[j, e],
    from ``by_query`` (B | 1, H, Lq, 2) and ``by_key`` (B | 1, H, Lk, 2)."""

    band: Tensor
    by_query: Tensor
    by_key: Tensor

    def add_sides(self, out: Tensor, start: int, stop: int) -> None:
        """Adds the sides to ``out`` (B', H, R, Lk), rows start..stop-1 of the term in
        reverse order (row r is query stop - 1 - r), in place; the band's columns are
        left as they are. B' is the sides' batch, or larger when theirs is 1. In blocks of
        rows as :class:`_ClippedToDense` writes them."""
        self._sides(out, start, stop, accumulate=True)

    def write_sides(self, out: Tensor, start: int, stop: int) -> None:
        """As :meth:`add_sides`, but writes the sides into ``out`` instead of adding them:
        every element of ``out`` is set (0 on the band), so ``out`` may hold anything
        before. B' must be the sides' batch."""
        self._sides(out, start, stop, accumulate=False)

    def _sides(self, out: Tensor, start: int, stop: int, accumulate: bool) -> None:
        lq, lk = self.by_query.shape[-2], self.by_key.shape[-2]
        margin = self.band.shape[-1] // 2
        for rows, c0, c1, offset in _row_blocks(lq, lk, margin, out.device, start, stop):
            block = out[..., stop - rows.stop : stop - rows.start, :]  # rows reversed
            _sides_into(block, self.by_query[..., rows, :].flip(-2), self.by_key, c0, c1,
                        offset.flip(0), margin, accumulate=accumulate)


def to_dense(term: Tensor | ClippedBand, lk: int) -> Tensor:
    """A content term given by :meth:`RelativeContent.band` as its (B | 1, H, Lq, Lk)
    matrix (differentiable). A :class:`ClippedBand` knows its Lk (its ``by_key``); ``lk``
    must agree with it."""
    if isinstance(term, ClippedBand) and term.by_key.shape[-2] != lk:
        raise ValueError(f"to_dense: lk={lk}, but the ClippedBand has "
                         f"{term.by_key.shape[-2]} keys")
    if isinstance(term, ClippedBand):
        return _ClippedToDense.apply(*term)
    return band_to_dense(term, lk)


def _band(q: Tensor, k: Tensor, rk: Tensor, rq: Tensor, scale: float):
    """The band (B, H, Lq, 2K + 1) (what keys that do not exist get is left as it falls),
    and the products it is made of: by_query (B, H, Lq, 2K + 1), by_key (B, H, Lk, 2K + 1)."""
    by_query = torch.matmul(q, rk.transpose(-1, -2))
    by_key = torch.matmul(k, rq.transpose(-1, -2))
    return (by_query + _KeyDiagonals.apply(by_key, q.shape[-2])) * scale, by_query, by_key


def band_to_dense(band: Tensor, lk: int) -> Tensor:
    """A band of logits (B | 1, H | 1, Lq, W), column m for the key at offset m - (W - 1) / 2
    from each query (queries at the last Lq of Lk positions), laid into a (B | 1, H | 1, Lq,
    Lk) matrix that is 0 off the band; what the band holds for keys that do not exist is
    dropped. Differentiable (its backward reads the band back out of the gradient)."""
    return _BandToDense.apply(band, lk)


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
        return _band_of(grad, ctx.width), None


class _ClippedToDense(torch.autograd.Function):
    """The clipped term from its band (B, H, Lq, W) and its edges: ``by_query`` (B, H, Lq, 2)
    and ``by_key`` (B, H, Lk, 2), column 0 for offsets below -K and column 1 for offsets
    above +K. Row i, column j is band[i, j - s + K] on the band and by_query[i, e] +
    by_key[j, e] off it, e the side. The adjoint: the band gathered back, each edge the
    gradient summed over its side's columns (for queries) or rows (for keys).

    Both directions go in blocks of rows: left of a block's strip every key is on the left
    side for all its rows, right of it on the right side, so those parts are plain
    broadcast adds (forward) and plain sums (backward); only the strip around the band,
    (rows + 2K) wide, needs the side masks. The dense term is written once, and its
    gradient read twice (its row and column sums)."""

    @staticmethod
    def forward(ctx, band: Tensor, by_query: Tensor, by_key: Tensor) -> Tensor:
        b, h, lq, width = band.shape
        lk = by_key.shape[-2]
        margin = width // 2
        ctx.width = width
        laid = band.new_empty(b, h, lq, lk + width - 1)
        term = laid[..., margin : margin + lk]
        for rows, c0, c1, offset in _row_blocks(lq, lk, margin, band.device):
            _sides_into(term[..., rows, :], by_query[..., rows, :], by_key, c0, c1, offset,
                        margin, accumulate=False)
        _diagonals(laid, lq, width, lk - lq).copy_(band)
        return term

    @staticmethod
    def backward(ctx, grad: Tensor):
        b, h, lq, lk = grad.shape
        by_query = grad.new_zeros(b, h, lq, 2)
        by_key = grad.new_zeros(b, h, lk, 2)
        margin = ctx.width // 2
        for rows, c0, c1, offset in _row_blocks(lq, lk, margin, grad.device):
            before, after = grad[..., rows, :c0], grad[..., rows, c1:]
            by_query[..., rows, 0] = before.sum(-1)
            by_query[..., rows, 1] = after.sum(-1)
            by_key[..., :c0, 0] += before.sum(-2)
            by_key[..., c1:, 1] += after.sum(-2)
            strip = grad[..., rows, c0:c1]
            for e, side in ((0, offset < -margin), (1, offset > margin)):
                part = torch.where(side, strip, 0)
                by_query[..., rows, e] += part.sum(-1)
                by_key[..., c0:c1, e] += part.sum(-2)
        return _band_of(grad, ctx.width), by_query, by_key


#: rows per block of :class:`_ClippedToDense`
_BLOCK = 64


def _sides_into(block: Tensor, sides: Tensor, by_key: Tensor, c0: int, c1: int,
                offset: Tensor, margin: int, accumulate: bool) -> None:
    """Writes (or with ``accumulate`` adds) the clipped term's sides into a block of rows
    (B', H, R, Lk): sides[r, e] + by_key[j, e] for key j on side e of row r's band, from
    ``sides`` (B | 1, H, R, 2) and ``by_key`` (B | 1, H, Lk, 2). Keys before c0 are left
    of every row's band, keys from c1 on right of it; the strip between uses ``offset``
    (R, c1 - c0), j minus the row's position. On the band the strip gets 0 (written) or
    nothing (added)."""
    for cols, e in ((slice(None, c0), 0), (slice(c1, None), 1)):
        if accumulate:
            block[..., cols].add_(sides[..., e : e + 1]).add_(by_key[..., None, cols, e])
        else:
            torch.add(sides[..., e : e + 1], by_key[..., None, cols, e], out=block[..., cols])
    strip = torch.where(offset < -margin, sides[..., 0:1] + by_key[..., None, c0:c1, 0],
                        torch.where(offset > margin,
                                    sides[..., 1:2] + by_key[..., None, c0:c1, 1], 0))
    if accumulate:
        block[..., c0:c1].add_(strip)
    else:
        block[..., c0:c1] = strip


def _row_blocks(lq: int, lk: int, margin: int, device, start: int = 0, stop: int | None = None):
    """For each block of at most ``_BLOCK`` query rows (of rows start..stop-1, default
    all): the rows (a slice), the strip of keys [c0, c1) where the block's rows are on
    different sides of their bands, and the strip's offsets j - s (rows, c1 - c0): left of
    the band below -K, right of it above K."""
    stop = lq if stop is None else stop
    for r0 in range(start, stop, _BLOCK):
        r1 = min(r0 + _BLOCK, stop)
        first, last = lk - lq + r0, lk - lq + r1 - 1  # positions of the block's queries
        c0 = min(max(first - margin, 0), lk)
        c1 = min(max(last + margin + 1, c0), lk)
        offset = (torch.arange(c0, c1, device=device)[None, :]
                  - torch.arange(first, last + 1, device=device)[:, None])
        yield slice(r0, r1), c0, c1, offset


def _band_of(grad: Tensor, width: int) -> Tensor:
    """The (B, H, Lq, W) band read straight out of a (B, H, Lq, Lk) gradient: key s + m - K
    of row i, 0 where that key does not exist (an O(Lq * K) gather, no pass over the
    gradient)."""
    b, h, lq, lk = grad.shape
    band = grad.gather(-1, _band_keys(lq, lk, width, grad.device).clamp(0, lk - 1).expand(
        b, h, lq, width))
    return band * keys_exist(lq, lk, width, grad.device).to(band.dtype)


def _band_keys(lq: int, lk: int, width: int, device, start: int = 0,
               stop: int | None = None) -> Tensor:
    """(R, W) long for queries start..stop-1 (default all Lq): the key of band column m
    for query i, s + m - K (s = Lk - Lq + i)."""
    stop = lq if stop is None else stop
    return torch.arange(lk - lq + start, lk - lq + stop, device=device)[:, None] + torch.arange(
        -(width // 2), width // 2 + 1, device=device)


def keys_exist(lq: int, lk: int, width: int, device, start: int = 0,
               stop: int | None = None) -> Tensor:
    """(R, W) bool for queries start..stop-1 (default all Lq) of a band of width W: band
    column m of query i is a key that exists."""
    key = _band_keys(lq, lk, width, device, start, stop)
    return (key >= 0) & (key < lk)


def _diagonals(laid: Tensor, lq: int, width: int, start: int) -> Tensor:
    """The (B, H, Lq, W) view of a contiguous (B, H, Lq, C) tensor whose row i, column m
    is its element (i, start + i + m)."""
    b, h, _, cols = laid.shape
    return laid.as_strided((b, h, lq, width), (h * lq * cols, lq * cols, cols + 1, 1), start)
