"""Naive reference implementations, written straight from the formulas with Python loops.

Slow on purpose: they share no code with the package, so the package is tested against
an independent statement of what it should compute.
"""

from __future__ import annotations

import math

import torch


def rbf(offsets, amplitude, sharpness, offset):
    """f_h(k) = sum_s a_hs * exp(-|b_hs| * (k - c_hs)^2), looping over heads and kernels."""
    h, s = amplitude.shape
    out = torch.zeros(h, *offsets.shape, dtype=amplitude.dtype)
    k = offsets.to(amplitude.dtype)
    for hi in range(h):
        for si in range(s):
            a, b, c = amplitude[hi, si], sharpness[hi, si], offset[hi, si]
            out[hi] = out[hi] + a * torch.exp(-b.abs() * (k - c) ** 2)
    return out


def toeplitz_bias(f, lq, lk):
    """Dense (H, Lq, Lk) bias with queries at positions lk-lq .. lk-1: F[h,i,j] = f(j - i)."""
    rows = []
    for qi in range(lq):
        i = lk - lq + qi
        rows.append(torch.stack([f(torch.tensor(j - i)) for j in range(lk)], -1))
    return torch.stack(rows, -2)  # (H, Lq, Lk)


def attention(q, k, v, bias=None, keep=None, causal=False, scale=None):
    """softmax(q k^T * scale + bias, masked) v, one (batch, head, query) row at a time.

    keep: optional bool (B, Lk) padding mask, True = attend. Masked keys get weight 0.
    Queries sit at the last Lq of the Lk positions.
    """
    b, h, lq, d = q.shape
    lk = k.shape[-2]
    scale = 1 / math.sqrt(d) if scale is None else scale
    out = torch.zeros(b, h, lq, v.shape[-1], dtype=q.dtype)
    positions = torch.arange(lk)
    for bi in range(b):
        for hi in range(h):
            for qi in range(lq):
                i = lk - lq + qi
                logits = (k[bi, hi] * q[bi, hi, qi]).sum(-1) * scale  # (Lk,)
                if bias is not None:
                    logits = logits + bias[hi, qi]
                allowed = torch.ones(lk, dtype=torch.bool)
                if keep is not None:
                    allowed &= keep[bi].bool()
                if causal:
                    allowed &= positions <= i
                w = torch.exp(logits - logits[allowed].max()) * allowed
                out[bi, hi, qi] = (w / w.sum()) @ v[bi, hi]
    return out
