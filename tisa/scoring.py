"""Positional scoring functions f_h(k), the positional half of TISA.

Every family maps integer offsets ``k = j - i`` (key position minus query position, so
``k > 0`` looks ahead) to one value per attention head::

    scorer = build("rbf", num_heads=12)
    scorer(torch.arange(-3, 4))          # (12, 7): f_h(k) for k = -3..3

Letters used in shapes: H heads, S kernels per head, K the largest distinct offset a table
keeps, ``*`` any shape of offsets.

Families
--------
``rbf``          the paper: f_h(k) = sum_s a_hs * exp(-|b_hs| * (k - c_hs)^2)
``alibi``        fixed geometric slopes: f_h(k) = -m_h * |k| (no parameters)
``t5``           learned log-spaced distance buckets (one value per bucket and head)
``kerple_log``   f_h(k) = -r1_h * log(1 + r2_h * |k|), with r1, r2 > 0
``free``         one learned value per offset in [-K, K], offsets beyond clipped to +-K
``rbf_linear``   RBF kernels plus a learned linear tail: rbf_h(k) - m_h * |k|, m_h >= 0
``rbf_log``      RBF kernels plus a learned KERPLE-log tail: rbf_h(k) - r1_h log(1 + r2_h |k|)
``rbf_logdist``  RBF kernels on the log-distance axis psi(k) = sign(k) log(1 + |k|/w),
                 plus a tail (log by default)
``alibi_learned`` ALiBi with learned slopes -m_h |k|, m_h >= 0 (ALiBi's at the start)
``fire``         FIRE: an MLP of log(c|k| + 1) over a log normaliser; the paper's
                 normaliser depends on the query position (not translation invariant),
                 ours (``normalizer="length"``) on a learned length only

The last three exist for length extrapolation. RBF kernels are local bumps that vanish far
away, so beyond the kernels every key gets the same bias; at lengths beyond training a
query then spreads its attention over more distant keys than it ever saw. A tail that
falls monotonically with |k| (as ALiBi's does) keeps distant keys down at any length while
the kernels keep the local, direction-aware structure. Tails start from ALiBi's geometric
slopes, so a model begins with ALiBi's recency prior.

The kernel families also take ``far_offset=K`` (off by default): an extra penalty
``-far_slope * (|k| - K)`` on offsets beyond +-K. With K at least the largest offset seen
in training it leaves every trained offset unchanged, so it can be switched on for
evaluation at longer lengths without retraining (a soft attention window).

Names resolve through :data:`REGISTRY` (see :func:`build`), so configs hold plain data:
``{"name": "rbf", "num_heads": 12, "num_kernels": 5}``.
"""

from __future__ import annotations

import inspect
import itertools
import math
import numbers
from typing import Any

import torch
from torch import Tensor, nn

from tisa._validate import check_int

__all__ = [
    "REGISTRY",
    "TAILS",
    "ScoringFunction",
    "RBFScoring",
    "ALiBiScoring",
    "T5Scoring",
    "KerpleLogScoring",
    "FreeScoring",
    "RBFTailScoring",
    "RBFLinearScoring",
    "RBFLogScoring",
    "RBFLogDistScoring",
    "ALiBiLearnedScoring",
    "FIREScoring",
    "FIRE_NORMALIZERS",
    "alibi_slopes",
    "build",
    "far_ramp",
    "log_distance",
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
        ValueError: unknown family, an option the family does not take, or an invalid
            option value.
    """
    if name not in REGISTRY:
        raise ValueError(f"scoring: unknown family {name!r}; expected one of {sorted(REGISTRY)}")
    cls = REGISTRY[name]
    accepts = inspect.signature(cls.__init__).parameters
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepts.values()):
        unknown = sorted(set(options) - set(accepts) - {"self", "num_heads"})
        if unknown:
            expected = sorted(set(accepts) - {"self", "num_heads"})
            raise ValueError(f"scoring {name!r}: unknown option(s) {unknown}; it takes {expected}")
    return cls(num_heads=num_heads, **options)


class ScoringFunction(nn.Module):
    """Base class: a learned (or fixed) function of the offset, one per head.

    Subclasses implement :meth:`score` on a float/long tensor of offsets and describe
    their constructor arguments in :meth:`config` so that ``build(**config())`` rebuilds
    an identical (untrained) module.
    """

    family: str = ""
    #: True when f_h(k) depends on the sign of k only through |k| (symmetric functions).
    symmetric: bool = False
    #: False for a bias that depends on the query's position too, not on k = j - i alone
    #: (FIRE's query normaliser): such a family implements :meth:`position_bias`, and the
    #: attention code adds that whole (H, Lq, Lk) bias instead of expanding a table.
    translation_invariant: bool = True

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

    def position_bias(self, lq: int, lk: int) -> Tensor:
        """The dense bias of queries at positions Lk - Lq .. Lk - 1 on keys 0 .. Lk - 1.

        Returns:
            (H, Lq, Lk); for a translation-invariant family the Toeplitz matrix
            f_h(j - i). Families whose bias depends on the query position override this.
        """
        reference = next(itertools.chain(self.parameters(), self.buffers()), None)
        device = None if reference is None else reference.device
        i = torch.arange(lk - lq, lk, device=device)[:, None]  # (Lq, 1)
        j = torch.arange(lk, device=device)[None, :]  # (1, Lk)
        return self(j - i)  # (H, Lq, Lk)

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


def _check_number(value: Any, name: str, *, minimum: float | None = None, strict=False) -> float:
    """``float(value)`` for a finite real number (``> minimum`` if strict, else ``>=``)."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    ok = ok and math.isfinite(value)
    if ok and minimum is not None:
        ok = value > minimum if strict else value >= minimum
    if not ok:
        bound = "" if minimum is None else f" {'>' if strict else '>='} {minimum:g}"
        raise ValueError(f"{name} must be a finite number{bound}, got {value!r}")
    return float(value)


def _check_bool(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return value


def _kernel_init(
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
        "amplitude_mean": _check_number(amplitude_mean, "amplitude_mean"),
        "amplitude_std": _check_number(amplitude_std, "amplitude_std", minimum=0),
        "sharpness_mean": _check_number(sharpness_mean, "sharpness_mean"),
        "sharpness_std": _check_number(sharpness_std, "sharpness_std", minimum=0),
        "offset_mean": _check_number(offset_mean, "offset_mean"),
        "offset_std": _check_number(offset_std, "offset_std", minimum=0),
    }
    finite = isinstance(offset_range, (int, float)) and math.isfinite(offset_range)
    if offset_range is not None and not (finite and offset_range >= 0):
        raise ValueError(f"offset_range must be a number >= 0 or None, got {offset_range!r}")
    init["offset_range"] = None if offset_range is None else float(offset_range)
    return init


@torch.no_grad()
def _reset_kernels(amplitude: Tensor, sharpness: Tensor, offset: Tensor, init: dict) -> None:
    """Draws (H, S) kernel parameters from ``init`` (see :func:`_kernel_init`), in place."""
    amplitude.normal_(init["amplitude_mean"], init["amplitude_std"])
    sharpness.normal_(init["sharpness_mean"], init["sharpness_std"])
    offset.normal_(init["offset_mean"], init["offset_std"])
    if init["offset_range"] is not None:  # evenly spread, the noise breaks ties between heads
        r = init["offset_range"]
        n = offset.shape[-1]
        grid = torch.linspace(-r, r, n) if n > 1 else torch.zeros(1)
        offset.add_(grid.to(offset)[None, :])  # centred on offset_mean


def _kernel_sum(u: Tensor, amplitude: Tensor, sharpness: Tensor, offset: Tensor) -> Tensor:
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


def _check_far(far_offset: Any, far_slope: Any) -> tuple[int | None, float]:
    far_offset = check_int(far_offset, "far_offset", minimum=0, optional=True)
    return far_offset, _check_number(far_slope, "far_slope", minimum=0, strict=True)


def far_ramp(offsets: Tensor, far_offset: int, far_slope: float) -> Tensor:
    """The far-field penalty ``-far_slope * max(|k| - far_offset, 0)``, same shape as ``offsets``.

    Zero on |k| <= far_offset, then falling linearly: with ``far_slope`` of 1 or more,
    keys beyond the offset get a weight of at most exp(-far_slope) per token of excess
    distance, a soft attention window of +-far_offset.
    """
    excess = (offsets.abs() - far_offset).clamp(min=0)
    return -far_slope * excess


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
    ) -> None:
        super().__init__(num_heads=num_heads)
        self.num_kernels = check_int(num_kernels, "num_kernels (S)")
        self.init = _kernel_init(
            amplitude_mean=amplitude_mean,
            amplitude_std=amplitude_std,
            sharpness_mean=sharpness_mean,
            sharpness_std=sharpness_std,
            offset_mean=offset_mean,
            offset_std=offset_std,
            offset_range=offset_range,
        )
        self.far_offset, self.far_slope = _check_far(far_offset, far_slope)
        shape = (self.num_heads, self.num_kernels)
        self.amplitude = nn.Parameter(torch.empty(shape))
        self.sharpness = nn.Parameter(torch.empty(shape))
        self.offset = nn.Parameter(torch.empty(shape))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        _reset_kernels(self.amplitude, self.sharpness, self.offset, self.init)

    def score(self, offsets: Tensor) -> Tensor:
        k = offsets.to(self.amplitude.dtype)  # (N,)
        out = _kernel_sum(k, self.amplitude, self.sharpness, self.offset)  # (H, N)
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
        }


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
TAILS: tuple[str, ...] = ("linear", "log", "none")


def log_distance(offsets: Tensor, scale: float) -> Tensor:
    """The log-distance axis psi(k) = sign(k) * log(1 + |k| / w) (FIRE's transform).

    About k / w for |k| << w and logarithmic beyond, so a kernel of fixed width on this
    axis covers a range of offsets that grows in proportion to its distance. Float in,
    same shape and dtype out; bounded by log(1 + |k|/w), so safe for any offset.
    """
    return torch.sign(offsets) * torch.log1p(offsets.abs() / scale)


def _softplus_inverse(x: Tensor) -> Tensor:
    """The raw value whose softplus is ``x`` (> 0): log(exp(x) - 1), stable for small x."""
    return x + torch.log(-torch.expm1(-x))


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    # At least float32: in bfloat16 integer offsets above 256 round, and (k - c) of two
    # nearby large numbers loses every digit. The output goes back to the module's dtype.
    return torch.promote_types(dtype, torch.float32)


class RBFTailScoring(ScoringFunction):
    """Shared implementation of the kernel-plus-tail families (registered subclasses).

    f_h(k) = sum_s a_hs * exp(-|b_hs| * (u(k) - c_hs)^2) + tail_h(k) [+ far_ramp(k)]

    with u(k) = k (``axis="offset"``) or u(k) = psi(k) = sign(k) log(1 + |k|/w)
    (``axis="log"``, :func:`log_distance`), and a tail that never increases with |k|:

    - ``"linear"``: tail_h(k) = -m_h |k|, m_h = softplus(raw_slope_h) >= 0;
    - ``"log"``: tail_h(k) = -r1_h log(1 + r2_h |k|), r1_h = softplus(raw_r1_h),
      r2_h = softplus(raw_r2_h) >= 0;
    - ``"none"``: no tail.

    Softplus keeps every tail parameter >= 0, so the tail never rises with |k| whatever
    values training gives the raw parameters (and, unlike a clamp, it keeps a gradient).
    With ``asymmetric`` each tail parameter has one value for k < 0 (keys before the
    query) and one for k > 0, shape (H, 2); a causal model only ever trains the k < 0 one.

    Tails start from ALiBi's geometric slopes m_h (:func:`alibi_slopes`) times
    ``tail_scale``: the linear tail with m_h, the log tail with r1_h = ``init_r1`` and
    r2_h = m_h / r1_h, so its slope at k = 0 is ALiBi's and it bends into a power law
    (1 + r2|k|)^(-r1) beyond |k| ~ 1/r2. ``init_r1 > 1`` makes those weights summable:
    the positional prior of a query keeps a finite total mass at any length.

    Computed in at least float32 (integer offsets up to 2^24 are exact there; bfloat16
    rounds them above 256) and returned in the parameters' dtype; values and gradients
    stay finite for large offsets (tested to |k| = 10^6 in float32 and bfloat16).
    """

    symmetric = False
    #: ``"offset"``: kernels on k; ``"log"``: kernels on psi(k).
    axis: str = "offset"

    def __init__(
        self,
        *,
        num_heads: int,
        num_kernels: int,
        kernel_init: dict[str, Any],
        tail: str,
        tail_scale: float,
        init_r1: float | None,
        learn_tail: bool,
        asymmetric: bool,
        far_offset: int | None,
        far_slope: float,
        distance_scale: float | None = None,
    ) -> None:
        super().__init__(num_heads=num_heads)
        self.num_kernels = check_int(num_kernels, "num_kernels (S)")
        self.init = _kernel_init(**kernel_init)
        if tail not in TAILS:
            raise ValueError(f"tail must be one of {TAILS}, got {tail!r}")
        self.tail_kind = tail
        self.tail_scale = _check_number(tail_scale, "tail_scale", minimum=0, strict=True)
        self.init_r1 = None  # the log tail's starting power
        if tail == "log":
            self.init_r1 = _check_number(init_r1, "init_r1", minimum=0, strict=True)
        self.learn_tail = _check_bool(learn_tail, "learn_tail")
        self.asymmetric = _check_bool(asymmetric, "asymmetric")
        self.far_offset, self.far_slope = _check_far(far_offset, far_slope)
        if self.axis == "log":
            self.distance_scale = _check_number(
                distance_scale, "distance_scale", minimum=0, strict=True
            )
        shape = (self.num_heads, self.num_kernels)
        self.amplitude = nn.Parameter(torch.empty(shape))
        self.sharpness = nn.Parameter(torch.empty(shape))
        self.offset = nn.Parameter(torch.empty(shape))
        self._tail_names: tuple[str, ...] = {
            "linear": ("raw_slope",),
            "log": ("raw_r1", "raw_r2"),
            "none": (),
        }[tail]
        tail_shape = (self.num_heads, 2) if self.asymmetric else (self.num_heads,)
        for name in self._tail_names:
            if self.learn_tail:
                self.register_parameter(name, nn.Parameter(torch.empty(tail_shape)))
            else:  # fixed: rebuilt from the config, so not part of the state dict
                self.register_buffer(name, torch.empty(tail_shape), persistent=False)
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        _reset_kernels(self.amplitude, self.sharpness, self.offset, self.init)
        slopes = self.tail_scale * alibi_slopes(self.num_heads).double()  # (H,)
        if self.asymmetric:
            slopes = slopes[:, None].expand(-1, 2)
        if self.tail_kind == "linear":
            self.raw_slope.copy_(_softplus_inverse(slopes))
        elif self.tail_kind == "log":
            r1 = torch.full_like(slopes, self.init_r1)
            self.raw_r1.copy_(_softplus_inverse(r1))
            self.raw_r2.copy_(_softplus_inverse(slopes / r1))

    def tail_parameters(self) -> dict[str, Tensor]:
        """The tail's effective values: ``{"slope": m}`` or ``{"r1": r1, "r2": r2}``.

        Each (H,), or (H, 2) with ``asymmetric`` (column 0: k < 0, column 1: k > 0).
        """
        return {
            name.removeprefix("raw_"): nn.functional.softplus(getattr(self, name))
            for name in self._tail_names
        }

    def kernels(self, offsets: Tensor) -> Tensor:
        """The kernel part alone, at integer offsets of any shape ``*``: (H, *)."""
        return self._part(offsets, self._kernels)

    def tail(self, offsets: Tensor) -> Tensor:
        """The tail alone (zeros for ``tail="none"``), at integer offsets ``*``: (H, *)."""
        return self._part(offsets, self._tail)

    def score(self, offsets: Tensor) -> Tensor:
        k = offsets.to(_compute_dtype(self.amplitude.dtype))  # (N,)
        out = self._kernels(k) + self._tail(k)  # (H, N)
        if self.far_offset is not None:
            out = out + far_ramp(k, self.far_offset, self.far_slope)[None, :]
        return out.to(self.amplitude.dtype)

    def _part(self, offsets: Tensor, fn) -> Tensor:
        if offsets.is_floating_point() or offsets.is_complex():
            raise ValueError(
                f"offsets must be an integer tensor (k = j - i), got dtype {offsets.dtype}"
            )
        k = offsets.reshape(-1).to(_compute_dtype(self.amplitude.dtype))
        out = fn(k).to(self.amplitude.dtype)  # (H, N)
        return out.reshape(self.num_heads, *offsets.shape)

    def _kernels(self, k: Tensor) -> Tensor:
        """(N,) float offsets -> (H, N) kernel sum in k's dtype."""
        u = log_distance(k, self.distance_scale) if self.axis == "log" else k
        a, b, c = (p.to(k.dtype) for p in (self.amplitude, self.sharpness, self.offset))
        return _kernel_sum(u, a, b, c)

    def _tail(self, k: Tensor) -> Tensor:
        """(N,) float offsets -> (H, N) tail values in k's dtype."""
        dist = k.abs()[None, :]  # (1, N)
        if self.tail_kind == "none":
            return torch.zeros(self.num_heads, k.shape[0], dtype=k.dtype, device=k.device)
        values = {}
        for name in self._tail_names:
            v = nn.functional.softplus(getattr(self, name).to(k.dtype))  # softplus in k's dtype
            if self.asymmetric:  # column 0 for k < 0, column 1 for k > 0 (k = 0: tail is 0)
                v = v[:, (k > 0).long()]  # (H, N)
            else:
                v = v[:, None]  # (H, 1)
            values[name.removeprefix("raw_")] = v
        if self.tail_kind == "linear":
            return -values["slope"] * dist
        return -values["r1"] * torch.log1p(values["r2"] * dist)

    def config(self) -> dict[str, Any]:
        out: dict[str, Any] = {**super().config(), "num_kernels": self.num_kernels, **self.init}
        if self.axis == "log":
            out["distance_scale"] = self.distance_scale
        out.update(self._tail_config())
        out["far_offset"] = self.far_offset
        out["far_slope"] = self.far_slope
        return out

    def _tail_config(self) -> dict[str, Any]:
        out: dict[str, Any] = {"tail_scale": self.tail_scale}
        if self.tail_kind == "log":
            out["init_r1"] = self.init_r1
        out["learn_tail"] = self.learn_tail
        out["asymmetric"] = self.asymmetric
        return out


@register("rbf_linear")
class RBFLinearScoring(RBFTailScoring):
    """RBF kernels plus a learned linear tail per head: ALiBi with learned local structure.

    f_h(k) = sum_s a_hs * exp(-|b_hs| * (k - c_hs)^2) - m_h * |k|,   m_h = softplus(w_h) >= 0

    Parameters: the paper's ``amplitude``, ``sharpness``, ``offset`` (H, S) and the raw
    slope ``raw_slope`` (H,): 3 * S * H + H per layer (+ H more with ``asymmetric``, whose
    slopes are (H, 2): k < 0, k > 0; none with ``learn_tail=False``, which keeps the
    starting slopes fixed).

    Initialisation: kernels as the paper's (c ~ N(0, 5^2), a, b ~ N(0.1, 0.01^2)); slopes
    m_h = ``tail_scale`` * ALiBi's geometric slopes, so at the start f is ALiBi's bias plus
    small bumps. Far from the kernels f_h(k) = -m_h |k| exactly: the far field is ALiBi's
    (with learned slopes), whatever the kernels learn, since they are bounded by
    sum_s |a_hs| and vanish.

    Args:
        num_heads: heads H.
        num_kernels: kernels S per head.
        amplitude_mean, amplitude_std, sharpness_mean, sharpness_std, offset_mean,
            offset_std, offset_range: kernel initialisation, as for ``rbf``.
        tail_scale: starting slopes are ``tail_scale`` times ALiBi's (> 0).
        learn_tail: learn the slopes (True) or keep them fixed (False).
        asymmetric: separate slopes for k < 0 and k > 0.
        far_offset, far_slope: the optional :func:`far_ramp` (off with None).
    """

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
        tail_scale: float = 1.0,
        learn_tail: bool = True,
        asymmetric: bool = False,
        far_offset: int | None = None,
        far_slope: float = 1.0,
    ) -> None:
        super().__init__(
            num_heads=num_heads,
            num_kernels=num_kernels,
            kernel_init=dict(
                amplitude_mean=amplitude_mean,
                amplitude_std=amplitude_std,
                sharpness_mean=sharpness_mean,
                sharpness_std=sharpness_std,
                offset_mean=offset_mean,
                offset_std=offset_std,
                offset_range=offset_range,
            ),
            tail="linear",
            tail_scale=tail_scale,
            init_r1=None,
            learn_tail=learn_tail,
            asymmetric=asymmetric,
            far_offset=far_offset,
            far_slope=far_slope,
        )


@register("rbf_log")
class RBFLogScoring(RBFTailScoring):
    """RBF kernels plus a learned KERPLE-log tail per head.

    f_h(k) = sum_s a_hs * exp(-|b_hs| * (k - c_hs)^2) - r1_h * log(1 + r2_h * |k|)

    with r1_h = softplus(raw_r1_h) >= 0, r2_h = softplus(raw_r2_h) >= 0. Parameters: the
    paper's (H, S) kernel tables and ``raw_r1``, ``raw_r2`` (H,): 3 * S * H + 2 * H per
    layer (+ 2 * H with ``asymmetric``; none for the tail with ``learn_tail=False``).

    Initialisation: kernels as the paper's; r1_h = ``init_r1`` (default 2) and
    r2_h = ``tail_scale`` * m_h / r1_h with ALiBi's slopes m_h, so the tail starts with
    ALiBi's slope at k = 0 and decays like |k|^(-r1) in weight beyond 1/r2_h, a prior that
    allows more long-range attention than ALiBi's yet has a finite total mass (r1 > 1).

    Args:
        num_heads, num_kernels, amplitude_mean, amplitude_std, sharpness_mean,
            sharpness_std, offset_mean, offset_std, offset_range, tail_scale, learn_tail,
            asymmetric, far_offset, far_slope: as for ``rbf_linear``.
        init_r1: starting power r1 (> 0; > 1 for a summable prior).
    """

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
        tail_scale: float = 1.0,
        init_r1: float = 2.0,
        learn_tail: bool = True,
        asymmetric: bool = False,
        far_offset: int | None = None,
        far_slope: float = 1.0,
    ) -> None:
        super().__init__(
            num_heads=num_heads,
            num_kernels=num_kernels,
            kernel_init=dict(
                amplitude_mean=amplitude_mean,
                amplitude_std=amplitude_std,
                sharpness_mean=sharpness_mean,
                sharpness_std=sharpness_std,
                offset_mean=offset_mean,
                offset_std=offset_std,
                offset_range=offset_range,
            ),
            tail="log",
            tail_scale=tail_scale,
            init_r1=init_r1,
            learn_tail=learn_tail,
            asymmetric=asymmetric,
            far_offset=far_offset,
            far_slope=far_slope,
        )


@register("rbf_logdist")
class RBFLogDistScoring(RBFTailScoring):
    """RBF kernels on the log-distance axis, plus a tail (KERPLE-log by default).

    f_h(k) = sum_s a_hs * exp(-|b_hs| * (psi(k) - c_hs)^2) + tail_h(k),
    psi(k) = sign(k) * log(1 + |k| / w)

    The axis is FIRE's transform (Li et al., 2023): near the query (|k| << w) it is
    linear, beyond it logarithmic, so a kernel's width in tokens grows with its distance
    and a few kernels cover both the neighbours and the far field. w
    (``distance_scale``) is fixed, not learned: the kernel centres c are read on this
    axis, and a learned w would move all of them at once. The tail is that of
    ``rbf_log`` (``tail="log"``), ``rbf_linear`` (``"linear"``) or none (``"none"``:
    the kernels alone, which vanish beyond the outermost centre like ``rbf``'s).

    Parameters: (H, S) kernel tables plus the tail's: 3 * S * H + 2 * H per layer with
    the log tail (+ H with ``"linear"``, + 0 with ``"none"``; doubled tail parameters
    with ``asymmetric``).

    Initialisation (units of psi): each head's centres evenly over [-4, 4] plus
    N(0, 0.5^2) noise (w = 1, S = 5: offsets 0, +-6 and +-54; the log axis's counterpart
    of the paper's spread over a few tokens, reaching out towards the training length),
    sharpness N(0.5, 0.05^2) (a kernel's standard deviation is 1 on this axis, so
    neighbouring kernels overlap), amplitudes N(0.1, 0.01^2) as the paper's; the tail as
    ``rbf_log``'s / ``rbf_linear``'s.

    Args:
        num_heads, num_kernels: H and S.
        amplitude_mean, amplitude_std, sharpness_mean, sharpness_std, offset_mean,
            offset_std, offset_range: kernel initialisation, in units of psi.
        distance_scale: w in tokens (> 0).
        tail: ``"log"``, ``"linear"`` or ``"none"``.
        tail_scale, init_r1, learn_tail, asymmetric: the tail's options (None: the
            default of ``rbf_log`` / ``rbf_linear``; giving one that the tail does not
            use is an error).
        far_offset, far_slope: the optional :func:`far_ramp` (off with None).
    """

    axis = "log"

    def __init__(
        self,
        *,
        num_heads: int,
        num_kernels: int = 5,
        amplitude_mean: float = 0.1,
        amplitude_std: float = 0.01,
        sharpness_mean: float = 0.5,
        sharpness_std: float = 0.05,
        offset_mean: float = 0.0,
        offset_std: float = 0.5,
        offset_range: float | None = 4.0,
        distance_scale: float = 1.0,
        tail: str = "log",
        tail_scale: float | None = None,
        init_r1: float | None = None,
        learn_tail: bool | None = None,
        asymmetric: bool | None = None,
        far_offset: int | None = None,
        far_slope: float = 1.0,
    ) -> None:
        if tail not in TAILS:
            raise ValueError(f"tail must be one of {TAILS}, got {tail!r}")
        given = {
            "tail_scale": tail_scale,
            "init_r1": init_r1,
            "learn_tail": learn_tail,
            "asymmetric": asymmetric,
        }
        used = {"log": set(given), "linear": set(given) - {"init_r1"}, "none": set()}[tail]
        wrong = sorted(n for n, v in given.items() if v is not None and n not in used)
        if wrong:
            raise ValueError(f"{wrong} do not apply to tail={tail!r}")
        super().__init__(
            num_heads=num_heads,
            num_kernels=num_kernels,
            kernel_init=dict(
                amplitude_mean=amplitude_mean,
                amplitude_std=amplitude_std,
                sharpness_mean=sharpness_mean,
                sharpness_std=sharpness_std,
                offset_mean=offset_mean,
                offset_std=offset_std,
                offset_range=offset_range,
            ),
            tail=tail,
            tail_scale=1.0 if tail_scale is None else tail_scale,
            init_r1=(2.0 if init_r1 is None else init_r1) if tail == "log" else None,
            learn_tail=True if learn_tail is None else learn_tail,
            asymmetric=False if asymmetric is None else asymmetric,
            far_offset=far_offset,
            far_slope=far_slope,
            distance_scale=distance_scale,
        )

    def _tail_config(self) -> dict[str, Any]:
        out = {"tail": self.tail_kind}
        if self.tail_kind != "none":
            out.update(super()._tail_config())
        return out


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
        self.slope_scale = _check_number(slope_scale, "slope_scale", minimum=0, strict=True)
        self.raw_slope = nn.Parameter(torch.empty(self.num_heads))
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        slopes = self.slope_scale * alibi_slopes(self.num_heads).double()
        self.raw_slope.copy_(_softplus_inverse(slopes))

    def slopes(self) -> Tensor:
        """The effective slopes m_h = softplus(raw_slope): (H,)."""
        return nn.functional.softplus(self.raw_slope)

    def score(self, offsets: Tensor) -> Tensor:
        dtype = _compute_dtype(self.raw_slope.dtype)
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
        self.init_c = _check_number(init_c, "init_c", minimum=0, strict=True)
        self.init_threshold = _check_number(
            init_threshold, "init_threshold", minimum=0, strict=True
        )
        if normalizer not in FIRE_NORMALIZERS:
            raise ValueError(f"normalizer must be one of {FIRE_NORMALIZERS}, got {normalizer!r}")
        self.normalizer = normalizer
        self.eps = _check_number(eps, "eps", minimum=0, strict=True)
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
        k = offsets.to(_compute_dtype(self.c.dtype))  # (N,)
        normaliser = self._psi(self.threshold().to(k.dtype)) + self.eps
        u = self._psi(k.abs()) / normaliser  # (N,)
        if self.normalizer == "length":
            u = torch.sign(k) * u
        return self._mlp(u)  # (H, N)

    def position_bias(self, lq: int, lk: int) -> Tensor:
        """The bias of queries at positions Lk - Lq .. Lk - 1 on keys 0 .. Lk - 1: (H, Lq, Lk).

        With the ``"length"`` normaliser this is the Toeplitz expansion of :meth:`score`.
        """
        device = self.c.device
        dtype = _compute_dtype(self.c.dtype)
        i = torch.arange(lk - lq, lk, device=device, dtype=dtype)[:, None]  # (Lq, 1)
        j = torch.arange(lk, device=device, dtype=dtype)[None, :]  # (1, Lk)
        if self.normalizer == "length":
            return self.score((j - i).long())
        normaliser = self._psi(torch.maximum(i, self.threshold().to(dtype))) + self.eps  # (Lq, 1)
        return self._mlp(self._psi((i - j).abs()) / normaliser)  # (H, Lq, Lk)

    def config(self) -> dict[str, Any]:
        return {
            **super().config(),
            "mlp_width": self.mlp_width,
            "init_c": self.init_c,
            "init_threshold": self.init_threshold,
            "normalizer": self.normalizer,
            "eps": self.eps,
        }
