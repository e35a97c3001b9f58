"""Paired comparisons: a mean difference with its t interval and p-value, and Holm's
correction over a family of them.

What the benchmarks of the features report when two settings were measured on the same
units (seeds, cells): the difference per unit is the evidence, its mean the effect.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

__all__ = ["PairedDifference", "holm", "paired_difference"]


@dataclass(frozen=True)
class PairedDifference:
    """The mean of paired differences a - b over n units.

    Attributes:
        mean: mean difference.
        low, high: its two-sided t interval at ``level`` (equal to the mean when every
            difference is the same).
        p: two-sided p-value of the one-sample t test of mean 0 (1.0 when every difference
            is 0; when they are all the same non-zero value, where the t statistic is
            undefined, the exact sign-flip p-value 2 / 2^n: no test of n pairs can say
            more, e.g. 0.25 for three).
        n: number of pairs.
        level: confidence level of the interval.
    """

    mean: float
    low: float
    high: float
    p: float
    n: int
    level: float

    def to_dict(self) -> dict[str, float | int]:
        return asdict(self)


def paired_difference(
    a: Sequence[float], b: Sequence[float], *, level: float = 0.95
) -> PairedDifference:
    """Mean of ``a[i] - b[i]`` with a t interval and the t test's p-value.

    Raises:
        ValueError: unequal lengths, fewer than two pairs or a level outside (0, 1).
    """
    from scipy import stats

    if len(a) != len(b):
        raise ValueError(f"paired values: expected equal lengths, got {len(a)} and {len(b)}")
    n = len(a)
    if n < 2:
        raise ValueError(f"paired values: expected at least 2 pairs, got {n}")
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    diffs = [float(x) - float(y) for x, y in zip(a, b)]
    mean = sum(diffs) / n
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1))
    if sd <= 1e-12 * max(1.0, abs(mean)):  # t undefined (rounding aside): sign-flip test
        p = 1.0 if mean == 0 else min(1.0, 2.0 * 0.5**n)
        return PairedDifference(mean, mean, mean, p, n, level)
    se = sd / math.sqrt(n)
    half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * se
    p = float(2 * stats.t.sf(abs(mean) / se, n - 1))
    return PairedDifference(mean, mean - half, mean + half, p, n, level)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given (each at most 1).

    A comparison is significant at level alpha over the whole family when its adjusted
    p-value is below alpha.
    """
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted
