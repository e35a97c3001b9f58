"""Position embeddings and positional attention terms out of Hugging Face models.

Supported: models with a learned (or fixed) absolute position-embedding table, namely
BERT, RoBERTa (and XLM-R / CamemBERT, which share its embeddings), ALBERT, ELECTRA,
DistilBERT and GPT-2, plus TISA models made with :mod:`tisa.hf` (their learned scoring
functions f_h). Where each family keeps these modules is described once, in
:mod:`tisa.hf.architectures`, which also reads a model's position table
(:func:`position_embeddings` and the other model facts are re-exported here); task heads
(``...ForMaskedLM`` etc.) and TISA models work too.

Letters: L positions analysed, E embedding size, D hidden size, H heads, Dh head size.

What is extracted
    ``P`` (L, E): the rows of the position table that real positions 0..L-1 use. RoBERTa
    numbers positions from ``padding_idx + 1`` (row 0..padding_idx are never used for
    real tokens), so its rows start there.

    ``F_P = P~ W_Q^h (W_K^h)^T P~^T * s`` (H, L, L): the position-to-position part of the
    layer-1 attention logits, with ``s`` the model's own logit scale (1/sqrt(Dh)). Two
    versions of ``P~`` (L, D):

    * ``"raw"``: P itself, mapped to the hidden size by the *linear part* (no bias) of
      ALBERT's ``embedding_hidden_mapping_in`` / ELECTRA's ``embeddings_project`` when the
      embedding size differs from the hidden size. This is the term Wennberg & Henter
      analyse.
    * ``"ln"``: P as it reaches layer 1, through the same modules the model applies: the
      embedding LayerNorm (then the projection, with its bias) for BERT-style models, the
      first block's ``ln_1`` for GPT-2 (pre-LN). The real LayerNorm input is
      word + token type + position; LayerNorm is not linear, so "the LayerNorm of the
      position part" is an approximation. We use ``LN(P + t)`` with ``t`` the mean
      token-type embedding (``ln_input="position+type"``, the default; BERT inputs mostly
      use type 0 of 2, RoBERTa has a single type) or ``LN(P)`` (``ln_input="position"``).
      Word embeddings are left out: they are what varies, not position.

    Query/key biases are left out by default (``include_bias=False``): then ``F_P`` is the
    pure bilinear position-position term. With ``include_bias=True`` it is
    ``(P~ W_Q + b_Q)(P~ W_K + b_K)^T * s``, the full layer-1 logits of a position-only
    input, which matches the model's own attention exactly when word and type embeddings
    are zero (the tests check this for every family).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import Tensor, nn

from tisa import metrics
from tisa._validate import check_int
from tisa.bias import expand
from tisa.bias import table as bias_table
from tisa.hf import iter_scorers
from tisa.hf.architectures import (  # model facts, re-exported here for the analysis
    SUPPORTED_ARCHITECTURES,
    PositionalLayout,
    UnsupportedModelError,
    check_max_positions,
    check_table,
    has_absolute_positions,
    is_causal,
    num_positions,
    position_embeddings,
    positional_layout,
    supported_message,
    swapped_positions,
)

__all__ = [
    "SUPPORTED_ARCHITECTURES",
    "PositionalTI",
    "PositionalTerms",
    "ScoringProfiles",
    "UnsupportedModelError",
    "cosine_matrix",
    "describe",
    "extract",
    "gram_matrix",
    "has_absolute_positions",
    "is_causal",
    "layer1_inputs",
    "layer1_position_inputs",
    "num_positions",
    "position_embeddings",
    "positional_logits",
    "scoring_profiles",
    "supported_message",
    "swapped_positions",
    "tisa_scorers",
]


LnInput = Literal["position+type", "position"]
Variant = Literal["raw", "ln"]


def describe(model: nn.Module) -> dict[str, Any]:
    """Plain-data summary: family, layers, heads, positions, causal, TISA or not."""
    config = getattr(model, "config", None)
    out: dict[str, Any] = {
        "model_type": getattr(config, "model_type", type(model).__name__),
        "class": type(model).__name__,
        "num_layers": getattr(config, "num_hidden_layers", None),
        "num_heads": getattr(config, "num_attention_heads", None),
        "hidden_size": getattr(config, "hidden_size", None),
        "absolute_positions": has_absolute_positions(model),
    }
    if out["absolute_positions"]:
        lay = positional_layout(model)
        out.update(
            family=lay.family,
            num_heads=lay.num_heads,
            head_dim=lay.head_dim,
            num_positions=num_positions(model),
            embedding_size=lay.position.embedding_dim,
            causal=lay.causal,
        )
    else:
        out["causal"] = is_causal(model)
    out["tisa_layers"] = len(tisa_scorers(model))
    out["num_parameters"] = sum(p.numel() for p in model.parameters())
    return out


# --------------------------------------------------------------------------------------
# Position embeddings and layer-1 positional logits
# --------------------------------------------------------------------------------------


def gram_matrix(p: Tensor) -> Tensor:
    """P P^T: (L, L) from (L, E)."""
    if p.dim() != 2:
        raise ValueError(f"p must have shape (L, E), got {tuple(p.shape)}")
    return p @ p.T


def cosine_matrix(p: Tensor) -> Tensor:
    """Cosine similarity of every pair of rows: (L, L) from (L, E)."""
    if p.dim() != 2:
        raise ValueError(f"p must have shape (L, E), got {tuple(p.shape)}")
    unit = nn.functional.normalize(p, dim=-1)
    return unit @ unit.T


@torch.no_grad()
def layer1_inputs(
    model: nn.Module, table: Tensor, *, ln_input: LnInput = "position+type"
) -> dict[str, Tensor]:
    """P~ of any (L, E) position table with the model's own modules: {"raw", "ln"}: (L, D).

    The same maps as for the model's own table (module docstring): ``"raw"`` applies the
    linear part of the embedding projection (if any), ``"ln"`` the embedding LayerNorm
    (of ``table`` plus the mean token-type embedding with ``ln_input="position+type"``)
    and then the projection. This is what null tables go through
    (:mod:`tisa.analysis.nulls`): the model's weights, another table.

    Args:
        model: a supported Hugging Face model.
        table: (L, E) rows standing in for positions 0..L-1.
        ln_input: ``"position+type"`` or ``"position"``.
    """
    if ln_input not in ("position+type", "position"):
        raise ValueError(f"ln_input must be 'position+type' or 'position', got {ln_input!r}")
    lay = positional_layout(model)
    p = check_table(lay, table)
    raw = p if lay.project is None else p @ lay.project.weight.detach().T
    x = p
    if ln_input == "position+type" and lay.token_type is not None:
        x = x + lay.token_type.weight.detach().mean(0)
    if lay.norm is not None:
        x = lay.norm(x)
    if lay.project is not None:
        x = lay.project(x)
    return {"raw": raw.float().cpu(), "ln": x.float().cpu()}


@torch.no_grad()
def layer1_position_inputs(
    model: nn.Module, *, max_positions: int | None = None, ln_input: LnInput = "position+type"
) -> dict[str, Tensor]:
    """P~ for both variants (see the module docstring): {"raw": (L, D), "ln": (L, D)}."""
    if ln_input not in ("position+type", "position"):
        raise ValueError(f"ln_input must be 'position+type' or 'position', got {ln_input!r}")
    lay = positional_layout(model)
    n = check_max_positions(model, max_positions)
    p = lay.position.weight.detach()[lay.first : lay.first + n]
    return layer1_inputs(model, p, ln_input=ln_input)


@torch.no_grad()
def _logits(lay: PositionalLayout, x: Tensor, include_bias: bool) -> Tensor:
    """(L, D) inputs -> (H, L, L) query-key logits of layer 1."""
    n = x.shape[0]
    (wq, bq), (wk, bk) = lay.query, lay.key
    q = x @ wq.float().cpu()  # (L, H*Dh)
    k = x @ wk.float().cpu()
    if include_bias:
        if bq is not None:
            q = q + bq.float().cpu()
        if bk is not None:
            k = k + bk.float().cpu()
    q = q.reshape(n, lay.num_heads, lay.head_dim).transpose(0, 1)  # (H, L, Dh)
    k = k.reshape(n, lay.num_heads, lay.head_dim).transpose(0, 1)  # (H, L, Dh)
    return (q @ k.transpose(-2, -1)) * lay.scale  # (H, L, L)


def positional_logits(
    model: nn.Module,
    *,
    table: Tensor | None = None,
    max_positions: int | None = None,
    variant: Variant = "ln",
    ln_input: LnInput = "position+type",
    include_bias: bool = False,
) -> Tensor:
    """F_P of every layer-1 head: (H, L, L), float32.

    Args:
        model: a supported Hugging Face model.
        table: an (L, E) table to use instead of the model's position embeddings, with
            the model's own LayerNorm, projection and query/key weights (a null table,
            say); ``max_positions`` is then ignored.
        max_positions: L (default: the full table).
        variant: ``"raw"`` (P through the linear projection only) or ``"ln"`` (P as it
            reaches layer 1: embedding LayerNorm / GPT-2's ``ln_1``, then projection).
        ln_input: what the LayerNorm sees: ``"position+type"`` (P + mean token-type
            embedding) or ``"position"`` (P alone). Ignored by ``variant="raw"``.
        include_bias: add the query/key biases before the product.
    """
    if variant not in ("raw", "ln"):
        raise ValueError(f"variant must be 'raw' or 'ln', got {variant!r}")
    lay = positional_layout(model)
    if table is None:
        inputs = layer1_position_inputs(model, max_positions=max_positions, ln_input=ln_input)
    else:
        inputs = layer1_inputs(model, table, ln_input=ln_input)
    return _logits(lay, inputs[variant], include_bias)


@dataclass(frozen=True)
class PositionalTI:
    """Translation invariance of a model's positional terms (the model-level summary).

    Attributes:
        gram: TI of P P^T.
        fp_raw: (H,) TI of each layer-1 head's F_P from raw P.
        fp_ln: (H,) TI of each layer-1 head's F_P from P through LayerNorm.
    """

    gram: float
    fp_raw: Tensor
    fp_ln: Tensor

    @property
    def fp_raw_mean(self) -> float:
        """Mean over layer-1 heads of TI(F_P), raw P."""
        return float(self.fp_raw.mean())

    @property
    def fp_ln_mean(self) -> float:
        """Mean over layer-1 heads of TI(F_P), P through LayerNorm."""
        return float(self.fp_ln.mean())


@dataclass(frozen=True)
class PositionalTerms:
    """Everything :func:`extract` reads off one model.

    Attributes:
        position: (L, E) position embeddings P.
        gram: (L, L) P P^T.
        cosine: (L, L) cosine similarities of the rows of P.
        fp_raw: (H, L, L) layer-1 F_P from raw P.
        fp_ln: (H, L, L) layer-1 F_P from P as it reaches layer 1.
        causal: whether the model only attends to j <= i (GPT-2).
        settings: the options used (plain data).
    """

    position: Tensor
    gram: Tensor
    cosine: Tensor
    fp_raw: Tensor
    fp_ln: Tensor
    causal: bool
    settings: dict[str, Any]

    def translation_invariance(self) -> PositionalTI:
        """TI of P P^T and of every head's F_P (on the j <= i triangle for causal models,
        which never use the rest)."""
        return PositionalTI(
            gram=float(metrics.translation_invariance(self.gram)),
            fp_raw=metrics.translation_invariance(self.fp_raw, causal=self.causal),
            fp_ln=metrics.translation_invariance(self.fp_ln, causal=self.causal),
        )


def extract(
    model: nn.Module,
    *,
    max_positions: int | None = None,
    ln_input: LnInput = "position+type",
    include_bias: bool = False,
) -> PositionalTerms:
    """P, P P^T, cosines and both versions of layer-1 F_P for a supported model."""
    lay = positional_layout(model)
    p = position_embeddings(model, max_positions)
    inputs = layer1_position_inputs(model, max_positions=max_positions, ln_input=ln_input)
    return PositionalTerms(
        position=p,
        gram=gram_matrix(p),
        cosine=cosine_matrix(p),
        fp_raw=_logits(lay, inputs["raw"], include_bias),
        fp_ln=_logits(lay, inputs["ln"], include_bias),
        causal=lay.causal,
        settings={
            "max_positions": p.shape[0],
            "ln_input": ln_input,
            "include_bias": include_bias,
            "first_row": lay.first,
            "family": lay.family,
        },
    )


# --------------------------------------------------------------------------------------
# TISA models
# --------------------------------------------------------------------------------------


def tisa_scorers(model: nn.Module) -> list[tuple[int, nn.Module]]:
    """(layer, scoring function) pairs of a TISA model; empty for other models."""
    return list(iter_scorers(model))


@dataclass(frozen=True)
class ScoringProfiles:
    """Learned f_h of every TISA layer and head.

    Attributes:
        layers: layer index of each row.
        offsets: (2K+1,) k = -K..K.
        values: (N_layers, H, 2K+1) f_h(k).
        ti: (N_layers, H) TI of each head's bias matrix (K+1, K+1) f_h(j - i).
        families: scoring family name per layer.
    """

    layers: list[int]
    offsets: Tensor
    values: Tensor
    ti: Tensor
    families: list[str]


@torch.no_grad()
def scoring_profiles(
    scorers: Iterable[tuple[int, nn.Module]], *, max_offset: int = 64
) -> ScoringProfiles:
    """Evaluates scoring functions on k = -K..K and measures their biases' TI.

    The TI is computed (not assumed) on the dense (H, K+1, K+1) bias that
    :func:`tisa.bias.expand` builds from the table, so a broken expansion would show up.

    Args:
        scorers: (layer, :class:`~tisa.scoring.ScoringFunction`) pairs, e.g. from
            :func:`tisa_scorers`.
        max_offset: K >= 1.
    """
    check_int(max_offset, "max_offset")
    n = max_offset + 1
    layers, values, tis, families = [], [], [], []
    for layer, scorer in scorers:
        tab = bias_table(scorer, n).detach().float().cpu()  # (H, 2K+1), column t <-> k = t-K
        layers.append(int(layer))
        values.append(tab)
        tis.append(metrics.translation_invariance(expand(tab, n, n)))
        families.append(str(getattr(scorer, "family", type(scorer).__name__)))
    if not layers:
        raise ValueError("scorers is empty: the model has no TISA scoring functions")
    return ScoringProfiles(
        layers=layers,
        offsets=torch.arange(-max_offset, max_offset + 1),
        values=torch.stack(values),
        ti=torch.stack(tis),
        families=families,
    )
