"""Null baselines: matched random and shuffled tables, and figures compared with them."""

from __future__ import annotations

import math

import pytest
import torch

from tisa import metrics
from tisa.analysis import nulls


def _sinusoidal(n: int, d: int) -> torch.Tensor:
    """Vaswani et al. (2017) position encodings, (n, d), float64."""
    pos = torch.arange(n, dtype=torch.float64)[:, None]
    freq = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    pe = torch.zeros(n, d, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(pos * freq)
    pe[:, 1::2] = torch.cos(pos * freq)
    return pe


def _random_table(n: int, d: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    # unequal norms, so that matching them is something a wrong null would miss
    scale = torch.linspace(0.5, 2.0, n, dtype=torch.float64)[:, None]
    return torch.randn(n, d, generator=gen, dtype=torch.float64) * scale


def _off_gram(p: torch.Tensor) -> torch.Tensor:
    return nulls.gram_ti(p, exclude_diagonal=True)


# --- the null tables -----------------------------------------------------------------


def test_random_tables_keep_shape_and_row_norms() -> None:
    p = _random_table(37, 11, 0)
    p[5] = 0.0  # a zero row stays zero
    draws = nulls.random_tables(p.float(), 6, seed=3)
    assert draws.shape == (6, 37, 11)
    assert draws.dtype == torch.float64
    torch.testing.assert_close(
        draws.norm(dim=-1), p.norm(dim=-1).expand(6, 37), atol=1e-5, rtol=1e-6
    )
    assert float(draws[:, 5].abs().max()) == 0.0
    # new directions: a draw is not the table, and draws differ from each other
    assert not torch.allclose(draws[0], p.float().double(), atol=0.1)
    assert not torch.allclose(draws[0], draws[1], atol=0.1)
    # uniform directions: the mean of many unit rows is near zero in every coordinate
    many = nulls.random_tables(torch.ones(400, 3), 5, seed=1).reshape(-1, 3)
    assert float(many.mean(0).abs().max()) < 0.05


def test_shuffled_tables_permute_rows() -> None:
    p = _random_table(23, 5, 1)
    draws = nulls.shuffled_tables(p, 8, seed=4)
    assert draws.shape == (8, 23, 5)
    for draw in draws:
        # each row of the draw is exactly one row of p, each row of p used once
        match = (draw[:, None, :] == p[None, :, :]).all(-1)  # (23, 23)
        assert match.sum(0).tolist() == [1] * 23
        assert match.sum(1).tolist() == [1] * 23
    assert not torch.equal(draws[0], p)
    assert not torch.equal(draws[0], draws[1])
    # every row reaches position 0 (a uniform permutation, not a fixed cycle)
    first = nulls.shuffled_tables(torch.arange(4.0)[:, None], 200, seed=0)[:, 0, 0]
    counts = torch.bincount(first.long(), minlength=4)
    assert counts.min() > 30


def test_draws_are_reproducible_by_seed() -> None:
    p = _random_table(16, 4, 2)
    for make in (nulls.random_tables, nulls.shuffled_tables):
        assert torch.equal(make(p, 3, seed=7), make(p, 3, seed=7))
        assert not torch.equal(make(p, 3, seed=7), make(p, 3, seed=8))
    a = nulls.compare_to_null(p, _off_gram, null="shuffled", draws=5, seed=11)
    b = nulls.compare_to_null(p, _off_gram, null="shuffled", draws=5, seed=11)
    assert a == b


# --- comparisons ---------------------------------------------------------------------


@pytest.mark.parametrize("null", ["random", "shuffled"])
def test_comparison_matches_hand_statistics(null: str) -> None:
    p = _random_table(19, 6, 3)
    draws = 9

    def statistic(t: torch.Tensor) -> torch.Tensor:
        return t[0, 0] * 2 + t[3].sum()

    res = nulls.compare_to_null(p, statistic, null=null, draws=draws, seed=5)
    tables = (nulls.random_tables if null == "random" else nulls.shuffled_tables)(p, draws, seed=5)
    values = [float(statistic(t)) for t in tables]
    mean = sum(values) / draws
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (draws - 1))
    observed = float(statistic(p))
    assert res.null == null and res.seed == 5
    assert res.draws == pytest.approx(tuple(values))
    assert res.observed == pytest.approx(observed)
    assert res.mean == pytest.approx(mean)
    assert res.std == pytest.approx(std)
    assert res.z == pytest.approx((observed - mean) / std)
    assert res.exceeded == pytest.approx(sum(v < observed for v in values) / draws)
    assert res.p_value == pytest.approx((1 + sum(v >= observed for v in values)) / (draws + 1))
    summary = res.summary()
    assert summary["draws"] == draws and summary["z"] == res.z and summary["null"] == null


def test_toeplitz_structured_table_stands_out_from_both_nulls() -> None:
    # sinusoidal encodings: P P^T and cos(P) are Toeplitz, TI 1; both nulls destroy that
    pe = _sinusoidal(128, 64)
    for statistic in (_off_gram, lambda t: nulls.cosine_ti(t, exclude_diagonal=True)):
        res = nulls.compare_to_nulls(pe, statistic, draws=12, seed=0)
        assert res.observed == pytest.approx(1.0, abs=1e-10)
        for comparison in (res.random, res.shuffled):
            assert comparison.observed == res.observed
            assert comparison.mean < 0.05  # the shuffled Toeplitz table scores near 0
            assert comparison.z > 100
            assert comparison.exceeded == 1.0
            assert comparison.p_value == pytest.approx(1 / 13)


def test_random_table_is_not_structured_even_where_its_ti_is_high() -> None:
    # A random table's TI(P P^T) with the diagonal is high (the squared norms), but the
    # matched random null has the same norms and scores the same: z near 0.
    n, d = 96, 48
    p = torch.randn(n, d, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    with_diagonal = nulls.compare_to_nulls(p, nulls.gram_ti, draws=24, seed=1)
    assert with_diagonal.observed == pytest.approx(d / (d + n), abs=0.05)
    assert with_diagonal.random.mean == pytest.approx(with_diagonal.observed, abs=0.02)
    off = nulls.compare_to_nulls(p, _off_gram, draws=24, seed=1)
    assert off.observed < 0.05
    for res in (with_diagonal, off):
        for comparison in (res.random, res.shuffled):
            assert abs(comparison.z) < 3


@pytest.mark.parametrize("statistic", [nulls.gram_ti, _off_gram])
def test_nulls_are_calibrated_for_random_tables(statistic) -> None:
    # For a table of i.i.d. Gaussian rows both nulls are exact (given the norms the
    # directions are uniform; the rows are exchangeable): z-scores average near 0 and the
    # observed value lands anywhere among the draws.
    zs, exceeded = [], []
    for seed in range(12):
        gen = torch.Generator().manual_seed(seed)
        p = torch.randn(48, 24, generator=gen, dtype=torch.float64)
        res = nulls.compare_to_nulls(p, statistic, draws=16, seed=100 + seed)
        zs += [res.random.z, res.shuffled.z]
        exceeded += [res.random.exceeded, res.shuffled.exceeded]
    z = torch.tensor(zs)
    assert abs(float(z.mean())) < 0.7  # 24 values of about unit spread
    assert float(z.abs().max()) < 4
    assert 0.3 < sum(exceeded) / len(exceeded) < 0.7


def test_constant_null_gives_infinite_or_zero_z() -> None:
    p = _random_table(10, 3, 6)
    exact = nulls.compare_to_null(p, lambda t: float(torch.equal(t, p)), null="shuffled", seed=2)
    # the identity permutation has probability 1/10! per draw: no draw equals p
    assert exact.observed == 1.0 and exact.std == 0.0 and exact.mean == 0.0
    assert exact.z == math.inf and exact.exceeded == 1.0
    same = nulls.compare_to_null(p, lambda t: 0.5, null="random", draws=4)
    assert same.z == 0.0 and same.std == 0.0 and same.exceeded == 0.0


def test_ready_made_statistics() -> None:
    p = _random_table(21, 7, 7)
    gram = p @ p.T
    unit = p / p.norm(dim=-1, keepdim=True)
    for exclude in (False, True):
        assert float(nulls.gram_ti(p, exclude_diagonal=exclude)) == pytest.approx(
            float(metrics.translation_invariance(gram, exclude_diagonal=exclude))
        )
        assert float(nulls.cosine_ti(p, exclude_diagonal=exclude)) == pytest.approx(
            float(metrics.translation_invariance(unit @ unit.T, exclude_diagonal=exclude))
        )
    batch = torch.stack([p, p.flip(0), 2 * p])
    got = nulls.gram_ti(batch, exclude_diagonal=True)
    assert got.shape == (3,)
    assert float(got[2]) == pytest.approx(float(got[0]))


# --- bad input -----------------------------------------------------------------------


def test_bad_input_raises_value_error() -> None:
    p = _random_table(8, 3, 8)
    with pytest.raises(ValueError, match="table"):
        nulls.compare_to_null(torch.randn(8), nulls.gram_ti)
    with pytest.raises(ValueError, match="table"):
        nulls.compare_to_null(torch.randn(1, 4), nulls.gram_ti)
    with pytest.raises(ValueError, match="table"):
        nulls.random_tables([[1.0, 2.0]], 3)  # type: ignore[arg-type]
    bad = p.clone()
    bad[2, 1] = float("nan")
    with pytest.raises(ValueError, match="finite"):
        nulls.shuffled_tables(bad, 3)
    with pytest.raises(ValueError, match="null"):
        nulls.compare_to_null(p, nulls.gram_ti, null="gaussian")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="draws"):
        nulls.compare_to_null(p, nulls.gram_ti, draws=1)
    with pytest.raises(ValueError, match="draws"):
        nulls.random_tables(p, 0)
    with pytest.raises(ValueError, match="seed"):
        nulls.compare_to_nulls(p, nulls.gram_ti, seed=-1)
    with pytest.raises(ValueError, match="statistic"):
        nulls.compare_to_null(p, 0.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="one number"):
        nulls.compare_to_null(p, lambda t: t.sum(-1))
    with pytest.raises(ValueError, match="NaN"):
        nulls.compare_to_nulls(p, lambda t: float("nan"))
    with pytest.raises(ValueError, match="number"):
        nulls.compare_to_null(p, lambda t: "high")  # type: ignore[arg-type, return-value]


# --- several statistics from the same draws ------------------------------------------


def test_many_statistics_agree_with_one_at_a_time() -> None:
    p = _random_table(30, 9, 9)
    calls = []

    def both(t: torch.Tensor) -> dict[str, torch.Tensor]:
        calls.append(1)
        return {"on": nulls.gram_ti(t), "off": _off_gram(t)}

    many = nulls.compare_many_to_nulls(p, both, draws=5, seed=3)
    assert list(many) == ["on", "off"]
    assert len(calls) == 1 + 2 * 5  # the table once, each draw of each null once
    assert many["on"] == nulls.compare_to_nulls(p, nulls.gram_ti, draws=5, seed=3)
    assert many["off"] == nulls.compare_to_nulls(p, _off_gram, draws=5, seed=3)


def test_many_statistics_bad_input() -> None:
    p = _random_table(8, 3, 10)
    with pytest.raises(ValueError, match="statistics must be a callable"):
        nulls.compare_many_to_nulls(p, 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="non-empty mapping"):
        nulls.compare_many_to_nulls(p, lambda t: 0.5)  # type: ignore[arg-type, return-value]
    with pytest.raises(ValueError, match="non-empty mapping"):
        nulls.compare_many_to_nulls(p, lambda t: {})
    seen = []

    def changing(t: torch.Tensor) -> dict[str, float]:
        seen.append(1)
        return {"a": 1.0} if len(seen) == 1 else {"b": 1.0}

    with pytest.raises(ValueError, match="random draw 0"):
        nulls.compare_many_to_nulls(p, changing, draws=2)
    with pytest.raises(ValueError, match=r"NaN on the table \(x\)"):
        nulls.compare_many_to_nulls(p, lambda t: {"x": float("nan")})
    with pytest.raises(ValueError, match="draws"):
        nulls.compare_many_to_nulls(p, lambda t: {"x": 1.0}, draws=1)
