"""Adding TISA to a Hugging Face model: :func:`add_tisa`, :func:`tisa_config` and the surgery.

What :func:`install` changes in a model:

- every ``PreTrainedModel`` in it becomes its TISA subclass (:mod:`tisa.hf.model_types`),
  and its config the TISA config holding the settings (``config.tisa``);
- ``base_model.tisa_scorers``: an ``nn.ModuleList`` of scoring functions, one per layer
  (or one shared by all layers), and a forward pre-hook on the base model that passes the
  list to the attention layers (see :mod:`tisa.hf.attention_fn`);
- each self-attention module gets ``tisa_layer`` (its layer index);
- ``position_embeddings="remove"``: the absolute position embeddings are deleted (with the
  ``position_ids`` / ``token_type_ids`` buffers that are sized by them) and the embeddings
  module adds no position term;
- ALBERT only: the encoder passes the depth of each applied layer (``tisa_depth``), so each
  of the ``num_hidden_layers`` applications of a shared layer has its own scorer.

Where each family keeps these modules is described once, in :mod:`tisa.hf.architectures`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from torch import Tensor, nn
from transformers import PreTrainedConfig, PreTrainedModel
from transformers.modeling_outputs import BaseModelOutput
from transformers.models.albert.modeling_albert import AlbertEmbeddings, AlbertTransformer
from transformers.models.bert.modeling_bert import BertEmbeddings
from transformers.models.electra.modeling_electra import ElectraEmbeddings
from transformers.models.roberta.modeling_roberta import RobertaEmbeddings
from transformers.utils.output_capturing import _CAN_RECORD_REGISTRY

from tisa.hf.architectures import ARCHITECTURES as LAYOUTS
from tisa.hf.model_types import TISA_CONFIGS, base_model_type, tisa_model_class
from tisa.hf.settings import TisaSettings
from tisa.scoring import ScoringFunction, build

__all__ = [
    "NoPositionEmbedding",
    "add_tisa",
    "install",
    "is_tisa",
    "iter_scorers",
    "positional_parameters",
    "tisa_config",
]


def _settings(settings: TisaSettings | None, options: dict[str, Any]) -> TisaSettings:
    """``settings`` as given, or built from keyword options (not both)."""
    if settings is None:
        return TisaSettings.from_options(**options)
    if not isinstance(settings, TisaSettings):
        raise ValueError(
            f"settings must be a TisaSettings (or pass its fields as keywords, e.g. "
            f"scoring='rbf'), got {settings!r}"
        )
    if options:
        raise ValueError(
            f"give either settings or keyword options, not both (got {sorted(options)})"
        )
    return settings


def is_tisa(model: nn.Module) -> bool:
    """True when TISA has been installed in ``model`` (by :func:`add_tisa` or a TISA class)."""
    base = getattr(model, "base_model", model)
    return isinstance(getattr(base, "tisa_scorers", None), nn.ModuleList)


def add_tisa(
    model: PreTrainedModel,
    settings: TisaSettings | None = None,
    *,
    start: str | None = None,
    **options: Any,
) -> PreTrainedModel:
    """Puts translation-invariant self-attention into a transformers model, in place.

    Every self-attention layer gets a positional scoring function f_h(j - i) (one per
    layer, or one for all with ``share_across_layers``) whose values are added to its
    attention logits; attention runs through :func:`tisa.attention.attention` via the
    registered ``"tisa"`` attention implementation. The settings are stored in
    ``model.config.tisa`` and the model and config become their registered TISA classes,
    so ``save_pretrained`` / ``AutoModel*.from_pretrained`` round-trip after
    ``import tisa.hf``.

    ALBERT shares one set of layer weights across its depth; its scorers are not shared:
    each of the ``num_hidden_layers`` applications gets its own (3·S·H·L parameters, the
    paper's count), unless ``share_across_layers``.

    Args:
        model: a BERT, ALBERT, RoBERTa, ELECTRA or GPT-2 model (any head).
        settings: what to install (default: the RBF scoring function next to the
            position embeddings, the paper's setting).
        start: a :data:`tisa.hf.STARTS` name for the RBF parameters (default
            :data:`tisa.hf.DEFAULT_START`, the paper's initialisation; ``"spread"`` and
            ``"zero"`` leave the pretrained model's function unchanged at step 0); other
            families start from their own defaults and take only ``"paper"``.
        **options: instead of ``settings``, its fields as keywords (``scoring``,
            ``num_kernels``, ``position_embeddings``, ``share_across_layers``, ``rotary``,
            ``rotary_base``, ``backend``) and scoring options of the family (e.g.
            ``amplitude_mean``), which override the start's values.

    Returns:
        The same model object.

    Raises:
        ValueError: unsupported architecture, TISA already installed, ``"remove"`` on a
            model without absolute position embeddings, or an invalid option. A rejected
            call leaves the model untouched.
    """
    if not isinstance(model, PreTrainedModel):
        raise ValueError(
            f"model must be a transformers PreTrainedModel, got {type(model).__name__}"
        )
    model_type = base_model_type(model.config)
    chosen = _settings(settings, options).with_start(start)
    stored = chosen.to_config(model.config)
    if (
        chosen.position_embeddings == "remove"
        and LAYOUTS[model_type].position_table(model.base_model) is None
    ):
        raise ValueError(
            "position_embeddings='remove': this model has no absolute position embeddings "
            "left to remove (was TISA already added with position_embeddings='remove'?)"
        )
    if is_tisa(model):
        raise ValueError(
            f"model already has TISA (config.tisa = {model.config.tisa}); add_tisa applies "
            "once: start again from the stock model"
        )
    previous = model.config._attn_implementation
    install(model, stored)
    model.config._attn_implementation = "tisa_eager" if previous == "eager" else "tisa"
    return model


def tisa_config(
    base_config: PreTrainedConfig, settings: TisaSettings | None = None, **options: Any
) -> PreTrainedConfig:
    """A TISA config built from a stock one, for training from scratch.

    ``AutoModelForMaskedLM.from_config(tisa_config(AlbertConfig(...)))`` builds a TISA
    ALBERT directly. ``settings`` / ``**options`` as in :func:`add_tisa`; the scorers
    start from their families' own initialisation (the paper's, for RBF).

    Returns:
        A new ``Tisa<Arch>Config`` (model type ``tisa_<type>``) with ``config.tisa`` set.

    Raises:
        ValueError: unsupported architecture or an invalid option.
    """
    if not isinstance(base_config, PreTrainedConfig):
        raise ValueError(
            f"base_config must be a transformers config, got {type(base_config).__name__}"
        )
    model_type = base_model_type(base_config)
    stored = _settings(settings, options).to_config(base_config)
    data = base_config.to_dict()
    for key in ("model_type", "tisa", "architectures"):
        data.pop(key, None)
    data["tisa"] = stored
    return TISA_CONFIGS[model_type](**data)


def iter_scorers(model: nn.Module) -> Iterator[tuple[int, ScoringFunction]]:
    """(layer index, scoring function) for each self-attention layer of a TISA model.

    Layers count applied self-attention layers from 0 (ALBERT: ``num_hidden_layers`` x
    ``inner_group_num``). With ``share_across_layers`` every layer yields the same object.
    Models without TISA scoring functions (stock models, rotary-only) yield nothing.
    """
    base = getattr(model, "base_model", model)
    scorers = getattr(base, "tisa_scorers", None)
    if not isinstance(scorers, nn.ModuleList) or len(scorers) == 0:
        return
    layers = LAYOUTS[base_model_type(model.config)].num_layers(model.config)
    for layer in range(layers):
        yield layer, scorers[0] if len(scorers) == 1 else scorers[layer]


def positional_parameters(model: nn.Module) -> dict[str, int]:
    """Counts positional parameters: absolute position embeddings and TISA scorers.

    The one count used everywhere (pretraining facts, GLUE results, the analysis).

    Returns:
        ``{"absolute": ..., "tisa": ..., "total": ...}``; shared scorers count once, fixed
        ones (ALiBi) count zero, and so does rotary embedding.

    Raises:
        ValueError: not a model of an architecture TISA supports.
    """
    config = getattr(model, "config", None)
    if not isinstance(model, PreTrainedModel) or config is None:
        raise ValueError(
            f"model must be a transformers PreTrainedModel, got {type(model).__name__}"
        )
    table = LAYOUTS[base_model_type(config)].position_table(model.base_model)
    absolute = table.weight.numel() if table is not None else 0
    unique = {id(s): s for _, s in iter_scorers(model)}
    tisa = sum(s.num_positional_parameters() for s in unique.values())
    return {"absolute": absolute, "tisa": tisa, "total": absolute + tisa}


# ------------------------------------------------------------------------------ surgery


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


def _remove_absolute_positions(base: nn.Module, model_type: str) -> None:
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


def _pass_scorers(module: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """Forward pre-hook of a TISA base model: hands its scorers to the attention layers,
    after checking that a model that keeps its position table is not asked past it."""
    _check_length(module, args, kwargs)
    kwargs["tisa_scorers"] = module.tisa_scorers
    return args, kwargs


def _check_length(base: nn.Module, args: tuple, kwargs: dict) -> None:
    """Refuses inputs longer than the position table of a ``"keep"`` model, at the model's
    boundary (the table lookup would fail with an IndexError deep in the embeddings)."""
    arch = LAYOUTS.get(base_model_type(base.config))
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


def install(model: PreTrainedModel, settings: dict[str, Any]) -> None:
    """Installs TISA into a stock model in place (see the module docstring).

    ``settings`` is the plain data of :meth:`tisa.hf.TisaSettings.to_config`, stored as
    ``config.tisa``. The caller checks that the model can take them (:func:`add_tisa`
    does).
    """
    model_type = base_model_type(model.config)
    layout = LAYOUTS[model_type]
    for module in model.modules():
        if isinstance(module, PreTrainedModel):
            module.__class__ = tisa_model_class(type(module))
            # transformers finds the layers whose outputs it records (hidden states,
            # attentions) by the model's class name, registered when a model is built
            _CAN_RECORD_REGISTRY[module] = module._can_record_outputs
    config = model.config
    config.__class__ = TISA_CONFIGS[model_type]
    config.tisa = settings
    base = model.base_model
    if settings["position_embeddings"] == "remove":
        _remove_absolute_positions(base, model_type)
    for index, module in enumerate(layout.attention_modules(base)):
        if model_type == "albert":
            index %= int(config.inner_group_num)  # index inside its layer group
        module.tisa_layer = index
    if model_type == "albert":
        base.encoder.__class__ = TisaAlbertTransformer
    scorers = nn.ModuleList()
    if settings["scoring"] is not None:
        count = 1 if settings["share_across_layers"] else layout.num_layers(config)
        scorers.extend(build(**settings["scoring"]) for _ in range(count))
        reference = next(model.parameters(), None)
        if reference is not None:
            scorers.to(device=reference.device, dtype=reference.dtype)
    base.tisa_scorers = scorers
    if _pass_scorers not in base._forward_pre_hooks.values():
        base.register_forward_pre_hook(_pass_scorers, with_kwargs=True)
