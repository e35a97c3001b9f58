"""Adding TISA to a Hugging Face model: :func:`add_tisa`, :func:`tisa_config`, and what a
TISA model holds (:func:`iter_scorers`, :func:`positional_parameters`).

What :func:`tisa.hf.model_types.install` changes in a model (the changes inside its modules
are :mod:`tisa.hf.surgery`):

- every ``PreTrainedModel`` in it becomes its TISA subclass (:mod:`tisa.hf.model_types`),
  and its config the TISA config holding the settings (``config.tisa``);
- ``base_model.tisa_scorers``: an ``nn.ModuleList`` of scoring functions, one per layer
  (or one shared by all layers), and a forward pre-hook on the base model that passes the
  list to the attention layers (see :mod:`tisa.hf.attention_fn`);
- ``base_model.tisa_content`` (only with ``content_offsets``): an ``nn.ModuleList`` of
  relative content terms (:class:`tisa.scoring.RelativeContent`), laid out as the scorers
  and handed to the attention layers by the same hook;
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

from torch import nn
from transformers import PreTrainedConfig, PreTrainedModel

from tisa.hf.architectures import FAMILIES
from tisa.hf.model_types import TISA_CONFIGS, base_model_type, install
from tisa.hf.settings import TisaSettings
from tisa.hf.surgery import NoPositionEmbedding
from tisa.scoring import ScoringFunction, build

__all__ = [
    "NoPositionEmbedding",
    "add_tisa",
    "install",
    "is_tisa",
    "iter_scorers",
    "positional_parameters",
    "tisa_config",
    "with_scoring_options",
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
            ``rotary_base``, ``backend``, ``length_scale``, ``clip_distance``) and scoring
            options of the family (e.g. ``amplitude_mean``), which override the start's
            values.

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
        and FAMILIES[model_type].position_table(model.base_model) is None
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
    layers = FAMILIES[base_model_type(model.config)].num_layers(model.config)
    for layer in range(layers):
        yield layer, scorers[0] if len(scorers) == 1 else scorers[layer]


def positional_parameters(model: nn.Module) -> dict[str, int]:
    """Counts positional parameters: absolute position embeddings, TISA scorers and
    relative content terms.

    The one count used everywhere (pretraining facts, GLUE results, the analysis).

    Returns:
        ``{"absolute": ..., "tisa": ..., "total": ...}`` (``tisa``: scorers and content
        terms); shared scorers count once, fixed
        ones (ALiBi) count zero, and so does rotary embedding.

    Raises:
        ValueError: not a model of an architecture TISA supports.
    """
    config = getattr(model, "config", None)
    if not isinstance(model, PreTrainedModel) or config is None:
        raise ValueError(
            f"model must be a transformers PreTrainedModel, got {type(model).__name__}"
        )
    table = FAMILIES[base_model_type(config)].position_table(model.base_model)
    absolute = table.weight.numel() if table is not None else 0
    unique = {id(s): s for _, s in iter_scorers(model)}
    tisa = sum(s.num_positional_parameters() for s in unique.values())
    content = getattr(model.base_model, "tisa_content", None) or []
    tisa += sum(c.num_positional_parameters() for c in content)
    return {"absolute": absolute, "tisa": tisa, "total": absolute + tisa}


def with_scoring_options(model, options: dict[str, Any], *, label: str = "model"):
    """Rebuilds every TISA scoring function of ``model`` with ``options`` changed, keeping
    its learned parameters (in place; returns the model).

    Raises:
        ValueError: a model without TISA scoring functions, an option its family does not
            take, or one that changes the parameters' shapes (e.g. ``num_kernels``).
    """
    scorers = getattr(getattr(model, "base_model", model), "tisa_scorers", None)
    if not options:
        return model
    if scorers is None or len(scorers) == 0:
        raise ValueError(f"scoring_options: {label} has no TISA scoring functions to change")
    for index, old in enumerate(scorers):
        config = {**old.config(), **options}
        new = build(**config)
        try:
            new.load_state_dict(old.state_dict())
        except RuntimeError as err:
            raise ValueError(
                f"scoring_options {sorted(options)} change the learned parameters of {label}: "
                f"{str(err).splitlines()[0]}"
            ) from err
        # where add_tisa put the scorers: the model's device and dtype
        reference = next(model.parameters())
        scorers[index] = new.to(device=reference.device, dtype=reference.dtype)
    if getattr(model.config, "tisa", None) and model.config.tisa.get("scoring"):
        model.config.tisa["scoring"] = scorers[0].config()
    return model
