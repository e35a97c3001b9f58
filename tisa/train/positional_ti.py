"""Translation invariance of a model's position table, off the diagonal and against nulls.

What :class:`tisa.train.callbacks.TranslationInvarianceCallback` records at each
checkpoint of a run with absolute position embeddings (and what
``benchmarks/position_schemes.py`` recomputes from kept checkpoints). For the table P of
the trained positions 0..L-1 (L, E):

* the figures the paper uses, TI over all entries: ``ti_gram`` (P Pᵀ), ``ti_fp_raw`` /
  ``ti_fp_ln`` (the mean over layer-1 heads of TI(F_P), P mapped to the hidden size by
  the linear embedding projection / as it reaches layer 1), ``ti_fp_raw_heads``;
* the same over off-diagonal entries only (j != i; j < i for a causal model), which a
  table without order cannot fake: ``ti_gram_offdiag``, ``ti_cos_offdiag`` (cos(P)),
  ``ti_fp_raw_offdiag``. The diagonal of P Pᵀ holds the squared norms, nearly constant
  for any table, so full TI of a random table is already about E / (E + L); on F_P the
  diagonal holds the quadratic forms p_i W_Q W_Kᵀ p_iᵀ, which training can make special
  too (a query attending to its own position);
* ``nulls``: each off-diagonal figure next to matched null tables
  (:func:`tisa.analysis.nulls.compare_to_nulls`): random directions with P's row norms,
  and P's rows shuffled. The F_P null maps each null table through the same embedding
  projection and layer-1 query / key weights, so only the order of the positions changes.

TI(M) = 1 - ||M - T(M)||² / ||M - mean(M)||² over the entries used, T(M) the least-squares
Toeplitz approximation (:func:`tisa.analysis.metrics.translation_invariance`).

Letters: L positions, E embedding size, D hidden size, H heads, Dh head size.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn

from tisa._validate import check_int

__all__ = ["NULL_SERIES", "fp_ti_statistic", "position_table_ti"]

#: The off-diagonal figures compared with nulls, as keys of ``position_table_ti()["nulls"]``.
NULL_SERIES: tuple[str, ...] = ("gram_offdiag", "cos_offdiag", "fp_raw_offdiag")


def fp_ti_statistic(
    model: nn.Module, *, exclude_diagonal: bool = True
) -> Callable[[Tensor], float]:
    """A statistic (L, E) table -> mean over layer-1 heads of TI(F_P) with that table as P.

    F_P^h = P~ W_Q^h (W_K^h)ᵀ P~ᵀ / sqrt(Dh), P~ = P through the linear part of the
    model's embedding projection (none for BERT and GPT-2): the ``fp_raw`` term of
    :func:`tisa.analysis.extract.extract`, computed in float64 for any table, so that
    null tables go through the same weights. Causal models use the j <= i triangle
    (j < i without the diagonal).

    Args:
        model: a model :mod:`tisa.hf.architectures` describes.
        exclude_diagonal: off-diagonal TI.

    Raises:
        ValueError: an architecture without a description or with non-linear Q/K.
    """
    from tisa.analysis.metrics import translation_invariance
    from tisa.hf.architectures import architecture_of

    arch = architecture_of(model)
    if arch is None:
        raise ValueError(f"model: no architecture description for {type(model).__name__}")
    base = model.base_model
    attention = arch.attention_modules(base)[0]
    qk = arch.query_key(attention)
    if qk is None:
        raise ValueError("model: layer-1 queries and keys are not linear maps")
    (wq, _), (wk, _) = qk
    heads, head_dim = arch.head_shape(attention)
    scale = arch.logit_scale(attention)
    projection = arch.input_projection(base)
    w_in = None if projection is None else projection.weight.detach().double().cpu().T  # (E, D)
    wq, wk = wq.double().cpu(), wk.double().cpu()  # (D, H*Dh)
    causal = arch.causal

    def statistic(table: Tensor) -> float:
        x = table.double() if w_in is None else table.double() @ w_in  # (L, D)
        n = x.shape[0]
        q = (x @ wq).reshape(n, heads, head_dim).transpose(0, 1)  # (H, L, Dh)
        k = (x @ wk).reshape(n, heads, head_dim).transpose(0, 1)  # (H, L, Dh)
        logits = (q @ k.mT) * scale  # (H, L, L)
        ti = translation_invariance(logits, causal=causal, exclude_diagonal=exclude_diagonal)
        return float(ti.mean())

    return statistic


@torch.no_grad()
def position_table_ti(
    model: nn.Module, *, max_positions: int, draws: int = 32, seed: int = 0
) -> dict[str, Any] | None:
    """TI of a model's position table with and without the diagonal, and its nulls.

    Args:
        model: a model with absolute position embeddings (ALBERT, BERT, GPT-2, ...).
        max_positions: L, the positions analysed (the training length: rows beyond it
            never receive a gradient).
        draws: null tables per null (>= 2).
        seed: seed of the null draws.

    Returns:
        None for a model without absolute position embeddings, else plain data: the keys
        listed in the module docstring, with ``nulls`` mapping each of
        :data:`NULL_SERIES` to :meth:`tisa.analysis.nulls.NullBaselines.summary`.
    """
    from tisa.analysis import extract
    from tisa.analysis.nulls import compare_to_nulls, cosine_ti, gram_ti

    check_int(max_positions, "max_positions")
    if not extract.has_absolute_positions(model):
        return None
    terms = extract.extract(model, max_positions=max_positions)
    ti = terms.translation_invariance()
    table = terms.position.double()  # (L, E)
    statistics = {
        "gram_offdiag": lambda t: gram_ti(t, exclude_diagonal=True),
        "cos_offdiag": lambda t: cosine_ti(t, exclude_diagonal=True),
        "fp_raw_offdiag": fp_ti_statistic(model, exclude_diagonal=True),
    }
    nulls = {
        name: compare_to_nulls(table, statistic, draws=draws, seed=seed)
        for name, statistic in statistics.items()
    }
    return {
        "ti_gram": ti.gram,
        "ti_fp_raw": ti.fp_raw_mean,
        "ti_fp_ln": ti.fp_ln_mean,
        "ti_fp_raw_heads": [float(v) for v in ti.fp_raw],
        "positions": int(table.shape[0]),
        "ti_gram_offdiag": nulls["gram_offdiag"].observed,
        "ti_cos_offdiag": nulls["cos_offdiag"].observed,
        "ti_fp_raw_offdiag": nulls["fp_raw_offdiag"].observed,
        "nulls": {name: result.summary() for name, result in nulls.items()},
    }
