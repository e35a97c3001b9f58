"""The interface every scoring family implements (:class:`ScoringFunction`), the registry
that resolves family names (:data:`REGISTRY`, :func:`build`) and the checks the families
share (letters as in :mod:`tisa.scoring`)."""

from __future__ import annotations

import inspect
import itertools
import math
import numbers
from typing import Any

import torch
from torch import Tensor, nn

from tisa._validate import check_int

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
    cls.resolve_options(options)  # names an unknown option
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
    #: The family's options and their defaults, for families that declare them as data
    #: (the kernel-plus-tail families); None: the constructor's keywords are the options.
    defaults: dict[str, Any] | None = None

    def __init__(self, *, num_heads: int) -> None:
        super().__init__()
        self.num_heads = check_int(num_heads, "num_heads")

    @classmethod
    def option_names(cls) -> set[str]:
        """The keyword options the family takes besides ``num_heads``: its declared
        :attr:`defaults` where it has them, else its constructor's keywords."""
        if cls.defaults is not None:
            return set(cls.defaults)
        params = inspect.signature(cls.__init__).parameters
        return set(params) - {"self", "num_heads"}

    @classmethod
    def resolve_options(cls, options: dict[str, Any]) -> dict[str, Any]:
        """``options`` over the family's :attr:`defaults` (``options`` alone where it
        declares none).

        Raises:
            ValueError: an option the family does not take.
        """
        unknown = sorted(set(options) - cls.option_names())
        if unknown:
            expected = sorted(cls.option_names())
            raise ValueError(
                f"scoring {cls.family!r}: unknown option(s) {unknown}; it takes {expected}"
            )
        return {**(cls.defaults or {}), **options}

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

    def position_bias(self, lq: int, lk: int, *, clip_distance: int | None = None) -> Tensor:
        """The dense bias of queries at positions Lk - Lq .. Lk - 1 on keys 0 .. Lk - 1.

        Args:
            lq, lk: queries and keys.
            clip_distance: K: offsets beyond +-K are read as +-K (see
                :class:`ClippedOffsets`); None: as they are.

        Returns:
            (H, Lq, Lk); for a translation-invariant family the Toeplitz matrix
            f_h(j - i). Families whose bias depends on the query position override this.
        """
        reference = next(itertools.chain(self.parameters(), self.buffers()), None)
        device = None if reference is None else reference.device
        i = torch.arange(lk - lq, lk, device=device)[:, None]  # (Lq, 1)
        j = torch.arange(lk, device=device)[None, :]  # (1, Lk)
        k = j - i
        if check_int(clip_distance, "clip_distance", optional=True) is not None:
            k = k.clamp(-clip_distance, clip_distance)
        return self(k)  # (H, Lq, Lk)

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


class _SettingOnScorer(ScoringFunction):
    """A setting read on top of a scoring function (a clip, a window): it holds no
    parameters of its own, its family, symmetry and :meth:`config` are the wrapped
    scorer's (the setting is the model's, stored in ``config.tisa``), and :meth:`of` keeps
    one wrapper per scorer and value."""

    def __init__(self, scorer: ScoringFunction) -> None:
        super().__init__(num_heads=scorer.num_heads)
        self.scorer = scorer
        self.family = scorer.family
        self.symmetric = scorer.symmetric

    @property
    def translation_invariant(self) -> bool:  # type: ignore[override]
        return self.scorer.translation_invariant

    def config(self) -> dict[str, Any]:
        return self.scorer.config()

    @classmethod
    def of(cls, scorer: ScoringFunction, value: int):
        """The one wrapper of ``scorer`` with this setting at ``value``, made on first use and
        kept on the scorer (outside its submodules: the state dict does not change), so
        every forward pass uses the same object (``torch.compile`` guards on it)."""
        kept = scorer.__dict__.setdefault(f"_tisa_{cls.__name__}", {})
        if value not in kept:
            kept[value] = cls(scorer, value)
        return kept[value]


class ClippedOffsets(_SettingOnScorer):
    """A scoring function that reads every offset beyond +-K as +-K: f_h(clamp(k, -K, K)).

    Clipped relative positions (Shaw et al., 2018) applied to a trained ``scorer`` at
    inference: with K the longest offset a model was trained on, no key, however far,
    gets a bias the model never produced, and every offset up to K keeps its own. The
    result is still a function of k = j - i alone for a translation-invariant ``scorer``.
    A family whose bias also depends on the query position (FIRE's query normaliser)
    clips in its own :meth:`position_bias`. The attention code uses it (through
    :meth:`of`, one wrapper per scorer and K) when ``TisaSettings.clip_distance`` is set;
    it holds no parameters of its own, and its :meth:`config` is the wrapped scorer's (the
    clip is a setting of the model, stored in ``config.tisa``, not an option of the
    family).
    """

    def __init__(self, scorer: ScoringFunction, clip_distance: int) -> None:
        super().__init__(scorer)
        self.clip_distance = check_int(clip_distance, "clip_distance")

    def score(self, offsets: Tensor) -> Tensor:
        return self.scorer.score(offsets.clamp(-self.clip_distance, self.clip_distance))

    def position_bias(self, lq: int, lk: int, *, clip_distance: int | None = None) -> Tensor:
        k = self.clip_distance if clip_distance is None else min(clip_distance, self.clip_distance)
        return self.scorer.position_bias(lq, lk, clip_distance=k)

    def extra_repr(self) -> str:
        return f"clip_distance={self.clip_distance}"


class WindowedOffsets(_SettingOnScorer):
    """A scoring function that masks every offset beyond +-W: f_h(k) on |k| <= W, -inf
    beyond (a hard attention window, as in Longformer's local attention).

    With W at most the longest offset a model was trained on, every query of a longer input
    sees at most 2W + 1 keys around it, as many as a window of the trained length holds,
    and every key it sees gets the bias it had in training. The result is still a function
    of k = j - i alone for a translation-invariant ``scorer``; the sdpa backend skips, for
    each block of query rows, the keys no row of the block can reach, forward and
    backward, so it costs O(L * W) instead of O(L^2) (the eager backend visits every key;
    a query-dependent bias, FIRE's, is a dense mask with nothing skipped). The attention
    code uses it (through :meth:`of`) when ``TisaSettings.attention_window`` is set; like
    :class:`ClippedOffsets` it holds no parameters, and its :meth:`config` is the wrapped
    scorer's.
    """

    def __init__(self, scorer: ScoringFunction, window: int) -> None:
        super().__init__(scorer)
        self.window = check_int(window, "attention_window")

    def score(self, offsets: Tensor) -> Tensor:
        values = self.scorer.score(offsets)
        outside = offsets.abs() > self.window
        return values.masked_fill(outside.to(values.device), float("-inf"))

    def position_bias(self, lq: int, lk: int, *, clip_distance: int | None = None) -> Tensor:
        bias = self.scorer.position_bias(lq, lk, clip_distance=clip_distance)
        i = torch.arange(lk - lq, lk, device=bias.device)[:, None]
        j = torch.arange(lk, device=bias.device)[None, :]
        return bias.masked_fill((j - i).abs() > self.window, float("-inf"))

    def extra_repr(self) -> str:
        return f"window={self.window}"


def check_number(value: Any, name: str, *, minimum: float | None = None, strict=False) -> float:
    """``float(value)`` for a finite real number (``> minimum`` if strict, else ``>=``)."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    ok = ok and math.isfinite(value)
    if ok and minimum is not None:
        ok = value > minimum if strict else value >= minimum
    if not ok:
        bound = "" if minimum is None else f" {'>' if strict else '>='} {minimum:g}"
        raise ValueError(f"{name} must be a finite number{bound}, got {value!r}")
    return float(value)


def check_bool(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return value


def softplus_inverse(x: Tensor) -> Tensor:
    """The raw value whose softplus is ``x`` (> 0): log(exp(x) - 1), stable for small x."""
    return x + torch.log(-torch.expm1(-x))


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    # At least float32: in bfloat16 integer offsets above 256 round, and (k - c) of two
    # nearby large numbers loses every digit. The output goes back to the module's dtype.
    return torch.promote_types(dtype, torch.float32)
