"""TISA model types for transformers: configs, model classes, Auto registration.

Each architecture TISA supports gets a registered model type, ``tisa_<type>``
(``tisa_bert``, ``tisa_albert``, ``tisa_roberta``, ``tisa_electra``, ``tisa_gpt2``): a config
class that adds one field, ``tisa`` (plain data, see :mod:`tisa.hf.settings`), and one model
class per head (``TisaBertForMaskedLM`` subclasses ``BertForMaskedLM``, ...). The model
classes build the stock model and then install TISA into it (:func:`install`),
so ``from_config`` and ``from_pretrained`` through the Auto classes give TISA models, and a
saved TISA model reloads bit-exactly (the scoring functions are ordinary parameters in the
state dict).
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

import torch
import transformers
from huggingface_hub.dataclasses import strict
from torch import nn
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
from transformers.models.auto import modeling_auto
from transformers.models.auto.tokenization_auto import TOKENIZER_MAPPING_NAMES
from transformers.utils.output_capturing import _CAN_RECORD_REGISTRY

from tisa.hf.architectures import FAMILIES, stock_model_type
from tisa.hf.attention_fn import IMPLEMENTATIONS
from tisa.hf.settings import stored_settings
from tisa.hf.surgery import (
    TisaAlbertTransformer,
    pass_scorers,
    remove_absolute_positions,
    tisa_kwargs,
)
from tisa.scoring import RelativeContent, ScoringFunction, build

__all__ = [
    "TISA_FAMILY_NAMES",
    "TISA_CONFIGS",
    "TisaAlbertConfig",
    "TisaBertConfig",
    "TisaElectraConfig",
    "TisaGPT2Config",
    "TisaModelMixin",
    "TisaRobertaConfig",
    "install",
    "base_model_type",
    "register_auto_classes",
    "resolve_implementation",
    "tisa_model_class",
]

#: model_type -> readable name, for the architectures TISA can be installed in.
TISA_FAMILY_NAMES: dict[str, str] = {
    "bert": "BERT",
    "albert": "ALBERT",
    "roberta": "RoBERTa",
    "electra": "ELECTRA",
    "gpt2": "GPT-2",
}


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


def base_model_type(config: Any) -> str:
    """The stock model type of a (TISA or stock) config: ``"tisa_bert"`` -> ``"bert"``.

    Raises:
        ValueError: not one of the architectures TISA supports.
    """
    base = stock_model_type(config)
    if base not in TISA_FAMILY_NAMES:
        supported = ", ".join(f"{name} ({t!r})" for t, name in TISA_FAMILY_NAMES.items())
        raise ValueError(
            f"model: TISA supports {supported}; got model_type "
            f"{getattr(config, 'model_type', '')!r}"
        )
    return base


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


def _init_scorer(module: ScoringFunction) -> None:
    """(Re)initialises a scorer's tensors that were not loaded, as its constructor would."""
    with torch.device("cpu"):
        fresh = build(**module.config())
    # recurse: a family may hold submodules (FIRE's MLP)
    start = dict(itertools.chain(fresh.named_parameters(), fresh.named_buffers()))
    tensors = itertools.chain(module.named_parameters(), module.named_buffers())
    for name, tensor in tensors:
        hf_init.copy_(tensor, start[name].to(tensor.dtype))


class TisaModelMixin:
    """Mixed into each TISA model class (``TisaBertForMaskedLM`` = this + ``BertForMaskedLM``).

    Builds the stock model, installs TISA from ``config.tisa``, keeps the attention
    implementation a TISA one and initialises scoring functions that were not loaded.
    """

    _tisa_model = True

    def __init__(self, config: PreTrainedConfig, *args: Any, **kwargs: Any) -> None:
        super().__init__(config, *args, **kwargs)
        install(self, stored_settings(config))

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
        elif isinstance(module, RelativeContent):  # starts at zero: no term until trained
            hf_init.zeros_(module.key_vectors)
            hf_init.zeros_(module.query_vectors)
        elif not getattr(module, "_tisa_no_positions", False):
            super()._init_weights(module)


_MODEL_CLASSES: dict[type, type] = {}


def _forward_with_scorers(forward):
    """``forward`` of a stock class, handing a TISA base model's scorers to its layers.

    The base model's forward pre-hook does that when the model is called; this covers
    callers that run ``model.forward(...)`` itself, which skips the hooks
    (sentence-transformers does). The signature stays the stock one (``functools.wraps``):
    the Trainer and sentence-transformers read it to choose the inputs they pass.
    """

    @functools.wraps(forward)
    def wrapped(self, *args: Any, **kwargs: Any):
        # only the base model holds them
        if getattr(self, "tisa_scorers", None) is not None and "tisa_scorers" not in kwargs:
            kwargs.update(tisa_kwargs(self))
        return forward(self, *args, **kwargs)

    return wrapped


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
        {
            "config_class": TISA_CONFIGS[model_type],
            "__doc__": f"{cls.__name__} with TISA.",
            "forward": _forward_with_scorers(cls.forward),
        },
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


def install(model: PreTrainedModel, settings: dict[str, Any]) -> None:
    """Installs TISA into a stock model in place (see the module docstring).

    ``settings`` is the plain data of :meth:`tisa.hf.TisaSettings.to_config`, stored as
    ``config.tisa``. The caller checks that the model can take them (:func:`add_tisa`
    does).
    """
    model_type = base_model_type(model.config)
    layout = FAMILIES[model_type]
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
        remove_absolute_positions(base, model_type)
    for index, module in enumerate(layout.attention_modules(base)):
        if model_type == "albert":
            index %= int(config.inner_group_num)  # index inside its layer group
        module.tisa_layer = index
    if model_type == "albert":
        base.encoder.__class__ = TisaAlbertTransformer
    count = 1 if settings["share_across_layers"] else layout.num_layers(config)
    reference = next(model.parameters(), None)  # where the model's weights live

    def per_layer(make) -> nn.ModuleList:
        modules = nn.ModuleList(make() for _ in range(count))
        if reference is not None:
            modules.to(device=reference.device, dtype=reference.dtype)
        return modules

    base.tisa_scorers = nn.ModuleList()
    if settings["scoring"] is not None:
        base.tisa_scorers = per_layer(lambda: build(**settings["scoring"]))
    if settings.get("content_offsets") is not None:
        heads = int(config.num_attention_heads)
        base.tisa_content = per_layer(lambda: RelativeContent(
            heads, int(config.hidden_size) // heads, settings["content_offsets"],
            settings.get("content_beyond", "clip")))
    if pass_scorers not in base._forward_pre_hooks.values():
        base.register_forward_pre_hook(pass_scorers, with_kwargs=True)
