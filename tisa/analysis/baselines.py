"""Null baselines of a model's position-table figures: P P^T, cos(P) and layer-1 F_P.

Every TI figure of a model's position table is compared with the same figure on tables
without order (:mod:`tisa.analysis.nulls`: random directions with the table's row norms,
and the table's own rows shuffled), pushed through the same model weights:

* ``gram`` / ``gram_offdiag``: TI of P P^T with and without its main diagonal. The
  diagonal holds the squared norms, nearly constant for any table, so TI with it is high
  for random tables too (about E / (E + L)); the random null shows how high.
* ``cosine`` / ``cosine_offdiag``: the same for the cosine similarities (diagonal: ones).
* ``fp_raw`` / ``fp_ln`` (and ``..._offdiag``): the mean over layer-1 heads of TI(F_P),
  F_P of the null table computed with the model's own LayerNorm, projection and
  query/key weights (:func:`tisa.analysis.extract.positional_logits` with ``table=``).
  Here the diagonal is not special: F_P[i, i] = p_i W_Q W_K^T p_i with W_Q W_K^T of rank
  at most the head size and not positive semi-definite, so it is no near-constant norm;
  the off-diagonal figure is reported to show that it barely differs.
* ``fp_raw_heads`` / ``fp_ln_heads``: TI(F_P) of each head, each with its own nulls.

Letters: L positions, E embedding size, H layer-1 heads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from tisa import metrics
from tisa._validate import check_int
from tisa.analysis.extract import LnInput, is_causal, position_embeddings, positional_logits
from tisa.analysis.nulls import NullBaselines, compare_many_to_nulls, cosine_ti, gram_ti

__all__ = ["TABLE_FIGURES", "TableNulls", "table_nulls"]

#: The figures :func:`table_nulls` compares, mean over heads for the F_P ones.
TABLE_FIGURES: tuple[str, ...] = (
    "gram",
    "gram_offdiag",
    "cosine",
    "cosine_offdiag",
    "fp_raw",
    "fp_raw_offdiag",
    "fp_ln",
    "fp_ln_offdiag",
)


@dataclass(frozen=True)
class TableNulls:
    """A model's position-table figures, each next to both nulls.

    Attributes:
        figures: name (:data:`TABLE_FIGURES`) -> :class:`~tisa.analysis.nulls.NullBaselines`.
        heads: ``"fp_raw"`` / ``"fp_ln"`` -> one NullBaselines per layer-1 head (TI of that
            head's F_P).
        draws: null tables per null.
        seed: generator seed of the draws.
        positions: L, the rows of the table used.
    """

    figures: Mapping[str, NullBaselines]
    heads: Mapping[str, tuple[NullBaselines, ...]]
    draws: int
    seed: int
    positions: int

    def to_dict(self) -> dict[str, Any]:
        """Plain data (no individual draws)."""
        return {
            "draws": self.draws,
            "seed": self.seed,
            "positions": self.positions,
            "figures": {k: v.summary() for k, v in self.figures.items()},
            "heads": {k: [b.summary() for b in v] for k, v in self.heads.items()},
        }


def _statistics(model: nn.Module, *, causal: bool, ln_input: LnInput, include_bias: bool) -> Any:
    """table -> every figure of :data:`TABLE_FIGURES` plus each head's TI(F_P)."""

    def statistics(table: Tensor) -> dict[str, float]:
        out = {
            "gram": float(gram_ti(table)),
            "gram_offdiag": float(gram_ti(table, exclude_diagonal=True)),
            "cosine": float(cosine_ti(table)),
            "cosine_offdiag": float(cosine_ti(table, exclude_diagonal=True)),
        }
        for variant in ("raw", "ln"):
            fp = positional_logits(
                model,
                table=table,
                variant=variant,
                ln_input=ln_input,
                include_bias=include_bias,
            )  # (H, L, L)
            ti = metrics.translation_invariance(fp, causal=causal)  # (H,)
            off = metrics.translation_invariance(fp, causal=causal, exclude_diagonal=True)
            out[f"fp_{variant}"] = float(ti.mean())
            out[f"fp_{variant}_offdiag"] = float(off.mean())
            out.update({f"fp_{variant}_heads/{h}": float(v) for h, v in enumerate(ti)})
        return out

    return statistics


@torch.no_grad()
def table_nulls(
    model: nn.Module,
    *,
    max_positions: int | None = None,
    ln_input: LnInput = "position+type",
    include_bias: bool = False,
    draws: int = 20,
    seed: int = 0,
) -> TableNulls:
    """TI of P P^T, cos(P) and layer-1 F_P of ``model``, each with both nulls.

    The nulls replace the rows of positions 0..L-1 (the ones analysed) by random
    directions of the same norms, or by the same rows in random order; F_P of each null
    table goes through the model's own modules. Causal models (GPT-2) are measured on
    the j <= i triangle, as elsewhere in the analysis.

    Args:
        model: a supported Hugging Face model with absolute position embeddings.
        max_positions: L (default: the full table).
        ln_input, include_bias: as for :func:`tisa.analysis.extract.positional_logits`.
        draws: null tables per null (>= 2).
        seed: generator seed (>= 0).

    Returns:
        :class:`TableNulls`.
    """
    n = check_int(draws, "draws", minimum=2)
    check_int(seed, "seed", minimum=0)
    p = position_embeddings(model, max_positions)  # (L, E)
    statistics = _statistics(
        model, causal=is_causal(model), ln_input=ln_input, include_bias=include_bias
    )
    found = compare_many_to_nulls(p, statistics, draws=n, seed=seed)
    heads = {}
    for variant in ("fp_raw", "fp_ln"):
        keys = sorted(
            (k for k in found if k.startswith(f"{variant}_heads/")),
            key=lambda k: int(k.rsplit("/", 1)[1]),
        )
        heads[variant] = tuple(found[k] for k in keys)
    return TableNulls(
        figures={k: found[k] for k in TABLE_FIGURES},
        heads=heads,
        draws=n,
        seed=int(seed),
        positions=int(p.shape[0]),
    )
