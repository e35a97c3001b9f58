"""Public entry points: put TISA into a model or a config, list its scorers, count parameters."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from torch import nn
from transformers import PreTrainedConfig, PreTrainedModel

from tisa.hf.models import (
    TISA_CONFIGS,
    absolute_position_embedding,
    base_model_type,
    install,
    make_settings,
    num_layers,
)
from tisa.scoring import ScoringFunction

__all__ = [
    "DEFAULT_START",
    "STARTS",
    "add_tisa",
    "is_tisa",
    "iter_scorers",
    "positional_parameters",
    "tisa_config",
]

#: Named starts for RBF scorers added to a pretrained model (scoring options of ``rbf``).
#: ``paper``: the paper's initialisation, a ~ N(0.1, 0.01^2), b ~ N(0.1, 0.01^2),
#: c ~ N(0, 5^2), which perturbs the pretrained logits from the first step; ``zero``: the
#: same offsets with zero amplitudes; ``spread``: zero amplitudes and each head's offsets
#: evenly over [-10, 10]. With zero amplitudes the model at step 0 computes exactly what the
#: original computes. Training from scratch (:func:`tisa_config`) keeps the paper's start.
STARTS: dict[str, dict[str, float]] = {
    "paper": {},
    "zero": {"amplitude_mean": 0.0, "amplitude_std": 0.0},
    "spread": {
        "amplitude_mean": 0.0,
        "amplitude_std": 0.0,
        "offset_range": 10.0,
        "offset_std": 0.0,
    },
}
#: The start :func:`add_tisa` uses for ``rbf`` unless told otherwise (chosen on held-out
#: GLUE training data, docs/glue.md).
DEFAULT_START = "spread"


def is_tisa(model: nn.Module) -> bool:
    """True when TISA has been installed in ``model`` (by :func:`add_tisa` or a TISA class)."""
    base = getattr(model, "base_model", model)
    return isinstance(getattr(base, "tisa_scorers", None), nn.ModuleList)


def add_tisa(
    model: PreTrainedModel,
    scoring: str | None = "rbf",
    num_kernels: int = 5,
    position_embeddings: str = "keep",
    share_across_layers: bool = False,
    *,
    rotary: bool = False,
    rotary_base: float = 10000.0,
    backend: str = "auto",
    start: str | None = None,
    **scoring_options: Any,
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
        scoring: a :data:`tisa.scoring.REGISTRY` family (``"rbf"``, ``"alibi"``, ``"t5"``,
            ``"kerple_log"``, ``"free"``) or None for no scoring function.
        num_kernels: kernels S per head for ``"rbf"``.
        position_embeddings: ``"keep"`` the absolute position embeddings (the paper's
            setting) or ``"remove"`` them (the model then accepts any length).
        share_across_layers: one scoring function for all layers.
        rotary: also apply rotary position embedding to queries and keys.
        rotary_base: rotary frequency base.
        backend: :func:`tisa.attention.attention` backend for the ``"tisa"`` implementation.
        start: a :data:`STARTS` name for the RBF parameters (default :data:`DEFAULT_START`,
            which leaves the pretrained model's function unchanged at step 0); other
            families start from their own defaults and take only ``"paper"``.
        **scoring_options: passed to :func:`tisa.scoring.build` (e.g. ``amplitude_mean``);
            they override the start's values.

    Returns:
        The same model object.

    Raises:
        ValueError: unsupported architecture, TISA already installed, ``"remove"`` on a
            model without absolute position embeddings, or an invalid option.
    """
    if not isinstance(model, PreTrainedModel):
        raise ValueError(
            f"model must be a transformers PreTrainedModel, got {type(model).__name__}"
        )
    model_type = base_model_type(model.config)
    scoring_options = {**start_options(scoring, start), **scoring_options}
    settings = make_settings(
        model.config,
        scoring=scoring,
        num_kernels=num_kernels,
        position_embeddings=position_embeddings,
        share_across_layers=share_across_layers,
        rotary=rotary,
        rotary_base=rotary_base,
        backend=backend,
        **scoring_options,
    )
    if (
        position_embeddings == "remove"
        and absolute_position_embedding(model.base_model, model_type) is None
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
    install(model, settings)
    model.config._attn_implementation = "tisa_eager" if previous == "eager" else "tisa"
    return model


def start_options(scoring: str | None, start: str | None) -> dict[str, float]:
    """The scoring options of a named start (:data:`STARTS`) for ``scoring``.

    Raises:
        ValueError: an unknown start, or a start other than ``"paper"`` for a family
            that is not ``"rbf"``.
    """
    if start is not None and start not in STARTS:
        raise ValueError(f"start must be one of {sorted(STARTS)} or None, got {start!r}")
    if scoring != "rbf":
        if start not in (None, "paper"):
            raise ValueError(
                f"start={start!r} applies to the 'rbf' scoring family, not {scoring!r}; "
                "other families start from their own defaults"
            )
        return {}
    return dict(STARTS[DEFAULT_START if start is None else start])


def tisa_config(
    base_config: PreTrainedConfig,
    scoring: str | None = "rbf",
    num_kernels: int = 5,
    position_embeddings: str = "keep",
    share_across_layers: bool = False,
    *,
    rotary: bool = False,
    rotary_base: float = 10000.0,
    backend: str = "auto",
    **scoring_options: Any,
) -> PreTrainedConfig:
    """A TISA config built from a stock one, for training from scratch.

    ``AutoModelForMaskedLM.from_config(tisa_config(AlbertConfig(...)))`` builds a TISA
    ALBERT directly. Arguments as in :func:`add_tisa`.

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
    settings = make_settings(
        base_config,
        scoring=scoring,
        num_kernels=num_kernels,
        position_embeddings=position_embeddings,
        share_across_layers=share_across_layers,
        rotary=rotary,
        rotary_base=rotary_base,
        backend=backend,
        **scoring_options,
    )
    data = base_config.to_dict()
    for key in ("model_type", "tisa", "architectures"):
        data.pop(key, None)
    data["tisa"] = settings
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
    for layer in range(num_layers(model.config)):
        yield layer, scorers[0] if len(scorers) == 1 else scorers[layer]


def positional_parameters(model: nn.Module) -> dict[str, int]:
    """Counts positional parameters: absolute position embeddings and TISA scorers.

    Returns:
        ``{"absolute": ..., "tisa": ..., "total": ...}``; shared scorers count once, fixed
        ones (ALiBi) count zero, and so does rotary embedding.

    Raises:
        ValueError: not a model of a supported architecture.
    """
    config = getattr(model, "config", None)
    if not isinstance(model, PreTrainedModel) or config is None:
        raise ValueError(
            f"model must be a transformers PreTrainedModel, got {type(model).__name__}"
        )
    model_type = base_model_type(config)
    table = absolute_position_embedding(model.base_model, model_type)
    absolute = table.weight.numel() if table is not None else 0
    unique = {id(s): s for _, s in iter_scorers(model)}
    tisa = sum(s.num_positional_parameters() for s in unique.values())
    return {"absolute": absolute, "tisa": tisa, "total": absolute + tisa}
