"""The sdpa backend: PyTorch's fused scaled-dot-product attention with the bias as a float
mask built a block of query rows at a time, and its own backward
(:class:`_BiasedSDPA`) when the bias trains (see :mod:`tisa.attention`, "Backends").

Letters: B batch, H heads, Lq queries, Lk keys, D head size, N = Lq + Lk - 1 offsets,
R query rows of a block.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

from tisa import bias as bias_lib
from tisa.attention.masks import additive, causal_table, window_band, with_causal
from tisa.scoring.content import keys_exist


def sdpa(q, k, v, tab, mask, causal, dropout_p, scale, window=None, band_term=None) -> Tensor:
    lq, lk = q.shape[-2], k.shape[-2]
    add = additive(mask, q.dtype)
    grad = torch.is_grad_enabled()
    # A zero bias (zero amplitudes) adds nothing: then the unbiased kernel computes exactly
    # what attention without TISA computes, also while the amplitudes train.
    zero = tab is None or not bool(tab.detach().any())
    if band_term is not None:  # (see dispatch.attention) added block by block, never trains
        if causal:
            tab = causal_table(tab, lk)
        return _blocked_forward(q, k, v, tab, add, scale, dropout_p,
                                _block_plan(q, k, v, add), band_term=band_term)
    if zero and (tab is None or not (grad and tab.requires_grad)):
        return _plain_sdpa(q, k, v, add, causal, dropout_p, scale)
    if causal:
        tab = causal_table(tab, lk)
    trainable = grad and any(
        t.requires_grad for t in (q, k, v, tab) + (() if add is None else (add,))
    )
    plan = _block_plan(q, k, v, add)
    band = window_band(window, lq, lk, causal)  # the table's columns in any query's reach
    if not trainable:  # detached: a mask that requires grad would rule out the fused kernel
        return _blocked_forward(q, k, v, tab.detach(), add, scale, dropout_p, plan, band)
    if dropout_p == 0:  # a differentiable mask gets its gradient, dS, from the same blocks
        return _BiasedSDPA.apply(q, k, v, tab, add, scale, plan, causal if zero else None, band)
    # Training with dropout: the same blocks under autograd, which runs PyTorch's math
    # kernel per block (the fused one has no dropout on CPU); the table enters through a
    # view whose backward sums anti-diagonals.
    return _blocked_forward(q, k, v, tab, add, scale, dropout_p, plan, band)


def _plain_sdpa(q, k, v, add, causal, dropout_p, scale) -> Tensor:
    """SDPA without positional bias; ``add`` a 4-D additive mask or None."""
    lq, lk = q.shape[-2], k.shape[-2]
    if add is None and (not causal or lq == lk):
        return F.scaled_dot_product_attention(
            q, k, v, dropout_p=dropout_p, is_causal=causal, scale=scale
        )
    if causal:
        add = with_causal(add, lq, lk, q.dtype, q.device)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=add, dropout_p=dropout_p, scale=scale)


# Blocks of the sdpa path. A block is some batch elements, some heads and some query rows;
# its logits are (batch, heads, rows, Lk). Sizes come from the shapes (measured on a 2-core
# x86 CPU with 1 MiB of L2 per core, B=8, H=12, D=64; see docs/benchmarks.md):
# - rows: 4 * D, within [64, 512]: the inner dimension of the dk and dv products, which
#   run below the fused kernel's speed when it is small (backward at L=2048: 128 rows
#   1.25x of the fused SDPA backward, 256 rows 1.21x, at 3 heads per block);
# - heads, then batch elements, up to about _BLOCK_ELEMENTS logits per block, so that the
#   logits, probabilities and score gradients of a block stay in cache between the
#   elementwise passes (L=2048, 256 rows: 1, 3, 6 heads gave 1.16x, 1.21x, 1.24x) while a
#   small problem still runs in few blocks (each block costs about a dozen tensor ops).
_BLOCK_ELEMENTS = 1 << 19


class _Plan(NamedTuple):
    """Block sizes of the sdpa path: batch elements, heads and query rows per block."""

    batch: int
    heads: int
    rows: int


def _block_plan(q: Tensor, k: Tensor, v: Tensor, add: Tensor | None) -> _Plan:
    """Block sizes for the backward (and for a forward that adds a mask), from the shapes."""
    b, h, lq, d = q.shape
    lk = k.shape[-2]
    rows = min(lq, max(64, min(512, 4 * d)))
    heads = max(1, min(h, _BLOCK_ELEMENTS // (rows * lk)))
    batch = max(1, min(b, _BLOCK_ELEMENTS // (h * rows * lk))) if heads == h else 1
    return _Plan(batch, heads, rows)


#: logits of a forward block that adds a mask: its bias plus mask is written whole, then
#: read by one fused call
_MASK_BLOCK_ELEMENTS = 1 << 22


def _forward_plan(q: Tensor, k: Tensor, add: Tensor | None, plan: _Plan) -> _Plan:
    """Block sizes of the forward: without a mask the bias is a view and costs no memory,
    so one fused call takes all heads and rows of as many batch elements as keep the
    reversed copies of q and of the output near _BLOCK_ELEMENTS (at least one). With a
    mask, each block writes its bias plus mask: all heads, and as many rows (then batch
    elements) as keep that near _MASK_BLOCK_ELEMENTS. (The backward's blocks, one head of
    128 rows at 4,096 keys, made a forward with a dense mask 3-5x slower: many small fused
    calls, each with its own copies.)"""
    b, h, lq, d = q.shape
    if add is None:
        return _Plan(max(1, min(b, _BLOCK_ELEMENTS // (h * lq * d))), h, lq)
    lk = k.shape[-2]
    rows = max(1, min(lq, _MASK_BLOCK_ELEMENTS // (h * lk)))
    batch = max(1, min(b, _MASK_BLOCK_ELEMENTS // (h * rows * lk))) if rows == lq else 1
    return _Plan(batch, h, rows)


def _band_plan(q: Tensor, band: tuple[int, int], plan: _Plan) -> _Plan:
    """Block sizes of a forward over a band: query rows a quarter of the band's width
    (within [64, plan.rows]), so that a block reads its rows plus the band's width of keys,
    then heads and batch elements up to about _BLOCK_ELEMENTS logits, as in the backward."""
    b, h, lq, _ = q.shape
    reach = band[1] - band[0] + 1
    rows = min(lq, max(64, min(plan.rows, reach // 4)))
    keys = rows + reach - 1
    heads = max(1, min(h, _BLOCK_ELEMENTS // (rows * keys)))
    batch = max(1, min(b, _BLOCK_ELEMENTS // (h * rows * keys))) if heads == h else 1
    return _Plan(batch, heads, rows)


def _reachable(band: tuple[int, int], lq: int, lk: int, start: int, stop: int) -> slice:
    """The keys that some query row start..stop-1 reads a finite bias for: row qi reads
    table column j - qi + Lq - 1 at key j (see :mod:`tisa.bias`)."""
    first, last = band
    return slice(max(0, first + start - lq + 1), min(lk, last + stop - lq + 1))


def _blocks(plan: _Plan, b: int, h: int, lq: int):
    """Yields (batch slice, head slice, start row, stop row): query rows outermost, batch
    innermost, so that a block's table gradient is summed over the batch before it is
    reduced along anti-diagonals."""
    for start in range(0, lq, plan.rows):
        for h0 in range(0, h, plan.heads):
            for b0 in range(0, b, plan.batch):
                yield (
                    slice(b0, min(b, b0 + plan.batch)),
                    slice(h0, min(h, h0 + plan.heads)),
                    start,
                    min(lq, start + plan.rows),
                )


def _rows_reversed(t: Tensor, start: int, stop: int) -> Tensor:
    """Rows start..stop-1 of a (..., Lq | 1, Lk) tensor along its query axis, reversed."""
    if t.shape[-2] == 1:
        return t
    return t[..., start:stop, :].flip(-2)


def _sub(t: Tensor, bs: slice, hs: slice) -> Tensor:
    """The batch and head slices of a 4-D mask whose first two axes may be broadcast."""
    return t[bs if t.shape[0] > 1 else slice(None), hs if t.shape[1] > 1 else slice(None)]


def _blocked_forward(q, k, v, tab, add, scale, dropout_p, plan, band=None,
                     band_term=None) -> Tensor:
    """Biased SDPA, one fused call per block; the block's bias is a view of the table.

    The view reads the block's rows in reverse order (a Toeplitz block read with
    non-negative strides is a Hankel block), so the block's queries are reversed to match
    and its output rows reversed back; this costs one copy of q and of the output in all.
    With ``band`` (:func:`~tisa.attention.masks.window_band`: the table is -inf outside
    those columns, an attention window) the rows are read in blocks that see only the keys
    the band lets them reach: the work is O(Lq * band) instead of O(Lq * Lk), and the
    result the same (a masked key has probability 0). With ``band_term`` (B | 1, H, Lq, W),
    or a :class:`~tisa.scoring.content.ClippedBand`, each block's bias is written once with
    the band's rows (and the clipped term's sides) added (:func:`_with_band`).
    """
    b, h, lq, _ = q.shape
    lk = k.shape[-2]
    masked = add if band_term is None else _band_of(band_term)
    plan = _forward_plan(q, k, masked, plan) if band is None else _band_plan(q, band, plan)
    # (B, Lq, H, D) storage seen as (B, H, Lq, D), the layout SDPA returns: a model that
    # transposes the output back and calls .contiguous() (as Hugging Face models do) then
    # copies nothing (2% of the forward at L = 512, measured with q, k, v in that layout)
    out = q.new_empty(b, lq, h, v.shape[-1]).transpose(1, 2)
    for bs, hs, start, stop in _blocks(plan, b, h, lq):
        keys = slice(None) if band is None else _reachable(band, lq, lk, start, stop)
        if keys.start is not None and keys.start >= keys.stop:  # no key in reach
            out[bs, hs, start:stop] = 0.0
            continue
        attn_mask = bias_lib.reversed_rows(tab[hs], lq, lk, start, stop)[None][..., keys]
        added = None if add is None else _rows_reversed(_sub(add, bs, hs), start, stop)
        if band_term is not None:
            attn_mask = _with_band(attn_mask, added, _sub_band(band_term, bs, hs), lq, start,
                                   stop)
        elif added is not None:
            attn_mask = attn_mask + added[..., keys]
        block = F.scaled_dot_product_attention(
            q[bs, hs, start:stop].flip(2),
            k[bs, hs, keys],
            v[bs, hs, keys],
            attn_mask=attn_mask,
            dropout_p=dropout_p,
            scale=scale,
        )
        # back in original row order: flipping the block while it is still in cache and
        # copying it was faster than index_copy_ in a side-by-side timing at L = 512
        out[bs, hs, start:stop] = block.flip(2)
    return out


def _band_of(band_term) -> Tensor:
    """The band (B | 1, H, Lq, W) of a band term: the tensor itself, or a ClippedBand's."""
    return band_term if isinstance(band_term, Tensor) else band_term.band


def _sub_band(band_term, bs: slice, hs: slice):
    """:func:`_sub` of a band term, each tensor of a ClippedBand sliced alike."""
    if isinstance(band_term, Tensor):
        return _sub(band_term, bs, hs)
    return type(band_term)(*(_sub(t, bs, hs) for t in band_term))


def _with_band(bias: Tensor, added: Tensor | None, band_term, lq: int, start: int,
               stop: int) -> Tensor:
    """A block's mask, its rows reversed: ``bias`` (1, h, R, Lk), plus ``added`` (its mask
    rows, or None), plus rows start..stop-1 of ``band_term`` (B | 1, h, Lq, W) on their
    diagonals, written into one new (nb, h, R, Lk) tensor. A
    :class:`~tisa.scoring.content.ClippedBand` also adds its sides off the band.

    Reversed row r is query stop - 1 - r, at position p = Lk - Lq + stop - 1 - r; its band
    column m is key p + m - K, at flat index r * (Lk - 1) + (Lk - Lq + stop - 1) + m of a
    storage with K spare elements before the block. Along r that is a stride of Lk - 1, so
    the band is one strided view (its elements distinct while Lk > W) and one in-place add.
    Band columns of keys that do not exist are set to 0 first; they land on a neighbouring
    row or a spare element, which they leave unchanged.
    """
    sides = None if isinstance(band_term, Tensor) else band_term
    band_term = _band_of(band_term)
    nb = max(band_term.shape[0], 1 if added is None else added.shape[0])  # sides: the band's
    h, rows, lk = bias.shape[1], stop - start, bias.shape[-1]
    width = band_term.shape[-1]
    n = nb * h * rows * lk
    flat = bias.new_empty(n + width - 1)
    out = flat[width // 2 : width // 2 + n].view(nb, h, rows, lk)
    if sides is not None and added is None:
        # the sides written, then the bias added: one pass over the block fewer than
        # copying the bias and adding the sides
        sides.write_sides(out, start, stop)
        out.add_(bias)
    else:
        if added is None:
            out.copy_(bias.expand_as(out))
        else:
            torch.add(bias, added, out=out)
        if sides is not None:
            sides.add_sides(out, start, stop)
    diagonals = flat.as_strided((nb, h, rows, width), (h * rows * lk, rows * lk, lk - 1, 1),
                                lk - lq + stop - 1)
    band = band_term[..., start:stop, :].flip(-2)
    first = lk - lq + start - width // 2  # the key of the block's first query's column 0
    if first < 0 or first + rows + width - 1 > lk:  # zero the columns of absent keys
        exist = keys_exist(lq, lk, width, band.device, start, stop).flip(0)
        band = band.masked_fill(~exist, 0.0)
    diagonals.add_(band.expand(nb, h, rows, width))
    return out


def _dead_rows(tab: Tensor, add: Tensor | None, lq: int, lk: int) -> Tensor | None:
    """Query rows whose keys are all masked (-inf), or None when there are none.

    Returns a bool tensor broadcastable to (B, H, Lq, 1). Found from the table and the mask
    alone, never from the logits: q . k is finite, so a row is masked out exactly when
    F + M is -inf on all its keys.
    """
    keep_tab = ~torch.isneginf(tab)  # (H, N)
    if add is None:
        # row qi reads columns Lq-1-qi .. Lq-1-qi+Lk-1: count the kept ones with a cumsum
        csum = F.pad(keep_tab.cumsum(-1), (1, 0))
        first = torch.arange(lq - 1, -1, -1, device=tab.device)
        dead = (csum[:, first + lk] - csum[:, first]) == 0  # (H, Lq)
        dead = dead[None, :, :, None]
    elif bool(keep_tab.all()):
        dead = torch.isneginf(add).all(-1, keepdim=True)  # (B|1, H|1, Lq|1, 1)
    elif bool(keep_tab[:, :lk].all()) and not bool(keep_tab[:, lk:].any()):
        # a causal table: row qi sees the kept keys j <= its position Lk - Lq + qi
        kept = (~torch.isneginf(add)).cumsum(-1)  # (B|1, H|1, Lq|1, Lk)
        pos = torch.arange(lk - lq, lk, device=tab.device)
        if kept.shape[-2] == 1:
            dead = (kept[..., 0, pos] == 0)[..., None]
        else:
            index = pos.view(lq, 1).expand(*kept.shape[:-1], 1)
            dead = kept.gather(-1, index) == 0
    else:
        # both can mask: combine them a block of query rows at a time
        keep = ~torch.isneginf(add)  # (B|1, H|1, Lq|1, Lk)
        dead = torch.zeros(keep.shape[0], tab.shape[0], lq, 1, dtype=torch.bool, device=tab.device)
        step = max(1, _BLOCK_ELEMENTS // (keep.shape[0] * tab.shape[0] * lk))
        for start in range(0, lq, step):
            stop = min(lq, start + step)
            rows = bias_lib.reversed_rows(keep_tab, lq, lk, start, stop).flip(1)  # (H, R, Lk)
            kept = keep[..., start:stop, :] if keep.shape[-2] > 1 else keep
            dead[:, :, start:stop] = ~(kept & rows).any(-1, keepdim=True)
    return dead if bool(dead.any()) else None


class _BiasedSDPA(torch.autograd.Function):
    """Fused SDPA forward; backward that also trains the bias table (and the mask, when
    it requires grad: its gradient is dS, summed over the axes it is broadcast along).

    Backward, per block (P recomputed; O the forward output, dO its gradient):
        P  = softmax(q k^T * scale + F + M)       (0 on rows masked out entirely)
        dv += P^T dO
        dP = dO v^T
        dS = P * (dP - rowsum(dO * O))
        dq = dS k * scale,  dk += dS^T q * scale,  dtable += antidiagonal_sums(sum_b dS)
    The block's query rows are reversed, as in the forward, so that F is a view of the
    table (added by the first matrix product itself); its adjoint is the anti-diagonal
    sum, taken once per block of rows and heads after summing dS over the batch.
    """

    @staticmethod
    def forward(ctx, q, k, v, tab, add, scale, plan, zero_causal, band):
        # a view of a table (or a mask) that requires grad also requires grad, even here,
        # and SDPA would then leave its fused kernel for the math one
        fixed = None if add is None else add.detach()
        if zero_causal is None:
            out = _blocked_forward(q, k, v, tab.detach(), fixed, scale, 0.0, plan, band)
        else:  # the table is zero (but trains): the unbiased kernel, causal or not
            out = _plain_sdpa(q, k, v, fixed, zero_causal, 0.0, scale)
        ctx.save_for_backward(q, k, v, out, tab, add)
        ctx.scale, ctx.plan, ctx.band = scale, plan, band
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, out, tab, add = ctx.saved_tensors
        tab = tab.detach()
        b, h, lq, d = q.shape
        lk = k.shape[-2]
        dead = _dead_rows(tab, add, lq, lk)
        band = ctx.band
        # Gradients in the layout of their inputs: for q, k, v that are transposed views of
        # (B, L, H, D) (a Hugging Face layer's) autograd then passes them on without a copy.
        # dk and dv are written by the first block of rows of each batch element and head,
        # and added to by the others (no zero fill); under a window each block adds to the
        # keys in its reach only, so they start at zero.
        dq = torch.empty_like(q)
        dk, dv = (torch.empty_like(t) if band is None else torch.zeros_like(t) for t in (k, v))
        dtab = torch.zeros(h, tab.shape[-1], dtype=torch.float32, device=q.device)
        # Two (n, R, K) buffers for every block (logits then dS; probabilities; K the keys
        # a block reads), allocated once: fresh ones per block went back to the system and
        # were faulted in again (about a sixth of the backward at L = 512, B = 8, one thread).
        plan = ctx.plan if band is None else _band_plan(q, band, ctx.plan)
        width = lk if band is None else min(lk, plan.rows + band[1] - band[0])
        size = min(b, plan.batch) * min(h, plan.heads) * min(lq, plan.rows) * width
        work = (q.new_empty(size), q.new_empty(size))
        acc = None
        # the mask's gradient, dS, in full: every block writes its rows (under a window
        # only the keys in reach, so the others start at 0)
        dadd = None
        if add is not None and ctx.needs_input_grad[4]:
            dadd = (q.new_empty if band is None else q.new_zeros)(b, h, lq, lk)
        for bs, hs, start, stop in _blocks(plan, b, h, lq):
            keys = slice(0, lk) if band is None else _reachable(band, lq, lk, start, stop)
            if bs.start == 0:  # a new block of rows and heads: sum dS over the batch here
                acc = torch.zeros(
                    hs.stop - hs.start, stop - start, keys.stop - keys.start, device=q.device
                )
            block = _Block(bs, hs, start, stop, keys)
            _backward_block(
                q, k, v, out, grad_out, tab, add, dead, ctx.scale, block, dq, dk, dv, acc, work,
                dadd,
            )
            if bs.stop == b:
                # table column of the block's anti-diagonal 0 (its first key's, reversed row 0)
                first = lq - stop + keys.start
                span = acc.shape[1] + acc.shape[2] - 1
                dtab[hs, first : first + span] += bias_lib.antidiagonal_sums(acc)
        if dadd is not None:
            dadd = dadd.sum_to_size(add.shape)
        return dq, dk, dv, dtab.to(tab.dtype), dadd, None, None, None, None


class _Block(NamedTuple):
    """A block of the sdpa path: batch elements, heads, query rows start..stop-1, and the
    keys it reads (all, or those in reach of an attention window)."""

    batch: slice
    heads: slice
    start: int
    stop: int
    keys: slice


def _merged(t: Tensor, n: int) -> Tensor:
    """(nb, g, L, D) as (nb * g, L, D): a view where the strides allow, else a copy."""
    return t.reshape(n, t.shape[-2], t.shape[-1])


def _backward_block(
    q, k, v, out, grad_out, tab, add, dead, scale, block, dq, dk, dv, acc, work, dadd=None
) -> None:
    """One block of :class:`_BiasedSDPA`'s backward: writes dq's rows, adds to dk, dv, acc
    (writes dk, dv in the first block of rows), and writes the block's dS into ``dadd``
    (B, H, Lq, Lk) when given.

    Works on n = nb * heads matrices of (R, K), K the block's keys (all Lk, or those an
    attention window lets its rows reach). The bias view is the first product's input (no
    extra pass over the logits), broadcast over the batch elements when there are several
    (small problems, all heads). q, k, v may be strided (a transposed layout): the
    products read them as they are, and only the block's rows are copied.
    """
    bs, hs, start, stop, keys = block
    lq, lk = q.shape[-2], k.shape[-2]
    nb, g, rows = bs.stop - bs.start, hs.stop - hs.start, stop - start
    n = nb * g
    view = bias_lib.reversed_rows(tab[hs], lq, lk, start, stop)[..., keys]  # (g, R, K)
    lk = keys.stop - keys.start  # from here on: the block's keys
    qb = q[bs, hs, start:stop].flip(2).reshape(n, rows, -1)  # rows reversed like the view
    gb = grad_out[bs, hs, start:stop].flip(2)  # (nb, g, R, Dv)
    # rowsum(dO * O) of the block's rows, reversed like them, in float32 at least: (nb, g, R, 1)
    wide = torch.promote_types(q.dtype, torch.float32)
    ob = out[bs, hs, start:stop].flip(2)
    delta = (gb.to(wide) * ob.to(wide)).sum(-1, keepdim=True).to(q.dtype)
    gb = gb.reshape(n, rows, -1)
    kb, vb = _merged(k[bs, hs, keys], n), _merged(v[bs, hs, keys], n)  # (n, K, D | Dv)
    logits, probs = (w[: n * rows * lk].view(n, rows, lk) for w in work)  # (n, R, Lk)
    if nb == 1:
        torch.baddbmm(view, qb, kb.transpose(1, 2), alpha=scale, out=logits)
    else:  # the view broadcast over the batch into the product's input: one pass, as above
        logits.view(nb, g, rows, lk).copy_(view)
        logits.baddbmm_(qb, kb.transpose(1, 2), alpha=scale)
    if add is not None:
        logits.view(nb, g, rows, lk).add_(
            _rows_reversed(_sub(add, bs, hs), start, stop)[..., keys])
    if dead is not None:
        dead = _rows_reversed(_sub(dead, bs, hs), start, stop)
        logits.view(nb, g, rows, lk).masked_fill_(dead, 0.0)  # no NaN from an all -inf row
    torch.softmax(logits, dim=-1, out=probs)
    if dead is not None:
        probs.view(nb, g, rows, lk).masked_fill_(dead, 0.0)
    first = start == 0 and lk == k.shape[-2]  # a window's blocks add to zeros
    _add_product(dv[bs, hs, keys], probs.transpose(1, 2), gb, first)  # dv += P^T dO
    dscores = torch.bmm(gb, vb.transpose(1, 2), out=logits)  # dP (n, R, Lk), over the logits
    dscores.view(nb, g, rows, lk).sub_(delta)
    dscores.mul_(probs)  # dS
    acc.add_(dscores if nb == 1 else dscores.view(nb, g, rows, lk).sum(0))
    if dadd is not None:  # the mask's gradient: dS, rows back in order
        dadd[bs, hs, start:stop, keys] = dscores.view(nb, g, rows, lk).flip(2)
    dq[bs, hs, start:stop] = torch.bmm(dscores, kb).view(nb, g, rows, -1).flip(2).mul_(scale)
    _add_product(dk[bs, hs, keys], dscores.transpose(1, 2), qb, first, scale)  # dk += dS^T q


def _add_product(t: Tensor, a: Tensor, b: Tensor, first: bool, alpha: float = 1.0) -> None:
    """``t += alpha * a @ b`` (``t = ...`` when ``first``) for t (nb, g, Lk, D), a
    (n, Lk, R) and b (n, R, D), n = nb * g: in place by the product itself where t's batch
    and head axes merge into one (one batch element, or a contiguous t), else through a
    temporary (several batch elements of a transposed layout)."""
    try:
        merged = t.view(a.shape[0], t.shape[-2], t.shape[-1])
    except RuntimeError:
        update = torch.bmm(a, b).view(t.shape)
        if first:
            torch.mul(update, alpha, out=t)
        else:
            t.add_(update, alpha=alpha)
    else:
        merged.baddbmm_(a, b, beta=0.0 if first else 1.0, alpha=alpha)
