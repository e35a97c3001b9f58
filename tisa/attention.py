"""Scaled dot-product attention with a translation-invariant positional bias.

    out = softmax(q k^T * scale + F + M) v,     F[h, i, j] = f_h(j - i)

where F is a Toeplitz bias from a positional scoring function (see :mod:`tisa.scoring`,
:mod:`tisa.bias`) and M the padding / causal mask.

Letters: B batch, H heads, Lq queries, Lk keys, D head size, N = Lq + Lk - 1 offsets.
Queries sit at the last Lq of the Lk key positions (a key/value cache); with Lq == Lk this
is ordinary self-attention.

Backends
--------
``"eager"``  the formula written out with matmul + softmax. Readable; the test oracle.
``"sdpa"``   :func:`torch.nn.functional.scaled_dot_product_attention` with the bias as a
             constant float mask (the fused kernel). When the bias must be trained, a
             custom backward recomputes the attention probabilities once per batch chunk,
             returns dq/dk/dv and reduces the logit gradient to the (H, N) table by summing
             over the batch and along diagonals. This avoids PyTorch's unfused "math"
             fallback that a grad-requiring float mask triggers, and never keeps a
             (B, H, Lq, Lk) tensor alive between forward and backward.
``"flex"``   FlexAttention with a ``score_mod`` that gathers from the (H, N) table, so no
             Lq x Lk bias is ever built. Compiled; on CPU forward only (PyTorch has no
             FlexAttention backward on CPU), on CUDA forward and backward.
``"auto"``   ``"sdpa"``, except: dropout or a grad-requiring mask during training ->
             ``"eager"``; CUDA with gradients -> ``"flex"`` when available.
"""

from __future__ import annotations

import functools
import math
from typing import Literal

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

# Peak number of logit elements the sdpa backward materialises at once (per tensor).
_BACKWARD_CHUNK_ELEMENTS = 1 << 20


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
        mask: bool (True = attend) or additive float mask, broadcastable to
            (B, H, Lq, Lk); e.g. a padding mask (B, 1, 1, Lk).
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
    attention probabilities (B, H, Lq, Lk) after masking and dropout.
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
        ValueError: unknown backend, or ``"flex"`` asked to train on CPU.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    needs_grad = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in (q, k, v, tab, mask)
    )
    if backend == "flex":
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
    tab = _as_table(bias, h, lq, lk, q)
    mask = _check_mask(mask, q, b, h, lq, lk)
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout_p must be in [0, 1), got {dropout_p}")
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    return tab, mask, scale


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
    if mask is None:
        return None
    if not isinstance(mask, Tensor):
        raise ValueError(f"mask must be a tensor or None, got {type(mask).__name__}")
    if mask.device != q.device:
        raise ValueError(f"mask is on {mask.device} but q is on {q.device}")
    if mask.dtype != torch.bool and not mask.is_floating_point():
        raise ValueError(f"mask must be bool (True = attend) or float (additive), got {mask.dtype}")
    try:
        torch.broadcast_shapes(mask.shape, (b, h, lq, lk))
    except RuntimeError:
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} does not broadcast to (B, H, Lq, Lk) = "
            f"{(b, h, lq, lk)}"
        ) from None
    if mask.dim() > 4 or torch.broadcast_shapes(mask.shape, (b, h, lq, lk)) != (b, h, lq, lk):
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} must broadcast to (B, H, Lq, Lk) = "
            f"{(b, h, lq, lk)} without growing it"
        )
    if mask.is_floating_point() and mask.dtype != q.dtype:
        mask = mask.to(q.dtype)
    return mask


# ------------------------------------------------------------------------- masks


def _causal_keep(lq: int, lk: int, device) -> Tensor:
    """(Lq, Lk) bool: query qi (absolute position Lk-Lq+qi) may see keys j <= its position."""
    qpos = torch.arange(lk - lq, lk, device=device)[:, None]
    return torch.arange(lk, device=device)[None, :] <= qpos


def _additive(mask: Tensor | None, causal: bool, lq: int, lk: int, dtype, device) -> Tensor | None:
    """Combines a bool/float mask and causality into one additive float mask (<= 4-D)."""
    neg = torch.finfo(dtype).min
    out = None
    if mask is not None:
        if mask.dtype == torch.bool:
            out = torch.zeros(mask.shape, dtype=dtype, device=device).masked_fill_(~mask, neg)
        else:
            out = mask
    if causal:
        c = torch.zeros(lq, lk, dtype=dtype, device=device)
        c.masked_fill_(~_causal_keep(lq, lk, device), neg)
        out = c if out is None else torch.clamp(out + c, min=neg)
    return out


# ---------------------------------------------------------------------- backends


def _eager(q, k, v, tab, mask, causal, dropout_p, scale) -> tuple[Tensor, Tensor]:
    """The formula written out; returns the output and the attention probabilities."""
    lq, lk = q.shape[-2], k.shape[-2]
    scores = torch.matmul(q, k.transpose(-1, -2)) * scale  # (B, H, Lq, Lk)
    if tab is not None:
        scores = scores + bias_lib.expand(tab, lq, lk)  # + (H, Lq, Lk)
    add = _additive(mask, causal, lq, lk, q.dtype, q.device)
    if add is not None:
        scores = scores + add
    probs = torch.softmax(scores.float(), dim=-1).to(q.dtype)
    if dropout_p > 0:
        probs = F.dropout(probs, p=dropout_p)
    return torch.matmul(probs, v), probs  # (B, H, Lq, Dv), (B, H, Lq, Lk)


def _sdpa(q, k, v, tab, mask, causal, dropout_p, scale) -> Tensor:
    lq, lk = q.shape[-2], k.shape[-2]
    if tab is None:
        if mask is None and (not causal or lq == lk):
            return F.scaled_dot_product_attention(
                q, k, v, dropout_p=dropout_p, is_causal=causal, scale=scale
            )
        add = _additive(mask, causal, lq, lk, q.dtype, q.device)
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=add, dropout_p=dropout_p, scale=scale
        )
    add = _additive(mask, causal, lq, lk, q.dtype, q.device)
    trainable = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v, tab))
    constant_mask = add is None or not add.requires_grad
    if trainable and dropout_p == 0 and constant_mask:
        return _BiasedSDPA.apply(q, k, v, tab, add, scale)
    # Otherwise the bias is added to the mask as it is: at inference SDPA keeps its fused
    # kernel; when training with dropout or a differentiable mask it runs PyTorch's math
    # kernel, which handles both.
    dense = bias_lib.expand(tab, lq, lk)[None]  # (1, H, Lq, Lk)
    attn_mask = dense if add is None else dense + add
    return F.scaled_dot_product_attention(
        q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, scale=scale
    )


class _BiasedSDPA(torch.autograd.Function):
    """Fused SDPA forward with a constant mask; backward that also trains the bias table.

    Backward, per batch chunk (P recomputed; O the forward output, dO its gradient):
        P  = softmax(q k^T * scale + F + M)
        dv = P^T dO
        dP = dO v^T
        dS = P * (dP - rowsum(dO * O))
        dq = dS k * scale,  dk = dS^T q * scale,  dtable = diagonal_sums(sum_b dS)
    """

    @staticmethod
    def forward(ctx, q, k, v, tab, add, scale):
        lq, lk = q.shape[-2], k.shape[-2]
        if add is not None:
            add = add.reshape((1,) * (4 - add.dim()) + tuple(add.shape))  # 4-D for slicing
        dense = bias_lib.expand(tab.detach(), lq, lk)[None]  # (1, H, Lq, Lk)
        attn_mask = dense if add is None else dense + add
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, scale=scale)
        ctx.save_for_backward(q, k, v, out, tab, add)
        ctx.scale = scale
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, out, tab, add = ctx.saved_tensors
        scale = ctx.scale
        b, h, lq, d = q.shape
        lk = k.shape[-2]
        dense = bias_lib.expand(tab, lq, lk)  # (H, Lq, Lk)
        if add is not None:
            add = add.expand(b, h, lq, lk).reshape(b * h, lq, lk)  # a view, no copy
        # Work on (B*H) slices, a chunk at a time, so the recomputed (chunk, Lq, Lk)
        # probabilities stay cache-sized and nothing quadratic outlives the loop.
        qf, kf, vf = (t.reshape(b * h, -1, t.shape[-1]) for t in (q, k, v))
        go = grad_out.reshape(b * h, lq, -1)
        delta = (go * out.reshape(b * h, lq, -1)).sum(-1, keepdim=True)  # (B*H, Lq, 1)
        dq, dk, dv = torch.empty_like(qf), torch.empty_like(kf), torch.empty_like(vf)
        dlogits = torch.zeros(h, lq, lk, dtype=torch.float32, device=q.device)
        heads = torch.arange(b * h, device=q.device) % h
        chunk = max(1, _BACKWARD_CHUNK_ELEMENTS // (lq * lk))
        for s in range(0, b * h, chunk):
            e = min(b * h, s + chunk)
            qs, ks, vs, gs = qf[s:e], kf[s:e], vf[s:e], go[s:e]
            logits = torch.baddbmm(dense[heads[s:e]], qs, ks.transpose(1, 2), alpha=scale)
            if add is not None:
                logits.add_(add[s:e])
            probs = torch.softmax(logits, dim=-1)  # (n, Lq, Lk)
            del logits
            dv[s:e] = torch.bmm(probs.transpose(1, 2), gs)
            dscores = torch.bmm(gs, vs.transpose(1, 2)).sub_(delta[s:e]).mul_(probs)  # dS
            del probs
            dlogits.index_add_(0, heads[s:e], dscores.float())
            dq[s:e] = torch.bmm(dscores, ks).mul_(scale)
            dk[s:e] = torch.bmm(dscores.transpose(1, 2), qs).mul_(scale)
        dtab = bias_lib.diagonal_sums(dlogits).to(tab.dtype)
        return dq.view_as(q), dk.view_as(k), dv.view_as(v), dtab, None, None


_FLEX = None
_FLEX_RECOMPILE_LIMIT = 64


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


def _flex(q, k, v, tab, mask, causal, scale) -> Tensor:
    if not torch.is_grad_enabled():
        # FlexAttention refuses CPU inputs that require grad even under no_grad.
        q, k, v = q.detach(), k.detach(), v.detach()
        tab = None if tab is None else tab.detach()
    b, h, lq, _ = q.shape
    lk = k.shape[-2]
    if tab is None:
        tab = q.new_zeros(h, lq + lk - 1)
    # Masks become an additive tensor broadcast (stride 0) to (B, H, Lq, Lk): a padding
    # mask (B, 1, 1, Lk) stays O(B * Lk) in memory.
    add = _additive(mask, False, lq, lk, q.dtype, q.device)
    if add is not None:
        add = add.reshape((1,) * (4 - add.dim()) + tuple(add.shape)).expand(b, h, lq, lk)
    shift = torch.tensor(lq - 1, device=q.device)  # table column = kv_idx - q_idx + Lq - 1
    block_mask = _block_mask(lq, lk, causal, q.device)
    # Inductor's CPU FlexAttention template does not compile with dynamic shapes (torch
    # 2.13), so kernels are specialised per shape; allow one per length seen.
    with torch._dynamo.config.patch(recompile_limit=_FLEX_RECOMPILE_LIMIT):
        return _compiled_flex()(q, k, v, tab, add, shift, block_mask, scale)


@functools.lru_cache(maxsize=64)
def _block_mask(lq: int, lk: int, causal: bool, device: torch.device):
    """FlexAttention block mask: causal (queries at the last Lq positions) or full.

    Built compiled, from blocks: O((Lq/128) * (Lk/128)) memory. Without an explicit block
    mask FlexAttention materialises an Lq x Lk one (512 MiB at L = 8192).
    """
    from torch.nn.attention.flex_attention import create_block_mask

    offset = lk - lq

    def causal_mod(bi, hi, qi, ki):
        return ki <= qi + offset

    def full_mod(bi, hi, qi, ki):
        return qi >= 0

    return create_block_mask(
        causal_mod if causal else full_mod, None, None, lq, lk, device=device, _compile=True
    )


def _flex_impl(q, k, v, tab, add, shift, block_mask, scale):
    from torch.nn.attention.flex_attention import flex_attention

    def score_mod(score, bi, hi, qi, ki):
        score = score + tab[hi, ki - qi + shift]
        if add is not None:
            score = score + add[bi, hi, qi, ki]
        return score

    return flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask, scale=scale)


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
