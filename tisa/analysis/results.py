"""What ``tisa analyze`` finds, as typed results (frozen dataclasses).

:func:`tisa.analysis.analyze` returns an :class:`AnalysisResult`: per model a
:class:`ModelAnalysis` with the numbers *and* the matrices they were computed from (for
figures), and optionally the :class:`~tisa.analysis.training.TrainingTI` of a run. Reports
(:mod:`tisa.analysis.report`) draw from these objects and compute nothing themselves;
``to_dict()`` gives the plain data written to ``metrics.json``.

Letters: L positions, E embedding size, H heads, N layers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from tisa.analysis.extract import ScoringProfiles
from tisa.analysis.nulls import NullBaselines
from tisa.analysis.probes import ProbeResult
from tisa.analysis.training import TrainingTI
from tisa.metrics import OffsetProfile

__all__ = [
    "AnalysisResult",
    "Layer1Result",
    "ModelAnalysis",
    "PositionEmbeddingResult",
    "PositionalAttentionResult",
    "TisaResult",
]


def _rounded(t: Tensor, digits: int = 6) -> list:
    return torch.round(t.double(), decimals=digits).tolist()


def _null_dict(nulls: Mapping[str, NullBaselines] | None) -> dict[str, Any] | None:
    return None if nulls is None else {k: v.summary() for k, v in nulls.items()}


@dataclass(frozen=True)
class PositionEmbeddingResult:
    """The position embeddings P of a model.

    Attributes:
        length: L, positions analysed.
        dim: E.
        first_row: table row of position 0 (RoBERTa: padding_idx + 1).
        ti_gram: TI of P P^T.
        ti_cosine: TI of the cosine similarities of P.
        cosine_profile: cosine similarity along each diagonal (mean, std) by offset.
        gram: (L, L) P P^T.
        cosine: (L, L) cosine similarities.
        ti_gram_offdiag: TI of P P^T without its diagonal (the squared norms).
        ti_cosine_offdiag: TI of the cosine similarities without their diagonal (ones).
        nulls: ``"ti_gram"``, ``"ti_gram_offdiag"``, ``"ti_cosine"``,
            ``"ti_cosine_offdiag"`` -> the figure next to both nulls
            (:mod:`tisa.analysis.baselines`); None when not computed.
    """

    length: int
    dim: int
    first_row: int
    ti_gram: float
    ti_cosine: float
    cosine_profile: OffsetProfile
    gram: Tensor
    cosine: Tensor
    ti_gram_offdiag: float
    ti_cosine_offdiag: float
    nulls: Mapping[str, NullBaselines] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "length": self.length,
            "dim": self.dim,
            "first_row": self.first_row,
            "ti_gram": self.ti_gram,
            "ti_gram_offdiag": self.ti_gram_offdiag,
            "ti_cosine": self.ti_cosine,
            "ti_cosine_offdiag": self.ti_cosine_offdiag,
            "nulls": _null_dict(self.nulls),
            "cosine_offset_profile": {
                "offsets": self.cosine_profile.offsets.tolist(),
                "mean": _rounded(self.cosine_profile.mean),
                "std": _rounded(self.cosine_profile.std),
            },
        }


@dataclass(frozen=True)
class PositionalAttentionResult:
    """Layer-1 positional logits F_P of one kind (from raw P, or P through LayerNorm).

    Attributes:
        logits: (H, L, L) F_P of every head.
        ti: (H,) TI of each head's F_P (j <= i triangle for causal models).
        transpose_symmetry: (H,) similarity of F_P and its transpose (1: f(k) = f(-k)).
        softmax_locality: (H,) locality of softmax(F_P).
        softmax_symmetry: (H,) mirror symmetry of softmax(F_P).
        ti_offdiag: (H,) TI of each head's F_P without the diagonal (reported to show
            that F_P's diagonal is not special: :mod:`tisa.analysis.baselines`).
        nulls: ``"ti_mean"``, ``"ti_offdiag_mean"`` -> the mean over heads next to both
            nulls; None when not computed.
        head_nulls: TI of each head next to both nulls; None when not computed.
    """

    logits: Tensor
    ti: Tensor
    transpose_symmetry: Tensor
    softmax_locality: Tensor
    softmax_symmetry: Tensor
    ti_offdiag: Tensor
    nulls: Mapping[str, NullBaselines] | None = None
    head_nulls: tuple[NullBaselines, ...] | None = None

    @property
    def ti_mean(self) -> float:
        """Mean TI over heads."""
        return float(self.ti.mean())

    @property
    def ti_offdiag_mean(self) -> float:
        """Mean off-diagonal TI over heads."""
        return float(self.ti_offdiag.mean())

    def to_dict(self) -> dict[str, Any]:
        return {
            "ti": self.ti.tolist(),
            "ti_mean": self.ti_mean,
            "ti_offdiag": self.ti_offdiag.tolist(),
            "ti_offdiag_mean": self.ti_offdiag_mean,
            "transpose_symmetry": self.transpose_symmetry.tolist(),
            "softmax_locality": self.softmax_locality.tolist(),
            "softmax_symmetry": self.softmax_symmetry.tolist(),
            "nulls": _null_dict(self.nulls),
            "head_nulls": None
            if self.head_nulls is None
            else [b.summary() for b in self.head_nulls],
        }


@dataclass(frozen=True)
class Layer1Result:
    """Layer-1 positional attention of a model.

    Attributes:
        num_heads: H.
        causal: TI measured on the j <= i triangle.
        raw: F_P from raw P.
        ln: F_P from P through the embedding LayerNorm.
        ln_profile: mean of each head's F_P (LN) along each diagonal, by offset.
    """

    num_heads: int
    causal: bool
    raw: PositionalAttentionResult
    ln: PositionalAttentionResult
    ln_profile: OffsetProfile

    def to_dict(self) -> dict[str, Any]:
        return {
            "num_heads": self.num_heads,
            "causal": self.causal,
            "raw": self.raw.to_dict(),
            "ln": self.ln.to_dict(),
        }


@dataclass(frozen=True)
class TisaResult:
    """The learned scoring functions of a TISA model.

    Attributes:
        profiles: f_h(k) of every layer and head and the TI of their biases.
        num_positional_parameters: parameters of the scoring functions.
    """

    profiles: ScoringProfiles
    num_positional_parameters: int

    @property
    def ti_min(self) -> float:
        """The smallest TI of any head's bias (1 up to rounding)."""
        return float(self.profiles.ti.min())

    def to_dict(self) -> dict[str, Any]:
        prof = self.profiles
        return {
            "layers": prof.layers,
            "families": prof.families,
            "offsets": prof.offsets.tolist(),
            "values": _rounded(prof.values),
            "ti": prof.ti.tolist(),
            "ti_min": self.ti_min,
            "num_positional_parameters": self.num_positional_parameters,
        }


@dataclass(frozen=True)
class Headline:
    """One of a model's headline TI figures (:meth:`ModelAnalysis.headline`).

    Attributes:
        key: the figure's name in metrics.json (``"ti_gram_offdiag"``, ``"fp_ln"``, ...).
        label: a short plain-text label ("P P^T off-diag.").
        value: the TI.
        nulls: its null baselines, None where they were not computed.
    """

    key: str
    label: str
    value: float
    nulls: NullBaselines | None


@dataclass(frozen=True)
class ModelAnalysis:
    """Everything measured on one model.

    Attributes:
        name: display name (unique within an analysis).
        source: what was loaded (Hub id, folder name, or ``run/checkpoint-<step>``).
        info: plain-data description (:func:`tisa.analysis.extract.describe`).
        notes: what was skipped or capped, in words.
        position_embeddings: None without absolute position embeddings.
        layer1: None without absolute position embeddings.
        tisa: None for models without TISA scoring functions.
        probes: ``{"repeated": ..., "sentences": ...}``; None when not probed.
        elapsed_s: seconds spent on this model.
    """

    name: str
    source: str
    info: Mapping[str, Any]
    notes: tuple[str, ...]
    position_embeddings: PositionEmbeddingResult | None
    layer1: Layer1Result | None
    tisa: TisaResult | None
    probes: Mapping[str, ProbeResult] | None
    elapsed_s: float

    @property
    def causal(self) -> bool:
        return bool(self.info.get("causal", False))

    def headline(self) -> list[Headline]:
        """The model's headline TI figures, in the order every summary shows them: P P^T
        with and without its diagonal, cos(P) without it, the mean over layer-1 heads of
        F_P (raw and through LN), and the off-diagonal TI of the two attention probes.
        Figures that were not measured are left out."""
        out: list[Headline] = []
        pe, l1, probes = self.position_embeddings, self.layer1, self.probes or {}
        if pe is not None:
            pn = pe.nulls or {}
            out += [
                Headline("ti_gram", "P P^T", pe.ti_gram, pn.get("ti_gram")),
                Headline(
                    "ti_gram_offdiag",
                    "P P^T off-diag.",
                    pe.ti_gram_offdiag,
                    pn.get("ti_gram_offdiag"),
                ),
                Headline(
                    "ti_cosine_offdiag",
                    "cos(P) off-diag.",
                    pe.ti_cosine_offdiag,
                    pn.get("ti_cosine_offdiag"),
                ),
            ]
        if l1 is not None:
            for key, label, terms in (("fp_raw", "F_P raw", l1.raw), ("fp_ln", "F_P LN", l1.ln)):
                out.append(Headline(key, label, terms.ti_mean, (terms.nulls or {}).get("ti_mean")))
        for key, label in (("repeated", "probe rep."), ("sentences", "probe sent.")):
            if key in probes:
                p = probes[key]
                b = None if p.nulls is None else p.nulls.mean["ti_offdiag"]
                out.append(
                    Headline(f"probe_{key}", f"{label} off-diag.", float(p.ti_offdiag.mean()), b)
                )
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "source": self.source,
            **self.info,
            "notes": list(self.notes),
            "position_embeddings": None
            if self.position_embeddings is None
            else self.position_embeddings.to_dict(),
            "layer1": None if self.layer1 is None else self.layer1.to_dict(),
            "tisa": None if self.tisa is None else self.tisa.to_dict(),
            "probe": None
            if self.probes is None
            else {k: v.summary() for k, v in self.probes.items()},
            "elapsed_s": self.elapsed_s,
        }


@dataclass(frozen=True)
class AnalysisResult:
    """What :func:`tisa.analysis.analyze` returns.

    Attributes:
        settings: the options used (plain data, as in ``metrics.json``).
        models: one analysis per model, in the order given.
        training: TI over the training of ``checkpoints`` (None without).
        elapsed_s: seconds of analysis (figures not included).
        files: the files written (``metrics.json`` first).
    """

    settings: Mapping[str, Any]
    models: tuple[ModelAnalysis, ...]
    training: TrainingTI | None
    elapsed_s: float
    files: tuple[Path, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        """The content of ``metrics.json``."""
        return {
            "settings": dict(self.settings),
            "models": [m.to_dict() for m in self.models],
            "training": None if self.training is None else self.training.to_dict(),
            "elapsed_s": self.elapsed_s,
        }
