"""Where each supported model family keeps its positional machinery.

One description per family (BERT, RoBERTa with XLM-R and CamemBERT, ALBERT, ELECTRA,
DistilBERT, GPT-2), used both to install TISA (:mod:`tisa.hf.install`) and to measure
translation invariance (:mod:`tisa.analysis.extract`):

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

from typing import Any

from torch import Tensor, nn

__all__ = [
    "ARCHITECTURES",
    "Architecture",
    "architecture_of",
    "stock_model_type",
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
ARCHITECTURES: dict[str, Architecture] = {
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
    return ARCHITECTURES.get(stock_model_type(config))
