"""What the analysis report says around its numbers: how to read it (TI, off-diagonal TI,
nulls, the matrices, the probes) and the summary table of every model, one row each."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tisa.analysis.results import ModelAnalysis

__all__ = ["NULL_TEXT", "READING", "SUMMARY_COLUMNS", "TI_TEXT", "summary_row", "ti_means"]

NULL_TEXT = (
    "Null baselines: the same figure with the position table replaced by random "
    "directions of the same per-position norms ('random') and by its own rows in random "
    "order ('shuffled'), pushed through the same model weights. z = (observed - null "
    "mean) / null std; 'draws exceeded' is the share of null draws of both nulls below "
    "the observed value. A figure that a table without order also reaches says nothing "
    "about translation invariance."
)

TI_TEXT = (
    "Translation invariance TI(M) = 1 - ||M - T(M)||² / ||M - mean(M)||², where T(M) "
    "replaces each entry by the mean of its diagonal (the best approximation of M by a "
    "function of the offset k = j - i alone). TI is the share of M's variance that the "
    "offset explains: 1 for a perfectly translation-invariant (Toeplitz) matrix, about "
    "2/L for random noise of size L×L."
)

READING = [
    TI_TEXT,
    "Off-diagonal TI uses only the entries with j ≠ i. The diagonal of P Pᵀ holds the "
    "squared norms of the positions, nearly equal for any table, so TI with it is high "
    "for random tables too (about E / (E + L) for L random E-dimensional positions); the "
    "off-diagonal TI is near 0 for them. It is the figure of translation invariance for "
    "P Pᵀ, cos(P) and the attention probes (a token's attention to itself is large "
    "whatever the order of the table). For F_P the diagonal is not special: F_P[i, i] = "
    "p_i W_Q W_Kᵀ p_i is no norm (W_Q W_Kᵀ has rank at most the head size and mixed "
    "signs), and both figures are shown to let the reader check that they agree.",
    NULL_TEXT,
    "P is the table of absolute position embeddings (one row per position). P Pᵀ and "
    "cos(P) compare every pair of positions. F_P = P~ W_Q W_Kᵀ P~ᵀ / √d_h is the part of a "
    "layer-1 attention logit that depends on the two positions only, per head; 'raw' uses "
    "P itself, 'LN' uses P after the embedding LayerNorm (as it reaches layer 1).",
    "The attention probes average every layer's and head's attention over inputs where "
    "only position varies (one token repeated) and over real sentences (Penn Treebank). "
    "Locality (Chen et al., 2023) is mean_i Σ_j A[i,j]·2^-|j-i| (1 = each token attends "
    "to itself only); symmetry is 1 - Σ|A[i,i-d] - A[i,i+d]| / Σ(A[i,i-d] + A[i,i+d]) "
    "(1 = left and right neighbours weighted equally, 0 = one-sided).",
    "TISA models replace or complement position embeddings with a learned function "
    "f_h(j - i) per head: their positional bias is Toeplitz by construction, TI = 1.",
]

SUMMARY_COLUMNS = [
    "Model",
    "Layers × heads",
    "Positions",
    "TI P Pᵀ",
    "TI P Pᵀ off-diag.",
    "TI cos(P) off-diag.",
    "TI F_P raw",
    "TI F_P LN",
    "Probe TI off-diag. repeated",
    "Probe TI off-diag. sentences",
    "Locality (sent.)",
    "Symmetry (sent.)",
    "TISA bias TI (min)",
]


def probe_mean(m: ModelAnalysis, probe: str, metric: str) -> float | None:
    """A probe's metric averaged over layers and heads; None where not measured."""
    if m.probes is None or probe not in m.probes:
        return None
    return float(getattr(m.probes[probe], metric).mean())


def ti_means(m: ModelAnalysis) -> dict[str, float | None]:
    """The headline TI figures of one model (:meth:`ModelAnalysis.headline`) by label, None
    where a figure another model has was not measured."""
    return {f"TI {h.label}": h.value for h in m.headline()}


def summary_row(m: ModelAnalysis) -> list[Any]:
    """One row of :data:`SUMMARY_COLUMNS` for a model."""
    layers, heads = m.info.get("num_layers"), m.info.get("num_heads")
    pe, l1 = m.position_embeddings, m.layer1
    return [
        m.name,
        f"{layers} × {heads}" if layers and heads else None,
        None if pe is None else pe.length,
        None if pe is None else pe.ti_gram,
        None if pe is None else pe.ti_gram_offdiag,
        None if pe is None else pe.ti_cosine_offdiag,
        None if l1 is None else l1.raw.ti_mean,
        None if l1 is None else l1.ln.ti_mean,
        probe_mean(m, "repeated", "ti_offdiag"),
        probe_mean(m, "sentences", "ti_offdiag"),
        probe_mean(m, "sentences", "locality"),
        probe_mean(m, "sentences", "symmetry"),
        None if m.tisa is None else m.tisa.ti_min,
    ]
