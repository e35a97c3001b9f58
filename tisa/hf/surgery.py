"""The surgery inside a model's modules when TISA is installed (by
:func:`tisa.hf.model_types.install`): position embeddings removed, the scorers handed to
the attention layers by a forward pre-hook, ALBERT's encoder passing each layer's depth.

Where each family keeps these modules is described once, in :mod:`tisa.hf.architectures`.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn
from transformers.modeling_outputs import BaseModelOutput
from transformers.models.albert.modeling_albert import AlbertEmbeddings, AlbertTransformer
from transformers.models.bert.modeling_bert import BertEmbeddings
from transformers.models.electra.modeling_electra import ElectraEmbeddings
from transformers.models.roberta.modeling_roberta import RobertaEmbeddings

from tisa.hf.architectures import FAMILIES, stock_model_type

__all__ = [
    "NoPositionEmbedding",
    "TisaAlbertTransformer",
    "pass_scorers",
    "remove_absolute_positions",
]


class NoPositionEmbedding(nn.Module):
    """Stands in for GPT-2's ``wpe`` once removed: no parameters, contributes exactly 0.

    GPT-2 adds ``wpe(position_ids)`` inline in its forward; returning a 0-d zero keeps that
    code unchanged (x + 0 == x in every dtype) and works for any sequence length.
    """

    _tisa_no_positions = True

    def forward(self, position_ids: Tensor) -> Tensor:
        return torch.zeros((), device=position_ids.device)


class _NoPositionEmbeddingsMixin:
    """Embeddings forward without a position term: words + token types, LayerNorm, dropout."""

    _tisa_no_positions = True

    def forward(
        self,
        input_ids: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        position_ids: Tensor | None = None,
        inputs_embeds: Tensor | None = None,
        cache_length: int = 0,
    ) -> Tensor:
        if inputs_embeds is None:
            inputs_embeds = self.word_embeddings(input_ids)  # (B, L, E)
        if token_type_ids is None:
            token_type_ids = torch.zeros(
                inputs_embeds.shape[:-1], dtype=torch.long, device=inputs_embeds.device
            )
        embeddings = inputs_embeds + self.token_type_embeddings(token_type_ids)
        return self.dropout(self.LayerNorm(embeddings))


_NO_POSITION_CLASSES: dict[type, type] = {}
for _cls in (BertEmbeddings, AlbertEmbeddings, RobertaEmbeddings, ElectraEmbeddings):
    _new = type(f"NoPosition{_cls.__name__}", (_NoPositionEmbeddingsMixin, _cls), {})
    _new.__module__ = __name__
    globals()[_new.__name__] = _new  # importable by name, so models pickle
    _NO_POSITION_CLASSES[_cls] = _new


def remove_absolute_positions(base: nn.Module, model_type: str) -> None:
    if model_type == "gpt2":
        base.wpe = NoPositionEmbedding()
        return
    emb = base.embeddings
    cls = type(emb)
    if cls not in _NO_POSITION_CLASSES:
        raise ValueError(f"model: cannot remove position embeddings from {cls.__name__}")
    del emb.position_embeddings
    for name in ("position_ids", "token_type_ids"):  # buffers sized max_position_embeddings
        if name in emb._buffers:
            delattr(emb, name)
    emb.__class__ = _NO_POSITION_CLASSES[cls]


class TisaAlbertTransformer(AlbertTransformer):
    """ALBERT's encoder, passing the depth of each applied layer group (``tisa_depth``).

    The loop is ALBERT's own (``AlbertTransformer.forward``); the only change is the extra
    keyword, which reaches the attention function and selects the scorer of that depth.
    """

    def forward(
        self, hidden_states: Tensor, attention_mask: Tensor | None = None, **kwargs: Any
    ) -> BaseModelOutput:
        hidden_states = self.embedding_hidden_mapping_in(hidden_states)
        for i in range(self.config.num_hidden_layers):
            group_idx = int(i / (self.config.num_hidden_layers / self.config.num_hidden_groups))
            hidden_states = self.albert_layer_groups[group_idx](
                hidden_states, attention_mask, tisa_depth=i, **kwargs
            )
        return BaseModelOutput(last_hidden_state=hidden_states)


def pass_scorers(module: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """Forward pre-hook of a TISA base model: hands its scorers (and relative content terms,
    ``tisa_content``, when it has them) to the attention layers,
    after checking that a model that keeps its position table is not asked past it."""
    _check_length(module, args, kwargs)
    kwargs.update(tisa_kwargs(module))
    return args, kwargs


def tisa_kwargs(base: nn.Module) -> dict[str, Any]:
    """What a TISA base model hands its attention layers: its scorers, and its relative
    content terms when it has them."""
    out = {"tisa_scorers": base.tisa_scorers}
    content = getattr(base, "tisa_content", None)
    if content is not None:
        out["tisa_content"] = content
    return out


def _check_length(base: nn.Module, args: tuple, kwargs: dict) -> None:
    """Refuses inputs longer than the position table of a ``"keep"`` model, at the model's
    boundary (the table lookup would fail with an IndexError deep in the embeddings)."""
    arch = FAMILIES.get(stock_model_type(base.config))
    table = None if arch is None else arch.position_table(base)
    if table is None:  # removed ("remove"), or a family without one
        return
    tokens = kwargs.get("input_ids", args[0] if args else None)
    if tokens is None:
        tokens = kwargs.get("inputs_embeds")
    if not isinstance(tokens, Tensor) or tokens.dim() < 2:
        return
    first = arch.first_position(base)
    limit = table.num_embeddings - first
    positions = kwargs.get("position_ids")
    if isinstance(positions, Tensor) and positions.numel():
        length = int(positions.max()) + 1 - first  # rows asked for directly
    else:
        length = int(tokens.shape[1])
        past = kwargs.get("cache", kwargs.get("past_key_values"))
        if past is not None and hasattr(past, "get_seq_length"):
            length += int(past.get_seq_length())  # a key/value cache: positions go on
    if length > limit:
        raise ValueError(
            f"input of {length} positions, but this TISA model keeps its absolute position "
            f"table (position_embeddings='keep'), which has {limit}: it cannot run longer "
            "inputs. Install TISA with position_embeddings='remove' (or convert the model "
            "with `tisa convert`) to go past the table"
        )
