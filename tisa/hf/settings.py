"""What TISA puts into a model: one frozen settings object, and how ``config.tisa`` holds it.

:class:`TisaSettings` is the single declaration of TISA's options (scoring family and its
options, position embeddings kept or removed, layer sharing, rotary, attention backend),
validated on construction. :func:`tisa.hf.add_tisa` and :func:`tisa.hf.tisa_config` take
it (or its fields as keywords), and :meth:`TisaSettings.to_config` turns it into the plain
data stored in a model's ``config.tisa``::

    {"scoring": {"name": "rbf", "num_heads": 12, "num_kernels": 5, ...} or None,
     "position_embeddings": "keep", "share_across_layers": False, "rotary": False,
     "rotary_base": 10000.0, "backend": "auto", "length_scale": None,
     "clip_distance": None}

(plus ``"attention_window": W`` when a window is set and ``"content_offsets": K`` when a
relative content term is, with ``"content_beyond"`` beside it: models without them store no
such key, so they load in versions that do not know it)

:func:`stored_settings` reads that data back (checking it) when a TISA model is built from
its config. Named starts (:data:`STARTS`) are scoring options for RBF scorers added to a
pretrained model.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from tisa.attention import BACKENDS
from tisa.scoring import REGISTRY, build
from tisa.scoring.content import BEYOND

__all__ = [
    "DEFAULT_START",
    "POSITION_EMBEDDINGS",
    "STARTS",
    "TisaSettings",
    "start_options",
    "stored_settings",
    "takes_num_kernels",
]

POSITION_EMBEDDINGS = ("keep", "remove")

#: Named starts for RBF scorers added to a pretrained model (scoring options of ``rbf``).
#: ``paper``: the paper's initialisation, a ~ N(0.1, 0.01^2), b ~ N(0.1, 0.01^2),
#: c ~ N(0, 5^2), which perturbs the pretrained logits from the first step; ``zero``: the
#: same offsets with zero amplitudes; ``spread``: zero amplitudes and each head's offsets
#: evenly over [-10, 10]. With zero amplitudes the model at step 0 computes exactly what the
#: original computes. Training from scratch (:func:`tisa.hf.tisa_config`) keeps the paper's
#: start.
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
#: The start :func:`tisa.hf.add_tisa` uses for ``rbf`` unless told otherwise: the paper's.
#: Chosen on held-out GLUE training data (``experiments/glue_protocol.py sweep``,
#: docs/glue.md), where it scored best and ``spread`` tied with it within seed noise.
DEFAULT_START = "paper"

_STORED_KEYS = (
    "scoring",
    "position_embeddings",
    "share_across_layers",
    "rotary",
    "rotary_base",
    "backend",
    "length_scale",
    "clip_distance",
    "attention_window",
    "content_offsets",
    "content_beyond",
)


@dataclass(frozen=True)
class TisaSettings:
    """TISA's options, validated on construction (the model-independent checks).

    Attributes:
        scoring: a :data:`tisa.scoring.REGISTRY` family (``"rbf"``, ``"alibi"``, ``"t5"``,
            ``"kerple_log"``, ``"free"``) or None for no scoring function.
        num_kernels: kernels S per head for a kernel family (``"rbf"``); None: the
            family's default (5). Any other family refuses it.
        position_embeddings: ``"keep"`` the absolute position embeddings (the paper's
            setting) or ``"remove"`` them (the model then accepts any length).
        share_across_layers: one scoring function for all layers.
        rotary: also apply rotary position embedding to queries and keys.
        rotary_base: rotary frequency base (> 1).
        backend: :func:`tisa.attention.attention` backend of the ``"tisa"`` implementation.
        length_scale: N: the logits of a query that sees n keys are multiplied by
            max(1, log n / log N), so that attention over inputs longer than the N tokens a
            model was trained on stays about as sharp as in training (log-n scaling,
            Chiang & Cholak 2022); None (the default): no scaling. Inputs of up to N
            tokens are unchanged.
        clip_distance: K: the scoring function reads every offset beyond +-K as +-K
            (:class:`tisa.scoring.ClippedOffsets`), so keys further than a model was
            trained on get the bias of the furthest trained offset; None (the default):
            offsets as they are. Inputs of up to K + 1 tokens are unchanged.
        attention_window: W: each query attends only to the keys within +-W tokens of it
            (a causal model: the W keys before it and itself), the scoring function
            reading -inf beyond (:class:`tisa.scoring.WindowedOffsets`); the sdpa backend
            then costs O(L * W), forward and backward (the eager backend still visits
            every key). None (the default): every key. Inputs of up to W + 1 tokens are
            unchanged.
        content_offsets: K: every layer (or one shared by all, with
            ``share_across_layers``) also adds the relative content term
            q_i . rk_h(j - i) + k_j . rq_h(j - i) to its logits
            (:class:`tisa.scoring.RelativeContent`), offsets clipped to +-K, the vectors
            zero at the start; None (the default): no such term.
        content_beyond: what the content term gives offsets beyond +-K: ``"clip"`` (the
            default) the vectors of +-K, ``"zero"`` nothing (the term then acts on the
            2K + 1 keys around each query alone, at any length).
        scoring_options: further keyword arguments of the family's constructor (e.g.
            ``amplitude_mean``).
    """

    scoring: str | None = "rbf"
    num_kernels: int | None = None
    position_embeddings: str = "keep"
    share_across_layers: bool = False
    rotary: bool = False
    rotary_base: float = 10000.0
    backend: str = "auto"
    length_scale: int | None = None
    clip_distance: int | None = None
    attention_window: int | None = None
    content_offsets: int | None = None
    content_beyond: str = "clip"
    scoring_options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "scoring_options", dict(self.scoring_options))
        if self.position_embeddings not in POSITION_EMBEDDINGS:
            raise ValueError(
                f"position_embeddings must be one of {POSITION_EMBEDDINGS}, "
                f"got {self.position_embeddings!r}"
            )
        for name in ("share_across_layers", "rotary"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be a bool, got {getattr(self, name)!r}")
        if self.content_beyond not in BEYOND:
            raise ValueError(
                f"content_beyond must be one of {BEYOND}, got {self.content_beyond!r}"
            )
        if self.content_beyond != "clip" and self.content_offsets is None:
            raise ValueError(
                f"content_beyond={self.content_beyond!r} needs content_offsets (a content term)"
            )
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {self.backend!r}")
        if not self.rotary_base > 1:
            raise ValueError(f"rotary_base must be > 1, got {self.rotary_base!r}")
        for name, least in (("length_scale", 2), ("clip_distance", 1), ("attention_window", 1),
                            ("content_offsets", 1)):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < least
            ):
                raise ValueError(
                    f"{name} must be None or a whole number of tokens >= {least}, got {value!r}"
                )
        if self.scoring is None:
            given = sorted(self.scoring_options)
            given += ["num_kernels"] if self.num_kernels is not None else []
            given += ["clip_distance"] if self.clip_distance is not None else []
            given += ["attention_window"] if self.attention_window is not None else []
            if given:
                raise ValueError(f"scoring options {given} were given but scoring is None")
            if not self.rotary and self.position_embeddings == "keep" and (
                self.content_offsets is None
            ):
                raise ValueError(
                    "nothing to add: scoring is None, rotary is False, content_offsets is None "
                    "and position_embeddings is 'keep'; choose a scoring family, rotary=True, "
                    "content_offsets or position_embeddings='remove'"
                )
            return
        if not isinstance(self.scoring, str) or self.scoring not in REGISTRY:
            raise ValueError(
                f"scoring must be one of {sorted(REGISTRY)} or None, got {self.scoring!r}"
            )
        accepts = _constructor_options(self.scoring)
        if self.num_kernels is not None and "num_kernels" not in accepts:
            raise ValueError(
                f"num_kernels applies to kernel scoring functions ('rbf'), not {self.scoring!r}"
            )
        if "num_kernels" in self.scoring_options:
            raise ValueError("num_kernels is its own field of TisaSettings, not a scoring option")
        unknown = set(self.scoring_options) - accepts
        if unknown:
            raise ValueError(
                f"scoring options {sorted(unknown)} do not apply to {self.scoring!r}; it "
                f"takes {sorted(accepts)}"
            )

    @classmethod
    def from_options(cls, **options: Any) -> TisaSettings:
        """Settings from keywords: the field names, plus scoring options of the family.

        ``TisaSettings.from_options(scoring="rbf", amplitude_mean=0.0)`` puts
        ``amplitude_mean`` into :attr:`scoring_options`.
        """
        names = {f.name for f in dataclasses.fields(cls)} - {"scoring_options"}
        scoring_options = dict(options.pop("scoring_options", None) or {})
        scoring_options.update({k: options.pop(k) for k in list(options) if k not in names})
        return cls(**options, scoring_options=scoring_options)

    def with_start(self, start: str | None) -> TisaSettings:
        """These settings with a named start (:data:`STARTS`) under the explicit options."""
        options = {**start_options(self.scoring, start), **self.scoring_options}
        return dataclasses.replace(self, scoring_options=options)

    def scorer_options(self) -> dict[str, Any]:
        """Keyword arguments of the scoring family's constructor (without ``num_heads``)."""
        extra = {} if self.num_kernels is None else {"num_kernels": self.num_kernels}
        return {**extra, **self.scoring_options}

    def to_config(self, config: Any) -> dict[str, Any]:
        """The plain data stored as ``config.tisa`` for a model with this ``config``.

        Raises:
            ValueError: options the model cannot take (rotary with an odd head size, a
                scoring option out of range).
        """
        heads = int(config.num_attention_heads)
        head_dim = int(config.hidden_size) // heads
        if self.rotary and head_dim % 2:
            raise ValueError(f"rotary needs an even head size, got {head_dim}")
        scorer = None
        if self.scoring is not None:
            with torch.device("cpu"):
                scorer = build(self.scoring, heads, **self.scorer_options()).config()
        stored = {
            "scoring": scorer,
            "position_embeddings": self.position_embeddings,
            "share_across_layers": self.share_across_layers,
            "rotary": self.rotary,
            "rotary_base": float(self.rotary_base),
            "backend": self.backend,
            "length_scale": self.length_scale,
            "clip_distance": self.clip_distance,
        }
        if self.attention_window is not None:  # named only when set (see the module doc)
            stored["attention_window"] = self.attention_window
        if self.content_offsets is not None:
            stored["content_offsets"] = self.content_offsets
            stored["content_beyond"] = self.content_beyond
        return stored


def _constructor_options(family: str) -> set[str]:
    """Keyword arguments a scoring family takes besides ``num_heads``."""
    return REGISTRY[family].option_names()


def takes_num_kernels(scoring: str | None) -> bool:
    """Whether a scoring family is built from kernels (takes ``num_kernels``)."""
    return scoring in REGISTRY and "num_kernels" in _constructor_options(scoring)


def stored_settings(config: Any) -> dict[str, Any]:
    """``config.tisa`` checked and completed with defaults for absent keys.

    Raises:
        ValueError: not a dict, unknown keys, a scoring entry that is not a
            ``ScoringFunction.config()`` of this model's head count.
    """
    raw = getattr(config, "tisa", None)
    if raw is None:
        return TisaSettings().to_config(config)
    if not isinstance(raw, dict):
        raise ValueError(f"config.tisa must be a dict, got {type(raw).__name__}")
    unknown = set(raw) - set(_STORED_KEYS)
    if unknown:
        raise ValueError(
            f"config.tisa has unknown keys {sorted(unknown)}; expected {sorted(_STORED_KEYS)}"
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
    settings = TisaSettings(
        scoring=None if scoring is None else scoring["name"],
        num_kernels=options.pop("num_kernels", None),
        position_embeddings=raw.get("position_embeddings", "keep"),
        share_across_layers=raw.get("share_across_layers", False),
        rotary=raw.get("rotary", False),
        rotary_base=raw.get("rotary_base", 10000.0),
        backend=raw.get("backend", "auto"),
        length_scale=raw.get("length_scale"),
        clip_distance=raw.get("clip_distance"),
        attention_window=raw.get("attention_window"),
        content_offsets=raw.get("content_offsets"),
        content_beyond=raw.get("content_beyond", "clip"),
        scoring_options=options,
    )
    return settings.to_config(config)


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
