"""TI of a position table off the diagonal, against matched nulls."""

from __future__ import annotations

import math

import pytest
import torch

from tisa.analysis import extract
from tisa.analysis.positional_ti import position_table_ti
from tisa.metrics import translation_invariance
from tisa.pretrain.build import build_model

L = 40


def _model(arch: str = "albert", position: str = "absolute"):
    return build_model(arch=arch, size="tiny", position=position, vocab_size=60, max_positions=64)


def _sinusoidal(n: int, dim: int) -> torch.Tensor:
    """Transformer sinusoids: p_i . p_j = sum_w cos(w (i - j)), an exactly Toeplitz Gram."""
    pos = torch.arange(n, dtype=torch.float64)[:, None]
    freq = 1.0 / (100.0 ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    table = torch.zeros(n, dim, dtype=torch.float64)
    table[:, 0::2], table[:, 1::2] = torch.sin(pos * freq), torch.cos(pos * freq)
    return table


def _set_table(model, table: torch.Tensor) -> None:
    weight = model.base_model.embeddings.position_embeddings.weight
    with torch.no_grad():
        weight[: table.shape[0]] = table.to(weight.dtype)


@pytest.mark.parametrize("arch", ["albert", "gpt2"])
def test_full_ti_figures_match_extract(arch):
    model = _model(arch)
    out = position_table_ti(model, max_positions=L, draws=4)
    ti = extract.extract(model, max_positions=L).translation_invariance()
    assert out["positions"] == L
    assert out["ti_gram"] == pytest.approx(ti.gram)
    assert out["ti_fp_raw"] == pytest.approx(ti.fp_raw_mean)
    assert out["ti_fp_ln"] == pytest.approx(ti.fp_ln_mean, rel=1e-4)
    assert out["ti_fp_raw_heads"] == pytest.approx([float(v) for v in ti.fp_raw], rel=1e-4)
    terms = extract.extract(model, max_positions=L)
    causal = arch == "gpt2"
    offdiag = translation_invariance(terms.fp_raw.double(), causal=causal, exclude_diagonal=True)
    assert out["ti_fp_raw_offdiag"] == pytest.approx(float(offdiag.mean()), rel=1e-4)


def test_sinusoidal_table_is_invariant_and_random_one_is_not():
    model = _model()
    dim = model.config.embedding_size
    _set_table(model, _sinusoidal(64, dim))
    out = position_table_ti(model, max_positions=L, draws=8)
    assert out["ti_gram_offdiag"] == pytest.approx(1.0, abs=1e-9)
    gram = out["nulls"]["gram_offdiag"]
    assert gram["random"]["mean"] < 0.2 and gram["random"]["z"] > 10
    assert gram["shuffled"]["exceeded"] == 1.0
    # a random table scores like its own nulls off the diagonal, though not on the full matrix
    _set_table(model, torch.randn(64, dim, generator=torch.Generator().manual_seed(0)))
    noise = position_table_ti(model, max_positions=L, draws=16)
    assert noise["ti_gram_offdiag"] < 0.2
    assert abs(noise["nulls"]["gram_offdiag"]["random"]["z"]) < 4
    assert noise["ti_gram"] > noise["ti_gram_offdiag"] + 0.1  # the diagonal's contribution


def test_nulls_are_reproducible_and_models_without_a_table_give_none():
    model = _model()
    a = position_table_ti(model, max_positions=L, draws=4, seed=3)
    b = position_table_ti(model, max_positions=L, draws=4, seed=3)
    assert a == b
    assert all(math.isfinite(v["random"]["z"]) for v in a["nulls"].values())
    assert position_table_ti(_model(position="tisa"), max_positions=L) is None
    with pytest.raises(ValueError, match="max_positions"):
        position_table_ti(model, max_positions=0)
