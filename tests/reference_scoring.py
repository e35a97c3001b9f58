"""Naive references for the kernel-plus-tail scoring families, written from their formulas.

One Python float at a time (float64 through ``math``), sharing no code with
``tisa.scoring``:

    f_h(k) = sum_s a_hs * exp(-|b_hs| * (u(k) - c_hs)^2) + tail_h(k) + ramp(k)

    u(k)    = k                                  (axis "offset")
            = sign(k) * log(1 + |k| / w)         (axis "log")
    tail    = -softplus(raw_slope) * |k|                              ("linear")
            = -softplus(raw_r1) * log(1 + softplus(raw_r2) * |k|)     ("log")
    ramp(k) = -far_slope * max(|k| - far_offset, 0)                   (far_offset set)

Asymmetric tails hold (H, 2) raw values: column 0 for k < 0, column 1 for k > 0.
"""

from __future__ import annotations

import math

import torch


def softplus(x: float) -> float:
    """log(1 + e^x), without overflow for large x."""
    return x + math.log1p(math.exp(-x)) if x > 0 else math.log1p(math.exp(x))


def log_distance(k: float, w: float) -> float:
    """psi(k) = sign(k) * log(1 + |k| / w)."""
    if k == 0:
        return 0.0
    return math.copysign(math.log(1.0 + abs(k) / w), k)


def _side(raw: torch.Tensor, h: int, k: float) -> float:
    """The raw tail value of head h for offset k (per side when raw is (H, 2))."""
    if raw.dim() == 1:
        return float(raw[h])
    return float(raw[h, 1 if k > 0 else 0])


def tail(offsets, tail_kind, raw, num_heads):
    """tail_h(k) for integer ``offsets`` of any shape: (H, *offsets.shape) float64.

    raw: ``{"raw_slope": ...}`` for "linear", ``{"raw_r1": ..., "raw_r2": ...}`` for "log".
    """
    flat = [float(k) for k in offsets.reshape(-1).tolist()]
    out = torch.zeros(num_heads, len(flat), dtype=torch.float64)
    for h in range(num_heads):
        for n, k in enumerate(flat):
            if tail_kind == "linear":
                out[h, n] = -softplus(_side(raw["raw_slope"], h, k)) * abs(k)
            elif tail_kind == "log":
                r1 = softplus(_side(raw["raw_r1"], h, k))
                r2 = softplus(_side(raw["raw_r2"], h, k))
                out[h, n] = -r1 * math.log1p(r2 * abs(k))
            elif tail_kind != "none":
                raise ValueError(tail_kind)
    return out.reshape(num_heads, *offsets.shape)


def kernel_tail(
    offsets,
    amplitude,
    sharpness,
    offset,
    *,
    axis="offset",
    distance_scale=1.0,
    tail_kind="none",
    raw=None,
    far_offset=None,
    far_slope=1.0,
):
    """The whole f_h(k) of the module docstring: (H, *offsets.shape) float64."""
    h_count, s_count = amplitude.shape
    flat = [float(k) for k in offsets.reshape(-1).tolist()]
    out = torch.zeros(h_count, len(flat), dtype=torch.float64)
    for h in range(h_count):
        for n, k in enumerate(flat):
            u = log_distance(k, distance_scale) if axis == "log" else k
            value = 0.0
            for s in range(s_count):
                a, b, c = (float(t[h, s]) for t in (amplitude, sharpness, offset))
                value += a * math.exp(-abs(b) * (u - c) ** 2)
            if far_offset is not None:
                value -= far_slope * max(abs(k) - far_offset, 0.0)
            out[h, n] = value
    out = out.reshape(h_count, *offsets.shape)
    return out + tail(offsets, tail_kind, raw or {}, h_count)
