"""Masked-LM pretraining with any position scheme: ``tisa pretrain``.

    tisa pretrain --position absolute+tisa --size small --seq-len 128 \\
        --max-steps 20000 --output-dir runs/albert-small-tisa

Pipeline: corpus (:mod:`tisa.data.corpus`) -> WordPiece tokenizer trained on it (or one
given with ``--tokenizer``) -> fixed-length blocks with reproducible dynamic masking
(:mod:`tisa.data.mlm`) -> a masked-only ALBERT/BERT of a named size with the chosen
position scheme (:mod:`tisa.train.models`) -> the Hugging Face Trainer (AdamW, linear
warm-up and decay, evaluation and checkpoints every N steps).

The run folder (``--output-dir``) holds::

    pretrain_config.json   the configuration plus model facts (parameters, vocabulary)
    tokenizer/             the tokenizer (also inside every checkpoint and model/)
    checkpoint-<step>/     Trainer checkpoints (model, optimiser, scheduler, RNG, state)
    model/                 the final model + tokenizer (save_pretrained layout)
    metrics.jsonl, .csv    step, train loss, eval loss and perplexity, lr, tokens/s
    ti.jsonl               translation invariance at each checkpoint (absolute runs)
    results.json           final evaluation

Checkpoints are atomic (:class:`tisa.checkpoints.AtomicCheckpoints`): each is written into
``.staging/`` and renamed to ``checkpoint-<step>`` only when complete, so a folder with that
name is always a finished checkpoint. ``--resume`` continues from the newest one; since
masks are a function of (seed, epoch, block) and the Trainer restores the optimiser,
scheduler, RNG and data position, a resumed run reaches the same weights and losses as an
uninterrupted one.

The same command runs data-parallel under ``torchrun --nproc_per_node N`` or
``accelerate launch`` (NCCL on GPUs, gloo on CPUs); ``--batch-size`` is per process.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import os
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tisa._validate import check_int
from tisa.files import write_json

__all__ = [
    "HELP",
    "PretrainConfig",
    "add_arguments",
    "config_from_args",
    "pretrain",
    "pretrain_or_reuse",
    "run",
]

HELP = "Pretrain a masked language model with a chosen position scheme (absolute, TISA, ...)."

logger = logging.getLogger(__name__)

#: Fields that must match when a run is resumed (they define the model and its data).
_RESUME_KEYS = (
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
    "max_train_blocks",
)
_POSITION_HELP = "absolute, none, tisa, absolute+tisa, alibi, t5, kerple_log, rope"
#: Artefacts of a run that --overwrite removes (nothing else in the folder is touched).
_RUN_FILES = (
    "pretrain_config.json",
    "tokenizer",
    "model",
    "metrics.jsonl",
    "metrics.csv",
    "ti.jsonl",
    "results.json",
    "runs",
)


@dataclass(frozen=True)
class PretrainConfig:
    """Everything a pretraining run depends on (plain data; validated on construction).

    Attributes:
        output_dir: the run folder.
        position: position scheme, one of :data:`tisa.train.models.POSITIONS`.
        size: ``"tiny"``, ``"small"`` or ``"base"`` (:data:`tisa.train.models.SIZES`).
        arch: ``"albert"`` or ``"bert"``.
        seq_len: tokens per training block (with [CLS] and [SEP]).
        max_steps: optimiser steps.
        batch_size: blocks per step and process.
        eval_batch_size: blocks per evaluation batch (default ``batch_size``).
        learning_rate: peak AdamW learning rate.
        weight_decay: AdamW weight decay.
        warmup: linear warm-up, a fraction of ``max_steps`` (< 1) or a number of steps.
        gradient_accumulation_steps: micro-batches per optimiser step.
        max_grad_norm: gradient clipping (0 disables it).
        seed: seed of initialisation, data order and training masks.
        eval_mask_seed: seed of the (fixed) evaluation masks, shared by all runs.
        save_steps: checkpoint every N steps.
        eval_steps: evaluate every N steps.
        logging_steps: log the training loss every N steps.
        save_total_limit: newest checkpoints kept (older ones are deleted).
        resume: ``False``, ``True`` (newest complete checkpoint in ``output_dir``) or a
            checkpoint folder.
        overwrite: start over in a folder that already holds a run.
        dataset: ``"ptb"`` or an HF dataset name / local folder.
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
        block_format: ``"cls_sep"`` or ``"plain"`` (:mod:`tisa.data.mlm`).
        mlm_probability: share of positions masked.
        max_positions: rows of the absolute position table.
        num_kernels: RBF kernels per head (TISA schemes).
        max_train_blocks: use only the first N training blocks.
        max_eval_blocks: evaluate on the first N validation blocks.
        bf16: bfloat16 autocast (GPUs with bf16, CPUs with AVX512-BF16 or AMX).
        attn_implementation: attention of the stock layers (``"sdpa"`` or ``"eager"``).
        num_workers: data-loader worker processes.
        progress: show progress bars.
        tensorboard: also log to TensorBoard (``None``: when it is installed).
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
    weight_decay: float = 0.01
    warmup: float = 0.06
    gradient_accumulation_steps: int = 1
    max_grad_norm: float = 1.0
    seed: int = 42
    eval_mask_seed: int = 0
    save_steps: int = 500
    eval_steps: int = 500
    logging_steps: int = 50
    save_total_limit: int = 3
    resume: bool | str = False
    overwrite: bool = False
    dataset: str = "ptb"
    dataset_config: str | None = None
    train_file: str | None = None
    validation_file: str | None = None
    text_column: str = "text"
    tokenizer: str | None = None
    tokenizer_cache: bool = True
    vocab_size: int = 30000
    block_format: str = "cls_sep"
    mlm_probability: float = 0.15
    max_positions: int = 512
    num_kernels: int = 5
    max_train_blocks: int | None = None
    max_eval_blocks: int | None = None
    bf16: bool = False
    attn_implementation: str = "sdpa"
    num_workers: int = 0
    progress: bool = True
    tensorboard: bool | None = None

    def __post_init__(self) -> None:
        from tisa.data.mlm import BLOCK_FORMATS
        from tisa.train.models import ARCHITECTURES, POSITIONS, SIZES

        if not self.output_dir:
            raise ValueError("output_dir must be a folder path, got an empty string")
        _choice("position", self.position, POSITIONS)
        _choice("size", self.size, tuple(SIZES))
        _choice("arch", self.arch, ARCHITECTURES)
        _choice("block_format", self.block_format, BLOCK_FORMATS)
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
        if self.position in ("absolute", "absolute+tisa") and self.seq_len > self.max_positions:
            raise ValueError(
                f"seq_len ({self.seq_len}) exceeds max_positions ({self.max_positions}), the "
                f"size of the absolute position table of position={self.position!r}; raise "
                "max_positions or use a scheme without absolute embeddings"
            )
        if not (isinstance(self.learning_rate, int | float) and self.learning_rate > 0):
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate!r}")
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

    def to_dict(self) -> dict[str, Any]:
        """Plain-data view (JSON serialisable)."""
        return dataclasses.asdict(self)


def _choice(name: str, value: Any, choices: Sequence[str]) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {tuple(choices)}, got {value!r}")


# ----------------------------------------------------------------------------- run folder


def _holds_run(run: Path) -> bool:
    from tisa.checkpoints import list_checkpoints

    return (run / "pretrain_config.json").exists() or bool(list_checkpoints(run))


def _resume_point(config: PretrainConfig, run: Path) -> Path | None:
    """Checks the run folder against the config; the checkpoint to resume from (or None)."""
    from tisa.checkpoints import latest_checkpoint

    if config.resume is False:
        if _holds_run(run) and not config.overwrite:
            raise ValueError(
                f"output_dir {str(run)!r} already holds a run; pass --resume to continue it "
                "or --overwrite to start over"
            )
        return None
    saved = run / "pretrain_config.json"
    if saved.is_file():
        previous = json.loads(saved.read_text()).get("config", {})
        changed = [
            f"{k}: {previous.get(k)!r} -> {getattr(config, k)!r}"
            for k in _RESUME_KEYS
            if k in previous and previous[k] != getattr(config, k)
        ]
        if changed:
            raise ValueError(
                "resume: the run was started with other settings (" + "; ".join(changed) + ")"
            )
    if isinstance(config.resume, str):
        ckpt = Path(config.resume)
        if not ckpt.is_dir() or not (ckpt / "trainer_state.json").is_file():
            raise ValueError(f"resume: {config.resume!r} is not a checkpoint folder")
        return ckpt
    return latest_checkpoint(run)


def _tensorboard_wanted(flag: bool | None) -> bool:
    if flag is False:
        return False
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        if flag:
            raise ValueError("tensorboard=True but the tensorboard package is not installed")
        return False
    return True


def _tensorboard_callbacks(config: PretrainConfig, run: Path) -> list[Any]:
    """TensorBoard logging into ``<run>/runs/<date>_<host>`` (the Trainer's own default
    would follow ``output_dir``, which is the staging folder)."""
    if not _tensorboard_wanted(config.tensorboard):
        return []
    from transformers.integrations import TensorBoardCallback
    from transformers.integrations.integration_utils import default_logdir

    callback = TensorBoardCallback()
    if callback.logging_dir is None:  # TENSORBOARD_LOGGING_DIR, when set, wins
        callback.logging_dir = str(run / default_logdir())
    return [callback]


def _training_arguments(config: PretrainConfig, run: Path):
    import torch
    from transformers import TrainingArguments

    from tisa.checkpoints import staging_folder

    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    warmup = config.warmup if config.warmup < 1 else int(config.warmup)
    return TrainingArguments(
        # checkpoints are written there and renamed into the run (AtomicCheckpoints)
        output_dir=str(staging_folder(run)),
        max_steps=config.max_steps,
        per_device_train_batch_size=config.batch_size,
        per_device_eval_batch_size=config.eval_batch_size or config.batch_size,
        gradient_accumulation_steps=config.gradient_accumulation_steps,
        learning_rate=config.learning_rate,
        weight_decay=config.weight_decay,
        warmup_steps=warmup,
        lr_scheduler_type="linear",
        max_grad_norm=config.max_grad_norm,
        seed=config.seed,
        data_seed=config.seed,
        eval_strategy="steps",
        eval_steps=config.eval_steps,
        save_strategy="steps",
        save_steps=config.save_steps,
        save_total_limit=config.save_total_limit,
        logging_strategy="steps",
        logging_steps=config.logging_steps,
        prediction_loss_only=True,
        remove_unused_columns=False,
        dataloader_num_workers=config.num_workers,
        dataloader_pin_memory=torch.cuda.is_available(),
        bf16=config.bf16,
        disable_tqdm=not config.progress,
        report_to="none",  # TensorBoard: _tensorboard_callbacks
        # Without GPUs, data parallelism (gloo) and bf16 autocast need the Trainer's CPU
        # mode; without it the processes would train side by side without synchronising.
        use_cpu=(distributed or config.bf16) and not torch.cuda.is_available(),
        ddp_backend="gloo" if distributed and not torch.cuda.is_available() else None,
        ddp_find_unused_parameters=False if distributed else None,
    )


def _tokenizer(config: PretrainConfig, run: Path, args, corpus, resuming: bool):
    """(tokenizer, where it came from) for a run; the main process trains, others load."""
    from tisa.data.tokenizer import cached_wordpiece, load_tokenizer, train_wordpiece

    if config.tokenizer is not None:
        return load_tokenizer(config.tokenizer), "given"
    saved = run / "tokenizer"
    if resuming and (saved / "tokenizer.json").is_file():
        return load_tokenizer(saved), "run"
    source = "trained"
    with args.main_process_first(desc="training the tokenizer"):
        if args.process_index == 0:
            train = corpus["train"]

            def texts():
                return (t for batch in train.iter(batch_size=1000) for t in batch["text"])

            settings = dict(
                vocab_size=config.vocab_size,
                model_max_length=max(config.max_positions, config.seq_len),
                length=len(train),
                show_progress=config.progress,
            )
            if config.tokenizer_cache:
                tok, folder = cached_wordpiece(texts, **settings)
                tok.model_max_length = settings["model_max_length"]
                source = f"cache:{folder.name}"
            else:
                tok = train_wordpiece(texts(), **settings)
            tok.save_pretrained(saved)
        else:
            tok = load_tokenizer(saved)
    return tok, source


def pretrain(config: PretrainConfig, *, callbacks: Sequence[Any] = ()) -> Path:
    """Runs (or resumes) masked-LM pretraining; returns the run folder.

    Args:
        config: the run's settings.
        callbacks: extra ``transformers.TrainerCallback`` objects.

    Returns:
        The run folder (``config.output_dir``), holding the final model in ``model/``.

    Raises:
        ValueError: bad configuration, a run folder in the way, a corpus too small for
            one batch, or an unreadable tokenizer / corpus.
    """
    from transformers import Trainer, set_seed

    from tisa.analysis.extract import has_absolute_positions
    from tisa.checkpoints import AtomicCheckpoints, clear_run, staging_folder, trainer_step
    from tisa.data.corpus import load_corpus
    from tisa.data.mlm import MaskedBlocks, build_blocks, collate_blocks, masked_eval_dataset
    from tisa.hf import positional_parameters
    from tisa.train.callbacks import (
        EpochCallback,
        MetricsCallback,
        TranslationInvarianceCallback,
        truncate_after,
    )
    from tisa.train.models import build_model

    if not isinstance(config, PretrainConfig):
        raise ValueError(f"config must be a PretrainConfig, got {type(config).__name__}")
    run = Path(config.output_dir)
    checkpoint = _resume_point(config, run)  # read-only: every process checks the same
    args = _training_arguments(config, run)  # sets up the process group under torchrun
    with args.main_process_first(desc="preparing the run folder"):
        if args.process_index == 0:
            if config.overwrite and run.is_dir():
                clear_run(run, _RUN_FILES)
            run.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(staging_folder(run), ignore_errors=True)  # remains of a crash
            if config.resume is not False:
                truncate_after(run, trainer_step(checkpoint) if checkpoint else 0)

    corpus = load_corpus(
        dataset=config.dataset,
        dataset_config=config.dataset_config,
        train_file=config.train_file,
        validation_file=config.validation_file,
        text_column=config.text_column,
        seed=config.seed,
        progress=config.progress,
    )
    tokenizer, tokenizer_source = _tokenizer(
        config, run, args, corpus, resuming=config.resume is not False
    )
    train_blocks = build_blocks(
        corpus["train"],
        tokenizer,
        seq_len=config.seq_len,
        block_format=config.block_format,
        max_blocks=config.max_train_blocks,
        progress=config.progress,
    )
    per_step = config.batch_size * args.world_size
    if len(train_blocks) < per_step:
        raise ValueError(
            f"the training corpus gives {len(train_blocks)} blocks of {config.seq_len} tokens, "
            f"fewer than one batch ({config.batch_size} x {args.world_size} processes)"
        )
    eval_blocks = build_blocks(
        corpus["validation"],
        tokenizer,
        seq_len=config.seq_len,
        block_format=config.block_format,
        max_blocks=config.max_eval_blocks,
        progress=config.progress,
    )
    train_data = MaskedBlocks(
        train_blocks, tokenizer, seed=config.seed, mlm_probability=config.mlm_probability
    )
    eval_data = masked_eval_dataset(
        eval_blocks, tokenizer, seed=config.eval_mask_seed, mlm_probability=config.mlm_probability
    )

    set_seed(config.seed)
    absolute = config.position in ("absolute", "absolute+tisa")
    model = build_model(
        arch=config.arch,
        size=config.size,
        position=config.position,
        vocab_size=len(tokenizer),
        max_positions=config.max_positions
        if absolute
        else max(config.max_positions, config.seq_len),
        pad_token_id=tokenizer.pad_token_id,
        num_kernels=config.num_kernels,
        attn_implementation=config.attn_implementation,
        bos_token_id=tokenizer.cls_token_id,
        eos_token_id=tokenizer.sep_token_id,
    )
    tokens_per_step = per_step * config.seq_len * config.gradient_accumulation_steps
    facts = {
        "config": config.to_dict(),
        "vocab_size": len(tokenizer),
        "tokenizer_source": tokenizer_source,
        "num_parameters": sum(p.numel() for p in model.parameters()),
        "positional_parameters": positional_parameters(model),
        "absolute_positions": has_absolute_positions(model),
        "world_size": args.world_size,
        "tokens_per_step": tokens_per_step,
        "train_blocks": len(train_blocks),
        "eval_blocks": len(eval_blocks),
    }
    if args.process_index == 0:
        write_json(run / "pretrain_config.json", facts)

    trainer_callbacks = [
        AtomicCheckpoints(run),
        EpochCallback(train_data),
        MetricsCallback(run, tokens_per_step),
        *_tensorboard_callbacks(config, run),
    ]
    if facts["absolute_positions"]:
        trainer_callbacks.append(TranslationInvarianceCallback(run, config.seq_len))
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=train_data,
        eval_dataset=eval_data,
        data_collator=collate_blocks,
        processing_class=tokenizer,
        callbacks=[*trainer_callbacks, *callbacks],
    )
    if checkpoint is not None:
        logger.info("resuming from %s", checkpoint)
    start = time.perf_counter()
    trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint is not None else None)
    wall = time.perf_counter() - start
    step = trainer.state.global_step
    logged = [e for e in trainer.state.log_history if "eval_loss" in e and e.get("step") == step]
    final = logged[-1] if logged else trainer.evaluate()
    trainer.save_model(str(run / "model"))
    if args.process_index == 0:
        eval_loss = float(final["eval_loss"])
        train_losses = [e["loss"] for e in trainer.state.log_history if "loss" in e]
        write_json(
            run / "results.json",
            {
                "step": int(trainer.state.global_step),
                "eval_loss": eval_loss,
                "eval_perplexity": math.exp(eval_loss) if eval_loss < 700 else math.inf,
                "last_train_loss": float(train_losses[-1]) if train_losses else None,
                "train_wall_s": round(wall, 3),
                "resumed_from": checkpoint.name if checkpoint is not None else None,
            },
        )
    trainer.accelerator.wait_for_everyone()
    return run


def pretrain_or_reuse(config: PretrainConfig, *, must_match: Sequence[str] = ()) -> Path:
    """A finished run in ``config.output_dir`` as it is, or the run trained to the end.

    A finished run (its ``model/`` is there) is reused; an interrupted one resumes from
    its newest complete checkpoint; anything else in the folder is started over. This is
    what the demo and the benchmarks do with their fixed run folders. ``config.resume``
    and ``config.overwrite`` are chosen here.

    Args:
        config: the run's settings.
        must_match: settings a finished run must have been trained with to be reused
            (e.g. ``("max_steps", "seq_len")``).

    Raises:
        ValueError: a finished run trained with other ``must_match`` settings.
    """
    from tisa.checkpoints import run_status

    run = Path(config.output_dir)
    status = run_status(run, finished="model")
    if status.action == "reuse":
        trained = json.loads((run / "pretrain_config.json").read_text())["config"]
        changed = [k for k in must_match if trained.get(k) != getattr(config, k)]
        if changed:
            there = ", ".join(f"{k}={trained.get(k)!r}" for k in changed)
            wanted = ", ".join(f"{k}={getattr(config, k)!r}" for k in changed)
            raise ValueError(
                f"{run} holds a finished run with {there}; use another output folder for {wanted}"
            )
        return run
    resume = status.action == "resume"
    return pretrain(
        dataclasses.replace(config, resume=resume, overwrite=status.started and not resume)
    )


# ----------------------------------------------------------------------------- CLI


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds the ``tisa pretrain`` options to ``parser``."""
    # Defaults come from the dataclass fields (no instance: validation imports torch).
    d = argparse.Namespace(
        **{f.name: f.default for f in dataclasses.fields(PretrainConfig) if f.name != "output_dir"}
    )
    g = parser.add_argument_group("model")
    g.add_argument("--position", default=d.position, help=f"position scheme: {_POSITION_HELP}")
    g.add_argument(
        "--size",
        default=d.size,
        help="model size: tiny, small (hidden 256, 4 layers), base (ALBERT-base)",
    )
    g.add_argument("--arch", default=d.arch, help="architecture: albert or bert")
    g.add_argument(
        "--max-positions",
        type=int,
        default=d.max_positions,
        help="rows of the absolute position table (default %(default)s)",
    )
    g.add_argument(
        "--num-kernels",
        type=int,
        default=d.num_kernels,
        help="RBF kernels per head for TISA (default %(default)s)",
    )
    g.add_argument(
        "--attn-implementation",
        default=d.attn_implementation,
        help="attention of the stock layers: sdpa or eager",
    )
    g = parser.add_argument_group("training")
    g.add_argument("--output-dir", required=True, help="run folder")
    g.add_argument("--seq-len", type=int, default=d.seq_len, help="tokens per block")
    g.add_argument("--max-steps", type=int, default=d.max_steps, help="optimiser steps")
    g.add_argument(
        "--batch-size", type=int, default=d.batch_size, help="blocks per step and process"
    )
    g.add_argument("--eval-batch-size", type=int, default=None, help="default: --batch-size")
    g.add_argument("--learning-rate", type=float, default=d.learning_rate)
    g.add_argument("--weight-decay", type=float, default=d.weight_decay)
    g.add_argument(
        "--warmup",
        type=float,
        default=d.warmup,
        help="warm-up: fraction of --max-steps (< 1) or steps (default %(default)s)",
    )
    g.add_argument("--grad-accum", type=int, default=1, help="gradient accumulation steps")
    g.add_argument("--seed", type=int, default=d.seed)
    g.add_argument(
        "--eval-mask-seed",
        type=int,
        default=d.eval_mask_seed,
        help="seed of the evaluation masks (keep it equal across runs)",
    )
    g.add_argument("--save-steps", type=int, default=d.save_steps)
    g.add_argument("--eval-steps", type=int, default=d.eval_steps)
    g.add_argument("--logging-steps", type=int, default=d.logging_steps)
    g.add_argument("--save-total-limit", type=int, default=d.save_total_limit)
    g.add_argument(
        "--resume",
        nargs="?",
        const=True,
        default=False,
        metavar="CHECKPOINT",
        help="continue the run in --output-dir from its newest checkpoint (or from CHECKPOINT)",
    )
    g.add_argument("--overwrite", action="store_true", help="start over in an existing run folder")
    g.add_argument("--bf16", action="store_true", help="bfloat16 autocast")
    g.add_argument("--num-workers", type=int, default=0, help="data-loader workers")
    g.add_argument("--no-progress", action="store_true", help="hide progress bars")
    g.add_argument(
        "--tensorboard",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="log to TensorBoard (default: when installed)",
    )
    g = parser.add_argument_group("data")
    g.add_argument(
        "--dataset",
        default=d.dataset,
        help="'ptb' (Penn Treebank, default) or an HF dataset name or folder",
    )
    g.add_argument("--dataset-config", default=None, help="HF dataset configuration")
    g.add_argument("--train-file", default=None, help="plain text training file")
    g.add_argument("--validation-file", default=None, help="plain text validation file")
    g.add_argument("--text-column", default=d.text_column)
    g.add_argument("--tokenizer", default=None, help="existing tokenizer (default: train one)")
    g.add_argument(
        "--no-tokenizer-cache",
        action="store_true",
        help="train a fresh tokenizer instead of reusing the one cached for this corpus",
    )
    g.add_argument("--vocab-size", type=int, default=d.vocab_size)
    g.add_argument("--block-format", default=d.block_format, help="cls_sep or plain")
    g.add_argument("--mlm-probability", type=float, default=d.mlm_probability)
    g.add_argument("--max-train-blocks", type=int, default=None)
    g.add_argument("--max-eval-blocks", type=int, default=None)


def config_from_args(args: argparse.Namespace) -> PretrainConfig:
    """The :class:`PretrainConfig` described by parsed ``tisa pretrain`` arguments."""
    return PretrainConfig(
        output_dir=args.output_dir,
        position=args.position,
        size=args.size,
        arch=args.arch,
        seq_len=args.seq_len,
        max_steps=args.max_steps,
        batch_size=args.batch_size,
        eval_batch_size=args.eval_batch_size,
        learning_rate=args.learning_rate,
        weight_decay=args.weight_decay,
        warmup=args.warmup if args.warmup < 1 else int(args.warmup),
        gradient_accumulation_steps=args.grad_accum,
        seed=args.seed,
        eval_mask_seed=args.eval_mask_seed,
        save_steps=args.save_steps,
        eval_steps=args.eval_steps,
        logging_steps=args.logging_steps,
        save_total_limit=args.save_total_limit,
        resume=args.resume,
        overwrite=args.overwrite,
        dataset=args.dataset,
        dataset_config=args.dataset_config,
        train_file=args.train_file,
        validation_file=args.validation_file,
        text_column=args.text_column,
        tokenizer=args.tokenizer,
        tokenizer_cache=not args.no_tokenizer_cache,
        vocab_size=args.vocab_size,
        block_format=args.block_format,
        mlm_probability=args.mlm_probability,
        max_positions=args.max_positions,
        num_kernels=args.num_kernels,
        max_train_blocks=args.max_train_blocks,
        max_eval_blocks=args.max_eval_blocks,
        bf16=args.bf16,
        attn_implementation=args.attn_implementation,
        num_workers=args.num_workers,
        progress=not args.no_progress,
        tensorboard=args.tensorboard,
    )


def run(args: argparse.Namespace) -> int:
    """``tisa pretrain``: returns 0 on success, 2 on bad input."""
    try:
        out = pretrain(config_from_args(args))
    except ValueError as err:
        print(f"tisa pretrain: error: {err}", file=sys.stderr)
        return 2
    if int(os.environ.get("RANK", "0")) == 0:
        print(f"run folder: {out}")
    return 0
