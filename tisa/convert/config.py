"""Settings of ``tisa convert`` and of its distillation (plain data, no heavy imports: the
command line reads them before anything else is loaded)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from tisa._validate import check_int

__all__ = ["ConvertConfig", "DistillSettings"]


Train = Literal["scoring", "all"]


@dataclass(frozen=True)
class DistillSettings:
    """Plain-data settings of a distillation run.

    Attributes:
        steps: optimiser steps (0 skips distillation).
        train: which parameters are trained: the scoring functions only (``"scoring"``)
            or every parameter (``"all"``).
        learning_rate: learning rate of the non-scoring parameters (``train="all"``).
        tisa_learning_rate: learning rate of the scoring parameters.
        tokens_per_batch: about this many tokens per step (batch = tokens // length).
        min_length: shortest block (lengths are drawn log-uniformly).
        max_length: longest block (capped at the original's positions).
        pooled_weight: weight of the pooled-embedding term (0 for models that are not
            sentence encoders).
        order_weight: weight of the word-order term (0: none). When above 0, half the
            blocks of each step are twins of the other half with adjacent tokens swapped
            (one pair per 64 tokens), and the student's change from block to twin, layer
            by layer, is fitted to the teacher's (:func:`tisa.convert.distill.order_loss`).
        attention_weight: weight of the attention-map term (0: none). When above 0, both
            models run eager attention and the loss adds the mean KL divergence from the
            teacher's attention probabilities to the student's, over every layer, head
            and query (:func:`tisa.convert.distill.attention_loss`).
        long_weight: weight of the long-input term (0: none). When above 0, every step
            also draws one block of ``long_length`` tokens; the teacher reads it in
            windows of ``max_length`` tokens whose starts are half a window apart, each
            token taking the teacher's states from the window in which it lies nearest the
            middle (:func:`tisa.convert.distill.windowed_states`), and the student, reading
            the whole block in one pass, is fitted to those states as to a short block's.
        long_length: tokens of the long block (more than ``max_length``).
        long_every: draw the long block on every ``long_every``-th step only (steps 0,
            K, 2K, ...), which divides the term's cost by K.
        warmup: share of the steps with a linearly rising learning rate.
        seed: seed of the block sampler and of the conversion.
        save_every: checkpoint interval in steps.
    """

    steps: int = 300
    train: Train = "all"
    learning_rate: float = 2e-5
    tisa_learning_rate: float = 1e-2
    tokens_per_batch: int = 4096
    min_length: int = 16
    max_length: int = 512
    pooled_weight: float = 1.0
    order_weight: float = 0.0
    attention_weight: float = 0.0
    long_weight: float = 0.0
    long_length: int = 2048
    long_every: int = 1
    warmup: float = 0.1
    seed: int = 0
    save_every: int = 50

    def __post_init__(self) -> None:
        check_int(self.steps, "steps", minimum=0)
        check_int(self.tokens_per_batch, "tokens_per_batch")
        check_int(self.min_length, "min_length", minimum=4)
        check_int(self.max_length, "max_length", minimum=4)
        check_int(self.save_every, "save_every")
        if self.min_length > self.max_length:
            raise ValueError(
                f"min_length ({self.min_length}) must not exceed max_length ({self.max_length})"
            )
        if self.train not in ("scoring", "all"):
            raise ValueError(f"train must be 'scoring' or 'all', got {self.train!r}")
        for name in ("learning_rate", "tisa_learning_rate"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")
        if not (self.pooled_weight >= 0 and 0 <= self.warmup < 1):
            raise ValueError(
                f"pooled_weight must be >= 0 and warmup in [0, 1), got {self.pooled_weight!r}, "
                f"{self.warmup!r}"
            )
        for name in ("order_weight", "attention_weight", "long_weight"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        check_int(self.long_length, "long_length", minimum=4)
        check_int(self.long_every, "long_every")
        if self.long_weight > 0 and self.long_length <= self.max_length:
            raise ValueError(
                f"long_length ({self.long_length}) must exceed max_length ({self.max_length}) "
                "when long_weight is above 0"
            )


def _optional_int(name: str):
    """The ``parse`` of an ``--option N|none``: a number, or ``none`` for None."""

    def parse(value: int | str | None) -> int | None:
        if value is None or isinstance(value, int):
            return value
        if value.strip().lower() == "none":
            return None
        try:
            return int(value)
        except ValueError:
            raise ValueError(f"{name}: expected an integer or 'none', got {value!r}") from None

    return parse


def _length_scale(value: int | str | None) -> int | str | None:
    """``--length-scale``: a number of tokens, ``auto`` or ``none``."""
    if value is None or isinstance(value, int):
        return value
    text = value.strip().lower()
    if text in ("auto", "none"):
        return None if text == "none" else "auto"
    try:
        return int(text)
    except ValueError:
        raise ValueError(
            f"length_scale: expected a number of tokens, 'auto' or 'none', got {value!r}"
        ) from None


@dataclass(frozen=True)
class ConvertConfig:
    """What ``tisa convert`` does (plain data; validated on construction).

    Attributes:
        model: HF model id or local folder of a BERT-family model with absolute positions
            (BERT, RoBERTa, ALBERT, ELECTRA).
        output_dir: the run folder.
        num_kernels: RBF kernels per head S.
        near_offsets: K: every scorer also gets a free value per head and offset in
            [-K, K], set by the fit to what the kernels miss there (the measured profile
            exactly) and distilled with them; None (the default): kernels only. At
            offsets beyond +-K (every offset past the original's table among them) the
            scorers are the kernels alone.
        content_offsets: K: every layer also gets a relative content term
            (``tisa.hf.TisaSettings.content_offsets``: logits q_i . rk(j - i) +
            k_j . rq(j - i), offsets clipped to +-K), zero after the fit and learned in
            the distillation at ``tisa_learning_rate``; None (the default): none.
        content_beyond: what the content term gives offsets beyond +-K: ``"clip"`` the
            vectors of +-K, ``"zero"`` nothing (``tisa.hf.TisaSettings.content_beyond``).
        fit_layers: which layers' scorers are fitted before distillation: ``"all"``
            (each layer to its own measured positional term), ``"first"`` (layer 1; the
            rest start at zero) or ``"none"``.
        fold_positions: fold the mean of the first N position rows into the token-type
            embeddings (None: fold nothing).
        fit_length: tokens per text block for measuring the attention profiles.
        fit_blocks: number of blocks.
        distill: the distillation settings (``steps=0`` skips distillation; its seed is
            the seed of the whole conversion).
        eval_texts: Penn Treebank test sentences for the fidelity figure.
        length_scale: log-n scaling of the converted model's attention beyond N tokens
            (``tisa.hf.TisaSettings.length_scale``): None (the default) leaves attention
            unscaled at every length, ``"auto"`` takes N = the longest distillation length
            (the original's table, 512 for BERT), a number sets N. On held-out draws of
            the long-input tasks, scaling at 512 was no better on the whole, and no
            difference by task survived the correction (docs/convert.md).
        lengths: input lengths beyond the table to run the converted model on.
        glue_dir: classic glue_data folder for STS-B dev (default: found like ``tisa glue``
            does; without one the STS-B figures are left out, and the report says so).
        max_sts_pairs: evaluate on the first N STS-B dev pairs only (default all 1,500).
        train_file: plain text (one text per line) for fitting and distillation instead
            of the Penn Treebank training set.
        eval_file: plain text for the fidelity and long-input figures instead of the Penn
            Treebank test set.
        overwrite: redo a finished conversion in ``output_dir``.
        progress: show progress bars.
    """

    model: str = field(metadata={"cli": {"positional": True}})
    output_dir: str = "runs/convert"
    num_kernels: int = 5
    near_offsets: int | None = field(
        default=None,
        metadata={
            "cli": {"type": str, "parse": _optional_int("near_offsets"), "metavar": "K|none"}
        },
    )
    content_offsets: int | None = field(
        default=None,
        metadata={
            "cli": {"type": str, "parse": _optional_int("content_offsets"), "metavar": "K|none"}
        },
    )
    content_beyond: Literal["clip", "zero"] = "clip"
    fit_layers: Literal["all", "first", "none"] = "all"
    fold_positions: int | None = field(
        default=128,
        metadata={
            "cli": {"type": str, "parse": _optional_int("fold_positions"), "metavar": "N|none"}
        },
    )
    fit_length: int = 256
    fit_blocks: int = 16
    distill: DistillSettings = field(
        default_factory=DistillSettings, metadata={"cli": {"skip": True}}
    )
    eval_texts: int = 1000
    length_scale: int | str | None = field(
        default=None,
        metadata={"cli": {"type": str, "parse": _length_scale, "metavar": "N|auto|none"}},
    )
    lengths: tuple[int, ...] = (1024, 2048, 4096)
    glue_dir: str | None = None
    max_sts_pairs: int | None = None
    train_file: str | None = None
    eval_file: str | None = None
    overwrite: bool = False
    progress: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model:
            raise ValueError(f"model: expected a model id or folder, got {self.model!r}")
        check_int(self.num_kernels, "num_kernels")
        if self.fit_layers not in ("all", "first", "none"):
            raise ValueError(f"fit_layers: expected all, first or none, got {self.fit_layers!r}")
        check_int(self.fold_positions, "fold_positions", optional=True)
        check_int(self.fit_length, "fit_length", minimum=8)
        check_int(self.near_offsets, "near_offsets", minimum=0, optional=True)
        if self.near_offsets is not None and self.near_offsets > self.fit_length - 3:
            raise ValueError(
                f"near_offsets: {self.near_offsets} reaches beyond the offsets measured in "
                f"blocks of fit_length {self.fit_length} (at most {self.fit_length - 3})"
            )
        check_int(self.content_offsets, "content_offsets", optional=True)
        if self.content_beyond not in ("clip", "zero"):
            raise ValueError(
                f"content_beyond: expected clip or zero, got {self.content_beyond!r}"
            )
        if self.content_beyond != "clip" and self.content_offsets is None:
            raise ValueError("content_beyond: needs --content-offsets K (a content term)")
        check_int(self.fit_blocks, "fit_blocks")
        check_int(self.eval_texts, "eval_texts")
        object.__setattr__(self, "length_scale", _length_scale(self.length_scale))
        if self.length_scale != "auto":
            check_int(self.length_scale, "length_scale", minimum=2, optional=True)
        check_int(self.max_sts_pairs, "max_sts_pairs", optional=True)
        object.__setattr__(self, "lengths", tuple(check_int(n, "lengths", 3) for n in self.lengths))
        if not isinstance(self.distill, DistillSettings):
            raise ValueError(
                f"distill: expected DistillSettings, got {type(self.distill).__name__}"
            )
