"""Known answers for the translation-invariance, locality and symmetry metrics."""

from __future__ import annotations

import math

import pytest
import torch

from tisa import metrics, scoring
from tisa.bias import expand, table


def _toeplitz(values: torch.Tensor, n: int) -> torch.Tensor:
    """Naive Toeplitz matrix: M[i, j] = values[j - i + n - 1]."""
    return torch.stack([torch.stack([values[j - i + n - 1] for j in range(n)]) for i in range(n)])


def _naive_projection(m: torch.Tensor) -> torch.Tensor:
    n = m.shape[-1]
    out = torch.empty_like(m, dtype=torch.float64)
    for k in range(-(n - 1), n):
        idx = [(i, i + k) for i in range(n) if 0 <= i + k < n]
        mean = sum(float(m[i, j]) for i, j in idx) / len(idx)
        for i, j in idx:
            out[i, j] = mean
    return out


def _sinusoidal(n: int, d: int) -> torch.Tensor:
    """Vaswani et al. (2017) position encodings, (n, d), float64."""
    pos = torch.arange(n, dtype=torch.float64)[:, None]
    freq = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    pe = torch.zeros(n, d, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(pos * freq)
    pe[:, 1::2] = torch.cos(pos * freq)
    return pe


# --- translation invariance ----------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 7, 97, 128])
def test_random_toeplitz_has_ti_one(n: int) -> None:
    gen = torch.Generator().manual_seed(n)
    m = _toeplitz(torch.randn(2 * n - 1, generator=gen), n)
    assert float(metrics.translation_invariance(m)) == pytest.approx(1.0, abs=1e-10)


def test_sinusoidal_gram_is_translation_invariant() -> None:
    pe = _sinusoidal(200, 64)
    assert float(metrics.translation_invariance(pe @ pe.T)) == pytest.approx(1.0, abs=1e-10)
    # float32 input: still 1 up to float error
    pe32 = pe.float()
    assert float(metrics.translation_invariance(pe32 @ pe32.T)) == pytest.approx(1.0, abs=1e-5)


def test_iid_gaussian_has_low_ti() -> None:
    gen = torch.Generator().manual_seed(0)
    ti = float(metrics.translation_invariance(torch.randn(256, 256, generator=gen)))
    assert 0.0 < ti < 0.05
    # expectation for noise is about (2L - 1) / L^2
    assert ti == pytest.approx(511 / 256**2, rel=0.5)


@pytest.mark.parametrize("family", ["rbf", "alibi", "t5", "free"])
def test_tisa_bias_has_ti_one(family: str) -> None:
    torch.manual_seed(0)
    scorer = scoring.build(family, num_heads=4)
    n = 50
    bias = expand(table(scorer, n).detach(), n, n)  # (H, n, n)
    ti = metrics.translation_invariance(bias)
    assert ti.shape == (4,)
    torch.testing.assert_close(ti, torch.ones(4, dtype=torch.float64), atol=1e-10, rtol=0)


def test_hand_computed_value() -> None:
    # T(M) = [[.5, 0], [0, .5]] -> residual .5; mean .25 -> total .75; TI = 1/3
    m = torch.tensor([[1.0, 0.0], [0.0, 0.0]])
    assert float(metrics.translation_invariance(m)) == pytest.approx(1 / 3)


def test_constant_and_zero_matrices_are_defined_as_one() -> None:
    assert float(metrics.translation_invariance(torch.full((5, 5), 3.7))) == 1.0
    assert float(metrics.translation_invariance(torch.zeros(4, 4))) == 1.0
    assert float(metrics.translation_invariance(torch.full((1, 1), -2.0))) == 1.0


def test_ti_is_invariant_to_affine_maps_and_decreases_with_noise() -> None:
    gen = torch.Generator().manual_seed(1)
    n = 64
    base = _toeplitz(torch.randn(2 * n - 1, generator=gen), n)
    noise = torch.randn(n, n, generator=gen)
    tis = [float(metrics.translation_invariance(base + s * noise)) for s in (0.0, 0.1, 0.5, 2.0)]
    assert tis[0] == pytest.approx(1.0)
    assert tis == sorted(tis, reverse=True)
    assert 0.0 < tis[-1] < 0.5
    m = base + 0.5 * noise
    assert float(metrics.translation_invariance(3.0 * m - 7.0)) == pytest.approx(
        float(metrics.translation_invariance(m))
    )


def test_batches_give_one_value_per_matrix() -> None:
    gen = torch.Generator().manual_seed(2)
    m = torch.randn(2, 3, 9, 9, generator=gen)
    m[0, 1] = _toeplitz(torch.randn(17, generator=gen), 9)
    ti = metrics.translation_invariance(m)
    assert ti.shape == (2, 3)
    for a in range(2):
        for b in range(3):
            assert float(ti[a, b]) == pytest.approx(float(metrics.translation_invariance(m[a, b])))
    assert float(ti[0, 1]) == pytest.approx(1.0)
    assert ((ti >= 0) & (ti <= 1)).all()


def test_causal_ti_ignores_the_upper_triangle() -> None:
    gen = torch.Generator().manual_seed(3)
    n = 20
    m = _toeplitz(torch.randn(2 * n - 1, generator=gen), n)
    m = m + torch.randn(n, n, generator=gen).triu(1) * 5  # garbage above the diagonal
    assert float(metrics.translation_invariance(m, causal=True)) == pytest.approx(1.0)
    assert float(metrics.translation_invariance(m)) < 0.9


def _naive_ti(m: torch.Tensor, *, causal: bool = False, exclude_diagonal: bool = False) -> float:
    """Loop reference: projection, mean and variance over the used entries only."""
    n = m.shape[-1]
    used = [
        (i, j)
        for i in range(n)
        for j in range(n)
        if (j <= i or not causal) and (j != i or not exclude_diagonal)
    ]
    diagonals: dict[int, list[float]] = {}
    for i, j in used:
        diagonals.setdefault(j - i, []).append(float(m[i, j]))
    proj = {k: sum(v) / len(v) for k, v in diagonals.items()}
    mean = sum(float(m[i, j]) for i, j in used) / len(used)
    resid = sum((float(m[i, j]) - proj[j - i]) ** 2 for i, j in used)
    total = sum((float(m[i, j]) - mean) ** 2 for i, j in used)
    return 1.0 - resid / total


# M[i, j] for j <= i (rows 1, 2 0, 4 0 0) and garbage above the diagonal (5, -3, 7).
_CAUSAL_EXAMPLE = torch.tensor([[1.0, 5.0, -3.0], [2.0, 0.0, 7.0], [4.0, 0.0, 0.0]])


def test_causal_ti_hand_computed_values() -> None:
    # j <= i: diagonals k = 0: (1, 0, 0), mean 1/3, residual 2/3; k = -1: (2, 0), residual 2;
    # k = -2: (4,), residual 0. Six entries, mean 7/6, variance sum 21 - 6 (7/6)^2 = 77/6.
    # TI = 1 - (8/3) / (77/6) = 61/77 = 0.792. A variance over all nine entries (ignoring
    # the mask, 2040/27) would give 0.965, one over the triangle around the mean of all
    # nine entries (16/9) would give 0.823.
    m = _CAUSAL_EXAMPLE
    assert float(metrics.translation_invariance(m, causal=True)) == pytest.approx(61 / 77)
    # j < i: (2, 0) on k = -1 (residual 2) and (4,) on k = -2; mean 2, variance sum 8.
    off = metrics.translation_invariance(m, causal=True, exclude_diagonal=True)
    assert float(off) == pytest.approx(3 / 4)
    # the upper triangle does matter without the mask
    assert float(metrics.translation_invariance(m)) == pytest.approx(_naive_ti(m))
    assert float(metrics.translation_invariance(m)) != pytest.approx(61 / 77, abs=1e-3)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("exclude_diagonal", [False, True])
@pytest.mark.parametrize("n", [3, 5, 12])
def test_ti_matches_loop_reference(n: int, causal: bool, exclude_diagonal: bool) -> None:
    gen = torch.Generator().manual_seed(100 + n)
    # a Toeplitz part plus noise, with an upper triangle on another scale, so that every
    # term (projection, mean, variance) has to use exactly the right entries
    m = _toeplitz(torch.randn(2 * n - 1, generator=gen), n) + 0.7 * torch.randn(n, n, generator=gen)
    m = m + 4.0 * torch.randn(n, n, generator=gen).triu(1) + 3.0
    m = m + torch.diag(torch.linspace(-2.0, 5.0, n))
    expected = _naive_ti(m, causal=causal, exclude_diagonal=exclude_diagonal)
    assert 0.05 < expected < 0.95  # a non-trivial value
    ti = metrics.translation_invariance(m, causal=causal, exclude_diagonal=exclude_diagonal)
    assert float(ti) == pytest.approx(expected, abs=1e-12)
    batch = torch.stack([m, m.T, 2 * m])
    got = metrics.translation_invariance(batch, causal=causal, exclude_diagonal=exclude_diagonal)
    assert got.shape == (3,)
    assert float(got[1]) == pytest.approx(
        _naive_ti(m.T, causal=causal, exclude_diagonal=exclude_diagonal), abs=1e-12
    )
    assert float(got[2]) == pytest.approx(expected, abs=1e-12)


def test_causal_ti_of_random_lower_triangle_is_low() -> None:
    # i.i.d. noise below the diagonal and a Toeplitz matrix above: causal TI sees only
    # the noise: L diagonals fitted to L (L + 1) / 2 entries explain about (L - 1) / that
    gen = torch.Generator().manual_seed(7)
    n = 128
    noise = torch.randn(n, n, generator=gen).tril()
    m = noise + _toeplitz(torch.randn(2 * n - 1, generator=gen), n).triu(1) * 10
    ti = float(metrics.translation_invariance(m, causal=True))
    assert ti == pytest.approx((n - 1) / (n * (n + 1) / 2), rel=0.5)
    assert float(metrics.translation_invariance(m, causal=True, exclude_diagonal=True)) < 0.05


@pytest.mark.parametrize("n", [2, 9, 64])
def test_toeplitz_plus_varying_diagonal_scores_one_off_diagonal(n: int) -> None:
    gen = torch.Generator().manual_seed(8 + n)
    m = _toeplitz(torch.randn(2 * n - 1, generator=gen), n)
    m = m + torch.diag(torch.randn(n, generator=gen) * 3)
    assert float(metrics.translation_invariance(m, exclude_diagonal=True)) == pytest.approx(
        1.0, abs=1e-10
    )
    assert float(
        metrics.translation_invariance(m, causal=True, exclude_diagonal=True)
    ) == pytest.approx(1.0, abs=1e-10)
    if n > 2:
        assert float(metrics.translation_invariance(m)) < 0.95
        assert float(metrics.translation_invariance(m, causal=True)) < 0.95


def test_off_diagonal_ti_of_random_gram_is_near_zero() -> None:
    # 512 random 384-dimensional positions: the diagonal (squared norms, about d each)
    # alone explains about d / (d + n) of the variance of P P^T
    gen = torch.Generator().manual_seed(9)
    n, d = 512, 384
    p = torch.randn(n, d, generator=gen, dtype=torch.float64)
    gram = p @ p.T
    assert float(metrics.translation_invariance(gram)) == pytest.approx(d / (d + n), abs=0.03)
    off = float(metrics.translation_invariance(gram, exclude_diagonal=True))
    assert 0.0 < off < 0.01
    assert off == pytest.approx((2 * n - 3) / (n * (n - 1)), rel=0.5)


def test_off_diagonal_ti_of_sinusoidal_embeddings_is_one() -> None:
    pe = _sinusoidal(300, 96)
    gram = pe @ pe.T
    assert float(metrics.translation_invariance(gram, exclude_diagonal=True)) == pytest.approx(
        1.0, abs=1e-10
    )
    unit = torch.nn.functional.normalize(pe, dim=-1)
    cosine = unit @ unit.T
    assert float(metrics.translation_invariance(cosine, exclude_diagonal=True)) == pytest.approx(
        1.0, abs=1e-10
    )


def test_off_diagonal_ti_of_tiny_matrices_is_defined() -> None:
    one = torch.full((1, 1), 2.0)
    assert float(metrics.translation_invariance(one, exclude_diagonal=True)) == 1.0
    two = torch.tensor([[1.0, 2.0], [3.0, -4.0]])
    # two off-diagonal entries, each its own diagonal: a perfect Toeplitz fit
    assert float(metrics.translation_invariance(two, exclude_diagonal=True)) == 1.0
    assert float(metrics.translation_invariance(two, causal=True, exclude_diagonal=True)) == 1.0
    assert float(metrics.translation_invariance(two)) < 1.0


def test_projection_matches_naive_reference_and_is_idempotent() -> None:
    gen = torch.Generator().manual_seed(4)
    m = torch.randn(11, 11, generator=gen)
    proj = metrics.toeplitz_projection(m)
    assert proj.dtype == m.dtype
    torch.testing.assert_close(proj.double(), _naive_projection(m), atol=1e-6, rtol=0)
    torch.testing.assert_close(metrics.toeplitz_projection(proj), proj, atol=1e-6, rtol=0)


def test_offset_profile_matches_reference() -> None:
    gen = torch.Generator().manual_seed(5)
    n = 9
    m = torch.randn(n, n, generator=gen)
    prof = metrics.offset_profile(m)
    assert prof.offsets.tolist() == list(range(-(n - 1), n))
    for t, k in enumerate(prof.offsets.tolist()):
        diag = torch.diagonal(m, offset=k).double()  # entries with j - i = k
        assert int(prof.count[t]) == n - abs(k)
        assert float(prof.mean[t]) == pytest.approx(float(diag.mean()))
        assert float(prof.std[t]) == pytest.approx(float(diag.std(unbiased=False)), abs=1e-7)
    values = torch.randn(2 * n - 1, generator=gen)
    prof_t = metrics.offset_profile(_toeplitz(values, n))
    torch.testing.assert_close(prof_t.mean, values.double(), atol=1e-6, rtol=0)
    assert float(prof_t.std.max()) < 1e-6


# --- locality and symmetry -----------------------------------------------------------


def _naive_locality(a: torch.Tensor) -> float:
    n = a.shape[-1]
    return sum(float(a[i, j]) * 2.0 ** -abs(j - i) for i in range(n) for j in range(n)) / n


def _naive_chen_symmetry(a: torch.Tensor) -> float:
    """Per row: |left - right| at mirror distances, min-max scaled, 1 - overall mean."""
    n = a.shape[-1]
    scaled = []
    for i in range(n):
        m = min(i, n - 1 - i)
        if m == 0:
            continue
        diffs = [abs(float(a[i, i - d]) - float(a[i, i + d])) for d in range(1, m + 1)]
        lo, hi = min(diffs), max(diffs)
        scaled += [(x - lo) / (hi - lo) if hi > lo else 0.0 for x in diffs]
    return 1.0 - sum(scaled) / len(scaled)


def _random_attention(n: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(n, n, generator=gen) * 2, dim=-1)


def test_locality_known_answers() -> None:
    n = 10
    assert float(metrics.locality(torch.eye(n))) == pytest.approx(1.0)
    uniform = torch.full((n, n), 1.0 / n)
    expected = (n + 2 * sum((n - d) * 2.0**-d for d in range(1, n))) / n**2
    assert float(metrics.locality(uniform)) == pytest.approx(expected)
    previous = torch.zeros(n, n)  # attend to the previous token (row 0 to itself)
    previous[0, 0] = 1.0
    previous[torch.arange(1, n), torch.arange(n - 1)] = 1.0
    assert float(metrics.locality(previous)) == pytest.approx((1 + (n - 1) * 0.5) / n)
    a = _random_attention(13, 0)
    assert float(metrics.locality(a)) == pytest.approx(_naive_locality(a))
    assert 0 < float(metrics.locality(a)) < 1


def test_symmetry_known_answers() -> None:
    n = 12
    k = torch.arange(n)
    sym = torch.softmax(-(k[None, :] - k[:, None]).abs().float() * 0.7, dim=-1)
    assert float(metrics.symmetry(sym)) == pytest.approx(1.0)
    assert float(metrics.symmetry(sym, method="chen")) == pytest.approx(1.0)
    causal = torch.softmax(torch.randn(n, n).masked_fill(k[None, :] > k[:, None], -1e9), -1)
    assert float(metrics.symmetry(causal)) == pytest.approx(0.0, abs=1e-6)
    assert float(metrics.symmetry(torch.eye(n))) == 1.0  # no weight off the diagonal
    a = _random_attention(15, 1)
    value = float(metrics.symmetry(a))
    assert 0 < value < 1
    left = [float(a[i, i - d]) for i in range(15) for d in range(1, min(i, 14 - i) + 1)]
    right = [float(a[i, i + d]) for i in range(15) for d in range(1, min(i, 14 - i) + 1)]
    expected = 1 - sum(abs(x - y) for x, y in zip(left, right)) / sum(
        x + y for x, y in zip(left, right)
    )
    assert value == pytest.approx(expected)
    assert float(metrics.symmetry(a, method="chen")) == pytest.approx(_naive_chen_symmetry(a))


def test_symmetry_and_locality_batch() -> None:
    a = torch.stack([_random_attention(8, s) for s in range(6)]).reshape(2, 3, 8, 8)
    assert metrics.locality(a).shape == (2, 3)
    sym = metrics.symmetry(a, method="chen")
    assert sym.shape == (2, 3)
    assert float(sym[1, 2]) == pytest.approx(_naive_chen_symmetry(a[1, 2]))


def test_transpose_symmetry() -> None:
    gen = torch.Generator().manual_seed(6)
    x = torch.randn(7, 7, generator=gen)
    assert float(metrics.transpose_symmetry(x + x.T)) == pytest.approx(1.0)
    assert float(metrics.transpose_symmetry(x - x.T)) == pytest.approx(0.0, abs=1e-12)
    assert 0 < float(metrics.transpose_symmetry(x)) < 1
    assert float(metrics.transpose_symmetry(torch.zeros(3, 3))) == 1.0
    expected = 1 - float(torch.linalg.norm(x - x.T)) / (2 * float(torch.linalg.norm(x)))
    assert float(metrics.transpose_symmetry(x)) == pytest.approx(expected)


# --- bad input -----------------------------------------------------------------------


def test_bad_input_raises_value_error() -> None:
    with pytest.raises(ValueError, match="matrix"):
        metrics.translation_invariance(torch.randn(3, 4))
    with pytest.raises(ValueError, match="matrix"):
        metrics.translation_invariance(torch.randn(5))
    with pytest.raises(ValueError, match="non-negative"):
        metrics.locality(-torch.eye(3))
    with pytest.raises(ValueError, match="sum to 1"):
        metrics.symmetry(torch.ones(4, 4))
    with pytest.raises(ValueError, match="method"):
        metrics.symmetry(torch.eye(4), method="other")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="base"):
        metrics.locality(torch.eye(4), base=1.0)
    assert not math.isnan(float(metrics.symmetry(torch.eye(2))))
