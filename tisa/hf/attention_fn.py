"""The attention function and mask function that transformers calls for TISA models.

transformers 5 decouples models from their attention kernel: each attention layer calls
``ALL_ATTENTION_FUNCTIONS[config._attn_implementation](module, q, k, v, mask, ...)``, and
the model builds its mask with ``ALL_MASK_ATTENTION_FUNCTIONS[config._attn_implementation]``.
This module registers four names with both interfaces:

==============  ==========================================================================
``"tisa"``      :func:`tisa.attention.attention` with the backend named in ``config.tisa``
                (``"auto"`` unless set otherwise)
``"tisa_eager"`` backend ``"eager"``; also returns the attention probabilities
``"tisa_sdpa"``  backend ``"sdpa"``
``"tisa_flex"``  backend ``"flex"``
==============  ==========================================================================

Registering a mask function matters: transformers gives an attention implementation that
has no mask function ``attention_mask=None``, so padding would be silently ignored.

Where the scoring functions come from: a TISA model's base model (``model.base_model``)
holds them in ``tisa_scorers`` (an ``nn.ModuleList``) and a forward pre-hook adds that list
to the keyword arguments of its forward call. transformers passes these keyword arguments
down to every attention layer and into the attention function, which picks the scorer of
its layer (attribute ``tisa_layer`` of the attention module; ALBERT, whose layers are
applied several times, also passes the depth ``tisa_depth``). Attention modules without
``tisa_layer`` (cross-attention) get no positional bias.

Positions with a key/value cache: TISA needs the position of each query among the keys.
A dynamic cache hands over exactly the keys seen so far, so the queries are the last Lq.
A static cache hands over all its slots, filled or not; :func:`tisa_mask` then builds the
mask over the filled slots only (transformers gives it the position of the first query,
``q_offset``), and the attention function drops the keys the mask does not cover, which
puts the queries at the last Lq positions again.

Letters: B batch, H heads, Lq queries, Lk keys, D head size.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from transformers import AttentionInterface
from transformers.masking_utils import (
    AttentionMaskInterface,
    bidirectional_mask_function,
    prepare_padding_mask,
    sdpa_mask,
)

from tisa._validate import check_int
from tisa.attention import attention, attention_with_weights
from tisa.attention.masks import additive
from tisa.scoring import ClippedOffsets, WindowedOffsets

__all__ = [
    "IMPLEMENTATIONS",
    "apply_rotary",
    "eager_attention",
    "keys_seen",
    "length_factor",
    "register",
    "tisa_attention_forward",
    "tisa_mask",
]

#: attention implementation name -> tisa.attention backend (None: read config.tisa)
IMPLEMENTATIONS: dict[str, str | None] = {
    "tisa": None,
    "tisa_eager": "eager",
    "tisa_sdpa": "sdpa",
    "tisa_flex": "flex",
}


# ------------------------------------------------------------------------------ rotary


@functools.lru_cache(maxsize=32)
def _rotary_tables(
    start: int, length: int, dim: int, base: float, device: torch.device, dtype: torch.dtype
) -> tuple[Tensor, Tensor]:
    inv_freq = 1.0 / base ** (torch.arange(0, dim, 2, device=device, dtype=torch.float32) / dim)
    pos = torch.arange(start, start + length, device=device, dtype=torch.float32)
    angles = torch.outer(pos, inv_freq)  # (L, D/2)
    emb = torch.cat([angles, angles], dim=-1)  # (L, D)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def apply_rotary(x: Tensor, start: int, base: float = 10000.0) -> Tensor:
    """Rotary position embedding (Su et al., 2021; rotate-half layout) of positions start...

    Args:
        x: (B, H, L, D) queries or keys, D even.
        start: position of the first of the L rows.
        base: frequency base.

    Returns:
        (B, H, L, D), the rows rotated by their positions start .. start + L - 1.
    """
    length, dim = x.shape[-2], x.shape[-1]
    cos, sin = _rotary_tables(start, length, dim, float(base), x.device, x.dtype)
    x1, x2 = x[..., : dim // 2], x[..., dim // 2 :]
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


# ------------------------------------------------------------------- log-n scaling


def keys_seen(
    mask: Tensor | None, causal: bool, lq: int, lk: int, window: int | None = None
) -> Tensor:
    """How many keys each query attends to, broadcastable to (B, H, Lq).

    Args:
        mask: None, a bool mask (True = attend) or an additive float mask (0 = attend,
            a large negative number or -inf = masked), broadcastable to (B, H, Lq, Lk).
        causal: without a mask, whether query i (of the last Lq of Lk positions) sees only
            the keys up to its own position.
        lq, lk: query and key counts.
        window: W: a query sees only the keys within +-W of it (``attention_window``);
            None: every key the mask keeps.
    """
    if window is not None:
        return _keys_in_window(mask, causal, lq, lk, window)
    if mask is None:
        if causal:
            return torch.arange(lk - lq + 1, lk + 1, dtype=torch.float32)[None, None]
        return torch.full((1, 1, lq), float(lk))
    if mask.dtype == torch.bool:
        seen = mask
    else:
        seen = mask > torch.finfo(mask.dtype).min / 2
    return seen.expand(*seen.shape[:-1], lk).sum(-1, dtype=torch.float32)


def _keys_in_window(mask: Tensor | None, causal: bool, lq: int, lk: int, window: int) -> Tensor:
    """:func:`keys_seen` for queries that see only keys within +-``window``: the kept keys
    of each query's window, counted from a running sum over the keys."""
    if mask is None:
        keep = torch.ones(1, 1, 1, lk, dtype=torch.bool)
    else:
        keep = mask if mask.dtype == torch.bool else mask > torch.finfo(mask.dtype).min / 2
    total = F.pad(keep.cumsum(-1, dtype=torch.int32), (1, 0))  # (B|1, H|1, Lq|1, Lk + 1)
    pos = torch.arange(lk - lq, lk, device=total.device)  # the queries' positions
    lo = (pos - window).clamp(min=0)
    hi = (pos + (0 if causal and mask is None else window)).clamp(max=lk - 1) + 1
    if total.shape[-2] == 1:
        seen = total[..., 0, hi] - total[..., 0, lo]
    else:  # a mask row per query: each reads its own row
        shape = (*total.shape[:-1], 1)
        upper = total.gather(-1, hi.view(lq, 1).expand(shape))
        seen = (upper - total.gather(-1, lo.view(lq, 1).expand(shape)))[..., 0]
    return seen.to(torch.float32)


def length_factor(seen: Tensor, length_scale: int) -> Tensor:
    """max(1, log n / log N) for key counts n: 1 up to N keys, rising slowly beyond."""
    return (seen.clamp(min=1).log() / math.log(length_scale)).clamp(min=1.0)


# --------------------------------------------------------------------------- attention


def _scorer_for(module: nn.Module, kwargs: dict[str, Any]):
    """The scoring function of this attention call, or None (no TISA bias here)."""
    layer = getattr(module, "tisa_layer", None)
    if layer is None:
        return None  # cross-attention or a module TISA was not installed on
    scorers = kwargs.get("tisa_scorers")
    if scorers is None:
        raise RuntimeError(
            "TISA attention was called without its scoring functions: call the model (or its "
            "base model), not an inner module; the base model passes them to every layer"
        )
    return _of_layer(scorers, module, layer, kwargs)  # None for rotary only


def _content_for(module: nn.Module, kwargs: dict[str, Any]):
    """The relative content term of this attention call (:class:`tisa.scoring.RelativeContent`),
    or None: a model without ``content_offsets``, or a layer without TISA."""
    layer = getattr(module, "tisa_layer", None)
    content = kwargs.get("tisa_content")
    return None if layer is None or content is None else _of_layer(content, module, layer, kwargs)


def _of_layer(modules: nn.ModuleList, module: nn.Module, layer: int, kwargs: dict[str, Any]):
    """The entry of a per-layer list (scorers, content terms) for this attention call:
    None when empty, the one entry when shared across layers (or a one-layer model), else
    the layer's; ALBERT applies shared layer modules at several depths, one entry each."""
    if len(modules) == 0:
        return None
    if len(modules) == 1:
        return modules[0]
    depth = kwargs.get("tisa_depth")
    if depth is not None:
        layer = depth * module.config.inner_group_num + layer
    return modules[layer]


def tisa_attention_forward(
    module: nn.Module,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attention_mask: Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    *,
    backend: str | None = None,
    **kwargs: Any,
) -> tuple[Tensor, Tensor | None]:
    """Attention function in transformers' ``AttentionInterface`` convention.

    Args:
        module: the calling attention layer (reads ``module.config.tisa``,
            ``module.tisa_layer`` and ``module.is_causal``).
        query: (B, H, Lq, D).
        key: (B, H, Lk, D); with a key/value cache the queries are the last Lq positions.
        value: (B, H, Lk, D).
        attention_mask: None, a bool mask (True = attend) or an additive float mask
            broadcastable to (B, H, Lq, Lk), as built by :func:`tisa_mask`.
        scaling: logit scale (default 1 / sqrt(D)).
        dropout: dropout probability on the attention probabilities.
        backend: :func:`tisa.attention.attention` backend; None reads ``config.tisa``.
        **kwargs: transformers' pass-through arguments, including ``tisa_scorers`` (and
            ``tisa_content`` for a model with relative content terms).

    Returns:
        ``(out, weights)``: out (B, Lq, H, D); weights (B, H, Lq, Lk) for the eager backend
        or when ``output_attentions`` is requested, else None.
    """
    settings = getattr(module.config, "tisa", None) or {}
    if backend is None:
        backend = settings.get("backend", "auto")
    scorer = _scorer_for(module, kwargs)
    lq, lk = query.shape[-2], key.shape[-2]
    causal = bool(getattr(module, "is_causal", False)) and attention_mask is None
    if causal and lq > 1 and lk > lq:
        # transformers drops the mask only for a prefill into an empty static cache: the
        # queries are then the *first* Lq positions, and later keys are unused slots.
        key, value = key[:, :, :lq], value[:, :, :lq]
        lk = lq
    elif attention_mask is not None and lq <= attention_mask.shape[-1] < lk:
        # a static cache: the mask covers the filled slots only (see tisa_mask), the
        # queries being the last of them
        lk = attention_mask.shape[-1]
        key, value = key[:, :, :lk], value[:, :, :lk]
    if settings.get("rotary", False) and getattr(module, "tisa_layer", None) is not None:
        base = settings.get("rotary_base", 10000.0)
        query = apply_rotary(query, lk - lq, base)
        key = apply_rotary(key, 0, base)
    length_scale = settings.get("length_scale")
    window = settings.get("attention_window")
    if getattr(module, "tisa_layer", None) is None:
        window = None  # cross-attention: no TISA bias, no window
    if window is not None:  # config.tisa may have been changed on a loaded model
        check_int(window, "config.tisa['attention_window']")
        if scorer is None:
            raise ValueError(
                "config.tisa['attention_window'] needs a scoring function (the window is "
                "the scores' -inf beyond +-W), but this model has none (scoring=None)"
            )
    # inputs of up to N keys are left as they are (every factor would be 1)
    if length_scale and lk > length_scale and getattr(module, "tisa_layer", None) is not None:
        seen = keys_seen(attention_mask, causal, lq, lk, window).to(query.device)
        factor = length_factor(seen, length_scale)  # (B|1, H|1, Lq)
        query = query * factor[..., None].to(query.dtype)
    clip = settings.get("clip_distance")
    if clip is not None and scorer is not None:
        # config.tisa may have been changed on a loaded model: the same check as on load
        check_int(clip, "config.tisa['clip_distance']")
        if lk - 1 > clip:  # shorter inputs have no offset to clip
            scorer = ClippedOffsets.of(scorer, clip)
    if window is not None and lk - 1 > window:  # shorter inputs: every key in the window
        scorer = WindowedOffsets.of(scorer, window)
    scale = query.shape[-1] ** -0.5 if scaling is None else scaling
    content = _content_for(module, kwargs)
    weights_asked = backend == "eager" or kwargs.get("output_attentions", False)
    band = None
    if content is not None and not weights_asked and not (
        torch.is_grad_enabled()
        and any(t.requires_grad for t in (query, key, *content.parameters()))
    ):  # nothing trains: the term as its band, which attention adds block by block
        band = content.band(query, key, scale)
    elif content is not None:  # dense (B, H, Lq, Lk): it joins the mask as an additive float
        term = content(query, key, scale)
        mask = additive(attention_mask, term.dtype)  # causality stays the backend's
        if mask is None:
            attention_mask = term
        elif term.requires_grad:
            attention_mask = term + mask
        else:  # the term is this call's own tensor: no second (B, H, Lq, Lk) one
            attention_mask = term.add_(mask)
    common = dict(mask=attention_mask, causal=causal, dropout_p=dropout, scale=scale)
    if weights_asked:
        out, weights = attention_with_weights(query, key, value, scorer, **common)
    else:
        out = attention(query, key, value, scorer, backend=backend, band_term=band, **common)
        weights = None
    return out.transpose(1, 2).contiguous(), weights  # (B, Lq, H, D)


# -------------------------------------------------------------------------------- mask


def tisa_mask(
    batch_size: int,
    q_length: int,
    kv_length: int,
    q_offset: int = 0,
    kv_offset: int = 0,
    mask_function=bidirectional_mask_function,
    attention_mask: Tensor | None = None,
    allow_is_causal_skip: bool = True,
    allow_is_bidirectional_skip: bool = False,
    use_vmap: bool = False,
    device: torch.device | str = "cpu",
    **kwargs: Any,
) -> Tensor | None:
    """Mask function in transformers' ``AttentionMaskInterface`` convention.

    Bidirectional masks (encoders) stay compact: a padding mask (B, 1, 1, Lk) of bools, or
    None when nothing is padded. Everything else (causal, sliding, custom patterns) is
    transformers' own SDPA mask: (B, 1, Lq, Lk) bools, or None for a plain causal mask
    that the attention function then applies itself. When the keys run past the last query
    (``q_offset + q_length``: the unfilled slots of a static cache), the mask ends at the
    last query, and the attention function leaves the later keys out.
    """
    visible = int(q_offset) + q_length - kv_offset
    if mask_function is not bidirectional_mask_function and 0 < visible < kv_length:
        kv_length = visible
    if (
        mask_function is bidirectional_mask_function
        and not use_vmap
        and allow_is_bidirectional_skip
        and q_offset == 0
    ):
        padding = prepare_padding_mask(attention_mask, kv_length, kv_offset)
        if padding is None or bool(padding.all()):
            return None
        return padding[:, None, None, :].to(device)  # (B, 1, 1, Lk)
    return sdpa_mask(
        batch_size=batch_size,
        q_length=q_length,
        kv_length=kv_length,
        q_offset=q_offset,
        kv_offset=kv_offset,
        mask_function=mask_function,
        attention_mask=attention_mask,
        allow_is_causal_skip=allow_is_causal_skip,
        allow_is_bidirectional_skip=allow_is_bidirectional_skip,
        use_vmap=use_vmap,
        device=device,
    )


def register() -> None:
    """Registers the TISA attention and mask functions under every name in IMPLEMENTATIONS."""
    for name, backend in IMPLEMENTATIONS.items():
        fn = (
            tisa_attention_forward
            if backend is None
            else functools.partial(tisa_attention_forward, backend=backend)
        )
        AttentionInterface.register(name, fn)
        AttentionMaskInterface.register(name, tisa_mask)


@contextlib.contextmanager
def eager_attention(*models: Any) -> Iterator[None]:
    """Runs ``models`` (Hugging Face models) with an attention implementation that returns
    its probabilities under ``output_attentions=True``: ``"eager"``, or ``"tisa_eager"``
    for a TISA model (which keeps its positional bias); each gets its own back on exit."""
    previous = [model.config._attn_implementation for model in models]
    try:
        for model, name in zip(models, previous):
            eager = "tisa_eager" if str(name).startswith("tisa") else "eager"
            if name != eager:
                model.set_attn_implementation(eager)
        yield
    finally:
        for model, name in zip(models, previous):
            if model.config._attn_implementation != name:
                model.set_attn_implementation(name)
