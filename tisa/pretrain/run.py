"""Masked-LM (and causal-LM) pretraining with any position scheme: ``tisa pretrain``.

    tisa pretrain --position absolute+tisa --size small --seq-len 128 \\
        --max-steps 20000 --output-dir runs/albert-small-tisa
    tisa pretrain --arch gpt2 --position alibi --output-dir runs/gpt2-alibi

Pipeline: corpus (:mod:`tisa.data.corpus`) -> WordPiece tokenizer trained on it (or one
given with ``--tokenizer``) -> fixed-length blocks with reproducible dynamic masking
(:mod:`tisa.data.mlm`; causal LM: plain blocks, :mod:`tisa.data.clm`) -> a masked-only
ALBERT/BERT (or a GPT-2 decoder, :mod:`tisa.pretrain.causal_lm`) of a named size with the
chosen position scheme (:mod:`tisa.pretrain.masked_lm`) -> the Hugging Face Trainer with the
positional scoring parameters on their own learning rate and without weight decay
(:class:`tisa.hf.TisaTrainer`; AdamW, linear warm-up and decay, evaluation and checkpoints
every N steps). The settings are a :class:`~tisa.pretrain.config.PretrainConfig`.

The run folder (``--output-dir``) holds::

    pretrain_config.json   the configuration plus model facts (parameters, vocabulary)
    tokenizer/             the tokenizer (also inside every checkpoint and model/)
    checkpoint-<step>/     Trainer checkpoints (model, optimiser, scheduler, RNG, state)
    model/                 the final model + tokenizer (save_pretrained layout)
    metrics.jsonl, .csv    step, train loss, eval loss and perplexity, lr, tokens/s
    ti.jsonl               translation invariance at each checkpoint (absolute runs)
    results.json           final evaluation; how far the scoring parameters moved

Checkpoints are atomic (:class:`tisa.checkpoints.AtomicCheckpoints`): each is written into
``.staging/`` and renamed to ``checkpoint-<step>`` only when complete, so a folder with that
name is always a finished checkpoint. ``--resume`` continues from the newest complete one
(one damaged since, e.g. cut short by a copy, is skipped with a warning naming the bad
file), does nothing on a finished run, and says so when there is nothing to resume. Since
masks are a function of (seed, epoch, block), the Trainer restores the optimiser,
scheduler, RNG and data position, and the training loss is logged at every checkpoint (so
no logging window spans a resume), a resumed run reaches the same weights and logs the
same losses as an uninterrupted one.

The same command runs data-parallel under ``torchrun --nproc_per_node N`` or
``accelerate launch`` (NCCL on GPUs, gloo on CPUs); ``--batch-size`` is per process.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tisa._validate import check_output_dir
from tisa.checkpoints import (
    AtomicCheckpoints,
    clear_run,
    run_status,
    staging_folder,
    trainer_step,
)
from tisa.console import format_seconds, stage_done, verbose
from tisa.data.clm import CausalBlocks, collate_causal
from tisa.data.corpus import load_corpus
from tisa.data.mixed_lengths import MixedLengthBatches, collate_batch
from tisa.data.mlm import (
    MaskedBlocks,
    build_blocks,
    collate_blocks,
    masked_eval_dataset,
    token_stream,
)
from tisa.data.tokenizer import cached_wordpiece, load_tokenizer, train_wordpiece
from tisa.files import RunLock, write_json
from tisa.hf import TisaTrainer, positional_parameters, scoring_movement, scoring_snapshot
from tisa.hf.architectures import has_absolute_positions
from tisa.hf.precision import resolve_bf16
from tisa.hf.trainer import quiet_trainer
from tisa.pretrain.build import build_model
from tisa.pretrain.callbacks import (
    EpochCallback,
    MetricsCallback,
    TranslationInvarianceCallback,
    elapsed_before,
    tensorboard_callbacks,
    truncate_after,
)
from tisa.pretrain.config import PretrainConfig
from tisa.pretrain.run_folder import (
    RUN_FILES,
    check_resume_settings,
    finished_step,
    resume_point,
)
from tisa.pretrain.schemes import scoring_family

__all__ = ["PretrainConfig", "TIMeasure", "pretrain", "pretrain_or_reuse"]

#: ``measure(model, max_positions=, draws=, seed=)`` -> plain data, or None for a model
#: without absolute positions (:func:`tisa.analysis.positional_ti.position_table_ti`).
TIMeasure = Callable[..., dict[str, Any] | None]


logger = logging.getLogger(__name__)

def _training_arguments(config: PretrainConfig, run: Path):
    import torch
    from transformers import TrainingArguments

    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    warmup = config.warmup if config.warmup < 1 else int(config.warmup)
    bf16 = resolve_bf16(config.bf16)  # where the machine computes it natively
    return TrainingArguments(
        # checkpoints are written there and renamed into the run (AtomicCheckpoints)
        output_dir=str(staging_folder(run)),
        max_steps=config.max_steps,
        # mixed lengths: each item is a whole batch (tisa.data.mixed_lengths)
        per_device_train_batch_size=1 if config.mixed_lengths else config.batch_size,
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
        bf16=bf16,
        disable_tqdm=not config.progress,
        report_to="none",  # TensorBoard: tensorboard_callbacks
        # Without GPUs, data parallelism (gloo) and bf16 autocast need the Trainer's CPU
        # mode; without it the processes would train side by side without synchronising.
        use_cpu=(distributed or bf16) and not torch.cuda.is_available(),
        ddp_backend="gloo" if distributed and not torch.cuda.is_available() else None,
        ddp_find_unused_parameters=False if distributed else None,
    )


def _tokenizer(config: PretrainConfig, run: Path, args, corpus, resuming: bool):
    """(tokenizer, where it came from) for a run; the main process trains, others load."""
    if config.tokenizer is not None:
        return load_tokenizer(config.tokenizer), "given"
    saved = run / "tokenizer"
    if resuming and (saved / "tokenizer.json").is_file():
        return load_tokenizer(saved), "run"

    source = "trained"
    with args.main_process_first(desc="training the tokenizer"):
        if args.process_index == 0:
            train = corpus["train"]
            start = time.perf_counter()

            def texts():
                return (t for batch in train.iter(batch_size=1000) for t in batch["text"])

            settings = dict(
                vocab_size=config.vocab_size,
                model_max_length=max(config.max_positions, config.seq_len),
                length=len(train),
                # the trainer's own bars (several, not tqdm) only with --verbose
                show_progress=config.progress and verbose(),
            )
            if config.tokenizer_cache:
                tok, folder = cached_wordpiece(texts, **settings)
                tok.model_max_length = settings["model_max_length"]
                source = f"cache:{folder.name}"
            else:
                tok = train_wordpiece(texts(), **settings)
            tok.save_pretrained(saved)
            how = f"trained on {len(train):,} texts" if source == "trained" else "from the cache"
            took = format_seconds(time.perf_counter() - start)
            stage_done("tokenizer", f"WordPiece, {len(tok):,} tokens, {how}, in {took}")
        else:
            tok = load_tokenizer(saved)
    return tok, source


def _mixed_length_data(config: PretrainConfig, corpus, tokenizer, collate):
    """(training batches of mixed lengths, the collate function for them and for the
    evaluation blocks)."""
    import functools

    data = MixedLengthBatches(
        token_stream(corpus["train"], tokenizer, progress=config.progress),
        tokenizer,
        seq_len=config.seq_len,
        batch_size=config.batch_size,
        lengths=config.mixed_lengths,
        share=config.mixed_share,
        seed=config.seed,
        block_format=config.block_format,
        mlm_probability=None if config.causal else config.mlm_probability,
        max_blocks=config.max_train_blocks,
    )
    return data, functools.partial(collate_batch, fallback=collate)


def pretrain(
    config: PretrainConfig, *, callbacks: Sequence[Any] = (), ti_measure: TIMeasure | None = None
) -> Path:
    """Runs (or resumes) masked-LM pretraining; returns the run folder.

    Args:
        config: the run's settings.
        callbacks: extra ``transformers.TrainerCallback`` objects.
        ti_measure: the translation invariance logged to ``ti.jsonl`` at every checkpoint
            of a model with absolute positions, ``ti_measure(model, max_positions=,
            draws=, seed=)`` (``tisa pretrain`` hands it
            :func:`tisa.analysis.positional_ti.position_table_ti`); None logs none.

    Returns:
        The run folder (``config.output_dir``), holding the final model in ``model/``.

    Raises:
        ValueError: bad configuration, a run folder in the way, a corpus too small for
            one batch, or an unreadable tokenizer / corpus.
    """
    if not isinstance(config, PretrainConfig):
        raise ValueError(f"config must be a PretrainConfig, got {type(config).__name__}")
    # two runs into one folder would interleave their checkpoints and metrics
    with RunLock(config.output_dir) as lock:
        return _pretrain(config, callbacks, lock, ti_measure)


def _pretrain(
    config: PretrainConfig,
    callbacks: Sequence[Any],
    lock: RunLock,
    ti_measure: TIMeasure | None,
) -> Path:
    """:func:`pretrain` holding ``lock`` (:class:`tisa.files.RunLock`), taken at once when
    the run folder exists, else where it is created."""
    from transformers import TrainerState, set_seed

    run = check_output_dir(config.output_dir, "output_dir")
    done = finished_step(run) if config.resume is True else None
    if done is not None and done >= config.max_steps:
        check_resume_settings(config, run)
        logger.warning(
            "resume: %s holds a finished run (step %d, max_steps %d); nothing to do",
            run,
            done,
            config.max_steps,
        )
        return run
    checkpoint = resume_point(config, run)  # read-only: every process checks the same
    if checkpoint is not None and trainer_step(checkpoint) > config.max_steps:
        raise ValueError(
            f"max_steps: {checkpoint} is at step {trainer_step(checkpoint)}, beyond "
            f"max_steps={config.max_steps}; raise max_steps or resume an older checkpoint"
        )
    args = _training_arguments(config, run)  # sets up the process group under torchrun
    with args.main_process_first(desc="preparing the run folder"):
        if args.process_index == 0:
            lock.acquire()
            if config.overwrite and run.is_dir():
                clear_run(run, RUN_FILES)
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

    def blocks(split: str, limit: int | None):
        return build_blocks(
            corpus[split],
            tokenizer,
            seq_len=config.seq_len,
            block_format=config.block_format,
            max_blocks=limit,
            progress=config.progress,
        )

    train_blocks = blocks("train", config.max_train_blocks)
    per_step = config.batch_size * args.world_size
    if len(train_blocks) < per_step:
        raise ValueError(
            f"the training corpus gives {len(train_blocks)} blocks of {config.seq_len} tokens, "
            f"fewer than one batch ({config.batch_size} x {args.world_size} processes)"
        )
    eval_blocks = blocks("validation", config.max_eval_blocks)
    if config.causal:
        train_data, eval_data = CausalBlocks(train_blocks), CausalBlocks(eval_blocks)
        collate = collate_causal
    else:
        train_data = MaskedBlocks(
            train_blocks, tokenizer, seed=config.seed, mlm_probability=config.mlm_probability
        )
        eval_data = masked_eval_dataset(
            eval_blocks,
            tokenizer,
            seed=config.eval_mask_seed,
            mlm_probability=config.mlm_probability,
        )
        collate = collate_blocks
    if config.mixed_lengths:
        train_data, collate = _mixed_length_data(config, corpus, tokenizer, collate)

    set_seed(config.seed)
    absolute = config.position in ("absolute", "absolute+tisa")
    scoring_options = config.scoring_options_dict()
    if scoring_family(config.position) == "fire":
        # FIRE's threshold starts at the training length: the normalised distances of
        # training then span [0, 1], the range that longer inputs are mapped into
        scoring_options.setdefault("init_threshold", float(config.seq_len))
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
        scoring_options=scoring_options,
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
        "bf16": bool(args.bf16),
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
        *tensorboard_callbacks(config, run),
    ]
    if facts["absolute_positions"] and ti_measure is not None:
        trainer_callbacks.append(
            TranslationInvarianceCallback(run, config.seq_len, measure=ti_measure)
        )
    # the initialisation is a function of the seed, so this is the start of a resumed run too
    start_scoring = scoring_snapshot(model)
    trainer = TisaTrainer(
        model=model,
        args=args,
        train_dataset=train_data,
        eval_dataset=eval_data,
        data_collator=collate,
        processing_class=tokenizer,
        callbacks=[*trainer_callbacks, *callbacks],
        tisa_learning_rate=config.tisa_learning_rate,
    )
    before = 0.0
    quiet_trainer(trainer, f"pretrain {config.size} {config.arch}, {config.position}")
    if checkpoint is not None:
        before = elapsed_before(run, trainer_step(checkpoint))
        logger.warning(
            "resume: continuing from %s (step %d of %d)",
            checkpoint,
            trainer_step(checkpoint),
            config.max_steps,
        )
    start = time.perf_counter()
    if checkpoint is not None and trainer_step(checkpoint) == config.max_steps:
        # Training ended there but the run stopped before saving its model. The Trainer,
        # resumed at max_steps, would take one step more; load the checkpoint instead.
        trainer._load_from_checkpoint(str(checkpoint))
        trainer.state = TrainerState.load_from_json(str(checkpoint / "trainer_state.json"))
    else:
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
                "train_wall_s": round(wall, 3),  # this process; after a resume, its part
                "train_wall_total_s": round(before + wall, 3),  # every part of the run
                "resumed_from": checkpoint.name if checkpoint is not None else None,
                "scoring_movement": scoring_movement(trainer.model, start_scoring),
            },
        )
    trainer.accelerator.wait_for_everyone()
    return run


def pretrain_or_reuse(
    config: PretrainConfig,
    *,
    must_match: Sequence[str] = (),
    ti_measure: TIMeasure | None = None,
) -> Path:
    """A finished run in ``config.output_dir`` as it is, or the run trained to the end.

    A finished run (its ``results.json`` is there) is reused; an interrupted one resumes from
    its newest complete checkpoint; anything else in the folder is started over. This is
    what the demo and the benchmarks do with their fixed run folders. ``config.resume``
    and ``config.overwrite`` are chosen here.

    Args:
        config: the run's settings.
        must_match: settings a finished run must have been trained with to be reused
            (e.g. ``("max_steps", "seq_len")``).
        ti_measure: see :func:`pretrain`.

    Raises:
        ValueError: a finished run trained with other ``must_match`` settings.
    """
    run = Path(config.output_dir)
    status = run_status(run, finished="results.json")  # written last, after model/
    if status.action == "reuse":
        facts = json.loads((run / "pretrain_config.json").read_text())
        trained = dict(facts["config"])
        current = config.to_dict()  # the JSON form, as saved
        if "bf16" in must_match:  # compared as trained: bf16=None means the machine's choice
            trained["bf16"] = facts.get("bf16", trained.get("bf16"))
            current["bf16"] = resolve_bf16(current["bf16"])
        changed = [k for k in must_match if trained.get(k) != current[k]]
        if changed:
            there = ", ".join(f"{k}={trained.get(k)!r}" for k in changed)
            wanted = ", ".join(f"{k}={current[k]!r}" for k in changed)
            raise ValueError(
                f"{run} holds a finished run with {there}; use another output folder for {wanted}"
            )
        return run
    resume = status.action == "resume"
    return pretrain(
        dataclasses.replace(config, resume=resume, overwrite=status.started and not resume),
        ti_measure=ti_measure,
    )
