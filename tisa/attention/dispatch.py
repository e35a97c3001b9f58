"""``attention()``: checks the inputs, builds the bias table once and hands it to the backend
that fits (see :mod:`tisa.attention` for the backends and the letters)."""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch import Tensor

from tisa import bias as bias_lib
from tisa.attention.eager import eager
from tisa.attention.flex import flex, has_flex
from tisa.attention.masks import additive
from tisa.attention.sdpa import sdpa
from tisa.scoring import ScoringFunction, WindowedOffsets
from tisa.scoring.content import ClippedBand, to_dense

__all__ = ["BACKENDS", "Backend", "attention", "attention_with_weights", "resolve_backend"]

Backend = Literal["auto", "eager", "sdpa", "flex"]
BACKENDS: tuple[str, ...] = ("auto", "eager", "sdpa", "flex")


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
    band_term: Tensor | None = None,
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
        band_term: logits added on the 2K + 1 diagonals around each query and nowhere
            else, (B | 1, H, Lq, 2K + 1): column m for the key at offset m - K (ignored
            where that key does not exist; :meth:`tisa.scoring.RelativeContent.band`), or
            a :class:`~tisa.scoring.content.ClippedBand`, which also adds a row plus a
            column constant on each side of the band. The sdpa backend adds it to each
            block of query rows it writes, with no (B, H, Lq, Lk) tensor, when nothing
            needs a gradient, there is no attention window and Lk > 2K + 1; otherwise it
            is laid into a dense float mask (:func:`tisa.scoring.content.to_dense`) added
            to ``mask``.

    Returns:
        (B, H, Lq, Dv) attention output.
    """
    # an attention window, which sdpa and flex skip the keys beyond of (a query-dependent
    # bias, FIRE's, goes into a dense mask: nothing to skip there)
    windowed = isinstance(bias, WindowedOffsets) and bias.translation_invariant
    window = bias.window if windowed else None
    tab, mask, scale = _prepare(q, k, v, bias, mask, dropout_p, scale)
    chosen = resolve_backend(backend, q, k, v, tab, mask, dropout_p)
    if band_term is not None:
        terms = _check_band(band_term, q, k)
        by_rows = chosen == "sdpa" and tab is not None and window is None and (
            k.shape[-2] > terms[0].shape[-1]) and not (torch.is_grad_enabled() and any(
                t is not None and t.requires_grad for t in (q, k, v, tab, mask, *terms)))
        if not by_rows:  # a dense float mask, as any other; the backend is chosen again
            dense = to_dense(band_term, k.shape[-2])
            add = additive(mask, q.dtype)
            if add is None:
                mask = dense
            elif dense.requires_grad or torch.broadcast_shapes(dense.shape,
                                                               add.shape) != dense.shape:
                mask = dense + add
            else:  # the term is this call's own tensor: no second (B, H, Lq, Lk) one
                mask = dense.add_(add)
            band_term = None
            chosen = resolve_backend(backend, q, k, v, tab, mask, dropout_p)
    if chosen == "eager":
        return eager(q, k, v, tab, mask, causal, dropout_p, scale)[0]
    if chosen == "flex":
        return flex(q, k, v, tab, mask, causal, scale, window)
    return sdpa(q, k, v, tab, mask, causal, dropout_p, scale, window, band_term)


def _check_band(band_term: Tensor | ClippedBand, q: Tensor, k: Tensor) -> tuple[Tensor, ...]:
    """A band term (B | 1, H, Lq, 2K + 1), or a ClippedBand whose sides (B | 1, H, Lq, 2)
    and (B | 1, H, Lk, 2) have the band's batch, for these queries and keys, on their
    device and dtype. Returns its tensors, the band first."""
    b, h, lq, _ = q.shape
    clipped = isinstance(band_term, ClippedBand)
    band = band_term.band if clipped else band_term
    if not isinstance(band, Tensor) or band.dim() != 4 or band.shape[0] not in (1, b) or (
        tuple(band.shape[1:3]) != (h, lq) or band.shape[-1] % 2 == 0
    ):
        raise ValueError(
            f"band_term must be (B | 1, H, Lq, 2K + 1) = ({b} | 1, {h}, {lq}, odd), got "
            f"{tuple(band.shape) if isinstance(band, Tensor) else type(band).__name__}"
        )
    terms = tuple(band_term) if clipped else (band,)
    if clipped:
        for name, t, n in (("by_query", band_term.by_query, lq),
                           ("by_key", band_term.by_key, k.shape[-2])):
            if t.dim() != 4 or tuple(t.shape) != (band.shape[0], h, n, 2):
                raise ValueError(f"band_term.{name} must be (the band's batch, H, {n}, 2) = "
                                 f"({band.shape[0]}, {h}, {n}, 2), got {tuple(t.shape)}")
    for t in terms:
        if t.device != q.device or t.dtype != q.dtype:
            raise ValueError(f"band_term is {t.dtype} on {t.device}; q is {q.dtype} on "
                             f"{q.device}")
    return terms


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
    return eager(q, k, v, tab, mask, causal, dropout_p, scale)


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
    if needs_grad and dropout_p > 0:
        return "eager"
    if needs_grad and mask is not None and mask.requires_grad:
        return "sdpa"  # its blocked backward also gives the mask its gradient
    if needs_grad and tab is not None and q.device.type == "cuda" and has_flex():
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
    add = additive(mask, q.dtype)
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
    # a keep mask holds 0s and 1s only: one row with any other value settles it (a dense
    # additive mask, such as a content term's, costs one row here instead of two passes)
    first_row = m[(0,) * (m.dim() - 1)]
    if not bool(((first_row == 0) | (first_row == 1)).all()):
        return
    ones = m == 1
    if bool(ones.any()) and bool((ones | (m == 0)).all()):
        raise ValueError(
            "mask is a float tensor of 0s and 1s, which looks like a keep mask (1 = attend, "
            "0 = padding) but would be added to the scores and mask nothing; pass a bool "
            "mask (True = attend, e.g. mask.bool()) or an additive float mask (0 = attend, "
            "-inf = masked)"
        )
