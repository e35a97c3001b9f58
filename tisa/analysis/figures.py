"""The figures of one analysed model that more than one report draws: the position table's
heatmaps, the TI of layer-1 F_P per head and of the probe attention per layer and head, and
the display helpers (curves scaled to ±1, the unused triangle of causal models blanked)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from tisa.reports import heatmaps

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from tisa.analysis.results import ModelAnalysis

__all__ = [
    "causal_nan",
    "layer1_ti_figure",
    "position_embeddings_figure",
    "probe_ti_figure",
    "unit_scaled",
]

def unit_scaled(curves: torch.Tensor) -> torch.Tensor:
    """Each row divided by its largest magnitude (heads differ by orders of magnitude)."""
    scale = curves.abs().amax(-1, keepdim=True)
    return curves / torch.where(scale > 0, scale, torch.ones_like(scale))


def causal_nan(x: torch.Tensor, causal: bool) -> torch.Tensor:
    """Blanks (NaN) the never-used j > i part of causal models' matrices for display."""
    if not causal:
        return x
    n = x.shape[-1]
    keep = torch.ones(n, n, dtype=torch.bool).tril()
    return x.masked_fill(~keep, float("nan"))


def position_embeddings_figure(m: ModelAnalysis) -> Figure:
    """Heatmaps of P Pᵀ and of the cosine similarities of P."""
    pe = m.position_embeddings
    return heatmaps.matrix_heatmaps(
        [
            (f"P Pᵀ   (TI {pe.ti_gram:.3f}, off-diag. {pe.ti_gram_offdiag:.3f})", pe.gram),
            (
                f"cos(p_i, p_j)   (TI {pe.ti_cosine:.3f}, off-diag. {pe.ti_cosine_offdiag:.3f})",
                pe.cosine,
            ),
        ],
        suptitle=f"{m.name}: position embeddings, {pe.length} positions",
    )


def layer1_ti_figure(m: ModelAnalysis) -> Figure:
    """TI of F_P of every layer-1 head, from raw P and through LayerNorm."""
    l1 = m.layer1
    return heatmaps.value_heatmaps(
        {"TI of layer-1 F_P per head": [l1.raw.ti.tolist(), l1.ln.ti.tolist()]},
        row_names=["raw P", "P through LN"],
        row_label="",
    )


def probe_ti_figure(m: ModelAnalysis) -> Figure:
    """Off-diagonal TI of the mean probe attention per layer and head, for both probes."""
    return heatmaps.value_heatmaps(
        {
            "repeated token": m.probes["repeated"].ti_offdiag,
            "real sentences": m.probes["sentences"].ti_offdiag,
        },
        suptitle=f"{m.name}: off-diagonal TI of the mean attention per layer and head",
    )
