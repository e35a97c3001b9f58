"""Translation invariance of a model's position table, off the diagonal and against nulls.

What :class:`tisa.pretrain.callbacks.TranslationInvarianceCallback` records at each
checkpoint of a run with absolute position embeddings (``tisa pretrain`` hands it this
measure; ``experiments/position_schemes.py`` recomputes from kept checkpoints). For the table P of
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
  (:func:`tisa.analysis.baselines.table_nulls`): random directions with P's row norms,
  and P's rows shuffled. The F_P null maps each null table through the model's own
  embedding modules and layer-1 query / key weights, so only the order of the positions
  changes.

TI(M) = 1 - ||M - T(M)||² / ||M - mean(M)||² over the entries used, T(M) the least-squares
Toeplitz approximation (:func:`tisa.metrics.translation_invariance`).

Letters: L positions, E embedding size, D hidden size, H heads, Dh head size.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from tisa._validate import check_int
from tisa.analysis.baselines import table_nulls
from tisa.hf.architectures import has_absolute_positions

__all__ = ["NULL_SERIES", "position_table_ti"]

#: The off-diagonal figures compared with nulls: key of ``position_table_ti()["nulls"]``
#: -> the figure of :class:`tisa.analysis.baselines.TableNulls` it comes from.
NULL_SERIES: dict[str, str] = {
    "gram_offdiag": "gram_offdiag",
    "cos_offdiag": "cosine_offdiag",
    "fp_raw_offdiag": "fp_raw_offdiag",
}


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
        listed in the module docstring, with ``nulls`` mapping each key of
        :data:`NULL_SERIES` to :meth:`tisa.analysis.nulls.NullBaselines.summary`.
    """
    check_int(max_positions, "max_positions")
    if not has_absolute_positions(model):
        return None
    found = table_nulls(model, max_positions=max_positions, draws=draws, seed=seed)
    figures = found.figures
    return {
        "ti_gram": figures["gram"].observed,
        "ti_fp_raw": figures["fp_raw"].observed,
        "ti_fp_ln": figures["fp_ln"].observed,
        "ti_fp_raw_heads": [h.observed for h in found.heads["fp_raw"]],
        "positions": found.positions,
        "ti_gram_offdiag": figures["gram_offdiag"].observed,
        "ti_cos_offdiag": figures["cosine_offdiag"].observed,
        "ti_fp_raw_offdiag": figures["fp_raw_offdiag"].observed,
        "nulls": {key: figures[name].summary() for key, name in NULL_SERIES.items()},
    }
