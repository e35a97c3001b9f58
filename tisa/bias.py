"""Toeplitz bias tables: evaluate f_h once per distinct offset, expand only when needed.

For Lq queries and Lk keys the bias F[h, i, j] = f_h(j - i) takes only Lq + Lk - 1
distinct values per head. We evaluate the scoring function on those offsets once, into an
``(H, Lq + Lk - 1)`` *table* (O(H*L) work and memory), and expand it into the dense
``(H, Lq, Lk)`` matrix only for backends that need one.

Positions: keys sit at 0 .. Lk-1 and queries at the *last* Lq positions,
Lk-Lq .. Lk-1, which is what a key/value cache during generation looks like (and plain
self-attention when Lq == Lk). Column ``t`` of a table holds offset ``t - (Lk - 1)``, so
query row ``qi`` (0-based among the Lq queries) and key ``j`` read column
``j - qi + Lq - 1``.

Rows of the dense bias can also be read straight out of the table, without a copy: a
Toeplitz matrix has strides of opposite sign along its two axes, so with non-negative
strides the view is its row-reversed (Hankel) form, :func:`reversed_rows`. Backends that
work on blocks of query rows use it with the queries of the block reversed; its adjoint is
:func:`antidiagonal_sums`.

Letters: H heads, Lq queries, Lk keys, N = Lq + Lk - 1 distinct offsets, R rows of a block.
"""

from __future__ import annotations

import torch
from torch import Tensor

from tisa.scoring import ScoringFunction

__all__ = [
    "antidiagonal_sums",
    "diagonal_sums",
    "expand",
    "offsets",
    "reversed_rows",
    "table",
    "table_index",
    "toeplitz_projection",
]


def offsets(lq: int, lk: int, device: torch.device | str | None = None) -> Tensor:
    """The Lq + Lk - 1 distinct offsets k = j - i in table order: -(Lk-1) .. Lq-1."""
    _check_lengths(lq, lk)
    return torch.arange(-(lk - 1), lq, device=device)


def table(scorer: ScoringFunction, lq: int, lk: int | None = None) -> Tensor:
    """Evaluates ``scorer`` on every distinct offset: (H, Lq + Lk - 1).

    Args:
        scorer: any :class:`~tisa.scoring.ScoringFunction`.
        lq: number of queries (the last ``lq`` of the ``lk`` positions).
        lk: number of keys; defaults to ``lq`` (plain self-attention).
    """
    lk = lq if lk is None else lk
    device = next(iter(scorer.parameters()), None)
    device = device.device if device is not None else _buffer_device(scorer)
    return scorer(offsets(lq, lk, device=device))


def table_index(lq: int, lk: int, device: torch.device | str | None = None) -> Tensor:
    """(Lq, Lk) long tensor of table columns: ``table[:, table_index(lq, lk)]`` expands."""
    _check_lengths(lq, lk)
    q = torch.arange(lq, device=device)[:, None]
    k = torch.arange(lk, device=device)[None, :]
    return k - q + (lq - 1)


def expand(tab: Tensor, lq: int, lk: int) -> Tensor:
    """Expands an (H, Lq + Lk - 1) table into the dense Toeplitz bias (H, Lq, Lk).

    ``out[h, qi, j] = tab[h, j - qi + Lq - 1]``. Built from a strided view (no index
    tensor), so it costs one copy of the output; its gradient sums the incoming gradient
    along each diagonal (:func:`diagonal_sums`).
    """
    if tab.dim() != 2 or tab.shape[-1] != lq + lk - 1:
        raise ValueError(
            f"table must have shape (H, Lq + Lk - 1) = (H, {lq + lk - 1}), got {tuple(tab.shape)}"
        )
    return _Expand.apply(tab, lq, lk)


def diagonal_sums(grad: Tensor) -> Tensor:
    """Sums a (..., Lq, Lk) tensor along its diagonals: (..., Lq + Lk - 1).

    Column t of the result is the sum of entries with ``j - qi + Lq - 1 == t``; this is
    the adjoint of :func:`expand` (the gradient of a Toeplitz bias w.r.t. its table).
    Uses the skew trick: flip the rows, pad every row by Lq, and re-read the flat buffer
    with row length N so each diagonal lines up in one column. O(Lq * N) work, no index
    tensors, no scatter.
    """
    lq, lk = grad.shape[-2], grad.shape[-1]
    n = lq + lk - 1
    lead = grad.shape[:-2]
    g = grad.flip(-2)
    g = torch.nn.functional.pad(g, (0, lq))  # (..., Lq, Lk + Lq) = (..., Lq, N + 1)
    g = g.reshape(*lead, lq * (n + 1))[..., : lq * n].reshape(*lead, lq, n)
    return g.sum(-2)


def reversed_rows(tab: Tensor, lq: int, lk: int, start: int = 0, stop: int | None = None) -> Tensor:
    """Query rows ``start .. stop-1`` of the dense bias in reverse order, as a view of the table.

    ``out[h, r, j] = expand(tab, lq, lk)[h, stop - 1 - r, j] = tab[h, j + r + Lq - stop]``:
    (H, R, Lk) with R = stop - start, strides (N, 1, 1) for a contiguous table. No memory
    is allocated; the rows overlap in storage, so the view must not be written to.

    Args:
        tab: (H, Lq + Lk - 1) table.
        lq: number of queries the table was built for.
        lk: number of keys.
        start: first query row of the block.
        stop: one past the last query row (default ``lq``).
    """
    stop = lq if stop is None else stop
    if tab.dim() != 2 or tab.shape[-1] != lq + lk - 1:
        raise ValueError(
            f"table must have shape (H, Lq + Lk - 1) = (H, {lq + lk - 1}), got {tuple(tab.shape)}"
        )
    if not 0 <= start < stop <= lq:
        raise ValueError(f"rows must satisfy 0 <= start < stop <= Lq = {lq}, got {start}, {stop}")
    if tab.requires_grad and torch.is_grad_enabled():
        return _ReversedRows.apply(tab, lq, lk, start, stop)
    return _reversed_rows_view(tab, lq, lk, start, stop)


def antidiagonal_sums(grad: Tensor) -> Tensor:
    """Sums a (..., R, Lk) tensor along its anti-diagonals: (..., R + Lk - 1).

    Column t of the result is the sum of the entries with ``r + j == t``: the adjoint of
    :func:`reversed_rows` (the gradient of the reversed-row view w.r.t. the table columns it
    reads, starting at column ``Lq - stop``). Skew trick as in :func:`diagonal_sums`: pad
    every row by R, and re-read the flat buffer with rows one shorter, so each
    anti-diagonal lines up in one column.
    """
    rows, lk = grad.shape[-2], grad.shape[-1]
    n = rows + lk - 1
    lead = grad.shape[:-2]
    g = torch.nn.functional.pad(grad, (0, rows))  # (..., R, Lk + R) = (..., R, N + 1)
    g = g.reshape(*lead, rows * (n + 1))[..., : rows * n].reshape(*lead, rows, n)
    return g.sum(-2)


def toeplitz_projection(matrix: Tensor) -> Tensor:
    """Least-squares Toeplitz approximation of (..., Lq, Lk): each diagonal -> its mean."""
    lq, lk = matrix.shape[-2], matrix.shape[-1]
    sums = diagonal_sums(matrix)
    counts = diagonal_sums(torch.ones(lq, lk, dtype=matrix.dtype, device=matrix.device))
    means = sums / counts
    if means.dim() == 1:
        return expand(means[None], lq, lk)[0]
    flat = means.reshape(-1, lq + lk - 1)
    return expand(flat, lq, lk).reshape(matrix.shape)


class _Expand(torch.autograd.Function):
    """Dense Toeplitz expansion with a diagonal-sum backward (faster than unfold's)."""

    @staticmethod
    def forward(ctx, tab: Tensor, lq: int, lk: int) -> Tensor:
        ctx.lq, ctx.lk = lq, lk
        # rev[h, m] = tab[h, N-1-m];  view[h, qi, j'] = rev[h, qi + j'];  j = Lk-1-j'
        rev = tab.flip(-1)
        return rev.unfold(-1, lk, 1).flip(-1).contiguous()

    @staticmethod
    def backward(ctx, grad: Tensor):
        return diagonal_sums(grad), None, None


def _reversed_rows_view(tab: Tensor, lq: int, lk: int, start: int, stop: int) -> Tensor:
    s_h, s_t = tab.stride()
    offset = tab.storage_offset() + (lq - stop) * s_t
    return tab.as_strided((tab.shape[0], stop - start, lk), (s_h, s_t, s_t), offset)


class _ReversedRows(torch.autograd.Function):
    """The reversed-row view with an anti-diagonal-sum backward (autograd's generic
    ``as_strided`` backward would scatter element by element into the overlapping storage)."""

    @staticmethod
    def forward(ctx, tab: Tensor, lq: int, lk: int, start: int, stop: int) -> Tensor:
        ctx.n, ctx.first = tab.shape[-1], lq - stop
        return _reversed_rows_view(tab, lq, lk, start, stop)

    @staticmethod
    def backward(ctx, grad: Tensor):
        sums = antidiagonal_sums(grad)  # (H, R + Lk - 1)
        dtab = grad.new_zeros(grad.shape[0], ctx.n)
        dtab[:, ctx.first : ctx.first + sums.shape[-1]] = sums
        return dtab, None, None, None, None


def _check_lengths(lq: int, lk: int) -> None:
    if lq < 1 or lk < 1:
        raise ValueError(f"lengths must be >= 1, got Lq={lq}, Lk={lk}")
    if lq > lk:
        raise ValueError(
            f"Lq ({lq}) must not exceed Lk ({lk}): queries are the last Lq of the Lk key positions"
        )


def _buffer_device(module: torch.nn.Module) -> torch.device:
    for b in module.buffers():
        return b.device
    return torch.device("cpu")
