"""Masks of the attention backends: the causal mask, additive masks, the causal bias table,
the band of an attention window and a softmax that leaves fully masked rows at 0 (letters as
in :mod:`tisa.attention`)."""

from __future__ import annotations

import torch
from torch import Tensor

NEG_INF = float("-inf")


def causal_keep(lq: int, lk: int, device) -> Tensor:
    """(Lq, Lk) bool: query qi (absolute position Lk-Lq+qi) may see keys j <= its position."""
    qpos = torch.arange(lk - lq, lk, device=device)[:, None]
    return torch.arange(lk, device=device)[None, :] <= qpos


def additive(mask: Tensor | None, dtype) -> Tensor | None:
    """A bool or float mask as a 4-D additive float mask (-inf where a bool mask is False)."""
    if mask is None:
        return None
    if mask.dtype == torch.bool:
        zeros = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
        mask = zeros.masked_fill_(~mask, NEG_INF)
    return mask.reshape((1,) * (4 - mask.dim()) + tuple(mask.shape))


def with_causal(add: Tensor | None, lq: int, lk: int, dtype, device) -> Tensor:
    """``add`` (or nothing) with -inf on the keys after each query."""
    c = torch.zeros(lq, lk, dtype=dtype, device=device)
    c.masked_fill_(~causal_keep(lq, lk, device), NEG_INF)
    return c if add is None else add + c


def causal_table(tab: Tensor, lk: int) -> Tensor:
    """The table with -inf at positive offsets (column t holds offset t - (Lk - 1)).

    Causality depends on j - i only, so it is Toeplitz too and folds into the table.
    """
    return tab.masked_fill(torch.arange(tab.shape[-1], device=tab.device) > lk - 1, NEG_INF)


def masked_softmax(scores: Tensor) -> Tensor:
    """Softmax over the last axis; rows that are -inf everywhere give 0, as stock SDPA does.

    Those rows are set to 0 before the softmax so that no NaN enters the graph: the
    gradient through them is exactly 0.
    """
    dead = torch.isneginf(scores).all(-1, keepdim=True)
    if not bool(dead.any()):
        return torch.softmax(scores, dim=-1)
    return torch.softmax(scores.masked_fill(dead, 0.0), dim=-1).masked_fill(dead, 0.0)


def window_band(window: int | None, lq: int, lk: int, causal: bool) -> tuple[int, int] | None:
    """The table columns ``(first, last)`` that a query can read a finite bias from under an
    attention window of +-``window`` (:class:`tisa.scoring.WindowedOffsets`; causal: the
    window's keys up to the query), when they leave keys out of every row's reach; None
    otherwise (no window, or one that holds every key). Column t holds offset t - (Lk - 1)
    (:mod:`tisa.bias`). Found from the lengths alone, without reading the table."""
    if window is None:
        return None
    first = max(0, lk - 1 - window)
    last = min(lq + lk - 2, lk - 1 + (0 if causal else window))
    return (first, last) if last - first + 1 < lk else None
