"""TISA model types for transformers: configs, model classes and their installation.

Each supported architecture gets a registered model type, ``tisa_<type>`` (``tisa_bert``,
``tisa_albert``, ``tisa_roberta``, ``tisa_electra``, ``tisa_gpt2``): a config class that
adds one field, ``tisa`` (plain data, see :func:`make_settings`), and one model class per
head (``TisaBertForMaskedLM`` subclasses ``BertForMaskedLM``, ...). The model classes
build the stock model and then :func:`install` TISA into it, so ``from_config`` and
``from_pretrained`` through the Auto classes give TISA models, and a saved TISA model
reloads bit-exactly (the scoring functions are ordinary parameters in the state dict).

What :func:`install` changes in a model:

- every ``PreTrainedModel`` in it becomes its TISA subclass, and its config the TISA config;
- ``base_model.tisa_scorers``: an ``nn.ModuleList`` of scoring functions, one per layer
  (or one shared by all layers), and a forward pre-hook on the base model that passes the
  list to the attention layers (see :mod:`tisa.hf.attention_fn`);
- each self-attention module gets ``tisa_layer`` (its layer index);
- ``position_embeddings="remove"``: the absolute position embeddings are deleted (with the
  ``position_ids`` / ``token_type_ids`` buffers that are sized by them) and the embeddings
  module adds no position term;
- ALBERT only: the encoder passes the depth of each applied layer (``tisa_depth``), so each
  of the ``num_hidden_layers`` applications of a shared layer has its own scorer.
"""

from __future__ import annotations

import inspect
import itertools
from typing import Any

import torch
import transformers
from huggingface_hub.dataclasses import strict
from torch import Tensor, nn
from transformers import (
    AlbertConfig,
    AutoConfig,
    AutoModel,
    AutoModelForCausalLM,
    AutoModelForMaskedLM,
    AutoModelForMultipleChoice,
    AutoModelForNextSentencePrediction,
    AutoModelForPreTraining,
    AutoModelForQuestionAnswering,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
    AutoTokenizer,
    BertConfig,
    ElectraConfig,
    GPT2Config,
    PreTrainedConfig,
    PreTrainedModel,
    RobertaConfig,
)
from transformers import initialization as hf_init
from transformers.modeling_outputs import BaseModelOutput
from transformers.models.albert.modeling_albert import AlbertEmbeddings, AlbertTransformer
from transformers.models.auto import modeling_auto
from transformers.models.auto.tokenization_auto import TOKENIZER_MAPPING_NAMES
from transformers.models.bert.modeling_bert import BertEmbeddings
from transformers.models.electra.modeling_electra import ElectraEmbeddings
from transformers.models.roberta.modeling_roberta import RobertaEmbeddings
from transformers.utils.output_capturing import _CAN_RECORD_REGISTRY

from tisa.attention import BACKENDS
from tisa.hf.attention_fn import IMPLEMENTATIONS
from tisa.scoring import REGISTRY, ScoringFunction, build

__all__ = [
    "ARCHITECTURES",
    "NoPositionEmbedding",
    "TisaAlbertConfig",
    "TisaBertConfig",
    "TisaElectraConfig",
    "TisaGPT2Config",
    "TisaModelMixin",
    "TisaRobertaConfig",
    "absolute_position_embedding",
    "attention_modules",
    "base_model_type",
    "install",
    "make_settings",
    "num_layers",
    "register_auto_classes",
    "resolve_implementation",
    "tisa_model_class",
]

#: model_type -> readable name, for the architectures TISA can be installed in.
ARCHITECTURES: dict[str, str] = {
    "bert": "BERT",
    "albert": "ALBERT",
    "roberta": "RoBERTa",
    "electra": "ELECTRA",
    "gpt2": "GPT-2",
}
POSITION_EMBEDDINGS = ("keep", "remove")
_PREFIX = "tisa_"


# ------------------------------------------------------------------------------ configs


@strict
class TisaBertConfig(BertConfig):
    """:class:`~transformers.BertConfig` plus the TISA settings (``tisa``)."""

    model_type = "tisa_bert"
    tisa: dict | None = None


@strict
class TisaAlbertConfig(AlbertConfig):
    """:class:`~transformers.AlbertConfig` plus the TISA settings (``tisa``)."""

    model_type = "tisa_albert"
    tisa: dict | None = None


@strict
class TisaRobertaConfig(RobertaConfig):
    """:class:`~transformers.RobertaConfig` plus the TISA settings (``tisa``)."""

    model_type = "tisa_roberta"
    tisa: dict | None = None


@strict
class TisaElectraConfig(ElectraConfig):
    """:class:`~transformers.ElectraConfig` plus the TISA settings (``tisa``)."""

    model_type = "tisa_electra"
    tisa: dict | None = None


@strict
class TisaGPT2Config(GPT2Config):
    """:class:`~transformers.GPT2Config` plus the TISA settings (``tisa``)."""

    model_type = "tisa_gpt2"
    tisa: dict | None = None


TISA_CONFIGS: dict[str, type[PreTrainedConfig]] = {
    "bert": TisaBertConfig,
    "albert": TisaAlbertConfig,
    "roberta": TisaRobertaConfig,
    "electra": TisaElectraConfig,
    "gpt2": TisaGPT2Config,
}


def _supported_text() -> str:
    return ", ".join(f"{name} ({t!r})" for t, name in ARCHITECTURES.items())


def base_model_type(config: Any) -> str:
    """The stock model type of a (TISA or stock) config: ``"tisa_bert"`` -> ``"bert"``.

    Raises:
        ValueError: not one of the supported architectures.
    """
    model_type = str(getattr(config, "model_type", ""))
    base = model_type[len(_PREFIX) :] if model_type.startswith(_PREFIX) else model_type
    if base not in ARCHITECTURES:
        raise ValueError(f"model: TISA supports {_supported_text()}; got model_type {model_type!r}")
    return base


# ----------------------------------------------------------------------------- settings


def make_settings(
    config: Any,
    *,
    scoring: str | None = "rbf",
    num_kernels: int = 5,
    position_embeddings: str = "keep",
    share_across_layers: bool = False,
    rotary: bool = False,
    rotary_base: float = 10000.0,
    backend: str = "auto",
    **scoring_options: Any,
) -> dict[str, Any]:
    """Validated plain-data TISA settings for a model with this config (``config.tisa``).

    Returns:
        ``{"scoring": ScoringFunction.config() or None, "position_embeddings": ...,
        "share_across_layers": ..., "rotary": ..., "rotary_base": ..., "backend": ...}``.

    Raises:
        ValueError: an unknown or inconsistent option.
    """
    if position_embeddings not in POSITION_EMBEDDINGS:
        raise ValueError(
            f"position_embeddings must be one of {POSITION_EMBEDDINGS}, got {position_embeddings!r}"
        )
    if not isinstance(share_across_layers, bool):
        raise ValueError(f"share_across_layers must be a bool, got {share_across_layers!r}")
    if not isinstance(rotary, bool):
        raise ValueError(f"rotary must be a bool, got {rotary!r}")
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if not rotary_base > 1:
        raise ValueError(f"rotary_base must be > 1, got {rotary_base!r}")
    heads = int(config.num_attention_heads)
    head_dim = int(config.hidden_size) // heads
    if rotary and head_dim % 2:
        raise ValueError(f"rotary needs an even head size, got {head_dim}")
    scorer_config = None
    if scoring is not None:
        if not isinstance(scoring, str) or scoring not in REGISTRY:
            raise ValueError(f"scoring must be one of {sorted(REGISTRY)} or None, got {scoring!r}")
        accepts = inspect.signature(REGISTRY[scoring].__init__).parameters
        if "num_kernels" in accepts:
            scoring_options = {"num_kernels": num_kernels, **scoring_options}
        elif num_kernels != 5:
            raise ValueError(
                f"num_kernels applies to kernel scoring functions ('rbf'), not {scoring!r}"
            )
        unknown = set(scoring_options) - set(accepts) - {"num_heads"}
        if unknown:
            expected = sorted(set(accepts) - {"self", "num_heads"})
            raise ValueError(
                f"scoring options {sorted(unknown)} do not apply to {scoring!r}; it takes "
                f"{expected}"
            )
        with torch.device("cpu"):
            scorer_config = build(scoring, heads, **scoring_options).config()
    elif scoring_options or num_kernels != 5:
        given = sorted(scoring_options) + (["num_kernels"] if num_kernels != 5 else [])
        raise ValueError(f"scoring options {given} were given but scoring is None")
    if scoring is None and not rotary and position_embeddings == "keep":
        raise ValueError(
            "nothing to add: scoring is None, rotary is False and position_embeddings is "
            "'keep'; choose a scoring family, rotary=True or position_embeddings='remove'"
        )
    return {
        "scoring": scorer_config,
        "position_embeddings": position_embeddings,
        "share_across_layers": share_across_layers,
        "rotary": rotary,
        "rotary_base": float(rotary_base),
        "backend": backend,
    }


def _settings_from_config(config: Any) -> dict[str, Any]:
    """``config.tisa`` checked (and completed with defaults for absent keys)."""
    raw = getattr(config, "tisa", None)
    if raw is None:
        return make_settings(config)
    if not isinstance(raw, dict):
        raise ValueError(f"config.tisa must be a dict, got {type(raw).__name__}")
    known = {"scoring", "position_embeddings", "share_across_layers", "rotary", "rotary_base"}
    known |= {"backend"}
    unknown = set(raw) - known
    if unknown:
        raise ValueError(
            f"config.tisa has unknown keys {sorted(unknown)}; expected {sorted(known)}"
        )
    scoring = raw.get("scoring")
    if scoring is not None:
        if not isinstance(scoring, dict) or scoring.get("name") not in REGISTRY:
            raise ValueError(
                f"config.tisa['scoring'] must be a ScoringFunction.config() dict naming one of "
                f"{sorted(REGISTRY)}, got {scoring!r}"
            )
        if scoring.get("num_heads") != config.num_attention_heads:
            raise ValueError(
                f"config.tisa['scoring']['num_heads'] ({scoring.get('num_heads')}) differs from "
                f"num_attention_heads ({config.num_attention_heads})"
            )
    options = {k: v for k, v in (scoring or {}).items() if k not in ("name", "num_heads")}
    return make_settings(
        config,
        scoring=None if scoring is None else scoring["name"],
        position_embeddings=raw.get("position_embeddings", "keep"),
        share_across_layers=raw.get("share_across_layers", False),
        rotary=raw.get("rotary", False),
        rotary_base=raw.get("rotary_base", 10000.0),
        backend=raw.get("backend", "auto"),
        **options,
    )


_REQUESTED = {
    None: "tisa",
    "eager": "tisa_eager",
    "sdpa": "tisa_sdpa",
    "flex_attention": "tisa_flex",
}


def resolve_implementation(requested: str | None) -> str:
    """The TISA attention implementation for a requested ``attn_implementation``.

    ``None`` -> ``"tisa"``; the stock names ``"eager"``, ``"sdpa"``, ``"flex_attention"``
    -> the TISA function with that backend, so a TISA model never silently loses its bias.

    Raises:
        ValueError: an implementation TISA cannot run (e.g. flash attention kernels).
    """
    if requested in IMPLEMENTATIONS:
        return requested
    if requested in _REQUESTED:
        return _REQUESTED[requested]
    raise ValueError(
        f"attn_implementation: a TISA model runs one of {sorted(IMPLEMENTATIONS)} (the stock "
        f"names 'eager', 'sdpa', 'flex_attention' map to them); got {requested!r}"
    )


# --------------------------------------------------------------------- architecture parts


def num_layers(config: Any) -> int:
    """Number of applied self-attention layers (ALBERT: num_hidden_layers * inner_group_num)."""
    layers = int(config.num_hidden_layers)
    if base_model_type(config) == "albert":
        layers *= int(config.inner_group_num)
    return layers


def attention_modules(base: nn.Module, model_type: str) -> list[nn.Module]:
    """The distinct self-attention modules of a base model, in layer order.

    ALBERT: the modules of its layer groups (each applied several times).
    """
    if model_type == "albert":
        return [
            layer.attention
            for group in base.encoder.albert_layer_groups
            for layer in group.albert_layers
        ]
    if model_type == "gpt2":
        return [block.attn for block in base.h]
    return [layer.attention.self for layer in base.encoder.layer]


def absolute_position_embedding(base: nn.Module, model_type: str) -> nn.Embedding | None:
    """The absolute position-embedding table of a base model, or None once removed."""
    table = getattr(base, "wpe", None) if model_type == "gpt2" else None
    if model_type != "gpt2":
        table = getattr(base.embeddings, "position_embeddings", None)
    return table if isinstance(table, nn.Embedding) else None


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
    """Forward pre-hook of a TISA base model: hands its scorers to the attention layers."""
    kwargs["tisa_scorers"] = module.tisa_scorers
    return args, kwargs


# --------------------------------------------------------------------------- model classes


def _init_scorer(module: ScoringFunction) -> None:
    """(Re)initialises a scorer's tensors that were not loaded, as its constructor would."""
    with torch.device("cpu"):
        fresh = build(**module.config())
    tensors = itertools.chain(
        module.named_parameters(recurse=False), module.named_buffers(recurse=False)
    )
    for name, tensor in tensors:
        hf_init.copy_(tensor, getattr(fresh, name).to(tensor.dtype))


class TisaModelMixin:
    """Mixed into each TISA model class (``TisaBertForMaskedLM`` = this + ``BertForMaskedLM``).

    Builds the stock model, installs TISA from ``config.tisa``, keeps the attention
    implementation a TISA one and initialises scoring functions that were not loaded.
    """

    _tisa_model = True

    def __init__(self, config: PreTrainedConfig, *args: Any, **kwargs: Any) -> None:
        super().__init__(config, *args, **kwargs)
        install(self, _settings_from_config(config))

    def _check_and_adjust_attn_implementation(
        self, attn_implementation: str | None, is_init_check: bool = False, **kwargs: Any
    ) -> str:
        return resolve_implementation(attn_implementation)

    def get_correct_attn_implementation(
        self, requested_attention: str | None, is_init_check: bool = False
    ) -> str:
        return resolve_implementation(requested_attention)

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, ScoringFunction):
            _init_scorer(module)
        elif not getattr(module, "_tisa_no_positions", False):
            super()._init_weights(module)


_MODEL_CLASSES: dict[type, type] = {}


def tisa_model_class(cls: type[PreTrainedModel]) -> type[PreTrainedModel]:
    """The TISA subclass of a supported transformers model class (created once, cached).

    Raises:
        ValueError: ``cls`` is not a model of a supported architecture.
    """
    if getattr(cls, "_tisa_model", False):
        return cls
    if cls in _MODEL_CLASSES:
        return _MODEL_CLASSES[cls]
    config_class = getattr(cls, "config_class", None)
    model_type = base_model_type(config_class) if config_class is not None else ""
    new = type(
        f"Tisa{cls.__name__}",
        (TisaModelMixin, cls),
        {"config_class": TISA_CONFIGS[model_type], "__doc__": f"{cls.__name__} with TISA."},
    )
    if cls.__module__.startswith("transformers."):
        new.__module__ = __name__
        globals()[new.__name__] = new  # importable by name, so models pickle
    _MODEL_CLASSES[cls] = new
    return new


_AUTO_CLASSES = (
    (AutoModel, "MODEL_MAPPING_NAMES"),
    (AutoModelForPreTraining, "MODEL_FOR_PRETRAINING_MAPPING_NAMES"),
    (AutoModelForMaskedLM, "MODEL_FOR_MASKED_LM_MAPPING_NAMES"),
    (AutoModelForCausalLM, "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES"),
    (AutoModelForSequenceClassification, "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES"),
    (AutoModelForTokenClassification, "MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES"),
    (AutoModelForQuestionAnswering, "MODEL_FOR_QUESTION_ANSWERING_MAPPING_NAMES"),
    (AutoModelForMultipleChoice, "MODEL_FOR_MULTIPLE_CHOICE_MAPPING_NAMES"),
    (AutoModelForNextSentencePrediction, "MODEL_FOR_NEXT_SENTENCE_PREDICTION_MAPPING_NAMES"),
)


def register_auto_classes() -> None:
    """Registers the TISA configs with AutoConfig, the model classes with AutoModel*.

    Also maps each TISA config to the stock architecture's tokenizer, so ``AutoTokenizer``
    works on a saved TISA model folder whose tokenizer files do not name their class.
    """
    for model_type, config_class in TISA_CONFIGS.items():
        AutoConfig.register(config_class.model_type, config_class, exist_ok=True)
        tokenizer = getattr(transformers, TOKENIZER_MAPPING_NAMES.get(model_type) or "", None)
        if tokenizer is not None:
            AutoTokenizer.register(config_class, tokenizer_class=tokenizer, exist_ok=True)
        for auto_class, mapping in _AUTO_CLASSES:
            name = getattr(modeling_auto, mapping).get(model_type)  # e.g. "BertForMaskedLM"
            if isinstance(name, str):
                model_class = tisa_model_class(getattr(transformers, name))
                auto_class.register(config_class, model_class, exist_ok=True)


# -------------------------------------------------------------------------------- install


def install(model: PreTrainedModel, settings: dict[str, Any]) -> None:
    """Installs TISA into a stock model in place (see the module docstring).

    ``settings`` come from :func:`make_settings` and are stored as ``config.tisa``. The
    caller checks that the model can take them (:func:`tisa.hf.add_tisa` does).
    """
    model_type = base_model_type(model.config)
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
    for index, module in enumerate(attention_modules(base, model_type)):
        if model_type == "albert":
            index %= int(config.inner_group_num)  # index inside its layer group
        module.tisa_layer = index
    if model_type == "albert":
        base.encoder.__class__ = TisaAlbertTransformer
    scorers = nn.ModuleList()
    if settings["scoring"] is not None:
        count = 1 if settings["share_across_layers"] else num_layers(config)
        scorers.extend(build(**settings["scoring"]) for _ in range(count))
        reference = next(model.parameters(), None)
        if reference is not None:
            scorers.to(device=reference.device, dtype=reference.dtype)
    base.tisa_scorers = scorers
    if _pass_scorers not in base._forward_pre_hooks.values():
        base.register_forward_pre_hook(_pass_scorers, with_kwargs=True)
