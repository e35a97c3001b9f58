"""Scaled dot-product attention with a translation-invariant positional bias.

    out = softmax(q k^T * scale + F + M) v,     F[h, i, j] = f_h(j - i)

where F is a Toeplitz bias from a positional scoring function (see :mod:`tisa.scoring`,
:mod:`tisa.bias`) and M the padding / causal mask. A scoring function that is not
translation invariant (``translation_invariant = False``: FIRE's query normaliser) gives
its whole (H, Lq, Lk) bias instead (:meth:`~tisa.scoring.ScoringFunction.position_bias`),
which is added to M: the backends then see a float mask (trainable: ``"auto"`` picks
``"eager"`` for training).

Letters: B batch, H heads, Lq queries, Lk keys, D head size, N = Lq + Lk - 1 offsets,
R query rows of a block.
Queries sit at the last Lq of the Lk key positions (a key/value cache); with Lq == Lk this
is ordinary self-attention.

Backends
--------
``"eager"``  the formula written out with matmul + softmax. Readable; the test oracle.
``"sdpa"``   :func:`torch.nn.functional.scaled_dot_product_attention` (the fused kernel)
             with the bias as a constant float mask that is never built whole: the mask
             of a block of query rows is a strided view of the (H, N) table (rows
             reversed, see :func:`tisa.bias.reversed_rows`, with the block's queries
             reversed to match), plus the padding mask of those rows if there is one.
             Causality is folded into the table (-inf at positive offsets). When the bias
             trains, a custom backward recomputes the probabilities block by block,
             returns dq/dk/dv and reduces the logit gradient to the table by summing over
             the batch and along anti-diagonals; no (H, Lq, Lk) tensor exists at any time.
``"flex"``   FlexAttention with a ``score_mod`` that gathers from the (H, N) table, so no
             Lq x Lk bias is ever built. Compiled; on CPU forward only (PyTorch has no
             FlexAttention backward on CPU), on CUDA forward and backward. Has no
             attention dropout: ``dropout_p > 0`` is refused.
``"auto"``   ``"sdpa"``, except: dropout or a grad-requiring mask during training ->
             ``"eager"``; CUDA with gradients -> ``"flex"`` when available.

Masked rows
-----------
Bool masks (False = masked) and causality mask with -inf, as stock SDPA does: a query row
whose keys are all masked gets output 0 and zero, finite gradients on every backend. An
additive mask of ``finfo.min`` values is a finite number, so such a row averages over its
keys, also as in stock SDPA.

FlexAttention on CPU
--------------------
Inductor's CPU FlexAttention kernel (torch 2.13) computes ``q k^T`` with a micro-kernel
that writes past its tile when the head size is a multiple of the vector width below 24
and a key tile is not a multiple of 16 (e.g. D = 8 or 16 with AVX2: wrong values or NaN
at L = 40, 56, 72, 120). The flex backend therefore pads q and k with zero columns up to
D = 24 on CPU (zeros leave ``q . k`` unchanged; the scale is applied from the real D) and
pads the lengths to a few bucket sizes (masked keys, padded query rows sliced off), which
also bounds recompilation to one kernel per bucket. Inductor's on-disk cache does not
tell kernels generated for different instruction sets apart (``ATEN_CPU_CAPABILITY``):
a kernel generated for AVX2 and reused by an AVX-512 run gives wrong numbers. The flex
backend compiles with the vector width named in inductor's config, which is part of the
cache key; other code compiled in the same process is not covered by this.
"""

from __future__ import annotations

import contextlib
import functools
import math
from typing import Literal, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tisa import bias as bias_lib
from tisa.scoring import ScoringFunction, build

__all__ = [
    "BACKENDS",
    "TisaSelfAttention",
    "attention",
    "attention_with_weights",
    "resolve_backend",
]

Backend = Literal["auto", "eager", "sdpa", "flex"]
BACKENDS: tuple[str, ...] = ("auto", "eager", "sdpa", "flex")

_NEG_INF = float("-inf")


def attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    bias: ScoringFunction | Tensor | None = None,
    *,
    mask: Tensor | None = None,
    causal: bool = False,
    dropout_p: float = 0.0,
    scale: float | None = None,
    backend: Backend = "auto",
) -> Tensor:
    """Attention with an optional translation-invariant positional bias.

    Args:
        q: queries (B, H, Lq, D).
        k: keys (B, H, Lk, D), Lk >= Lq.
        v: values (B, H, Lk, Dv).
        bias: a :class:`~tisa.scoring.ScoringFunction` with H heads, a precomputed table
            (H, Lq + Lk - 1) from :func:`tisa.bias.table`, or None for no positional bias.
        mask: bool (True = attend) or additive float (0 = attend, -inf = masked; added to
            the scores as in SDPA), of shape (B | 1, H | 1, Lq | 1, Lk), e.g. a padding
            mask (B, 1, 1, Lk); a 2-D mask is a padding mask (B, Lk), read as
            (B, 1, 1, Lk). Other shapes are refused. A float mask of only 0s and 1s (a
            Hugging Face ``attention_mask`` cast to float: 1 = keep) is refused, since
            adding it would mask nothing; pass it as ``mask.bool()``.
        causal: mask keys after each query (queries at the last Lq positions).
        dropout_p: dropout on the attention probabilities (pass 0 at evaluation).
        scale: logit scale; default 1 / sqrt(D).
        backend: ``"auto"``, ``"eager"``, ``"sdpa"`` or ``"flex"`` (see module docstring).

    Returns:
        (B, H, Lq, Dv) attention output.
    """
    tab, mask, scale = _prepare(q, k, v, bias, mask, dropout_p, scale)
    chosen = resolve_backend(backend, q, k, v, tab, mask, dropout_p)
    if chosen == "eager":
        return _eager(q, k, v, tab, mask, causal, dropout_p, scale)[0]
    if chosen == "flex":
        return _flex(q, k, v, tab, mask, causal, scale)
    return _sdpa(q, k, v, tab, mask, causal, dropout_p, scale)


def attention_with_weights(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    bias: ScoringFunction | Tensor | None = None,
    *,
    mask: Tensor | None = None,
    causal: bool = False,
    dropout_p: float = 0.0,
    scale: float | None = None,
) -> tuple[Tensor, Tensor]:
    """:func:`attention` on the eager backend, also returning the probabilities.

    Same arguments as :func:`attention`. Returns ``(out, probs)``: (B, H, Lq, Dv) and the
    attention probabilities (B, H, Lq, Lk) after masking and dropout (rows whose keys are
    all masked are 0).
    """
    tab, mask, scale = _prepare(q, k, v, bias, mask, dropout_p, scale)
    return _eager(q, k, v, tab, mask, causal, dropout_p, scale)


def resolve_backend(
    backend: str,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    tab: Tensor | None = None,
    mask: Tensor | None = None,
    dropout_p: float = 0.0,
) -> str:
    """The backend :func:`attention` runs for these inputs (``"auto"`` resolved).

    Raises:
        ValueError: unknown backend, ``"flex"`` asked to train on CPU, or ``"flex"`` with
            attention dropout.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    needs_grad = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in (q, k, v, tab, mask)
    )
    if backend == "flex":
        if dropout_p > 0:
            raise ValueError(
                f"backend='flex' has no attention dropout, got dropout_p={dropout_p}: "
                "FlexAttention cannot drop probabilities after the softmax. Use "
                "backend='sdpa' or 'eager' (or 'auto') for training with attention "
                "dropout, or set the attention dropout to 0"
            )
        if needs_grad and q.device.type != "cuda":
            raise ValueError(
                "backend='flex' cannot train on "
                f"{q.device.type}: PyTorch has no FlexAttention backward there; use "
                "backend='sdpa' (or 'auto') for training, or run under torch.no_grad()"
            )
        return "flex"
    if backend != "auto":
        return backend
    if needs_grad and (dropout_p > 0 or (mask is not None and mask.requires_grad)):
        return "eager"
    if needs_grad and tab is not None and q.device.type == "cuda" and _has_flex():
        return "flex"
    return "sdpa"


# ----------------------------------------------------------------------------- checks


def _prepare(q, k, v, bias, mask, dropout_p, scale):
    """Validates the inputs; returns the bias table, the checked mask and the scale."""
    _check_qkv(q, k, v)
    b, h, lq, d = q.shape
    lk = k.shape[-2]
    mask = _check_mask(mask, q, b, h, lq, lk)
    if isinstance(bias, ScoringFunction) and not bias.translation_invariant:
        # a bias that depends on the query position (FIRE): no table, the dense bias is
        # added to the mask, which every backend adds to the logits
        mask = _with_position_bias(bias, mask, q, h, lq, lk)
        bias = None
    tab = _as_table(bias, h, lq, lk, q)
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout_p must be in [0, 1), got {dropout_p}")
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    return tab, mask, scale


def _with_position_bias(scorer: ScoringFunction, mask, q: Tensor, h: int, lq: int, lk: int):
    """``mask`` (checked, or None) plus the scorer's dense (H, Lq, Lk) bias, as a float mask."""
    if scorer.num_heads != h:
        raise ValueError(f"bias: scoring function has {scorer.num_heads} heads, q has {h} heads")
    dense = scorer.position_bias(lq, lk).to(device=q.device, dtype=q.dtype)[None]  # (1, H, Lq, Lk)
    add = _additive(mask, q.dtype)
    return dense if add is None else add + dense


def _check_qkv(q: Tensor, k: Tensor, v: Tensor) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, Tensor) or t.dim() != 4:
            shape = tuple(t.shape) if isinstance(t, Tensor) else type(t).__name__
            raise ValueError(f"{name} must be a 4-D tensor (B, H, L, D), got {shape}")
    if not (q.dtype == k.dtype == v.dtype):
        raise ValueError(f"q, k, v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if not q.is_floating_point():
        raise ValueError(f"q, k, v must be floating point, got {q.dtype}")
    if not (q.device == k.device == v.device):
        raise ValueError(f"q, k, v must be on one device, got {q.device}, {k.device}, {v.device}")
    if q.shape[:2] != k.shape[:2] or k.shape[:2] != v.shape[:2]:
        raise ValueError(
            "q, k, v must agree on batch and heads (B, H), got "
            f"{tuple(q.shape[:2])}, {tuple(k.shape[:2])}, {tuple(v.shape[:2])}"
        )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must share head size D, got {q.shape[-1]} and {k.shape[-1]}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k and v must have the same length, got {k.shape[-2]} and {v.shape[-2]}")
    if q.shape[-2] > k.shape[-2]:
        raise ValueError(
            f"q length ({q.shape[-2]}) must not exceed k length ({k.shape[-2]}): queries are "
            "the last Lq of the Lk key positions"
        )
    if min(q.shape) < 1 or min(v.shape) < 1:
        raise ValueError(
            f"q, k, v must not be empty, got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )


def _as_table(bias, h: int, lq: int, lk: int, q: Tensor) -> Tensor | None:
    if bias is None:
        return None
    if isinstance(bias, ScoringFunction):
        if bias.num_heads != h:
            raise ValueError(f"bias: scoring function has {bias.num_heads} heads, q has {h} heads")
        tab = bias_lib.table(bias, lq, lk)
    elif isinstance(bias, Tensor):
        tab = bias
    else:
        raise ValueError(
            "bias must be a ScoringFunction, an (H, Lq + Lk - 1) tensor or None, "
            f"got {type(bias).__name__}"
        )
    if tab.shape != (h, lq + lk - 1):
        raise ValueError(
            f"bias table must have shape (H, Lq + Lk - 1) = ({h}, {lq + lk - 1}), "
            f"got {tuple(tab.shape)}"
        )
    if tab.device != q.device:
        raise ValueError(f"bias is on {tab.device} but q is on {q.device}")
    if tab.dtype != q.dtype:
        if not tab.is_floating_point():
            raise ValueError(f"bias table must be floating point, got {tab.dtype}")
        tab = tab.to(q.dtype)  # parameters in fp32, activations in bf16: compute in q's dtype
    return tab


def _check_mask(mask: Tensor | None, q: Tensor, b: int, h: int, lq: int, lk: int):
    """The mask as a 4-D tensor, checked by what its axes mean (see :func:`attention`).

    Accepted: 4-D (B | 1, H | 1, Lq | 1, Lk | 1), and 2-D (B, Lk), a padding mask read as
    (B, 1, 1, Lk). Anything else is refused rather than broadcast from the right, where a
    (B, Lk) mask would silently become a (Lq, Lk) one whenever Lq == B.
    """
    if mask is None:
        return None
    if not isinstance(mask, Tensor):
        raise ValueError(f"mask must be a tensor or None, got {type(mask).__name__}")
    if mask.device != q.device:
        raise ValueError(f"mask is on {mask.device} but q is on {q.device}")
    if mask.dtype != torch.bool and not mask.is_floating_point():
        raise ValueError(f"mask must be bool (True = attend) or float (additive), got {mask.dtype}")
    shape = tuple(mask.shape)
    if mask.dim() == 2:
        if shape != (b, lk):
            raise ValueError(
                f"a 2-D mask is a padding mask (B, Lk) = {(b, lk)}, got {shape}; give a "
                "query-key mask 4-D, as (1, 1, Lq, Lk) or (B, H | 1, Lq, Lk)"
            )
        mask = mask[:, None, None, :]  # (B, 1, 1, Lk)
    elif mask.dim() != 4:
        raise ValueError(
            f"mask must be 4-D (B | 1, H | 1, Lq | 1, Lk) = {(b, h, lq, lk)} or a 2-D padding "
            f"mask (B, Lk) = {(b, lk)}, got {mask.dim()}-D {shape}"
        )
    elif any(n not in (1, full) for n, full in zip(shape, (b, h, lq, lk))):
        raise ValueError(
            f"mask of shape {shape} does not broadcast to (B, H, Lq, Lk) = {(b, h, lq, lk)}: "
            "each axis must be that size or 1"
        )
    if mask.is_floating_point():
        _refuse_keep_mask(mask)
        if mask.dtype != q.dtype:
            mask = mask.to(q.dtype)
    return mask


def _refuse_keep_mask(mask: Tensor) -> None:
    """Refuses a float mask of only 0s and 1s that holds a 1: a keep mask (1 = attend, 0 =
    padding, as Hugging Face tokenizers return it) that, added to the scores, would mask
    nothing. All zeros is a legitimate additive mask (nothing masked) and passes."""
    m = mask.detach()
    ones = m == 1
    if bool(ones.any()) and bool((ones | (m == 0)).all()):
        raise ValueError(
            "mask is a float tensor of 0s and 1s, which looks like a keep mask (1 = attend, "
            "0 = padding) but would be added to the scores and mask nothing; pass a bool "
            "mask (True = attend, e.g. mask.bool()) or an additive float mask (0 = attend, "
            "-inf = masked)"
        )


# ------------------------------------------------------------------------- masks


def _causal_keep(lq: int, lk: int, device) -> Tensor:
    """(Lq, Lk) bool: query qi (absolute position Lk-Lq+qi) may see keys j <= its position."""
    qpos = torch.arange(lk - lq, lk, device=device)[:, None]
    return torch.arange(lk, device=device)[None, :] <= qpos


def _additive(mask: Tensor | None, dtype) -> Tensor | None:
    """A bool or float mask as a 4-D additive float mask (-inf where a bool mask is False)."""
    if mask is None:
        return None
    if mask.dtype == torch.bool:
        zeros = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
        mask = zeros.masked_fill_(~mask, _NEG_INF)
    return mask.reshape((1,) * (4 - mask.dim()) + tuple(mask.shape))


def _with_causal(add: Tensor | None, lq: int, lk: int, dtype, device) -> Tensor:
    """``add`` (or nothing) with -inf on the keys after each query."""
    c = torch.zeros(lq, lk, dtype=dtype, device=device)
    c.masked_fill_(~_causal_keep(lq, lk, device), _NEG_INF)
    return c if add is None else add + c


def _causal_table(tab: Tensor, lk: int) -> Tensor:
    """The table with -inf at positive offsets (column t holds offset t - (Lk - 1)).

    Causality depends on j - i only, so it is Toeplitz too and folds into the table.
    """
    return tab.masked_fill(torch.arange(tab.shape[-1], device=tab.device) > lk - 1, _NEG_INF)


def _masked_softmax(scores: Tensor) -> Tensor:
    """Softmax over the last axis; rows that are -inf everywhere give 0, as stock SDPA does.

    Those rows are set to 0 before the softmax so that no NaN enters the graph: the
    gradient through them is exactly 0.
    """
    dead = torch.isneginf(scores).all(-1, keepdim=True)
    if not bool(dead.any()):
        return torch.softmax(scores, dim=-1)
    return torch.softmax(scores.masked_fill(dead, 0.0), dim=-1).masked_fill(dead, 0.0)


# ---------------------------------------------------------------------- backends


def _eager(q, k, v, tab, mask, causal, dropout_p, scale) -> tuple[Tensor, Tensor]:
    """The formula written out; returns the output and the attention probabilities."""
    lq, lk = q.shape[-2], k.shape[-2]
    scores = torch.matmul(q, k.transpose(-1, -2)) * scale  # (B, H, Lq, Lk)
    if tab is not None:
        scores = scores + bias_lib.expand(tab, lq, lk)  # + (H, Lq, Lk)
    add = _additive(mask, q.dtype)
    if add is not None:
        scores = scores + add
    if causal:
        scores = scores.masked_fill(~_causal_keep(lq, lk, q.device), _NEG_INF)
    probs = _masked_softmax(scores.float()).to(q.dtype)
    if dropout_p > 0:
        probs = F.dropout(probs, p=dropout_p)
    return torch.matmul(probs, v), probs  # (B, H, Lq, Dv), (B, H, Lq, Lk)


def _sdpa(q, k, v, tab, mask, causal, dropout_p, scale) -> Tensor:
    lk = k.shape[-2]
    add = _additive(mask, q.dtype)
    grad = torch.is_grad_enabled()
    # A zero bias (zero amplitudes) adds nothing: then the unbiased kernel computes exactly
    # what attention without TISA computes, also while the amplitudes train.
    zero = tab is None or not bool(tab.detach().any())
    if zero and (tab is None or not (grad and tab.requires_grad)):
        return _plain_sdpa(q, k, v, add, causal, dropout_p, scale)
    if causal:
        tab = _causal_table(tab, lk)
    trainable = grad and any(
        t.requires_grad for t in (q, k, v, tab) + (() if add is None else (add,))
    )
    plan = _block_plan(q, k, v, add)
    if not trainable:  # detached: a mask that requires grad would rule out the fused kernel
        return _blocked_forward(q, k, v, tab.detach(), add, scale, dropout_p, plan)
    if dropout_p == 0 and (add is None or not add.requires_grad):
        return _BiasedSDPA.apply(q, k, v, tab, add, scale, plan, causal if zero else None)
    # Training with dropout or a differentiable mask: the same blocks under autograd, which
    # runs PyTorch's math kernel per block (the fused one has neither dropout on CPU nor a
    # mask gradient); the table enters through a view whose backward sums anti-diagonals.
    return _blocked_forward(q, k, v, tab, add, scale, dropout_p, plan)


def _plain_sdpa(q, k, v, add, causal, dropout_p, scale) -> Tensor:
    """SDPA without positional bias; ``add`` a 4-D additive mask or None."""
    lq, lk = q.shape[-2], k.shape[-2]
    if add is None and (not causal or lq == lk):
        return F.scaled_dot_product_attention(
            q, k, v, dropout_p=dropout_p, is_causal=causal, scale=scale
        )
    if causal:
        add = _with_causal(add, lq, lk, q.dtype, q.device)
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


def _forward_plan(q: Tensor, k: Tensor, add: Tensor | None, plan: _Plan) -> _Plan:
    """Block sizes of the forward: without a mask the bias is a view and costs no memory,
    so one fused call takes all heads and rows of as many batch elements as keep the
    reversed copies of q and of the output near _BLOCK_ELEMENTS (at least one)."""
    if add is not None:
        return plan
    b, h, lq, d = q.shape
    return _Plan(max(1, min(b, _BLOCK_ELEMENTS // (h * lq * d))), h, lq)


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


def _blocked_forward(q, k, v, tab, add, scale, dropout_p, plan) -> Tensor:
    """Biased SDPA, one fused call per block; the block's bias is a view of the table.

    The view reads the block's rows in reverse order (a Toeplitz block read with
    non-negative strides is a Hankel block), so the block's queries are reversed to match
    and its output rows reversed back; this costs one copy of q and of the output in all.
    """
    b, h, lq, _ = q.shape
    lk = k.shape[-2]
    # (B, Lq, H, D) storage seen as (B, H, Lq, D), the layout SDPA returns: a model that
    # transposes the output back and calls .contiguous() (as Hugging Face models do) then
    # copies nothing (2% of the forward at L = 512, measured with q, k, v in that layout)
    out = q.new_empty(b, lq, h, v.shape[-1]).transpose(1, 2)
    for bs, hs, start, stop in _blocks(_forward_plan(q, k, add, plan), b, h, lq):
        attn_mask = bias_lib.reversed_rows(tab[hs], lq, lk, start, stop)[None]  # (1, h, R, Lk)
        if add is not None:
            attn_mask = attn_mask + _rows_reversed(_sub(add, bs, hs), start, stop)
        block = F.scaled_dot_product_attention(
            q[bs, hs, start:stop].flip(2),
            k[bs, hs],
            v[bs, hs],
            attn_mask=attn_mask,
            dropout_p=dropout_p,
            scale=scale,
        )
        # back in original row order: flipping the block while it is still in cache and
        # copying it was faster than index_copy_ in a side-by-side timing at L = 512
        out[bs, hs, start:stop] = block.flip(2)
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
    """Fused SDPA forward with a constant mask; backward that also trains the bias table.

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
    def forward(ctx, q, k, v, tab, add, scale, plan, zero_causal):
        if zero_causal is None:
            # a view of a table that requires grad also requires grad, even here, and
            # SDPA would then leave its fused kernel for the math one
            out = _blocked_forward(q, k, v, tab.detach(), add, scale, 0.0, plan)
        else:  # the table is zero (but trains): the unbiased kernel, causal or not
            out = _plain_sdpa(q, k, v, add, zero_causal, 0.0, scale)
        ctx.save_for_backward(q, k, v, out, tab, add)
        ctx.scale, ctx.plan = scale, plan
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, out, tab, add = ctx.saved_tensors
        tab = tab.detach()
        b, h, lq, d = q.shape
        lk = k.shape[-2]
        dead = _dead_rows(tab, add, lq, lk)
        # Gradients in the layout of their inputs: for q, k, v that are transposed views of
        # (B, L, H, D) (a Hugging Face layer's) autograd then passes them on without a copy.
        # dk and dv are written by the first block of rows of each batch element and head,
        # and added to by the others (no zero fill).
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        dtab = torch.zeros(h, tab.shape[-1], dtype=torch.float32, device=q.device)
        # Two (n, R, Lk) buffers for every block (logits then dS; probabilities), allocated
        # once: fresh ones per block went back to the system and were faulted in again
        # (about a sixth of the backward at L = 512, B = 8, one thread).
        plan = ctx.plan
        size = min(b, plan.batch) * min(h, plan.heads) * min(lq, plan.rows) * lk
        work = (q.new_empty(size), q.new_empty(size))
        acc = None
        for bs, hs, start, stop in _blocks(plan, b, h, lq):
            if bs.start == 0:  # a new block of rows and heads: sum dS over the batch here
                acc = torch.zeros(hs.stop - hs.start, stop - start, lk, device=q.device)
            block = _Block(bs, hs, start, stop)
            _backward_block(
                q, k, v, out, grad_out, tab, add, dead, ctx.scale, block, dq, dk, dv, acc, work
            )
            if bs.stop == b:
                first = lq - stop  # table column of the block's anti-diagonal 0
                dtab[hs, first : first + acc.shape[1] + lk - 1] += bias_lib.antidiagonal_sums(acc)
        return dq, dk, dv, dtab.to(tab.dtype), None, None, None, None


class _Block(NamedTuple):
    """A block of the sdpa path: batch elements, heads, query rows start..stop-1."""

    batch: slice
    heads: slice
    start: int
    stop: int


def _merged(t: Tensor, n: int) -> Tensor:
    """(nb, g, L, D) as (nb * g, L, D): a view where the strides allow, else a copy."""
    return t.reshape(n, t.shape[-2], t.shape[-1])


def _backward_block(
    q, k, v, out, grad_out, tab, add, dead, scale, block, dq, dk, dv, acc, work
) -> None:
    """One block of :class:`_BiasedSDPA`'s backward: writes dq's rows, adds to dk, dv, acc
    (writes dk, dv in the first block of rows).

    Works on n = nb * heads matrices of (R, Lk). The bias view is the first product's
    input (no extra pass over the logits), broadcast over the batch elements when there
    are several (small problems, all heads). q, k, v may be strided (a transposed
    layout): the products read them as they are, and only the block's rows are copied.
    """
    bs, hs, start, stop = block
    lq, lk = q.shape[-2], k.shape[-2]
    nb, g, rows = bs.stop - bs.start, hs.stop - hs.start, stop - start
    n = nb * g
    view = bias_lib.reversed_rows(tab[hs], lq, lk, start, stop)  # (g, R, Lk)
    qb = q[bs, hs, start:stop].flip(2).reshape(n, rows, -1)  # rows reversed like the view
    gb = grad_out[bs, hs, start:stop].flip(2)  # (nb, g, R, Dv)
    # rowsum(dO * O) of the block's rows, reversed like them, in float32 at least: (nb, g, R, 1)
    wide = torch.promote_types(q.dtype, torch.float32)
    ob = out[bs, hs, start:stop].flip(2)
    delta = (gb.to(wide) * ob.to(wide)).sum(-1, keepdim=True).to(q.dtype)
    gb = gb.reshape(n, rows, -1)
    kb, vb = _merged(k[bs, hs], n), _merged(v[bs, hs], n)  # (n, Lk, D | Dv)
    logits, probs = (w[: n * rows * lk].view(n, rows, lk) for w in work)  # (n, R, Lk)
    if nb == 1:
        torch.baddbmm(view, qb, kb.transpose(1, 2), alpha=scale, out=logits)
    else:  # the view broadcast over the batch into the product's input: one pass, as above
        logits.view(nb, g, rows, lk).copy_(view)
        logits.baddbmm_(qb, kb.transpose(1, 2), alpha=scale)
    if add is not None:
        logits.view(nb, g, rows, lk).add_(_rows_reversed(_sub(add, bs, hs), start, stop))
    if dead is not None:
        dead = _rows_reversed(_sub(dead, bs, hs), start, stop)
        logits.view(nb, g, rows, lk).masked_fill_(dead, 0.0)  # no NaN from an all -inf row
    torch.softmax(logits, dim=-1, out=probs)
    if dead is not None:
        probs.view(nb, g, rows, lk).masked_fill_(dead, 0.0)
    first = start == 0
    _add_product(dv[bs, hs], probs.transpose(1, 2), gb, first)  # dv += P^T dO
    dscores = torch.bmm(gb, vb.transpose(1, 2), out=logits)  # dP (n, R, Lk), over the logits
    dscores.view(nb, g, rows, lk).sub_(delta)
    dscores.mul_(probs)  # dS
    acc.add_(dscores if nb == 1 else dscores.view(nb, g, rows, lk).sum(0))
    dq[bs, hs, start:stop] = torch.bmm(dscores, kb).view(nb, g, rows, -1).flip(2).mul_(scale)
    _add_product(dk[bs, hs], dscores.transpose(1, 2), qb, first, scale)  # dk += dS^T q scale


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


# -------------------------------------------------------------------------- flex

_FLEX = None
_FLEX_RECOMPILE_LIMIT = 64
# Head sizes below this are zero-padded on CPU (see the module docstring).
_FLEX_CPU_MIN_HEAD_DIM = 24
_FLEX_BLOCK = 128  # FlexAttention's default sparse block size


def _has_flex() -> bool:
    try:
        from torch.nn.attention import flex_attention  # noqa: F401
    except ImportError:
        return False
    return True


def _compiled_flex():
    global _FLEX
    if _FLEX is None:
        if not _has_flex():
            raise ValueError("backend='flex' needs torch.nn.attention.flex_attention (torch>=2.5)")
        _FLEX = torch.compile(_flex_impl, dynamic=False)
    return _FLEX


def _cpu_isa_config(cpu: bool):
    """Inductor config naming the CPU vector width it compiles for.

    Inductor picks the instruction set from ``ATEN_CPU_CAPABILITY`` but its on-disk cache
    key does not include it: a kernel generated for AVX2 and found again in a run that
    generates for AVX-512 gives wrong numbers (torch 2.13). An explicit ``cpp.simdlen``
    is part of the key, so kernels for different widths never meet.
    """
    from torch._inductor import config as inductor_config

    if not cpu or inductor_config.cpp.simdlen is not None:
        return contextlib.nullcontext()
    from torch._inductor.cpu_vec_isa import pick_vec_isa

    width = pick_vec_isa().bit_width()
    return inductor_config.patch({"cpp.simdlen": width}) if width else contextlib.nullcontext()


def _flex_bucket(n: int, queries: bool) -> int:
    """Padded length: a power of two, at least 16 (a single query stays 1: decoding)."""
    if queries and n == 1:
        return 1
    return max(16, 1 << (n - 1).bit_length())


def _pad_to(t: Tensor, length: int, dim: int) -> Tensor:
    """Zero-pads the last two axes of (B, H, L, D) to (length, dim) (no copy when equal)."""
    pad_l, pad_d = length - t.shape[-2], dim - t.shape[-1]
    return t if pad_l == pad_d == 0 else F.pad(t, (0, pad_d, 0, pad_l))


def _flex(q, k, v, tab, mask, causal, scale) -> Tensor:
    if not torch.is_grad_enabled():
        # FlexAttention refuses CPU inputs that require grad even under no_grad.
        q, k, v = q.detach(), k.detach(), v.detach()
        tab = None if tab is None else tab.detach()
        mask = None if mask is None else mask.detach()
    b, h, lq, d = q.shape
    lk = k.shape[-2]
    lqp, lkp = _flex_bucket(lq, True), _flex_bucket(lk, False)
    dv = v.shape[-1]
    # On CPU v is padded alike (its columns are sliced off again), so that head sizes
    # below the minimum share one kernel.
    cpu = q.device.type == "cpu"
    dp = max(d, _FLEX_CPU_MIN_HEAD_DIM) if cpu else d
    dvp = max(dv, _FLEX_CPU_MIN_HEAD_DIM) if cpu else dv
    q, k, v = _pad_to(q, lqp, dp), _pad_to(k, lkp, dp), _pad_to(v, lkp, dvp)
    # Padded table: column kv - q + Lqp - 1 holds the offset the real table holds at
    # kv - q + Lq - 1, for every (q, kv) of the padded grid (padding reads zeros).
    tab = q.new_zeros(h, lq + lk - 1) if tab is None else tab
    tab = F.pad(tab, (lqp - lq, lkp - lk))
    # Masks become an additive tensor broadcast (stride 0) to (B, H, Lqp, Lkp): a padding
    # mask (B, 1, 1, Lk) stays O(B * Lk) in memory.
    add = _additive(mask, q.dtype)
    if add is not None:
        pad_q = lqp - lq if add.shape[-2] > 1 else 0
        pad_k = lkp - lk if add.shape[-1] > 1 else 0
        add = F.pad(add, (0, pad_k, 0, pad_q)).expand(b, h, lqp, lkp)
    # Real lengths are data, not shapes, so every length in a bucket shares one kernel:
    # keys at kv >= Lk are padding, and causally query q sees kv <= q + Lk - Lq.
    limits = torch.tensor([lk, lk - lq if causal else lkp], device=q.device)
    if lk == lkp and not causal:
        limits = None  # nothing to mask inside the grid: a kernel without the comparison
    scale_t = torch.tensor(scale, dtype=torch.float32, device=q.device)
    block_mask = _flex_block_mask(lq, lk, lqp, lkp, causal, q.device)
    # Inductor's CPU FlexAttention template does not compile with dynamic shapes (torch
    # 2.13), so kernels are specialised per bucket.
    with torch._dynamo.config.patch(recompile_limit=_FLEX_RECOMPILE_LIMIT), _cpu_isa_config(cpu):
        out = _compiled_flex()(q, k, v, tab, add, limits, scale_t, block_mask)
    return out[:, :, :lq, :dv]


@functools.lru_cache(maxsize=64)
def _flex_block_mask(lq: int, lk: int, lqp: int, lkp: int, causal: bool, device: torch.device):
    """FlexAttention block mask of the padded (Lqp, Lkp) grid, built from the lengths.

    Lists, per block of 128 query rows, the key blocks it must visit: none for blocks of
    padded rows, up to the last real key (or the last key a causal row sees) otherwise.
    O((Lqp/128) * (Lkp/128)) memory. Masking inside blocks is done by the score_mod, so
    on CUDA every visited block is listed as a full one (the kernel then skips the
    mask_mod); on CPU as partial ones with a mask_mod that keeps everything (inductor's
    CPU template does not compile with full blocks alone, torch 2.13).
    """
    from torch.nn.attention.flex_attention import BlockMask

    n_q, n_kv = -(-lqp // _FLEX_BLOCK), -(-lkp // _FLEX_BLOCK)
    counts = torch.zeros(n_q, dtype=torch.int32)
    for block in range(n_q):
        first, last = block * _FLEX_BLOCK, min(lq, (block + 1) * _FLEX_BLOCK) - 1
        if first < lq:
            last_key = min(lk - 1, last + lk - lq) if causal else lk - 1
            counts[block] = last_key // _FLEX_BLOCK + 1
    indices = torch.arange(n_kv, dtype=torch.int32).expand(n_q, n_kv).contiguous()
    indices = indices[None, None].to(device)
    counts = counts[None, None].to(device)
    if device.type == "cpu":
        return BlockMask.from_kv_blocks(
            counts, indices, BLOCK_SIZE=_FLEX_BLOCK, seq_lengths=(lqp, lkp)
        )
    return BlockMask.from_kv_blocks(
        torch.zeros_like(counts),  # no partial blocks
        indices,
        counts,
        indices,
        BLOCK_SIZE=_FLEX_BLOCK,
        seq_lengths=(lqp, lkp),
    )


def _flex_impl(q, k, v, tab, add, limits, scale, block_mask):
    from torch.nn.attention.flex_attention import flex_attention

    shift = q.shape[-2] - 1  # table column = kv_idx - q_idx + Lqp - 1

    def score_mod(score, bi, hi, qi, ki):
        score = score * scale + tab[hi, ki - qi + shift]
        if add is not None:
            score = score + add[bi, hi, qi, ki]
        if limits is None:
            return score
        keep = (ki < limits[0]) & (ki <= qi + limits[1])
        return torch.where(keep, score, -float("inf"))

    return flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask, scale=1.0)


# ----------------------------------------------------------------------- module


class TisaSelfAttention(nn.Module):
    """Multi-head self-attention with a per-layer positional scoring function.

    A building block for people writing their own models: projections, one scoring
    function (``scoring`` family, H heads) and :func:`attention`.

    Args:
        hidden_size: model width; must be divisible by ``num_heads``.
        num_heads: attention heads H.
        scoring: scoring family name (``"rbf"``, ``"alibi"``, ...) or None for none.
        causal: causal self-attention (decoder).
        dropout: attention-probability dropout during training.
        backend: attention backend (see :func:`attention`).
        **scoring_options: passed to :func:`tisa.scoring.build`.
    """

    def __init__(
        self,
        hidden_size: int,
        num_heads: int,
        *,
        scoring: str | None = "rbf",
        causal: bool = False,
        dropout: float = 0.0,
        bias: bool = True,
        backend: Backend = "auto",
        **scoring_options,
    ) -> None:
        super().__init__()
        if hidden_size % num_heads != 0:
            raise ValueError(
                f"hidden_size ({hidden_size}) must be divisible by num_heads ({num_heads})"
            )
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        self.num_heads = num_heads
        self.head_dim = hidden_size // num_heads
        self.causal = causal
        self.dropout = dropout
        self.backend = backend
        self.qkv = nn.Linear(hidden_size, 3 * hidden_size, bias=bias)
        self.out = nn.Linear(hidden_size, hidden_size, bias=bias)
        self.scorer = None if scoring is None else build(scoring, num_heads, **scoring_options)

    def forward(self, x: Tensor, padding_mask: Tensor | None = None) -> Tensor:
        """Self-attention over ``x``.

        Args:
            x: (B, L, hidden) inputs.
            padding_mask: optional (B, L) bool, True for real tokens.

        Returns:
            (B, L, hidden).
        """
        b, n, c = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.num_heads, self.head_dim).unbind(2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # (B, H, L, D)
        mask = None
        if padding_mask is not None:
            if padding_mask.shape != (b, n):
                raise ValueError(
                    f"padding_mask must have shape (B, L) = {(b, n)}, "
                    f"got {tuple(padding_mask.shape)}"
                )
            mask = padding_mask.bool()[:, None, None, :]  # (B, 1, 1, L)
        y = attention(
            q,
            k,
            v,
            self.scorer,
            mask=mask,
            causal=self.causal,
            dropout_p=self.dropout if self.training else 0.0,
            backend=self.backend,
        )  # (B, H, L, D)
        return self.out(y.transpose(1, 2).reshape(b, n, c))
