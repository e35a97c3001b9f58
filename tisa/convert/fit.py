"""Least-squares fit of RBF scoring functions to measured offset profiles.

Given, per head, a profile y(k) over offsets k = j - i (the mean of a positional logit
matrix along each diagonal: its least-squares Toeplitz projection) and a weight per
offset, this fits

    y^(k) = c0 + sum_s a_s * exp(-|b_s| * (k - c_s)^2)

by weighted least squares. The constant c0 is fitted but not kept: adding the same value
to every logit of a query row leaves the softmax unchanged, so only the kernels go into
the :class:`~tisa.scoring.RBFScoring` that TISA uses.

The start comes from the profile itself: S times, the offset where the weighted residual
is largest in magnitude becomes a kernel centre, its value the amplitude, and the width at
half height the sharpness; the kernel is subtracted and the next one placed. L-BFGS then
refines all heads at once (float64).

Letters: N profiles (layers x heads), K offsets, S kernels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from tisa._validate import check_int

__all__ = ["KernelFit", "fit_rbf", "initial_kernels", "weighted_r2"]


@dataclass(frozen=True)
class KernelFit:
    """Fitted kernels for N profiles.

    Attributes:
        amplitude: (N, S) a.
        sharpness: (N, S) b >= 0.
        offset: (N, S) c, in offsets.
        constant: (N,) c0 (not part of the scoring function).
        r2: (N,) weighted R^2 of the fit (1 - residual / variance, weights as fitted).
    """

    amplitude: Tensor
    sharpness: Tensor
    offset: Tensor
    constant: Tensor
    r2: Tensor

    def kernels(self, offsets: Tensor) -> Tensor:
        """sum_s a_s exp(-b_s (k - c_s)^2) at ``offsets`` (K,): (N, K), without c0."""
        return _kernels(self.amplitude, self.sharpness, self.offset, offsets.to(self.amplitude))

    def values(self, offsets: Tensor) -> Tensor:
        """The fitted profile c0 + kernels at ``offsets`` (K,): (N, K)."""
        return self.constant[:, None] + self.kernels(offsets)


def _kernels(a: Tensor, b: Tensor, c: Tensor, k: Tensor) -> Tensor:
    d = k[None, None, :] - c[..., None]  # (N, S, K)
    return (a[..., None] * torch.exp(-b.abs()[..., None] * d.square())).sum(1)  # (N, K)


def _check(profile: Tensor, offsets: Tensor, weights: Tensor | None) -> tuple[Tensor, Tensor]:
    if not isinstance(profile, Tensor) or profile.dim() != 2:
        raise ValueError(
            f"profile must be an (N, K) tensor, got {getattr(profile, 'shape', profile)}"
        )
    if offsets.shape != (profile.shape[1],):
        raise ValueError(
            f"offsets must have shape ({profile.shape[1]},) to match profile, "
            f"got {tuple(offsets.shape)}"
        )
    w = torch.ones_like(profile) if weights is None else weights.to(profile).expand_as(profile)
    if (w < 0).any() or not (w.sum(1) > 0).all():
        raise ValueError("weights must be >= 0 with a positive sum for every profile")
    if not torch.isfinite(profile).all():
        raise ValueError("profile must be finite")
    return profile.double(), w.double()


def weighted_r2(target: Tensor, fitted: Tensor, weights: Tensor) -> Tensor:
    """1 - sum w (y - y^)^2 / sum w (y - mean_w y)^2 per row; 1.0 for a constant target."""
    w = weights.expand_as(target)
    mean = (w * target).sum(1, keepdim=True) / w.sum(1, keepdim=True)
    total = (w * (target - mean).square()).sum(1)
    resid = (w * (target - fitted).square()).sum(1)
    return torch.where(total > 0, 1 - resid / total.clamp_min(1e-300), torch.ones_like(total))


@torch.no_grad()
def initial_kernels(
    profile: Tensor, offsets: Tensor, weights: Tensor | None = None, num_kernels: int = 5
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Greedy start from the profile's peaks: (amplitude, sharpness, offset) (N, S), c0 (N,).

    c0 is the weighted median of the profile (the level far from the peaks). Each kernel
    sits at the largest remaining weighted deviation; its width is where the deviation
    first falls to half on either side (at least one offset).
    """
    y, w = _check(profile, offsets, weights)
    s = check_int(num_kernels, "num_kernels")
    k = offsets.double()
    n = y.shape[0]
    c0 = torch.stack([_weighted_median(y[i], w[i]) for i in range(n)])
    resid = y - c0[:, None]
    amp, sharp, cen = (torch.zeros(n, s, dtype=torch.float64) for _ in range(3))
    score = (w / w.amax(1, keepdim=True)).sqrt()  # favour well-measured offsets
    for j in range(s):
        idx = (resid.abs() * score).argmax(1)  # (N,)
        peak = resid.gather(1, idx[:, None])[:, 0]
        for i in range(n):
            half = resid[i].abs() < peak[i].abs() / 2
            width = _half_width(half, int(idx[i]))
            sharp[i, j] = math.log(2.0) / max(width, 1.0) ** 2
        amp[:, j], cen[:, j] = peak, k[idx]
        resid = resid - _kernels(amp[:, j : j + 1], sharp[:, j : j + 1], cen[:, j : j + 1], k)
    return amp, sharp, cen, c0


def _half_width(below_half: Tensor, at: int) -> float:
    """Distance from ``at`` to the nearest offset where the deviation is below half."""
    positions = torch.nonzero(below_half).flatten()
    if positions.numel() == 0:
        return float(below_half.numel())
    return float((positions - at).abs().min().clamp_min(1))


def _weighted_median(values: Tensor, weights: Tensor) -> Tensor:
    order = values.argsort()
    cum = weights[order].cumsum(0)
    return values[order][torch.searchsorted(cum, cum[-1] / 2).clamp(max=len(values) - 1)]


def fit_rbf(
    profile: Tensor,
    offsets: Tensor,
    weights: Tensor | None = None,
    *,
    num_kernels: int = 5,
    max_iter: int = 300,
) -> KernelFit:
    """Fits S RBF kernels plus a constant to each profile by weighted least squares.

    Args:
        profile: (N, K) values y(k), e.g. the diagonal means of positional logits.
        offsets: (K,) integer offsets k of the columns.
        weights: (K,) or (N, K) non-negative weights, e.g. the number of entries on each
            diagonal (L - |k|), which makes this the least-squares fit of the kernels'
            Toeplitz matrix to the matrix itself. Default: equal weights.
        num_kernels: S.
        max_iter: L-BFGS iterations.

    Returns:
        :class:`KernelFit` (float64), the kernels never worse than the greedy start.

    Raises:
        ValueError: shapes that do not match, negative or all-zero weights, non-finite
            values.
    """
    y, w = _check(profile, offsets, weights)
    check_int(max_iter, "max_iter")
    k = offsets.double()
    a0, b0, c0_, const0 = initial_kernels(y, offsets, w, num_kernels)
    wn = w / w.sum(1, keepdim=True)
    # b is fitted on a log scale (always positive, widths across orders of magnitude)
    params = [t.clone().requires_grad_(True) for t in (a0, b0.clamp_min(1e-8).log(), c0_, const0)]

    def per_profile(a: Tensor, b: Tensor, c: Tensor, const: Tensor) -> Tensor:
        fitted = const[:, None] + _kernels(a, b, c, k)
        return (wn * (fitted - y).square()).sum(1)  # (N,)

    def loss_fn() -> Tensor:
        a, log_b, c, const = params
        return per_profile(a, log_b.exp(), c, const).sum()

    optimizer = torch.optim.LBFGS(params, max_iter=max_iter, line_search_fn="strong_wolfe")

    def closure() -> Tensor:
        optimizer.zero_grad()
        loss = loss_fn()
        loss.backward()
        return loss

    optimizer.step(closure)
    with torch.no_grad():
        a, log_b, c, const = (p.detach() for p in params)
        b = log_b.exp()
        after = per_profile(a, b, c, const)
        # per profile, keep the greedy start where L-BFGS made it worse or left the reals
        worse = ~torch.isfinite(after) | (after > per_profile(a0, b0, c0_, const0))
        a, b, c = (torch.where(worse[:, None], s0, s1) for s0, s1 in ((a0, a), (b0, b), (c0_, c)))
        const = torch.where(worse, const0, const)
        fitted = const[:, None] + _kernels(a, b, c, k)
        r2 = weighted_r2(y, fitted, w)
    return KernelFit(amplitude=a, sharpness=b, offset=c, constant=const, r2=r2)
