"""Null baselines for statistics of a position table: what a table without order scores.

A figure such as TI(P P^T) = 0.47 says little on its own: a table of random numbers
already scores 0.43 (its diagonal, the squared norms, is nearly constant). Each figure is
therefore compared with the same statistic on tables that keep what is not positional
structure and destroy what is. Two nulls, both matched to the table P under test:

``"random"``
    Random directions with P's norms: row i of a draw is ``||P_i|| * g_i / ||g_i||`` with
    ``g_i ~ N(0, I_E)`` independent. Same shape and the same per-position norms (so the
    diagonal of P P^T is exactly P's), no relation between positions.
``"shuffled"``
    P's own rows in a uniformly random order (a fresh permutation per draw). The same
    set of vectors, with their norms and pairwise similarities, but no order. Because
    the entries of P P^T (and of cos(P)) are only rearranged, their variance and the
    diagonal's residual are the same in every draw: TI with and without the diagonal
    then move together and get the same z-score. The ``"random"`` null is the one whose
    mean shows how much the diagonal alone scores.

For each null, :func:`compare_to_null` evaluates the statistic on ``draws`` such tables
and reports the observed value next to the draws' mean and standard deviation, the
z-score ``(observed - mean) / std`` and the share of draws the observed value exceeds.
Draws come from a ``torch.Generator`` seeded with ``seed``, so a figure is reproducible.

A statistic is any callable ``(L, E) float64 table -> number`` (a Python number or a
one-element tensor), e.g. :func:`gram_ti`, :func:`cosine_ti`, or a closure computing
layer-1 logits from the table. It is called once on P and once per draw. Where one
expensive step (a forward pass of a model with the table swapped in) yields several
figures, :func:`compare_many_to_nulls` takes a statistic returning ``{name: number}``
and compares every figure from the same draws.

Letters: L positions, E embedding size, N draws.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import Tensor

from tisa._validate import check_int
from tisa.metrics import translation_invariance

__all__ = [
    "NULLS",
    "NullBaselines",
    "NullComparison",
    "compare_many_to_nulls",
    "compare_to_null",
    "compare_to_nulls",
    "cosine_ti",
    "gram_ti",
    "random_tables",
    "shuffled_tables",
]

Null = Literal["random", "shuffled"]
Statistic = Callable[[Tensor], "float | Tensor"]
Statistics = Callable[[Tensor], "Mapping[str, float | Tensor]"]

#: The nulls :func:`compare_to_null` knows, in the order :func:`compare_to_nulls` runs them.
NULLS: tuple[str, ...] = ("random", "shuffled")


def _table(table: Tensor, name: str = "table") -> Tensor:
    if not isinstance(table, Tensor):
        raise ValueError(f"{name} must be a torch.Tensor of shape (L, E), got {type(table)}")
    if table.dim() != 2 or table.shape[0] < 2 or table.shape[1] < 1:
        raise ValueError(
            f"{name} must have shape (L, E) with L >= 2 positions and E >= 1, "
            f"got {tuple(table.shape)}"
        )
    if table.is_complex():
        raise ValueError(f"{name} must be real, got dtype {table.dtype}")
    p = table.detach().to(torch.float64)
    if not torch.isfinite(p).all():
        raise ValueError(f"{name} must hold finite values only (found NaN or inf)")
    return p


def _generator(seed: int) -> torch.Generator:
    return torch.Generator(device="cpu").manual_seed(check_int(seed, "seed", minimum=0))


def random_tables(table: Tensor, draws: int, *, seed: int = 0) -> Tensor:
    """Random tables with the shape and per-row norms of ``table``: (N, L, E) float64.

    Row i of each draw is ``||table_i|| * g / ||g||`` with ``g ~ N(0, I_E)``: a uniformly
    random direction of the same length. A zero row stays zero.

    Args:
        table: (L, E) real tensor, L >= 2.
        draws: N >= 1.
        seed: seed of the generator (>= 0); the same seed gives the same draws.
    """
    p = _table(table)
    n = check_int(draws, "draws")
    g = torch.randn(n, *p.shape, generator=_generator(seed), dtype=torch.float64)
    norms = torch.linalg.vector_norm(p.cpu(), dim=-1, keepdim=True)  # (L, 1)
    unit = g / torch.linalg.vector_norm(g, dim=-1, keepdim=True).clamp_min(1e-300)
    return (unit * norms).to(p.device)


def shuffled_tables(table: Tensor, draws: int, *, seed: int = 0) -> Tensor:
    """``table`` with its rows permuted, a uniform random permutation per draw: (N, L, E).

    Args:
        table: (L, E) real tensor, L >= 2.
        draws: N >= 1.
        seed: seed of the generator (>= 0); the same seed gives the same draws.
    """
    p = _table(table)
    n = check_int(draws, "draws")
    # argsort of i.i.d. uniforms is a uniform random permutation (ties have probability 0)
    perm = torch.rand(n, p.shape[0], generator=_generator(seed)).argsort(-1)  # (N, L)
    return p[perm.to(p.device)]


@dataclass(frozen=True)
class NullComparison:
    """A statistic of a table next to its distribution under one null.

    Attributes:
        null: ``"random"`` or ``"shuffled"`` (see the module docstring).
        observed: the statistic of the table itself.
        mean: mean of the statistic over the null draws.
        std: sample standard deviation (N - 1 in the denominator) over the draws.
        z: ``(observed - mean) / std``; ``+-inf`` when std is 0 and observed differs
            from the mean, 0.0 when it does not.
        exceeded: share of draws strictly below the observed value, in [0, 1].
        draws: the statistic on each draw, in draw order.
        seed: the generator seed the draws came from.
    """

    null: str
    observed: float
    mean: float
    std: float
    z: float
    exceeded: float
    draws: tuple[float, ...]
    seed: int

    @property
    def p_value(self) -> float:
        """One-sided empirical p-value, ``(1 + #{draws >= observed}) / (N + 1)``.

        The chance that a null table scores at least as high, counting the table itself
        as one draw; never below 1 / (N + 1).
        """
        at_least = sum(d >= self.observed for d in self.draws)
        return (1 + at_least) / (len(self.draws) + 1)

    def summary(self) -> dict[str, Any]:
        """Plain data (JSON-ready), without the individual draws."""
        return {
            "null": self.null,
            "observed": self.observed,
            "mean": self.mean,
            "std": self.std,
            "z": self.z,
            "exceeded": self.exceeded,
            "p_value": self.p_value,
            "draws": len(self.draws),
            "seed": self.seed,
        }


@dataclass(frozen=True)
class NullBaselines:
    """A statistic of a table with both nulls, computed on the same observed value.

    Attributes:
        observed: the statistic of the table itself.
        random: comparison with random directions of the same norms.
        shuffled: comparison with the table's rows in random order.
    """

    observed: float
    random: NullComparison
    shuffled: NullComparison

    def summary(self) -> dict[str, Any]:
        """Plain data: ``{"observed", "random": {...}, "shuffled": {...}}``."""
        return {
            "observed": self.observed,
            "random": self.random.summary(),
            "shuffled": self.shuffled.summary(),
        }


def _evaluate(statistic: Statistic, table: Tensor, what: str) -> float:
    return _number(statistic(table), what)


def _number(value: Any, what: str) -> float:
    """A statistic's value as a float; ValueError for anything but one real number."""
    if isinstance(value, Tensor):
        if value.numel() != 1:
            raise ValueError(
                f"statistic must return one number, got a tensor of shape {tuple(value.shape)} "
                f"on {what}"
            )
        value = value.item()
    try:
        out = float(value)
    except (TypeError, ValueError) as err:
        raise ValueError(f"statistic must return a number, got {type(value)} on {what}") from err
    if math.isnan(out):
        raise ValueError(f"statistic returned NaN on {what}")
    return out


def _compare(null: str, observed: float, draws: list[float], seed: int) -> NullComparison:
    values = torch.tensor(draws, dtype=torch.float64)
    mean = float(values.mean())
    std = float(values.std(correction=1))
    if std > 0:
        z = (observed - mean) / std
    else:  # every draw scored the same: any difference is infinitely many stds away
        z = 0.0 if observed == mean else math.copysign(math.inf, observed - mean)
    exceeded = float((values < observed).double().mean())
    return NullComparison(
        null=null,
        observed=observed,
        mean=mean,
        std=std,
        z=z,
        exceeded=exceeded,
        draws=tuple(draws),
        seed=seed,
    )


def _null_tables(table: Tensor, null: str, draws: int, seed: int) -> Tensor:
    if null == "random":
        return random_tables(table, draws, seed=seed)
    if null == "shuffled":
        return shuffled_tables(table, draws, seed=seed)
    raise ValueError(f"null must be one of {', '.join(map(repr, NULLS))}, got {null!r}")


def _check_statistic(statistic: Any) -> None:
    if not callable(statistic):
        raise ValueError(f"statistic must be a callable table -> number, got {type(statistic)}")


def compare_to_null(
    table: Tensor,
    statistic: Statistic,
    *,
    null: Null = "random",
    draws: int = 32,
    seed: int = 0,
) -> NullComparison:
    """Evaluates ``statistic`` on ``table`` and on ``draws`` tables of one null.

    Args:
        table: (L, E) real tensor (a position table P), L >= 2; converted to float64.
        statistic: callable (L, E) float64 tensor -> number (or one-element tensor).
        null: ``"random"`` (random directions, same norms) or ``"shuffled"`` (rows in
            random order).
        draws: N >= 2 null tables (2 at least, for a standard deviation).
        seed: generator seed (>= 0); the same seed gives the same draws.

    Returns:
        :class:`NullComparison`.

    Raises:
        ValueError: bad arguments, or the statistic returns no number or NaN.
    """
    _check_statistic(statistic)
    n = check_int(draws, "draws", minimum=2)
    p = _table(table)
    tables = _null_tables(p, null, n, seed)
    observed = _evaluate(statistic, p, "the table")
    values = [_evaluate(statistic, t, f"{null} draw {i}") for i, t in enumerate(tables)]
    return _compare(null, observed, values, seed)


def compare_to_nulls(
    table: Tensor, statistic: Statistic, *, draws: int = 32, seed: int = 0
) -> NullBaselines:
    """:func:`compare_to_null` with both nulls, the statistic of ``table`` computed once.

    Args:
        table: (L, E) real tensor, L >= 2.
        statistic: callable (L, E) float64 tensor -> number.
        draws: N >= 2 tables per null.
        seed: generator seed (>= 0), used for each null.

    Returns:
        :class:`NullBaselines`.
    """
    _check_statistic(statistic)
    return compare_many_to_nulls(table, lambda t: {"value": statistic(t)}, draws=draws, seed=seed)[
        "value"
    ]


def _evaluate_many(statistics: Statistics, table: Tensor, what: str) -> dict[str, float]:
    values = statistics(table)
    if not isinstance(values, Mapping) or not values:
        raise ValueError(
            f"statistics must return a non-empty mapping name -> number, got {type(values)} "
            f"on {what}"
        )
    return {str(k): _number(v, f"{what} ({k})") for k, v in values.items()}


def compare_many_to_nulls(
    table: Tensor, statistics: Statistics, *, draws: int = 32, seed: int = 0
) -> dict[str, NullBaselines]:
    """Several statistics of one table, each with both nulls, from the same draws.

    ``statistics`` is called once on ``table`` and once on each null table; every name it
    returns gets its own :class:`NullBaselines`. Use it where one expensive computation
    (F_P of every head, a forward pass) gives many figures.

    Args:
        table: (L, E) real tensor, L >= 2; converted to float64.
        statistics: callable (L, E) float64 tensor -> ``{name: number}``, the same names
            on every call.
        draws: N >= 2 tables per null.
        seed: generator seed (>= 0), used for each null.

    Returns:
        ``{name: NullBaselines}`` in the order ``statistics`` returns the names.

    Raises:
        ValueError: bad arguments; a statistic that is not a number or NaN; names that
            differ between calls.
    """
    if not callable(statistics):
        raise ValueError(
            f"statistics must be a callable table -> {{name: number}}, got {type(statistics)}"
        )
    n = check_int(draws, "draws", minimum=2)
    p = _table(table)
    observed = _evaluate_many(statistics, p, "the table")
    per_null: dict[str, dict[str, NullComparison]] = {}
    for null in NULLS:
        values: dict[str, list[float]] = {k: [] for k in observed}
        for i, t in enumerate(_null_tables(p, null, n, seed)):
            got = _evaluate_many(statistics, t, f"{null} draw {i}")
            if got.keys() != observed.keys():
                raise ValueError(
                    f"statistics returned {sorted(got)} on {null} draw {i}, but "
                    f"{sorted(observed)} on the table"
                )
            for k, v in got.items():
                values[k].append(v)
        per_null[null] = {k: _compare(null, observed[k], values[k], seed) for k in observed}
    return {
        k: NullBaselines(
            observed=observed[k], random=per_null["random"][k], shuffled=per_null["shuffled"][k]
        )
        for k in observed
    }


# --------------------------------------------------------------------------------------
# Ready-made statistics
# --------------------------------------------------------------------------------------


def gram_ti(table: Tensor, *, exclude_diagonal: bool = False) -> Tensor:
    """TI of the Gram matrix P P^T of (..., L, E) tables: (...) float64.

    Args:
        table: (..., L, E) real tensor.
        exclude_diagonal: off-diagonal TI (the squared norms on the diagonal left out).
    """
    p = table.detach().to(torch.float64)
    return translation_invariance(p @ p.mT, exclude_diagonal=exclude_diagonal)


def cosine_ti(table: Tensor, *, exclude_diagonal: bool = False) -> Tensor:
    """TI of the cosine similarities cos(P)[i, j] of the rows of (..., L, E) tables.

    A zero row has cosine 0 with every row (itself included).

    Args:
        table: (..., L, E) real tensor.
        exclude_diagonal: off-diagonal TI (the ones on the diagonal left out).
    """
    p = table.detach().to(torch.float64)
    unit = torch.nn.functional.normalize(p, dim=-1)
    return translation_invariance(unit @ unit.mT, exclude_diagonal=exclude_diagonal)
