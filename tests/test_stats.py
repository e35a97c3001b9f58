"""Paired differences and Holm's correction against scipy and a worked example."""

from __future__ import annotations

import pytest
from scipy import stats

from tisa.stats import holm, paired_difference


def test_paired_difference_matches_scipy():
    a = [0.9, 0.8, 1.0, 0.7, 0.95]
    b = [0.5, 0.6, 0.4, 0.7, 0.55]
    diff = paired_difference(a, b)
    test = stats.ttest_rel(a, b)
    low, high = test.confidence_interval(0.95)
    assert diff.mean == pytest.approx(sum(a) / 5 - sum(b) / 5)
    assert (diff.low, diff.high) == pytest.approx((low, high))
    assert diff.p == pytest.approx(test.pvalue) and diff.n == 5
    wider = paired_difference(a, b, level=0.99)
    assert wider.low < diff.low and wider.high > diff.high


def test_constant_differences_and_bad_input():
    assert paired_difference([1, 1], [1, 1]).p == 1.0
    same = paired_difference([1.0, 1.0, 1.0], [0.5, 0.5, 0.5])
    # t is undefined; the sign-flip test gives 2 / 2^3, the most three pairs can show
    assert (same.mean, same.low, same.high, same.p) == (0.5, 0.5, 0.5, 0.25)
    assert paired_difference([0.0] * 12, [-0.1] * 12).p == pytest.approx(2 / 2**12)
    with pytest.raises(ValueError, match="equal lengths"):
        paired_difference([1, 2], [1])
    with pytest.raises(ValueError, match="at least 2"):
        paired_difference([1], [1])
    with pytest.raises(ValueError, match="level"):
        paired_difference([1, 2], [1, 2], level=1.0)


def test_holm_step_down():
    # sorted 0.01, 0.02, 0.03, 0.04 -> 0.04, 0.06, 0.06 (monotone), 0.04 -> max 0.06
    assert holm([0.03, 0.01, 0.04, 0.02]) == pytest.approx([0.06, 0.04, 0.06, 0.06])
    assert holm([0.5, 0.9]) == [1.0, 1.0]
    assert holm([]) == []
