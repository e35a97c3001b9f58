"""The kernel-plus-tail families for length extrapolation (``rbf_linear``, ``rbf_log``,
``rbf_logdist``): RBF kernels plus a tail that never rises with |k|."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from tisa._validate import check_int
from tisa.scoring.base import (
    ScoringFunction,
    check_bool,
    check_number,
    compute_dtype,
    register,
    softplus_inverse,
)
from tisa.scoring.baselines import alibi_slopes
from tisa.scoring.rbf import check_far, far_ramp, kernel_sum, reset_kernels
from tisa.scoring.rbf import kernel_init as checked_kernel_init

TAILS: tuple[str, ...] = ("linear", "log", "none")


#: Options of the Gaussian kernels with the paper's initialisation (as ``rbf``'s):
#: declared once for every kernel-plus-tail family, each of which may change defaults.
KERNEL_DEFAULTS: dict[str, Any] = {
    "num_kernels": 5,
    "amplitude_mean": 0.1,
    "amplitude_std": 0.01,
    "sharpness_mean": 0.1,
    "sharpness_std": 0.01,
    "offset_mean": 0.0,
    "offset_std": 5.0,
    "offset_range": None,
}

#: Options of the tail and of the far ramp, shared by the kernel-plus-tail families.
TAIL_DEFAULTS: dict[str, Any] = {
    "tail_scale": 1.0,
    "learn_tail": True,
    "asymmetric": False,
    "far_offset": None,
    "far_slope": 1.0,
}

_KERNEL_INIT_KEYS = tuple(k for k in KERNEL_DEFAULTS if k != "num_kernels")


def _shared(o: dict[str, Any]) -> dict[str, Any]:
    """The arguments of :class:`RBFTailScoring` every family passes on unchanged."""
    return dict(
        num_kernels=o["num_kernels"],
        kernel_init={k: o[k] for k in _KERNEL_INIT_KEYS},
        tail_scale=o["tail_scale"],
        learn_tail=o["learn_tail"],
        asymmetric=o["asymmetric"],
        far_offset=o["far_offset"],
        far_slope=o["far_slope"],
    )


def log_distance(offsets: Tensor, scale: float) -> Tensor:
    """The log-distance axis psi(k) = sign(k) * log(1 + |k| / w) (FIRE's transform).

    About k / w for |k| << w and logarithmic beyond, so a kernel of fixed width on this
    axis covers a range of offsets that grows in proportion to its distance. Float in,
    same shape and dtype out; bounded by log(1 + |k|/w), so safe for any offset.
    """
    return torch.sign(offsets) * torch.log1p(offsets.abs() / scale)


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
        self.init = checked_kernel_init(**kernel_init)
        if tail not in TAILS:
            raise ValueError(f"tail must be one of {TAILS}, got {tail!r}")
        self.tail_kind = tail
        self.tail_scale = check_number(tail_scale, "tail_scale", minimum=0, strict=True)
        self.init_r1 = None  # the log tail's starting power
        if tail == "log":
            self.init_r1 = check_number(init_r1, "init_r1", minimum=0, strict=True)
        self.learn_tail = check_bool(learn_tail, "learn_tail")
        self.asymmetric = check_bool(asymmetric, "asymmetric")
        self.far_offset, self.far_slope = check_far(far_offset, far_slope)
        if self.axis == "log":
            self.distance_scale = check_number(
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
        reset_kernels(self.amplitude, self.sharpness, self.offset, self.init)
        slopes = self.tail_scale * alibi_slopes(self.num_heads).double()  # (H,)
        if self.asymmetric:
            slopes = slopes[:, None].expand(-1, 2)
        if self.tail_kind == "linear":
            self.raw_slope.copy_(softplus_inverse(slopes))
        elif self.tail_kind == "log":
            r1 = torch.full_like(slopes, self.init_r1)
            self.raw_r1.copy_(softplus_inverse(r1))
            self.raw_r2.copy_(softplus_inverse(slopes / r1))

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
        k = offsets.to(compute_dtype(self.amplitude.dtype))  # (N,)
        out = self._kernels(k) + self._tail(k)  # (H, N)
        if self.far_offset is not None:
            out = out + far_ramp(k, self.far_offset, self.far_slope)[None, :]
        return out.to(self.amplitude.dtype)

    def _part(self, offsets: Tensor, fn) -> Tensor:
        if offsets.is_floating_point() or offsets.is_complex():
            raise ValueError(
                f"offsets must be an integer tensor (k = j - i), got dtype {offsets.dtype}"
            )
        k = offsets.reshape(-1).to(compute_dtype(self.amplitude.dtype))
        out = fn(k).to(self.amplitude.dtype)  # (H, N)
        return out.reshape(self.num_heads, *offsets.shape)

    def _kernels(self, k: Tensor) -> Tensor:
        """(N,) float offsets -> (H, N) kernel sum in k's dtype."""
        u = log_distance(k, self.distance_scale) if self.axis == "log" else k
        a, b, c = (p.to(k.dtype) for p in (self.amplitude, self.sharpness, self.offset))
        return kernel_sum(u, a, b, c)

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

    defaults = {**KERNEL_DEFAULTS, **TAIL_DEFAULTS}

    def __init__(self, *, num_heads: int, **options: Any) -> None:
        o = self.resolve_options(options)
        super().__init__(num_heads=num_heads, **_shared(o), tail="linear", init_r1=None)


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

    defaults = {**KERNEL_DEFAULTS, **TAIL_DEFAULTS, "init_r1": 2.0}

    def __init__(self, *, num_heads: int, **options: Any) -> None:
        o = self.resolve_options(options)
        super().__init__(num_heads=num_heads, **_shared(o), tail="log", init_r1=o["init_r1"])


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

    defaults = {
        **KERNEL_DEFAULTS,
        "sharpness_mean": 0.5,
        "sharpness_std": 0.05,
        "offset_std": 0.5,
        "offset_range": 4.0,
        "distance_scale": 1.0,
        "tail": "log",
        # None: the default of rbf_log / rbf_linear (see the class docstring)
        **dict.fromkeys(("tail_scale", "init_r1", "learn_tail", "asymmetric")),
        "far_offset": None,
        "far_slope": 1.0,
    }

    def __init__(self, *, num_heads: int, **options: Any) -> None:
        o = self.resolve_options(options)
        tail = o["tail"]
        if tail not in TAILS:
            raise ValueError(f"tail must be one of {TAILS}, got {tail!r}")
        given = {name: o[name] for name in ("tail_scale", "init_r1", "learn_tail", "asymmetric")}
        used = {"log": set(given), "linear": set(given) - {"init_r1"}, "none": set()}[tail]
        wrong = sorted(n for n, v in given.items() if v is not None and n not in used)
        if wrong:
            raise ValueError(f"{wrong} do not apply to tail={tail!r}")
        o.update(
            tail_scale=1.0 if o["tail_scale"] is None else o["tail_scale"],
            learn_tail=True if o["learn_tail"] is None else o["learn_tail"],
            asymmetric=False if o["asymmetric"] is None else o["asymmetric"],
        )
        init_r1 = o["init_r1"]
        super().__init__(
            num_heads=num_heads,
            **_shared(o),
            tail=tail,
            init_r1=(2.0 if init_r1 is None else init_r1) if tail == "log" else None,
            distance_scale=o["distance_scale"],
        )

    def _tail_config(self) -> dict[str, Any]:
        out = {"tail": self.tail_kind}
        if self.tail_kind != "none":
            out.update(super()._tail_config())
        return out
