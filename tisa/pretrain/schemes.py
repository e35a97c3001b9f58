"""Position schemes and model sizes of pretraining: plain data, no heavy imports.

Position schemes (``position``):

``absolute``       stock learned absolute position embeddings.
``none``           no position information at all (embeddings removed, no bias).
``tisa``           the paper's RBF scoring functions, position embeddings removed.
``absolute+tisa``  RBF scoring functions alongside the embeddings (the paper's setting).
``alibi``, ``t5``, ``kerple_log``  those scoring families, embeddings removed.
``rbf_linear``, ``rbf_log``, ``rbf_logdist``  RBF kernels plus a monotone tail (the
                   length-extrapolation families of :mod:`tisa.scoring`), embeddings removed.
``alibi_learned``  ALiBi with learned slopes (ALiBi's at the start), embeddings removed.
``fire``           FIRE (Li et al., 2024), embeddings removed: the paper's query-position
                   normaliser in a causal LM, the translation-invariant variant
                   (``normalizer="length"``) in a masked LM, unless ``normalizer`` is given.
``rope``           rotary position embeddings on queries and keys, embeddings removed.

:mod:`tisa.pretrain.build` builds a model of a named size with one of these schemes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = [
    "PRETRAIN_ARCHS", "POSITIONS", "SIZES", "ModelSize", "describe_variant", "scoring_family",
]


Arch = Literal["albert", "bert", "gpt2"]


#: Masked-LM encoders, and GPT-2 (a causal decoder, :mod:`tisa.pretrain.causal_lm`).
PRETRAIN_ARCHS: tuple[str, ...] = ("albert", "bert", "gpt2")


POSITIONS: tuple[str, ...] = (
    "absolute",
    "none",
    "tisa",
    "absolute+tisa",
    "alibi",
    "t5",
    "kerple_log",
    "rbf_linear",
    "rbf_log",
    "rbf_logdist",
    "alibi_learned",
    "fire",
    "rope",
)


#: position scheme -> (scoring family or None, position embeddings, rotary)
SCHEMES: dict[str, tuple[str | None, str, bool]] = {
    "none": (None, "remove", False),
    "tisa": ("rbf", "remove", False),
    "absolute+tisa": ("rbf", "keep", False),
    "alibi": ("alibi", "remove", False),
    "t5": ("t5", "remove", False),
    "kerple_log": ("kerple_log", "remove", False),
    "rbf_linear": ("rbf_linear", "remove", False),
    "rbf_log": ("rbf_log", "remove", False),
    "rbf_logdist": ("rbf_logdist", "remove", False),
    "alibi_learned": ("alibi_learned", "remove", False),
    "fire": ("fire", "remove", False),
    "rope": (None, "remove", True),
}


def scoring_family(position: str) -> str | None:
    """The scoring family a position scheme installs (None: no scoring function).

    Raises:
        ValueError: unknown ``position``.
    """
    if position not in POSITIONS:
        raise ValueError(f"position must be one of {POSITIONS}, got {position!r}")
    return None if position == "absolute" else SCHEMES[position][0]


@dataclass(frozen=True)
class ModelSize:
    """Shape of a named model size.

    Attributes:
        hidden_size: D.
        num_layers: transformer layers (ALBERT shares their weights).
        num_heads: attention heads H.
        intermediate_size: feed-forward width.
        embedding_size: E, ALBERT's factorised embedding size (BERT uses D).
    """

    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    embedding_size: int


SIZES: dict[str, ModelSize] = {
    "tiny": ModelSize(32, 2, 2, 64, 16),
    "small": ModelSize(256, 4, 4, 1024, 128),
    "base": ModelSize(768, 12, 12, 3072, 128),  # ALBERT-base (BERT-base with E = D)
}


def describe_variant(length_scale: int | None, clip_distance: int | None, *,
                     short: bool = False) -> str:
    """Words for inference-time settings of TISA attention (log-n scaling past N keys,
    offsets clipped at +-K, or both; "" for neither), as ``tisa extrapolate`` and
    ``experiments/offset_retrieval/rescore.py`` apply them; ``short`` for a table."""
    parts = []
    if length_scale is not None:
        parts.append(f"log-n past {length_scale}" if short else
                     f"log-n scaling past {length_scale} keys")
    if clip_distance is not None:
        parts.append(f"clipped at {clip_distance}" if short else
                     f"offsets clipped at +-{clip_distance}")
    return (" + " if short else " and ").join(parts)
