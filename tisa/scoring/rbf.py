"""The paper's RBF scoring function (``rbf``) and the Gaussian kernels it shares with the
kernel-plus-tail families (:mod:`tisa.scoring.tails`), with the optional far ramp and free
table over short offsets."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

from tisa._validate import check_int
from tisa.scoring.base import ScoringFunction, check_number, register


def kernel_init(
    *,
    amplitude_mean: float,
    amplitude_std: float,
    sharpness_mean: float,
    sharpness_std: float,
    offset_mean: float,
    offset_std: float,
    offset_range: float | None,
) -> dict[str, float | None]:
    """Checked initialisation options of S Gaussian kernels (plain data for ``config()``)."""
    init: dict[str, float | None] = {
        "amplitude_mean": check_number(amplitude_mean, "amplitude_mean"),
        "amplitude_std": check_number(amplitude_std, "amplitude_std", minimum=0),
        "sharpness_mean": check_number(sharpness_mean, "sharpness_mean"),
        "sharpness_std": check_number(sharpness_std, "sharpness_std", minimum=0),
        "offset_mean": check_number(offset_mean, "offset_mean"),
        "offset_std": check_number(offset_std, "offset_std", minimum=0),
    }
    finite = isinstance(offset_range, (int, float)) and math.isfinite(offset_range)
    if offset_range is not None and not (finite and offset_range >= 0):
        raise ValueError(f"offset_range must be a number >= 0 or None, got {offset_range!r}")
    init["offset_range"] = None if offset_range is None else float(offset_range)
    return init


@torch.no_grad()
def reset_kernels(amplitude: Tensor, sharpness: Tensor, offset: Tensor, init: dict) -> None:
    """Draws (H, S) kernel parameters from ``init`` (see :func:`kernel_init`), in place."""
    amplitude.normal_(init["amplitude_mean"], init["amplitude_std"])
    sharpness.normal_(init["sharpness_mean"], init["sharpness_std"])
    offset.normal_(init["offset_mean"], init["offset_std"])
    if init["offset_range"] is not None:  # evenly spread, the noise breaks ties between heads
        r = init["offset_range"]
        n = offset.shape[-1]
        grid = torch.linspace(-r, r, n) if n > 1 else torch.zeros(1)
        offset.add_(grid.to(offset)[None, :])  # centred on offset_mean


def kernel_sum(u: Tensor, amplitude: Tensor, sharpness: Tensor, offset: Tensor) -> Tensor:
    """sum_s a_hs * exp(-|b_hs| * (u - c_hs)^2): (N,) positions on the kernel axis -> (H, N)."""
    d = u[None, None, :] - offset[..., None]  # (H, S, N)
    arg = -sharpness.abs()[..., None] * d.square()  # (H, S, N), <= 0
    # exp of an argument near or below log(tiny) is subnormal or 0, and 15-35 times slower
    # to compute on x86 CPUs than elsewhere: there the kernel is set to 0 (exactly, as far
    # away as before) and exp only sees arguments it computes at full speed. (Not in
    # float16, whose tiny, 6e-5, is a value a logit can tell from 0.)
    tiny = torch.finfo(arg.dtype).tiny
    floor = math.log(tiny) + 1.0 if tiny < 1e-30 else -math.inf
    kernels = torch.where(arg > floor, torch.exp(arg.clamp(min=floor)), 0.0)  # (H, S, N)
    return torch.einsum("hs,hsn->hn", amplitude, kernels)  # (H, N)


def check_far(far_offset: Any, far_slope: Any) -> tuple[int | None, float]:
    far_offset = check_int(far_offset, "far_offset", minimum=0, optional=True)
    return far_offset, check_number(far_slope, "far_slope", minimum=0, strict=True)


def far_ramp(offsets: Tensor, far_offset: int, far_slope: float) -> Tensor:
    """The far-field penalty ``-far_slope * max(|k| - far_offset, 0)``, same shape as ``offsets``.

    Zero on |k| <= far_offset, then falling linearly: with ``far_slope`` of 1 or more,
    keys beyond the offset get a weight of at most exp(-far_slope) per token of excess
    distance, a soft attention window of +-far_offset.
    """
    excess = (offsets.abs() - far_offset).clamp(min=0)
    return -far_slope * excess


def near_values(near: Tensor, offsets: Tensor) -> Tensor:
    """A free table over short offsets, read at ``offsets``: (H, N).

    ``near`` is (H, 2K + 1), column ``k + K`` holding offset k; offsets beyond +-K read 0.
    """
    reach = (near.shape[-1] - 1) // 2
    k = offsets.long()
    inside = k.abs() <= reach
    values = near[:, (k + reach).clamp(0, 2 * reach)]  # (H, N)
    return values * inside.to(values.dtype)


@register("rbf")
class RBFScoring(ScoringFunction):
    """Sum of S radial-basis kernels per head (Wennberg & Henter, 2021).

    f_h(k) = sum_s a_hs * exp(-|b_hs| * (k - c_hs)^2)

    Parameters ``amplitude`` (a), ``sharpness`` (b) and ``offset`` (c) are each (H, S):
    3 * S * H positional parameters per layer. Initialisation follows the paper's public
    code: c ~ N(0, 5^2), a ~ N(0.1, 0.01^2), b ~ N(0.1, 0.01^2).

    ``offset_range=R`` instead places each head's S offsets evenly over
    offset_mean + [-R, R] (plus N(0, offset_std^2) noise). With zero amplitudes
    (``amplitude_mean=amplitude_std=0``) the scorer adds exactly nothing to a pretrained
    model's logits at the start (see ``tisa.hf.STARTS``).

    ``far_offset=K`` (default None: off) adds :func:`far_ramp`,
    ``-far_slope * max(|k| - K, 0)``, for evaluation beyond the training length; no
    parameters, and nothing changes on |k| <= K.

    ``near_offsets=K`` (default None: off) adds a free value per head and offset in
    [-K, K] to the kernels, ``near`` (H, 2K + 1), starting at 0 (the scorer's function
    does not change until it trains); offsets beyond +-K get none, so at those offsets,
    whatever the input length, the function is the kernels' alone. It gives a scorer an
    exact profile over short offsets (a model converted by ``tisa convert --near-offsets
    K`` gets the part of each measured profile the kernels miss there).
    """

    symmetric = False

    def __init__(
        self,
        *,
        num_heads: int,
        num_kernels: int = 5,
        amplitude_mean: float = 0.1,
        amplitude_std: float = 0.01,
        sharpness_mean: float = 0.1,
        sharpness_std: float = 0.01,
        offset_mean: float = 0.0,
        offset_std: float = 5.0,
        offset_range: float | None = None,
        far_offset: int | None = None,
        far_slope: float = 1.0,
        near_offsets: int | None = None,
    ) -> None:
        super().__init__(num_heads=num_heads)
        self.num_kernels = check_int(num_kernels, "num_kernels (S)")
        self.near_offsets = check_int(near_offsets, "near_offsets", minimum=0, optional=True)
        self.init = kernel_init(
            amplitude_mean=amplitude_mean,
            amplitude_std=amplitude_std,
            sharpness_mean=sharpness_mean,
            sharpness_std=sharpness_std,
            offset_mean=offset_mean,
            offset_std=offset_std,
            offset_range=offset_range,
        )
        self.far_offset, self.far_slope = check_far(far_offset, far_slope)
        shape = (self.num_heads, self.num_kernels)
        self.amplitude = nn.Parameter(torch.empty(shape))
        self.sharpness = nn.Parameter(torch.empty(shape))
        self.offset = nn.Parameter(torch.empty(shape))
        if self.near_offsets is not None:
            self.near = nn.Parameter(torch.zeros(self.num_heads, 2 * self.near_offsets + 1))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        reset_kernels(self.amplitude, self.sharpness, self.offset, self.init)
        if self.near_offsets is not None:
            with torch.no_grad():
                self.near.zero_()

    def score(self, offsets: Tensor) -> Tensor:
        k = offsets.to(self.amplitude.dtype)  # (N,)
        out = kernel_sum(k, self.amplitude, self.sharpness, self.offset)  # (H, N)
        if self.near_offsets is not None:
            out = out + near_values(self.near, offsets)
        if self.far_offset is not None:
            out = out + far_ramp(k, self.far_offset, self.far_slope)[None, :]
        return out

    def config(self) -> dict[str, Any]:
        return {
            **super().config(),
            "num_kernels": self.num_kernels,
            **self.init,
            "far_offset": self.far_offset,
            "far_slope": self.far_slope,
            # only when set: a model saved without it loads where the option is unknown
            **({} if self.near_offsets is None else {"near_offsets": self.near_offsets}),
        }
