"""RBF kernels fitted to offset profiles by weighted least squares."""

from __future__ import annotations

import pytest
import torch

from tisa.convert.fit import fit_rbf, initial_kernels, weighted_r2


def _profile(k: torch.Tensor) -> torch.Tensor:
    k = k.double()
    return (
        0.7
        + 2.0 * torch.exp(-0.05 * (k - 3.0) ** 2)
        - 1.5 * torch.exp(-0.01 * (k + 10.0) ** 2)
        + 0.8 * torch.exp(-0.5 * k**2)
    )


def test_recovers_known_kernels_and_constant():
    k = torch.arange(-60, 61)
    y = torch.stack([_profile(k), -_profile(k)])  # two profiles, fitted at once
    fit = fit_rbf(y, k, num_kernels=3)
    assert fit.amplitude.shape == (2, 3) and fit.constant.shape == (2,)
    assert (fit.r2 > 0.99999).all()
    torch.testing.assert_close(fit.values(k), y, atol=1e-4, rtol=0)
    torch.testing.assert_close(
        fit.constant, torch.tensor([0.7, -0.7], dtype=torch.float64), atol=1e-3, rtol=0
    )
    torch.testing.assert_close(fit.kernels(k), y - fit.constant[:, None], atol=1e-4, rtol=0)
    assert (fit.sharpness >= 0).all()


def test_weights_decide_what_counts():
    k = torch.arange(-30, 31)
    y = _profile(k).clone()
    y[0] = 50.0  # an outlier at an offset with no weight
    w = torch.ones(61, dtype=torch.float64)
    w[0] = 0.0
    fit = fit_rbf(y[None], k, w, num_kernels=3)
    assert fit.r2[0] > 0.9999
    assert abs(float(fit.values(k)[0, 5]) - float(y[5])) < 1e-3
    unweighted = fit_rbf(y[None], k, num_kernels=3)
    assert unweighted.r2[0] < fit.r2[0]


def test_initial_kernels_sit_on_the_peaks():
    k = torch.arange(-40, 41)
    y = 1.0 + 3.0 * torch.exp(-0.1 * (k.double() - 7) ** 2)
    a, b, c, c0 = initial_kernels(y[None], k, num_kernels=1)
    assert float(c[0, 0]) == 7.0 and float(a[0, 0]) == pytest.approx(3.0)
    assert float(c0[0]) == pytest.approx(1.0, abs=1e-6)
    assert 0.02 < float(b[0, 0]) < 0.5  # from the width at half height


def test_weighted_r2_of_constant_and_perfect_fits():
    y = torch.tensor([[1.0, 2.0, 3.0], [5.0, 5.0, 5.0]], dtype=torch.float64)
    w = torch.ones(3, dtype=torch.float64)
    torch.testing.assert_close(weighted_r2(y, y, w), torch.ones(2, dtype=torch.float64))
    mean_fit = torch.full_like(y, 2.0)
    assert float(weighted_r2(y, mean_fit, w)[0]) == pytest.approx(0.0)


def test_bad_input():
    k = torch.arange(-3, 4)
    with pytest.raises(ValueError, match="profile must be an"):
        fit_rbf(torch.zeros(7), k)
    with pytest.raises(ValueError, match="offsets must have shape"):
        fit_rbf(torch.zeros(1, 7), torch.arange(5))
    with pytest.raises(ValueError, match="weights must be >= 0"):
        fit_rbf(torch.zeros(1, 7), k, -torch.ones(7))
    with pytest.raises(ValueError, match="finite"):
        fit_rbf(torch.full((1, 7), float("nan")), k)
    with pytest.raises(ValueError, match="num_kernels must be an integer"):
        fit_rbf(torch.zeros(1, 7), k, num_kernels=0)
