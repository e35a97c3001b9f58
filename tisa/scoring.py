"""Positional scoring functions f_h(k), the positional half of TISA.

Every family maps integer offsets ``k = j - i`` (key position minus query position, so
``k > 0`` looks ahead) to one value per attention head::

    scorer = build("rbf", num_heads=12)
    scorer(torch.arange(-3, 4))          # (12, 7): f_h(k) for k = -3..3

Letters used in shapes: H heads, S kernels per head, K the largest distinct offset a table
keeps, ``*`` any shape of offsets.

Families
--------
``rbf``        the paper: f_h(k) = sum_s a_hs * exp(-|b_hs| * (k - c_hs)^2)
``alibi``      fixed geometric slopes: f_h(k) = -m_h * |k| (no parameters)
``t5``         learned log-spaced distance buckets (one value per bucket and head)
``kerple_log`` f_h(k) = -r1_h * log(1 + r2_h * |k|), with r1, r2 > 0
``free``       one learned value per offset in [-K, K], offsets beyond clipped to +-K

Names resolve through :data:`REGISTRY` (see :func:`build`), so configs hold plain data:
``{"name": "rbf", "num_heads": 12, "num_kernels": 5}``.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

from tisa._validate import check_int

__all__ = [
    "REGISTRY",
    "ScoringFunction",
    "RBFScoring",
    "ALiBiScoring",
    "T5Scoring",
    "KerpleLogScoring",
    "FreeScoring",
    "build",
    "register",
]

REGISTRY: dict[str, type[ScoringFunction]] = {}


def register(name: str):
    """Class decorator adding a scoring family to :data:`REGISTRY` under ``name``."""

    def wrap(cls: type[ScoringFunction]) -> type[ScoringFunction]:
        if name in REGISTRY:
            raise ValueError(f"scoring family {name!r} is already registered")
        cls.family = name
        REGISTRY[name] = cls
        return cls

    return wrap


def build(name: str, num_heads: int, **options: Any) -> ScoringFunction:
    """Builds the scoring function registered as ``name`` for ``num_heads`` heads.

    Args:
        name: one of ``REGISTRY`` (``"rbf"``, ``"alibi"``, ``"t5"``, ``"kerple_log"``,
            ``"free"``).
        num_heads: number of attention heads H (one function per head).
        **options: family-specific keyword arguments (e.g. ``num_kernels`` for ``"rbf"``).

    Raises:
        ValueError: unknown family or invalid option.
    """
    if name not in REGISTRY:
        raise ValueError(f"scoring: unknown family {name!r}; expected one of {sorted(REGISTRY)}")
    return REGISTRY[name](num_heads=num_heads, **options)


class ScoringFunction(nn.Module):
    """Base class: a learned (or fixed) function of the offset, one per head.

    Subclasses implement :meth:`score` on a float/long tensor of offsets and describe
    their constructor arguments in :meth:`config` so that ``build(**config())`` rebuilds
    an identical (untrained) module.
    """

    family: str = ""
    #: True when f_h(k) depends on the sign of k only through |k| (symmetric functions).
    symmetric: bool = False

    def __init__(self, *, num_heads: int) -> None:
        super().__init__()
        self.num_heads = check_int(num_heads, "num_heads")

    def forward(self, offsets: Tensor) -> Tensor:
        """Evaluates f_h at integer offsets.

        Args:
            offsets: integer tensor of any shape ``*`` holding k = j - i.

        Returns:
            Tensor of shape ``(H, *)`` in the dtype of the module's parameters.
        """
        if offsets.is_floating_point() or offsets.is_complex():
            raise ValueError(
                f"offsets must be an integer tensor (k = j - i), got dtype {offsets.dtype}"
            )
        flat = offsets.reshape(-1)
        values = self.score(flat)  # (H, N)
        return values.reshape(self.num_heads, *offsets.shape)

    def score(self, offsets: Tensor) -> Tensor:  # pragma: no cover - abstract
        """(N,) integer offsets -> (H, N) values. Implemented by each family."""
        raise NotImplementedError

    def config(self) -> dict[str, Any]:
        """Plain-data description: ``build(**scorer.config())`` rebuilds the module."""
        return {"name": self.family, "num_heads": self.num_heads}

    def num_positional_parameters(self) -> int:
        """Number of learned positional parameters (fixed buffers do not count)."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad)

    def _dtype(self) -> torch.dtype:
        for p in self.parameters():
            return p.dtype
        for b in self.buffers():
            if b.is_floating_point():
                return b.dtype
        return torch.get_default_dtype()

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.config().items() if k != "name")


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
    ) -> None:
        super().__init__(num_heads=num_heads)
        self.num_kernels = check_int(num_kernels, "num_kernels (S)")
        finite = isinstance(offset_range, (int, float)) and math.isfinite(offset_range)
        if offset_range is not None and not (finite and offset_range >= 0):
            raise ValueError(f"offset_range must be a number >= 0 or None, got {offset_range!r}")
        for name, value in (
            ("amplitude_std", amplitude_std),
            ("sharpness_std", sharpness_std),
            ("offset_std", offset_std),
        ):
            if value < 0:
                raise ValueError(f"{name} must be >= 0, got {value!r}")
        self.init = {
            "amplitude_mean": float(amplitude_mean),
            "amplitude_std": float(amplitude_std),
            "sharpness_mean": float(sharpness_mean),
            "sharpness_std": float(sharpness_std),
            "offset_mean": float(offset_mean),
            "offset_std": float(offset_std),
            "offset_range": None if offset_range is None else float(offset_range),
        }
        shape = (self.num_heads, self.num_kernels)
        self.amplitude = nn.Parameter(torch.empty(shape))
        self.sharpness = nn.Parameter(torch.empty(shape))
        self.offset = nn.Parameter(torch.empty(shape))
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        i = self.init
        self.amplitude.normal_(i["amplitude_mean"], i["amplitude_std"])
        self.sharpness.normal_(i["sharpness_mean"], i["sharpness_std"])
        self.offset.normal_(i["offset_mean"], i["offset_std"])
        if i["offset_range"] is not None:  # evenly spread, the noise breaks ties between heads
            r = i["offset_range"]
            n = self.num_kernels
            grid = torch.linspace(-r, r, n) if n > 1 else torch.zeros(1)
            self.offset.add_(grid.to(self.offset)[None, :])  # centred on offset_mean

    def score(self, offsets: Tensor) -> Tensor:
        k = offsets.to(self.amplitude.dtype)  # (N,)
        d = k[None, None, :] - self.offset[..., None]  # (H, S, N)
        kernels = torch.exp(-self.sharpness.abs()[..., None] * d.square())  # (H, S, N)
        return torch.einsum("hs,hsn->hn", self.amplitude, kernels)  # (H, N)

    def config(self) -> dict[str, Any]:
        return {**super().config(), "num_kernels": self.num_kernels, **self.init}


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
