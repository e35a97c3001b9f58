"""Where each supported model family keeps its positional machinery.

One description per family (BERT, RoBERTa with XLM-R and CamemBERT, ALBERT, ELECTRA,
DistilBERT, GPT-2), used both to install TISA (:mod:`tisa.hf.install`) and to measure
translation invariance (:mod:`tisa.analysis.extract`), and the facts every feature asks of
a model through it (:func:`has_absolute_positions`, :func:`is_causal`,
:func:`num_positions`, :func:`position_embeddings`, the :class:`PositionalLayout` of
layer 1); the other lists of families (:data:`KNOWN_MODEL_TYPES`,
:data:`CAUSAL_MODEL_TYPES`) are derived from :data:`FAMILIES`:

- the absolute position table and the row that position 0 uses (RoBERTa numbers
  positions from ``padding_idx + 1``), the token-type table;
- what sits between the embedding sum and the first attention layer: the embedding
  LayerNorm (GPT-2, pre-LN: the first block's ``ln_1``) and the embedding-to-hidden
  projection (ALBERT's ``embedding_hidden_mapping_in``, ELECTRA's ``embeddings_project``);
- the distinct self-attention modules in layer order, their query and key projections
  (as ``x @ W + b``), head count, head size and logit scale;
- how many self-attention layers are applied (ALBERT applies its shared layers
  ``num_hidden_layers x inner_group_num`` times) and whether attention is causal.

Every method takes the *base* model (``model.base_model``), so task heads do not matter.
Families are found by ``config.model_type`` (a TISA model's ``tisa_<type>`` counts as
``<type>``). Letters: D hidden size, H heads, Dh head size.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from tisa._validate import check_int

__all__ = [
    "FAMILIES",
    "CAUSAL_MODEL_TYPES",
    "KNOWN_MODEL_TYPES",
    "SUPPORTED_ARCHITECTURES",
    "Architecture",
    "PositionalLayout",
    "UnsupportedModelError",
    "architecture_of",
    "check_max_positions",
    "check_table",
    "has_absolute_positions",
    "is_causal",
    "num_positions",
    "position_embeddings",
    "positional_layout",
    "stock_model_type",
    "supported_message",
    "swapped_positions",
]

_TISA_PREFIX = "tisa_"


def _embedding(module: Any) -> nn.Embedding | None:
    return module if isinstance(module, nn.Embedding) else None


def _linear(module: Any) -> tuple[Tensor, Tensor | None] | None:
    """(W (D, H*Dh), b (H*Dh,) or None) of an ``nn.Linear`` in ``x @ W + b`` form."""
    if not isinstance(module, nn.Linear):
        return None
    bias = None if module.bias is None else module.bias.detach()
    return module.weight.detach().T, bias


class Architecture:
    """The BERT layout; the other families override what differs.

    Attributes:
        name: readable family name.
        model_types: the ``config.model_type`` values of the family.
        causal: whether tokens attend to earlier positions only.
    """

    name = "BERT"
    model_types: tuple[str, ...] = ("bert",)
    causal = False

    # -- embeddings ------------------------------------------------------------------
    def position_table(self, base: nn.Module) -> nn.Embedding | None:
        """The absolute position-embedding table (None when there is none, or removed)."""
        return _embedding(getattr(getattr(base, "embeddings", None), "position_embeddings", None))

    def first_position(self, base: nn.Module) -> int:
        """The table row used by position 0."""
        return 0

    def token_type_table(self, base: nn.Module) -> nn.Embedding | None:
        return _embedding(getattr(base.embeddings, "token_type_embeddings", None))

    def input_norm(self, base: nn.Module) -> nn.Module | None:
        """The LayerNorm applied to the embedding sum before layer 1."""
        return getattr(base.embeddings, "LayerNorm", None)

    def input_projection(self, base: nn.Module) -> nn.Linear | None:
        """The map from embedding size E to hidden size D after the norm (None: E = D)."""
        return None

    # -- attention -------------------------------------------------------------------
    def attention_modules(self, base: nn.Module) -> list[nn.Module]:
        """The distinct self-attention modules, in layer order."""
        return [layer.attention.self for layer in base.encoder.layer]

    def query_key(
        self, attention: nn.Module
    ) -> tuple[tuple[Tensor, Tensor | None], tuple[Tensor, Tensor | None]] | None:
        """((W_Q, b_Q), (W_K, b_K)) as ``x @ W + b`` with W (D, H*Dh); None if not linear."""
        q, k = _linear(attention.query), _linear(attention.key)
        return None if q is None or k is None else (q, k)

    def head_shape(self, attention: nn.Module) -> tuple[int, int]:
        """(H, Dh) of a self-attention module."""
        return int(attention.num_attention_heads), int(attention.attention_head_size)

    def logit_scale(self, attention: nn.Module) -> float:
        """The factor on q·k (1/sqrt(Dh) unless the module says otherwise)."""
        head_dim = self.head_shape(attention)[1]
        return float(getattr(attention, "scaling", head_dim**-0.5))

    def num_layers(self, config: Any) -> int:
        """Self-attention layers applied per forward pass."""
        return int(config.num_hidden_layers)


class _Roberta(Architecture):
    name = "RoBERTa"
    model_types = ("roberta", "xlm-roberta", "camembert")

    def first_position(self, base: nn.Module) -> int:
        table = self.position_table(base)
        fallback = (table.padding_idx if table is not None else None) or 0
        return int(getattr(base.embeddings, "padding_idx", fallback)) + 1


class _Electra(Architecture):
    name = "ELECTRA"
    model_types = ("electra",)

    def input_projection(self, base: nn.Module) -> nn.Linear | None:
        return getattr(base, "embeddings_project", None)  # only when E != D


class _Albert(Architecture):
    name = "ALBERT"
    model_types = ("albert",)

    def input_projection(self, base: nn.Module) -> nn.Linear | None:
        return base.encoder.embedding_hidden_mapping_in

    def attention_modules(self, base: nn.Module) -> list[nn.Module]:
        # the modules of the layer groups, each applied several times
        return [
            layer.attention
            for group in base.encoder.albert_layer_groups
            for layer in group.albert_layers
        ]

    def num_layers(self, config: Any) -> int:
        return int(config.num_hidden_layers) * int(config.inner_group_num)


class _DistilBert(Architecture):
    name = "DistilBERT"
    model_types = ("distilbert",)

    def token_type_table(self, base: nn.Module) -> nn.Embedding | None:
        return None

    def attention_modules(self, base: nn.Module) -> list[nn.Module]:
        return [layer.attention for layer in base.transformer.layer]

    def query_key(self, attention: nn.Module):
        q, k = _linear(attention.q_lin), _linear(attention.k_lin)
        return None if q is None or k is None else (q, k)

    def head_shape(self, attention: nn.Module) -> tuple[int, int]:
        return int(attention.n_heads), int(attention.attention_head_size)


class _GPT2(Architecture):
    name = "GPT-2"
    model_types = ("gpt2",)
    causal = True

    def position_table(self, base: nn.Module) -> nn.Embedding | None:
        return _embedding(getattr(base, "wpe", None))

    def token_type_table(self, base: nn.Module) -> nn.Embedding | None:
        return None

    def input_norm(self, base: nn.Module) -> nn.Module | None:
        return base.h[0].ln_1  # pre-LN: the first block normalises its input

    def attention_modules(self, base: nn.Module) -> list[nn.Module]:
        return [block.attn for block in base.h]

    def query_key(self, attention: nn.Module):
        # Conv1D computes x @ W + b with W (D, 3D): queries, keys, values side by side
        w, b = attention.c_attn.weight.detach(), attention.c_attn.bias.detach()
        d = attention.embed_dim
        return (w[:, :d], b[:d]), (w[:, d : 2 * d], b[d : 2 * d])

    def head_shape(self, attention: nn.Module) -> tuple[int, int]:
        return int(attention.num_heads), int(attention.head_dim)


#: config.model_type -> the family's description.
FAMILIES: dict[str, Architecture] = {
    model_type: arch
    for arch in (Architecture(), _Roberta(), _Albert(), _Electra(), _DistilBert(), _GPT2())
    for model_type in arch.model_types
}


def stock_model_type(config: Any) -> str:
    """``config.model_type`` without the ``tisa_`` prefix of TISA models."""
    model_type = str(getattr(config, "model_type", ""))
    return model_type.removeprefix(_TISA_PREFIX)


def architecture_of(model_or_config: Any) -> Architecture | None:
    """The description of a model's (or config's) family; None for other families."""
    config = getattr(model_or_config, "config", model_or_config)
    return FAMILIES.get(stock_model_type(config))


# --------------------------------------------------------------------------------------
# Facts about a model, read through its family's description
# --------------------------------------------------------------------------------------

#: model_type values of the stock families described here (TISA models count as theirs).
KNOWN_MODEL_TYPES: frozenset[str] = frozenset(FAMILIES)

#: ``config.model_type`` of the causal families, stock and TISA.
CAUSAL_MODEL_TYPES: tuple[str, ...] = tuple(
    name for t, arch in FAMILIES.items() if arch.causal for name in (t, _TISA_PREFIX + t)
)

#: Human-readable list used in error messages.
SUPPORTED_ARCHITECTURES: tuple[str, ...] = (
    "BERT",
    "RoBERTa (also XLM-RoBERTa, CamemBERT)",
    "ALBERT",
    "ELECTRA",
    "DistilBERT",
    "GPT-2",
    "TISA models made with tisa.hf",
)


class UnsupportedModelError(ValueError):
    """The model has neither a supported absolute position table nor TISA scorers."""


def supported_message(what: str) -> str:
    """``what``, followed by the list of supported architectures."""
    return f"{what}; supported: " + ", ".join(SUPPORTED_ARCHITECTURES) + "."


@dataclass(frozen=True)
class PositionalLayout:
    """The positional machinery of one model, found through its family's description."""

    family: str
    position: nn.Embedding
    first: int  # table row of position 0
    token_type: nn.Embedding | None
    norm: nn.Module | None  # LayerNorm between the embedding sum and layer 1
    project: nn.Linear | None  # embedding size -> hidden size, after `norm`
    query: tuple[Tensor, Tensor | None]  # (D, H*Dh) in x @ W form, (H*Dh,)
    key: tuple[Tensor, Tensor | None]
    num_heads: int
    head_dim: int
    scale: float
    causal: bool


def base_model(model: nn.Module) -> nn.Module:
    return getattr(model, "base_model", model)


def positional_layout(model: nn.Module) -> PositionalLayout:
    """The position table and layer-1 query/key maps of a supported model."""
    arch = architecture_of(model)
    name = type(model).__name__
    if arch is None:
        model_type = getattr(getattr(model, "config", None), "model_type", None)
        raise UnsupportedModelError(
            supported_message(f"{name} (model_type {model_type!r}) is not a supported family")
        )
    base = base_model(model)
    position = arch.position_table(base)
    if position is None:
        raise UnsupportedModelError(
            supported_message(f"{name} has no absolute position-embedding table")
        )
    attention = arch.attention_modules(base)[0]
    query_key = arch.query_key(attention)
    if query_key is None:
        raise UnsupportedModelError(
            supported_message(f"layer-1 query/key of {name} are not Linear")
        )
    heads, head_dim = arch.head_shape(attention)
    return PositionalLayout(
        family=stock_model_type(model.config),
        position=position,
        first=arch.first_position(base),
        token_type=arch.token_type_table(base),
        norm=arch.input_norm(base),
        project=arch.input_projection(base),
        query=query_key[0],
        key=query_key[1],
        num_heads=heads,
        head_dim=head_dim,
        scale=arch.logit_scale(attention),
        causal=arch.causal,
    )


def has_absolute_positions(model: nn.Module) -> bool:
    """True when :func:`position_embeddings` can analyse ``model``."""
    try:
        positional_layout(model)
    except UnsupportedModelError:
        return False
    return True


def is_causal(model: nn.Module) -> bool:
    """True for decoder-only models (GPT-2, TISA GPT-2, any ``config.is_decoder``)."""
    arch = architecture_of(model)
    config = getattr(model, "config", None)
    return bool(getattr(config, "is_decoder", False)) or (arch is not None and arch.causal)


def num_positions(model: nn.Module) -> int:
    """Number of real positions the model's table covers (512 for BERT and RoBERTa)."""
    lay = positional_layout(model)
    return lay.position.num_embeddings - lay.first


def check_max_positions(model: nn.Module, max_positions: int | None) -> int:
    total = num_positions(model)
    if max_positions is None:
        return total
    check_int(max_positions, "max_positions", minimum=2)
    return min(max_positions, total)


@torch.no_grad()
def position_embeddings(model: nn.Module, max_positions: int | None = None) -> Tensor:
    """The position-embedding rows of positions 0..L-1: (L, E), float32 on CPU.

    Args:
        model: a supported Hugging Face model (base or with a task head).
        max_positions: L; default (``None``) the full table (512 for BERT), capped there.
    """
    lay = positional_layout(model)
    n = check_max_positions(model, max_positions)
    return lay.position.weight.detach()[lay.first : lay.first + n].float().cpu()


@contextmanager
def swapped_positions(model: nn.Module, table: Tensor) -> Iterator[None]:
    """Positions 0..L-1 of ``model`` use the rows of ``table`` while inside the block.

    The rows are written into the model's position-embedding weights (RoBERTa: from
    ``padding_idx + 1`` on) and the original rows are restored on leaving, also after an
    error. Use it to run a model with a null table (:mod:`tisa.analysis.nulls`) and
    everything else of its own, e.g. an attention probe of L tokens.

    Args:
        model: a supported Hugging Face model with absolute position embeddings.
        table: (L, E) rows, L at most the model's number of positions.
    """
    lay = positional_layout(model)
    rows = check_table(lay, table)
    n = rows.shape[0]
    if n > num_positions(model):
        raise ValueError(f"table has {n} rows; the model has {num_positions(model)} positions")
    weight = lay.position.weight
    keep = weight.detach()[lay.first : lay.first + n].clone()
    with torch.no_grad():
        weight[lay.first : lay.first + n] = rows
    try:
        yield
    finally:
        with torch.no_grad():
            weight[lay.first : lay.first + n] = keep


def check_table(lay: PositionalLayout, table: Tensor) -> Tensor:
    """An (L, E) table for this model's position embeddings, as float32 on CPU."""
    if not isinstance(table, Tensor):
        raise ValueError(f"table must be a torch.Tensor of shape (L, E), got {type(table)}")
    e = lay.position.embedding_dim
    if table.dim() != 2 or table.shape[0] < 1 or table.shape[1] != e:
        raise ValueError(
            f"table must have shape (L, {e}) (the model's embedding size), got {tuple(table.shape)}"
        )
    if table.is_complex() or not torch.isfinite(table).all():
        raise ValueError("table must hold finite real values")
    return table.detach().to(device=lay.position.weight.device, dtype=lay.position.weight.dtype)
