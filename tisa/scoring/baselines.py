"""The other positional schemes as scoring functions: ALiBi (fixed and learned slopes), T5
buckets, KERPLE-log, a free table per offset, and FIRE."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

from tisa._validate import check_int
from tisa.scoring.base import (
    ScoringFunction,
    check_number,
    compute_dtype,
    register,
    softplus_inverse,
)


def alibi_slopes(num_heads: int) -> Tensor:
    """Geometric ALiBi slopes (Press et al., 2022), including non-power-of-2 head counts."""

    def power_of_2(n: int) -> list[float]:
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start**i for i in range(n)]

    if math.log2(num_heads).is_integer():
        slopes = power_of_2(num_heads)
    else:
        closest = 2 ** math.floor(math.log2(num_heads))
        slopes = power_of_2(closest) + power_of_2(2 * closest)[0::2][: num_heads - closest]
    return torch.tensor(slopes)


@register("alibi")
class ALiBiScoring(ScoringFunction):
    """ALiBi: f_h(k) = -m_h * |k| with fixed geometric slopes m_h (no parameters)."""

    symmetric = True

    def __init__(self, *, num_heads: int) -> None:
        super().__init__(num_heads=num_heads)
        self.register_buffer("slopes", alibi_slopes(self.num_heads), persistent=False)

    def score(self, offsets: Tensor) -> Tensor:
        return -self.slopes[:, None] * offsets.abs().to(self.slopes.dtype)[None, :]


def t5_bucket(offsets: Tensor, *, bidirectional: bool, num_buckets: int, max_distance: int):
    """T5's relative-position buckets for k = j - i (memory minus query position).

    Half the buckets (per direction when bidirectional) are exact small distances, the
    rest log-spaced up to ``max_distance``; beyond it everything shares the last bucket.
    In causal mode future offsets (k > 0) map to bucket 0, like distance 0.
    """
    bucket = torch.zeros_like(offsets)
    n = num_buckets
    if bidirectional:
        n //= 2
        bucket = bucket + (offsets > 0).long() * n
        dist = offsets.abs()
    else:
        dist = (-offsets).clamp(min=0)
    max_exact = n // 2
    is_small = dist < max_exact
    large = (
        max_exact
        + (
            torch.log(dist.float().clamp(min=1) / max_exact)
            / math.log(max_distance / max_exact)
            * (n - max_exact)
        ).long()
    )
    large = large.clamp(max=n - 1)
    return bucket + torch.where(is_small, dist, large)


@register("t5")
class T5Scoring(ScoringFunction):
    """T5 relative attention bias: one learned value per (bucket, head)."""

    def __init__(
        self,
        *,
        num_heads: int,
        num_buckets: int = 32,
        max_distance: int = 128,
        bidirectional: bool = True,
    ) -> None:
        super().__init__(num_heads=num_heads)
        self.num_buckets = check_int(num_buckets, "num_buckets", minimum=4)
        self.max_distance = check_int(max_distance, "max_distance", minimum=2)
        half = self.num_buckets // 2 if bidirectional else self.num_buckets
        if self.max_distance <= half // 2:
            raise ValueError(
                f"max_distance must exceed the exact-bucket range {half // 2}, got {max_distance}"
            )
        self.bidirectional = bool(bidirectional)
        self.symmetric = False
        self.bias = nn.Parameter(torch.zeros(self.num_buckets, self.num_heads))
        nn.init.normal_(self.bias, std=0.02)

    def score(self, offsets: Tensor) -> Tensor:
        buckets = t5_bucket(
            offsets.long(),
            bidirectional=self.bidirectional,
            num_buckets=self.num_buckets,
            max_distance=self.max_distance,
        )  # (N,)
        return self.bias[buckets].transpose(0, 1)  # (H, N)

    def config(self) -> dict[str, Any]:
        return {
            **super().config(),
            "num_buckets": self.num_buckets,
            "max_distance": self.max_distance,
            "bidirectional": self.bidirectional,
        }


@register("kerple_log")
class KerpleLogScoring(ScoringFunction):
    """KERPLE's logarithmic kernel (Chi et al., 2022): f_h(k) = -r1_h * log(1 + r2_h*|k|).

    r1 and r2 stay positive by clamping at ``eps`` in the forward pass, as the original.
    """

    symmetric = True

    def __init__(
        self, *, num_heads: int, init_r1: float = 1.0, init_r2: float = 1.0, eps: float = 1e-2
    ) -> None:
        super().__init__(num_heads=num_heads)
        if init_r1 <= 0 or init_r2 <= 0:
            raise ValueError(
                f"init_r1 and init_r2 must be > 0, got init_r1={init_r1}, init_r2={init_r2}"
            )
        self.init_r1, self.init_r2, self.eps = float(init_r1), float(init_r2), float(eps)
        self.r1 = nn.Parameter(torch.full((self.num_heads,), self.init_r1))
        self.r2 = nn.Parameter(torch.full((self.num_heads,), self.init_r2))

    def score(self, offsets: Tensor) -> Tensor:
        r1 = self.r1.clamp(min=self.eps)[:, None]
        r2 = self.r2.clamp(min=self.eps)[:, None]
        dist = offsets.abs().to(self.r1.dtype)[None, :]
        return -r1 * torch.log1p(r2 * dist)

    def config(self) -> dict[str, Any]:
        return {
            **super().config(),
            "init_r1": self.init_r1,
            "init_r2": self.init_r2,
            "eps": self.eps,
        }


@register("free")
class FreeScoring(ScoringFunction):
    """One learned value per offset in [-K, K]; offsets beyond are clipped to +-K.

    This is the most flexible translation-invariant scorer (Shaw et al. style scalar
    relative bias): (2K + 1) * H parameters per layer.
    """

    def __init__(self, *, num_heads: int, max_offset: int = 128) -> None:
        super().__init__(num_heads=num_heads)
        self.max_offset = check_int(max_offset, "max_offset (K)", minimum=0)
        self.values = nn.Parameter(torch.zeros(self.num_heads, 2 * self.max_offset + 1))

    def score(self, offsets: Tensor) -> Tensor:
        idx = offsets.long().clamp(-self.max_offset, self.max_offset) + self.max_offset
        return self.values[:, idx]

    def config(self) -> dict[str, Any]:
        return {**super().config(), "max_offset": self.max_offset}


#: Tails of the kernel families: ``"linear"`` -m|k|, ``"log"`` -r1 log(1 + r2|k|), none.


@register("alibi_learned")
class ALiBiLearnedScoring(ScoringFunction):
    """ALiBi with learned slopes: f_h(k) = -m_h * |k|, m_h = softplus(w_h) >= 0.

    Starts from ALiBi's geometric slopes (times ``slope_scale``), so at initialisation it is
    ``alibi`` (to float rounding); then each head learns its own slope. Parameters:
    ``raw_slope`` (H,), H per layer. The same as ``rbf_linear`` without kernels.

    Args:
        num_heads: heads H.
        slope_scale: starting slopes are ``slope_scale`` times ALiBi's (> 0).
    """

    symmetric = True

    def __init__(self, *, num_heads: int, slope_scale: float = 1.0) -> None:
        super().__init__(num_heads=num_heads)
        self.slope_scale = check_number(slope_scale, "slope_scale", minimum=0, strict=True)
        self.raw_slope = nn.Parameter(torch.empty(self.num_heads))
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        slopes = self.slope_scale * alibi_slopes(self.num_heads).double()
        self.raw_slope.copy_(softplus_inverse(slopes))

    def slopes(self) -> Tensor:
        """The effective slopes m_h = softplus(raw_slope): (H,)."""
        return nn.functional.softplus(self.raw_slope)

    def score(self, offsets: Tensor) -> Tensor:
        dtype = compute_dtype(self.raw_slope.dtype)
        m = nn.functional.softplus(self.raw_slope.to(dtype))[:, None]  # (H, 1)
        return (-m * offsets.abs().to(dtype)[None, :]).to(self.raw_slope.dtype)  # (H, N)

    def config(self) -> dict[str, Any]:
        return {**super().config(), "slope_scale": self.slope_scale}


#: FIRE's normalisers: the paper's query position (causal), or a learned length (ours).
FIRE_NORMALIZERS: tuple[str, ...] = ("query", "length")


@register("fire")
class FIREScoring(ScoringFunction):
    """FIRE (Li et al., ICLR 2024): an MLP of the log distance over a log normaliser.

    The paper's bias from query position i to key position j <= i (causal) is

        b_h(i, j) = MLP_h( psi(i - j) / psi(max(L, i)) ),   psi(x) = log(c x + 1)

    with learned c > 0 and threshold L, and one small MLP (1 -> ``mlp_width`` -> H, ReLU)
    shared by the positions, one output per head. Following the paper's code, c enters as
    |c|, L as |l_multiplier * init_threshold| with a learned multiplier (starting at 1),
    and ``eps`` is added to the normaliser.

    Two normalisers (``normalizer``):

    ``"query"``   the paper's: psi(max(L, i)) with i the query's position. The bias then
                  depends on the query's position, not only on k = j - i, so it is *not*
                  translation invariant beyond the threshold: :attr:`translation_invariant`
                  is False and the attention code asks :meth:`position_bias` for the whole
                  (H, Lq, Lk) bias. Keys after the query (k > 0, a bidirectional model) get
                  the value of |k|. :meth:`score` (f of k alone, what tables and plots read)
                  is the bias of every query at a position up to the threshold, where the
                  normaliser is psi(L).
    ``"length"``  ours, for bidirectional (masked) LMs: the normaliser is psi(L) for every
                  query, L the learned threshold (start it at the training length), and the
                  input keeps the direction, sign(k) psi(|k|) / psi(L): a function of k
                  alone, translation invariant (Toeplitz), that goes through the offset
                  table like every other family. Beyond the training length its MLP sees
                  inputs above 1, outside what it was trained on.

    Parameters: the MLP's 2 * mlp_width + mlp_width * H + H, plus c and the threshold
    multiplier (shared by the heads).

    Args:
        num_heads: heads H.
        mlp_width: hidden units of the MLP (the paper: 32).
        init_c: starting c (> 0; the paper's code: 0.1).
        init_threshold: L at the start, in tokens (> 0; the paper's code: 512).
        normalizer: ``"query"`` (the paper's, causal) or ``"length"`` (translation invariant).
        eps: added to the normaliser (> 0).
    """

    symmetric = False

    def __init__(
        self,
        *,
        num_heads: int,
        mlp_width: int = 32,
        init_c: float = 0.1,
        init_threshold: float = 512.0,
        normalizer: str = "query",
        eps: float = 1e-6,
    ) -> None:
        super().__init__(num_heads=num_heads)
        self.mlp_width = check_int(mlp_width, "mlp_width")
        self.init_c = check_number(init_c, "init_c", minimum=0, strict=True)
        self.init_threshold = check_number(init_threshold, "init_threshold", minimum=0, strict=True)
        if normalizer not in FIRE_NORMALIZERS:
            raise ValueError(f"normalizer must be one of {FIRE_NORMALIZERS}, got {normalizer!r}")
        self.normalizer = normalizer
        self.eps = check_number(eps, "eps", minimum=0, strict=True)
        self.mlp = nn.Sequential(
            nn.Linear(1, self.mlp_width), nn.ReLU(), nn.Linear(self.mlp_width, self.num_heads)
        )
        self.c = nn.Parameter(torch.tensor(self.init_c))
        self.l_multiplier = nn.Parameter(torch.tensor(1.0))

    @property
    def translation_invariant(self) -> bool:  # type: ignore[override]
        """False for the paper's query normaliser: see :meth:`position_bias`."""
        return self.normalizer == "length"

    def threshold(self) -> Tensor:
        """The threshold L in tokens: a 0-d tensor."""
        return (self.l_multiplier * self.init_threshold).abs()

    def _psi(self, x: Tensor) -> Tensor:
        return torch.log(self.c.to(x.dtype).abs() * x + 1.0)

    def _mlp(self, u: Tensor) -> Tensor:
        """(*,) normalised distances -> (H, *) biases."""
        w = self.mlp[0].weight.dtype
        out = self.mlp(u.to(w)[..., None])  # (*, H)
        return out.movedim(-1, 0)

    def score(self, offsets: Tensor) -> Tensor:
        k = offsets.to(compute_dtype(self.c.dtype))  # (N,)
        normaliser = self._psi(self.threshold().to(k.dtype)) + self.eps
        u = self._psi(k.abs()) / normaliser  # (N,)
        if self.normalizer == "length":
            u = torch.sign(k) * u
        return self._mlp(u)  # (H, N)

    def position_bias(self, lq: int, lk: int, *, clip_distance: int | None = None) -> Tensor:
        """The bias of queries at positions Lk - Lq .. Lk - 1 on keys 0 .. Lk - 1: (H, Lq, Lk).

        With the ``"length"`` normaliser this is the Toeplitz expansion of :meth:`score`.
        With ``clip_distance`` K and the query normaliser, a query at i and a key at j get
        the bias of a query at min(i, K) on a key min(|i - j|, K) before it: the distance
        and the normaliser both stay within what a model trained on K + 1 tokens saw.
        """
        if self.normalizer == "length":
            return super().position_bias(lq, lk, clip_distance=clip_distance)
        device = self.c.device
        dtype = compute_dtype(self.c.dtype)
        i = torch.arange(lk - lq, lk, device=device, dtype=dtype)[:, None]  # (Lq, 1)
        j = torch.arange(lk, device=device, dtype=dtype)[None, :]  # (1, Lk)
        distance = (i - j).abs()
        if check_int(clip_distance, "clip_distance", optional=True) is not None:
            i, distance = i.clamp(max=clip_distance), distance.clamp(max=clip_distance)
        normaliser = self._psi(torch.maximum(i, self.threshold().to(dtype))) + self.eps  # (Lq, 1)
        return self._mlp(self._psi(distance) / normaliser)  # (H, Lq, Lk)

    def config(self) -> dict[str, Any]:
        return {
            **super().config(),
            "mlp_width": self.mlp_width,
            "init_c": self.init_c,
            "init_threshold": self.init_threshold,
            "normalizer": self.normalizer,
            "eps": self.eps,
        }
