"""What a pretraining run is (:class:`PretrainConfig`) and what an extrapolation
evaluation of such runs is (:class:`ExtrapolateConfig`): one declaration of every setting.

A run trains a masked LM (ALBERT or BERT) or, with ``arch="gpt2"``, a causal LM (a GPT-2
decoder, next-token loss).

``tisa pretrain`` derives its options from these fields (:mod:`tisa.cli.args`); the run
folder records them in ``pretrain_config.json``, and a resumed run must agree on the ones
that define its model and data (:data:`RESUME_KEYS`). ``tisa extrapolate`` does the same
with :class:`ExtrapolateConfig`. Plain data with no heavy imports: the command line reads
these before anything else is loaded.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tisa._validate import check_int
from tisa.pretrain.schemes import POSITIONS, PRETRAIN_ARCHS, SIZES, scoring_family

__all__ = [
    "DEFAULT_LENGTHS",
    "DEFAULT_RBF_LEARNING_RATE",
    "OWN_RATE_FAMILIES",
    "RESUME_KEYS",
    "ExtrapolateConfig",
    "PretrainConfig",
    "parse_options",
]

#: Peak learning rate of the RBF scoring parameters (``tisa``, ``absolute+tisa``,
#: ``rbf_linear``) when ``tisa_learning_rate`` is not given: the best of 5e-4 (the
#: backbone's) to 3e-1 on Penn Treebank validation loss for ``tisa``, confirmed at 2,500
#: steps for ``tisa``, ``absolute+tisa`` and ``rbf_linear`` (docs/pretraining.md).
DEFAULT_RBF_LEARNING_RATE = 1e-1

#: Scoring families whose masked LMs train their scoring parameters at
#: DEFAULT_RBF_LEARNING_RATE unless told otherwise (measured there; the others keep the
#: backbone's rate until they are).
OWN_RATE_FAMILIES = ("rbf", "rbf_linear")

#: Fields that must match when a run is resumed (they define the model and its data).
RESUME_KEYS = (
    "position",
    "size",
    "arch",
    "seq_len",
    "batch_size",
    "gradient_accumulation_steps",
    "seed",
    "dataset",
    "dataset_config",
    "train_file",
    "block_format",
    "mlm_probability",
    "max_positions",
    "num_kernels",
    "scoring_options",
    "mixed_lengths",
    "mixed_share",
    "max_train_blocks",
)


@dataclass(frozen=True)
class PretrainConfig:
    """Everything a pretraining run depends on (plain data; validated on construction).

    Attributes:
        output_dir: the run folder.
        position: position scheme (:data:`tisa.pretrain.schemes.POSITIONS`): absolute, none,
            tisa, absolute+tisa, alibi, t5, kerple_log, rbf_linear, rbf_log, rbf_logdist,
            alibi_learned, fire, rope.
        size: model size (:data:`tisa.pretrain.schemes.SIZES`): tiny, small (hidden 256,
            4 layers), base (ALBERT-base).
        arch: architecture: albert or bert (masked LM), or gpt2 (causal LM: a decoder
            trained on next-token loss).
        seq_len: tokens per training block (with [CLS] and [SEP]).
        max_steps: optimiser steps.
        batch_size: blocks per step and process.
        eval_batch_size: blocks per evaluation batch (default ``batch_size``).
        learning_rate: peak AdamW learning rate.
        tisa_learning_rate: peak learning rate of the positional scoring parameters
            (TISA kernels, tails, T5 buckets, ...), which never take weight decay; None:
            :data:`DEFAULT_RBF_LEARNING_RATE` for the RBF schemes (``tisa``,
            ``absolute+tisa``, ``rbf_linear``) of a masked LM, where it was measured;
            ``learning_rate`` otherwise. The schedule scales both alike.
        weight_decay: AdamW weight decay (not on biases, norms and scoring parameters).
        warmup: linear warm-up, a fraction of ``max_steps`` (< 1) or a number of steps.
        gradient_accumulation_steps: micro-batches per optimiser step.
        max_grad_norm: gradient clipping (0 disables it).
        seed: seed of initialisation, data order and training masks.
        eval_mask_seed: seed of the (fixed) evaluation masks, shared by all runs.
        save_steps: checkpoint every N steps.
        eval_steps: evaluate every N steps.
        logging_steps: log the training loss every N steps.
        save_total_limit: newest checkpoints kept (older ones are deleted).
        resume: continue the run in output_dir from its newest complete checkpoint
            (``True``) or from a checkpoint folder.
        overwrite: start over in a folder that already holds a run.
        dataset: ptb (Penn Treebank) or an HF dataset name / local folder.
        dataset_config: HF dataset configuration.
        train_file: plain text training file (one example per line); replaces
            ``dataset``.
        validation_file: plain text validation file.
        text_column: text column of an HF dataset.
        tokenizer: existing tokenizer (folder or Hub id); default: train a WordPiece one.
        tokenizer_cache: reuse the WordPiece tokenizer trained earlier on the same corpus
            with the same settings (:func:`tisa.data.tokenizer.cached_wordpiece`), so runs
            on one corpus share their tokenizer and can be compared token for token.
        vocab_size: vocabulary size of a trained tokenizer.
        block_format: cls_sep or plain (:mod:`tisa.data.mlm`); default cls_sep for a
            masked LM, plain for a causal LM (which takes no other).
        mlm_probability: share of positions masked (masked LM).
        max_positions: rows of the absolute position table.
        num_kernels: kernels per head of the kernel families (tisa, absolute+tisa,
            rbf_linear, rbf_log, rbf_logdist).
        scoring_options: options of the position scheme's scoring family as KEY=VALUE
            (e.g. learn_tail=false far_offset=127; values are read as numbers, true,
            false or none where they look like one).
        mixed_lengths: longer training lengths mixed into training: a share of the steps
            (mixed_share) trains on blocks of one of these lengths (drawn uniformly), with
            the batch shrunk to batch_size x seq_len / length blocks so that every step
            holds the same tokens (:mod:`tisa.data.mixed_lengths`).
        mixed_share: share of the steps at one of mixed_lengths.
        max_train_blocks: use only the first N training blocks.
        max_eval_blocks: evaluate on the first N validation blocks.
        bf16: bfloat16 autocast; default: where the machine computes it natively (GPUs
            with bf16, CPUs with AVX512-BF16 or AMX), float32 elsewhere, where bf16 is
            emulated and many times slower (:mod:`tisa.hf.precision`; asking for it
            there is warned about).
        attn_implementation: attention of the stock layers: sdpa or eager.
        num_workers: data-loader worker processes.
        progress: show progress bars.
        tensorboard: also log to TensorBoard (default: when it is installed).
    """

    output_dir: str
    position: str = "absolute"
    size: str = "small"
    arch: str = "albert"
    seq_len: int = 128
    max_steps: int = 1000
    batch_size: int = 32
    eval_batch_size: int | None = None
    learning_rate: float = 5e-4
    tisa_learning_rate: float | None = None
    weight_decay: float = 0.01
    warmup: float = field(
        default=0.06, metadata={"cli": {"parse": lambda v: v if v < 1 else int(v)}}
    )
    gradient_accumulation_steps: int = field(default=1, metadata={"cli": {"flag": "--grad-accum"}})
    max_grad_norm: float = 1.0
    seed: int = 42
    eval_mask_seed: int = 0
    save_steps: int = 500
    eval_steps: int = 500
    logging_steps: int = 50
    save_total_limit: int = 3
    resume: bool | str = field(
        default=False, metadata={"cli": {"nargs": "?", "const": True, "metavar": "CHECKPOINT"}}
    )
    overwrite: bool = False
    dataset: str = "ptb"
    dataset_config: str | None = None
    train_file: str | None = None
    validation_file: str | None = None
    text_column: str = "text"
    tokenizer: str | None = None
    tokenizer_cache: bool = True
    vocab_size: int = 30000
    block_format: str | None = None
    mlm_probability: float = 0.15
    max_positions: int = 512
    num_kernels: int = 5
    scoring_options: tuple[str, ...] = field(default=(), metadata={"cli": {"metavar": "KEY=VALUE"}})
    mixed_lengths: tuple[int, ...] = ()
    mixed_share: float = 0.15
    max_train_blocks: int | None = None
    max_eval_blocks: int | None = None
    bf16: bool | None = None
    attn_implementation: str = "sdpa"
    num_workers: int = 0
    progress: bool = True
    tensorboard: bool | None = None

    def __post_init__(self) -> None:
        # torch and transformers load here, when a config is checked: importing it stays light
        from tisa.data.mlm import BLOCK_FORMATS

        if not self.output_dir:
            raise ValueError("output_dir must be a folder path, got an empty string")
        _choice("position", self.position, POSITIONS)
        _choice("size", self.size, tuple(SIZES))
        _choice("arch", self.arch, PRETRAIN_ARCHS)
        if self.block_format is None:
            object.__setattr__(self, "block_format", "plain" if self.causal else "cls_sep")
        _choice("block_format", self.block_format, BLOCK_FORMATS)
        if self.causal and self.block_format != "plain":
            raise ValueError(
                f"block_format must be 'plain' for a causal LM (arch='gpt2'), got "
                f"{self.block_format!r}: the [CLS] ... [SEP] frame is for masked LMs"
            )
        object.__setattr__(self, "scoring_options", tuple(self.scoring_options))
        self.scoring_options_dict()  # checks the options against the scheme's family
        _choice("attn_implementation", self.attn_implementation, ("sdpa", "eager"))
        for name in (
            "seq_len",
            "max_steps",
            "batch_size",
            "gradient_accumulation_steps",
            "save_steps",
            "eval_steps",
            "logging_steps",
            "save_total_limit",
            "vocab_size",
            "max_positions",
            "num_kernels",
        ):
            check_int(getattr(self, name), name)
        for name in ("eval_batch_size", "max_train_blocks", "max_eval_blocks"):
            check_int(getattr(self, name), name, optional=True)
        for name in ("seed", "eval_mask_seed", "num_workers"):
            check_int(getattr(self, name), name, minimum=0)
        if self.seq_len < 3:
            raise ValueError(f"seq_len must be >= 3, got {self.seq_len}")
        object.__setattr__(self, "mixed_lengths", tuple(self.mixed_lengths))
        if self.mixed_lengths:
            from tisa.data.mixed_lengths import check_mixed_lengths  # torch: see above

            lengths = check_mixed_lengths(
                self.mixed_lengths,
                self.mixed_share,
                seq_len=self.seq_len,
                batch_size=self.batch_size,
            )
            object.__setattr__(self, "mixed_lengths", lengths)
        longest = max((self.seq_len, *self.mixed_lengths))
        if self.position in ("absolute", "absolute+tisa") and longest > self.max_positions:
            what = "seq_len" if longest == self.seq_len else "the longest of mixed_lengths"
            raise ValueError(
                f"{what} ({longest}) exceeds max_positions ({self.max_positions}), the "
                f"size of the absolute position table of position={self.position!r}; raise "
                "max_positions or use a scheme without absolute embeddings"
            )
        if not (isinstance(self.learning_rate, int | float) and self.learning_rate > 0):
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate!r}")
        lr = self.tisa_learning_rate
        if lr is not None and not (isinstance(lr, int | float) and lr > 0):
            raise ValueError(f"tisa_learning_rate must be > 0 or None, got {lr!r}")
        if lr is None and scoring_family(self.position) in OWN_RATE_FAMILIES and not self.causal:
            object.__setattr__(self, "tisa_learning_rate", DEFAULT_RBF_LEARNING_RATE)
        if not (isinstance(self.weight_decay, int | float) and self.weight_decay >= 0):
            raise ValueError(f"weight_decay must be >= 0, got {self.weight_decay!r}")
        if not (isinstance(self.warmup, int | float) and self.warmup >= 0):
            raise ValueError(f"warmup must be >= 0 (a fraction < 1 or steps), got {self.warmup!r}")
        if self.warmup >= 1 and float(self.warmup) != int(self.warmup):
            raise ValueError(f"warmup >= 1 counts steps and must be whole, got {self.warmup!r}")
        if not (isinstance(self.max_grad_norm, int | float) and self.max_grad_norm >= 0):
            raise ValueError(f"max_grad_norm must be >= 0, got {self.max_grad_norm!r}")
        if not 0.0 < self.mlm_probability < 1.0:
            raise ValueError(f"mlm_probability must be in (0, 1), got {self.mlm_probability!r}")
        if self.resume is not False and self.overwrite:
            raise ValueError("resume and overwrite exclude each other")
        if self.train_file is None and self.validation_file is not None:
            raise ValueError("validation_file needs train_file as well")

    @property
    def causal(self) -> bool:
        """True for a causal LM (``arch="gpt2"``), False for a masked LM."""
        return self.arch == "gpt2"

    def scoring_options_dict(self) -> dict[str, Any]:
        """:attr:`scoring_options` as keyword arguments of the scheme's scoring family.

        Raises:
            ValueError: a malformed item, options for a scheme without a scoring
                function, or an option the family does not take.
        """
        # torch and transformers load here, when a config is checked: importing it stays light
        from tisa.hf import TisaSettings

        options = parse_options(self.scoring_options, "scoring_options")
        if not options:
            return options
        family = scoring_family(self.position)
        if family is None:
            raise ValueError(
                f"scoring_options {sorted(options)} were given, but position="
                f"{self.position!r} has no scoring function"
            )
        if "num_kernels" in options:
            raise ValueError("scoring_options: num_kernels is its own setting (--num-kernels)")
        TisaSettings(scoring=family, scoring_options=options)  # names unknown options
        return options

    def to_dict(self) -> dict[str, Any]:
        """Plain-data view (JSON serialisable)."""
        out = dataclasses.asdict(self)
        out["scoring_options"] = list(self.scoring_options)
        out["mixed_lengths"] = list(self.mixed_lengths)
        return out


def parse_options(items: Sequence[str], name: str) -> dict[str, Any]:
    """``("learn_tail=false", "far_offset=127")`` -> ``{"learn_tail": False, "far_offset": 127}``.

    Values that read as an int or a float become numbers; ``true`` / ``false`` / ``none``
    (any case) become True / False / None; anything else stays a string.

    Raises:
        ValueError: an item without ``=``, an empty key, or a key given twice.
    """
    out: dict[str, Any] = {}
    for item in items:
        key, sep, text = str(item).partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"{name} must be KEY=VALUE items, got {item!r}")
        if key in out:
            raise ValueError(f"{name}: {key!r} is given twice")
        out[key] = _value(text.strip())
    return out


def _value(text: str) -> Any:
    words = {"true": True, "false": False, "none": None}
    if text.lower() in words:
        return words[text.lower()]
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _choice(name: str, value: Any, choices: Sequence[str]) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {tuple(choices)}, got {value!r}")


DEFAULT_LENGTHS: tuple[int, ...] = (128, 256, 512, 1024, 2048)


@dataclass(frozen=True)
class ExtrapolateConfig:
    """Settings of an extrapolation evaluation (validated on construction).

    Attributes:
        runs: run folders (from ``tisa pretrain``) or saved model folders.
        lengths: evaluation lengths L (tokens per block, special tokens included).
        eval_file: plain text file (one example per line); default Penn Treebank test.
        max_tokens: text tokens scored per run and length (the first ones of the text).
        mask_seed: seed of the evaluation masks (the same for all runs and lengths).
        mlm_probability: share of positions masked (masked LMs).
        stride: causal LMs: sliding windows of L tokens advancing by this many, each
            token scored once with up to L - 1 tokens of context (must not exceed any
            length); None: non-overlapping blocks.
        context_curve: window lengths c of the context curve (loss on fixed target
            spans against the context around them); empty: no curve.
        context_span: tokens per target span of the context curve.
        context_spans: target spans of the context curve.
        scoring_options: options of every TISA scoring function changed before scoring,
            as KEY=VALUE (e.g. far_offset=127); options that would change the learned
            parameters' shapes are refused.
        length_scale: log-n scaling past N keys for every run with TISA attention
            (``tisa.hf.TisaSettings.length_scale``); None: as saved.
        clip_distance: read every offset beyond +-K as +-K in every run with TISA
            attention (``tisa.hf.TisaSettings.clip_distance``); None: as saved.
        batch_tokens: tokens per forward pass (the batch is max(1, batch_tokens // L)).
        output_dir: folder for the table and plot; None writes nothing.
        device: torch device (cpu, cuda, ...); default: CUDA when available.
        progress: show progress bars.
    """

    runs: tuple[str, ...] = field(metadata={"cli": {"positional": True, "metavar": "RUN"}})
    lengths: tuple[int, ...] = DEFAULT_LENGTHS
    eval_file: str | None = None
    max_tokens: int = 65536
    mask_seed: int = 0
    mlm_probability: float = 0.15
    stride: int | None = None
    context_curve: tuple[int, ...] = ()
    context_span: int = 32
    context_spans: int = 128
    scoring_options: tuple[str, ...] = field(default=(), metadata={"cli": {"metavar": "KEY=VALUE"}})
    length_scale: int | None = field(default=None, metadata={"cli": {"metavar": "N"}})
    clip_distance: int | None = field(default=None, metadata={"cli": {"metavar": "K"}})
    batch_tokens: int = 16384
    output_dir: str | None = "runs/extrapolate"
    device: str | None = None
    progress: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "runs", tuple(str(r) for r in self.runs))
        object.__setattr__(self, "lengths", tuple(self.lengths))
        if not self.runs:
            raise ValueError("runs must name at least one run or model folder")
        if not self.lengths:
            raise ValueError("lengths must hold at least one length")
        for length in self.lengths:
            check_int(length, "lengths", minimum=3)
        if len(set(self.lengths)) != len(self.lengths):
            raise ValueError(f"lengths must be distinct, got {list(self.lengths)}")
        for name in ("max_tokens", "batch_tokens"):
            check_int(getattr(self, name), name)
        check_int(self.mask_seed, "mask_seed", minimum=0)
        if not 0.0 < self.mlm_probability < 1.0:
            raise ValueError(f"mlm_probability must be in (0, 1), got {self.mlm_probability!r}")
        check_int(self.stride, "stride", optional=True)
        if self.stride is not None and self.stride > min(self.lengths):
            raise ValueError(
                f"stride ({self.stride}) must not exceed the shortest length ({min(self.lengths)})"
            )
        object.__setattr__(self, "context_curve", tuple(self.context_curve))
        check_int(self.context_span, "context_span")
        check_int(self.context_spans, "context_spans")
        for context in self.context_curve:
            check_int(context, "context_curve", minimum=self.context_span + 3)
        if len(set(self.context_curve)) != len(self.context_curve):
            raise ValueError(f"context_curve must be distinct, got {list(self.context_curve)}")
        if self.eval_file is not None and not Path(self.eval_file).is_file():
            raise ValueError(f"eval_file: no such file: {self.eval_file!r}")
        object.__setattr__(self, "scoring_options", tuple(self.scoring_options))
        parse_options(self.scoring_options, "scoring_options")
        check_int(self.length_scale, "length_scale", minimum=2, optional=True)
        check_int(self.clip_distance, "clip_distance", optional=True)
