"""``tisa glue``: fine-tune a model (optionally with TISA) on GLUE tasks over several seeds.

One *run* is a (task, variant, seed) triple; the variants are ``none`` (the model as
loaded), ``keep`` (TISA added next to the absolute position embeddings) and ``remove``
(TISA replacing them). Each run fine-tunes ``AutoModelForSequenceClassification`` with the
Hugging Face Trainer, evaluates on the task's dev set(s) and writes its result::

    OUTPUT_DIR/
      settings.json                          hyperparameters shared by every run
      runs/<task>/<variant>/seed-<seed>/
        result.json                          metrics, score, positional parameters
        checkpoints/checkpoint-<step>/       Trainer checkpoints while the run is going
      results.md  results.csv  results.json  median over seeds per task and variant
      results.png                            scores and relative error reductions

A run's ``result.json`` is written atomically when the run ends; a rerun skips runs that
have one (an empty or unreadable one counts as not done) and resumes an interrupted run
from its newest complete checkpoint. Checkpoints are atomic as in pretraining: the
Trainer writes into ``checkpoints/.staging/`` and :class:`tisa.checkpoints.
AtomicCheckpoints` renames each finished one to ``checkpoint-<step>``, so a kill during a
save never leaves a partial checkpoint to resume from (one left by an older version is
skipped, with a warning naming the bad file). Relative error reduction against the
baseline variant: ``(err_base - err) / err_base`` with ``err = 1 - score`` (every GLUE
metric is bounded above by 1).

The experiment is declared by :class:`~tisa.glue.config.GlueConfig`; its results
are summarised by :mod:`tisa.glue.results`. From Python::

    from tisa.glue.run import GlueConfig, run_glue
    results = run_glue(GlueConfig(model="bert-base-uncased", tasks=("rte",), seeds=(1,)))
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from tqdm.auto import tqdm

import tisa.hf  # noqa: F401  (registers TISA models with the Auto classes)
from tisa._validate import check_output_dir
from tisa.checkpoints import (
    AtomicCheckpoints,
    latest_checkpoint,
    staging_folder,
    trainer_step,
)
from tisa.console import format_seconds, stage_done
from tisa.data.glue import GlueTask, compute_metrics
from tisa.files import RunLock, json_ready, write_atomic, write_json
from tisa.glue.config import VARIANTS, GlueConfig
from tisa.glue.inputs import (
    build_model,
    check_max_length,
    check_room_for_text,
    encode,
    load_task,
    model_tokenizer,
    own_position_names,
    read_model_config,
)
from tisa.glue.report import write_glue_report
from tisa.glue.results import (
    paired_comparison,
    relative_error_reduction,
    summarize,
    summary_csv,
    summary_markdown,
)
from tisa.hf import TisaTrainer, positional_parameters, scoring_movement, scoring_snapshot
from tisa.hf.precision import resolve_bf16
from tisa.hf.trainer import LogAtCheckpoints, quiet_trainer
from tisa.provenance import run_metadata
from tisa.reports.charts import glue_results
from tisa.reports.figures import figure_png

if TYPE_CHECKING:
    from datasets import DatasetDict
    from transformers import (
        PreTrainedTokenizerBase,
        TrainerCallback,
    )

__all__ = [
    "VARIANTS",
    "GlueConfig",
    "GlueResults",
    "paired_comparison",
    "relative_error_reduction",
    "run_dir",
    "run_glue",
    "summarize",
    "summary_markdown",
]


logger = logging.getLogger(__name__)


@dataclass
class GlueResults:
    """What :func:`run_glue` returns.

    Attributes:
        runs: one dict per finished (task, variant, seed) run, as in its result.json.
        summary: one row per (task, variant) with medians over seeds (see
            :func:`summarize`), plus a ``"glue"`` average row per variant with several tasks.
        files: name (``"markdown"``, ``"csv"``, ``"json"``, ``"plot"``) -> written path.
        trained: how many runs this call trained (0: every run was finished already).
    """

    runs: list[dict[str, Any]]
    summary: list[dict[str, Any]]
    files: dict[str, Path] = field(default_factory=dict)
    trained: int = 0


# --------------------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------------------
def _is_main_process() -> bool:
    """True on the process that writes files (rank 0 under torchrun / accelerate)."""
    return int(os.environ.get("RANK", "0")) == 0


def _main_process_first() -> contextlib.AbstractContextManager:
    """Under torchrun / accelerate launch, rank 0 runs the block first (downloads, cache
    files), the other ranks after it; a no-op in a single process."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return contextlib.nullcontext()
    from accelerate import PartialState

    return PartialState().main_process_first()


def _nan(value: Any) -> float:
    return float("nan") if value is None else float(value)


def run_dir(output_dir: str | Path, task: str, variant: str, seed: int) -> Path:
    """Folder of one (task, variant, seed) run."""
    return Path(output_dir) / "runs" / task / variant / f"seed-{seed}"


def _load_result(path: Path, *, warn: bool = False) -> dict[str, Any] | None:
    """A finished run's ``result.json``; None when there is none, or when it is empty, cut
    short or without metrics and score (such a run counts as not done and is redone;
    ``warn`` says so)."""
    if not path.is_file():
        return None
    try:
        result = json.loads(path.read_text(encoding="utf-8"))
        result["metrics"] = {k: _nan(v) for k, v in result["metrics"].items()}
        result["score"] = _nan(result["score"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        if warn:
            problem = "is empty" if path.stat().st_size == 0 else f"is no run result ({err})"
            logger.warning("%s %s; the run counts as not done and is trained again", path, problem)
        return None
    return result


def _check_settings(config: GlueConfig, *, write: bool = False) -> None:
    """Refuses settings other than those of the runs in ``output_dir`` (the shared ones,
    and the TISA ones of each TISA variant already there); with ``write``, records them
    (done once training starts, so a run that fails its checks leaves nothing behind)."""
    path = Path(config.output_dir) / "settings.json"
    now = json_ready(config.settings())
    tisa_now = {v: json_ready(config.tisa_settings()) for v in config.variants if v != "none"}
    before = None
    if path.is_file():
        try:
            before = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise ValueError(
                f"output_dir: {str(path)!r} is not valid JSON ({err}), so the settings of the "
                "runs there are unknown; restore it or use another output folder"
            ) from None
    if before is not None:
        tisa_before = before.pop("tisa_variants", {})
        diff = [(k, before.get(k), now[k]) for k in now if before.get(k) != now[k]]
        for variant, values in tisa_now.items():
            old = tisa_before.get(variant)
            if old is not None:
                diff += [
                    (f"{variant}.{k}", old.get(k), values[k])
                    for k in values
                    if old.get(k) != values[k]
                ]
        if diff:
            changes = ", ".join(f"{k}: {a!r} there, {b!r} now" for k, a, b in diff)
            raise ValueError(
                f"output_dir: {config.output_dir!r} holds runs made with other settings "
                f"({changes}); use another output folder or the same settings"
            )
        tisa_now = {**tisa_before, **tisa_now}
    if write and _is_main_process():
        write_json(path, {**now, "tisa_variants": tisa_now})


# --------------------------------------------------------------------------------------
# one run
# --------------------------------------------------------------------------------------
def _run_train_loss(
    log_history: Sequence[dict[str, Any]], resumed_at: int, part_loss: float, part_steps: int
) -> float | None:
    """The mean training loss over every step of a run resumed at step ``resumed_at``.

    The Trainer's own figure covers only the steps of the process that finished the run;
    the steps before the resume are the loss windows logged up to the checkpoint (each
    a mean over its steps), which cover all of them when the loss was logged at the
    checkpoint (:class:`tisa.hf.trainer.LogAtCheckpoints`). None when they do not
    (a checkpoint of an older run).
    """
    if resumed_at == 0:
        return part_loss
    done, total = 0, 0.0
    logged = sorted(
        (e for e in log_history if "loss" in e and "step" in e), key=lambda e: e["step"]
    )
    for entry in logged:
        if done < entry["step"] <= resumed_at:
            total += float(entry["loss"]) * (entry["step"] - done)
            done = entry["step"]
    if done != resumed_at:
        return None
    return (total + part_loss * part_steps) / max(1, resumed_at + part_steps)


def _fine_tune(
    config: GlueConfig,
    task: GlueTask,
    encoded: DatasetDict,
    tokenizer: PreTrainedTokenizerBase,
    variant: str,
    seed: int,
    callbacks: Sequence[TrainerCallback],
) -> dict[str, Any]:
    """Fine-tunes and evaluates one (task, variant, seed) run; returns its result dict."""
    import torch
    from transformers import DataCollatorWithPadding, Trainer, TrainingArguments, set_seed

    folder = run_dir(config.output_dir, task.name, variant, seed)
    checkpoints = folder / "checkpoints"
    last = latest_checkpoint(checkpoints)  # the newest complete one; damaged ones are named
    if _is_main_process():
        shutil.rmtree(staging_folder(checkpoints), ignore_errors=True)  # remains of a crash
    bf16 = resolve_bf16(config.bf16)

    set_seed(seed)  # the classifier head and TISA parameters start from this seed
    model = build_model(config, task, variant, tokenizer)
    positional = positional_parameters(model)
    start = scoring_snapshot(model)  # taken before a resume loads trained values
    args = TrainingArguments(
        # checkpoints are written there and renamed into checkpoints/ (AtomicCheckpoints)
        output_dir=str(staging_folder(checkpoints)),
        per_device_train_batch_size=config.batch_size,
        per_device_eval_batch_size=config.eval_batch_size or config.batch_size,
        learning_rate=config.learning_rate,
        num_train_epochs=config.epochs,
        max_steps=config.max_steps if config.max_steps is not None else -1,
        warmup_steps=config.warmup_ratio if config.warmup_ratio > 0 else 0,  # float: ratio
        weight_decay=config.weight_decay,
        seed=seed,
        save_strategy="steps",
        save_steps=config.save_steps,
        save_total_limit=1,
        eval_strategy="no",
        logging_steps=config.logging_steps,
        report_to="none",
        disable_tqdm=False,
        bf16=bf16,
        use_cpu=bf16 and not torch.cuda.is_available(),  # CPU autocast needs the CPU mode
        dataloader_pin_memory=torch.cuda.is_available(),
    )
    extra = {} if variant == "none" else {"tisa_learning_rate": config.tisa_learning_rate}
    if config.position_learning_rate:  # a rate of their own (0 froze them in build_model)
        extra["position_names"] = tuple(own_position_names(model, variant))
        extra["position_learning_rate"] = config.position_learning_rate
    trainer = (TisaTrainer if extra else Trainer)(
        model=model,
        args=args,
        train_dataset=encoded["train"],
        data_collator=DataCollatorWithPadding(tokenizer),
        processing_class=tokenizer,
        callbacks=[AtomicCheckpoints(checkpoints), LogAtCheckpoints(), *callbacks],
        **extra,
    )
    resumed_at = 0 if last is None else trainer_step(last)  # (pruned once a later one is saved)
    quiet_trainer(trainer, _run_name(task.name, variant, seed), summary=False)  # see run_glue
    train_output = trainer.train(resume_from_checkpoint=None if last is None else str(last))
    part_steps = int(train_output.global_step) - resumed_at
    part_loss = float(train_output.training_loss)  # the Trainer's: this process's steps only

    predictions, labels, eval_loss = {}, {}, {}
    for split in task.eval_splits:
        out = trainer.predict(encoded[split], metric_key_prefix=split)
        eval_loss[split] = float(out.metrics.get(f"{split}_loss", float("nan")))
        logits = out.predictions[0] if isinstance(out.predictions, tuple) else out.predictions
        logits = np.asarray(logits)  # (N, C), C = 1 for regression
        predictions[split] = logits.reshape(-1) if task.is_regression else logits.argmax(-1)
        labels[split] = np.asarray(out.label_ids).reshape(-1)
    metrics = compute_metrics(task, predictions, labels)
    result = {
        "task": task.name,
        "variant": variant,
        "seed": seed,
        "metrics": metrics,
        "score": task.score(metrics),
        "eval_loss": eval_loss,
        "positional_parameters": positional,
        "tisa_movement": scoring_movement(model, start),
        "evaluated_on": "heldout" if config.holdout > 0 else "dev",
        "train_samples": len(encoded["train"]),
        "eval_samples": {s: len(encoded[s]) for s in task.eval_splits},
        "global_step": int(train_output.global_step),
        # the mean over every step; after a resume, also the part trained here
        "train_loss": _run_train_loss(trainer.state.log_history, resumed_at, part_loss, part_steps),
        "train_runtime_s": float(train_output.metrics.get("train_runtime", float("nan"))),  # here
        "resumed_from": None if last is None else last.name,
        "resumed_part": None if last is None else {"steps": part_steps, "train_loss": part_loss},
        "settings": config.settings(variant),
    }
    del trainer, model
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return result


# --------------------------------------------------------------------------------------
# the experiment
# --------------------------------------------------------------------------------------
#: environment variable that lets several processes fill one output folder (see run_glue)
SHARED_OUTPUT = "TISA_GLUE_SHARED_OUTPUT"


def run_glue(config: GlueConfig, *, callbacks: Sequence[TrainerCallback] = ()) -> GlueResults:
    """Runs every (task, variant, seed) of ``config`` not finished yet, then summarises.

    Finished runs (a ``result.json`` in their folder) are skipped; an interrupted run
    resumes from its newest complete checkpoint. Tables and the plot are rewritten after
    every finished run, so they always show what is done. Everything that can be checked
    is checked before the first run trains: the output folder, the settings of the runs
    already there, the model, and the data of every task with runs to do.

    Args:
        config: the experiment.
        callbacks: extra ``transformers.TrainerCallback`` objects given to every Trainer.

    Returns:
        The runs, the summary rows, the paths of the written tables and how many runs
        were trained.

    Raises:
        ValueError: bad settings, model or data (also settings that differ from those of
            the runs already in ``config.output_dir``, and an output folder that is a
            file or cannot be written).
        FileNotFoundError: missing data (the message says how to get it).

    Several processes fill one folder at once, each with runs of its own (as
    ``experiments/glue_protocol.py --parallel`` does), when the environment variable
    ``TISA_GLUE_SHARED_OUTPUT`` is ``1``: each then holds the folder shared and each run it
    trains exclusively, so two processes never train the same run. Otherwise a process
    holds the whole folder.
    """
    # two experiments into one folder would train the same runs twice
    shared = os.environ.get(SHARED_OUTPUT) == "1"
    with RunLock(config.output_dir, shared=shared) as lock:
        return _run_glue(config, callbacks, lock, shared=shared)


def _run_glue(
    config: GlueConfig, callbacks: Sequence[TrainerCallback], lock: RunLock, *, shared: bool
) -> GlueResults:
    """:func:`run_glue` holding ``lock``, taken at once when the folder exists, else
    before the first write; with ``shared``, each run's folder is held while it trains."""
    check_output_dir(config.output_dir, "output_dir")
    _check_settings(config)
    main = _is_main_process()
    plan = [(t, v, s) for t in config.tasks for v in config.variants for s in config.seeds]
    pending = [r for r in plan if _load_result(_result_path(config, *r), warn=True) is None]
    pending_tasks = list(dict.fromkeys(t for t, _, _ in pending))
    tokenizer = None
    if pending_tasks:  # the model first: it is quick to check and often mistyped
        check_max_length(config, read_model_config(config))
    # load every pending task first, so missing data fails before hours of training
    with _main_process_first():  # downloads and dataset caches: once, by rank 0
        data = {t: load_task(config, t) for t in pending_tasks}
    if pending_tasks:
        tokenizer = model_tokenizer(config)
        check_room_for_text(config, [data[t][0] for t in pending_tasks], tokenizer)
        if main:
            lock.acquire()
        _check_settings(config, write=True)  # every check passed: training starts

    files: dict[str, Path] = {}
    with tqdm(
        total=len(plan),
        initial=len(plan) - len(pending),
        desc="GLUE runs",
        unit="run",
        disable=not main,
    ) as bar:
        for task_name in pending_tasks:
            task, dataset = data[task_name]
            with _main_process_first():
                encoded = encode(config, task, dataset, tokenizer)
            for _, variant, seed in (r for r in pending if r[0] == task_name):
                bar.set_postfix_str(f"{task_name} {variant} seed {seed}")
                with RunLock(run_dir(config.output_dir, task_name, variant, seed)) as own:
                    if shared and main:
                        own.acquire()  # another process on this run: refused in one line
                        if _load_result(_result_path(config, task_name, variant, seed)):
                            bar.update()  # finished by another process meanwhile
                            continue
                    result = _fine_tune(config, task, encoded, tokenizer, variant, seed, callbacks)
                    if main:
                        stage_done(_run_name(task_name, variant, seed), _run_line(result))
                        path = _result_path(config, task_name, variant, seed)
                        write_json(path, {**result, "provenance": run_metadata()})
                        if not config.keep_checkpoints:
                            shutil.rmtree(path.parent / "checkpoints", ignore_errors=True)
                        files = _write_tables(config, _collect(config, plan))
                bar.update()

    runs = _collect(config, plan)
    summary = summarize(runs, config.baseline_variant)
    if main and runs:
        files = _write_tables(config, runs)
    return GlueResults(runs=runs, summary=summary, files=files, trained=len(pending))


def _run_name(task: str, variant: str, seed: int) -> str:
    """A run's name on the console."""
    return f"GLUE {task} {variant} seed {seed}"


def _run_line(result: dict[str, Any]) -> str:
    """What the console says of a finished run: its metrics, steps and time."""
    metrics = ", ".join(f"{k} {v:.4f}" for k, v in result["metrics"].items())
    took = format_seconds(result["train_runtime_s"])
    return f"{metrics} ({result['global_step']} steps in {took})"


def _result_path(config: GlueConfig, task: str, variant: str, seed: int) -> Path:
    return run_dir(config.output_dir, task, variant, seed) / "result.json"


def _collect(config: GlueConfig, plan: Sequence[tuple[str, str, int]]) -> list[dict[str, Any]]:
    """The results of the finished runs of ``plan``, in its order."""
    found = (_load_result(_result_path(config, *r)) for r in plan)
    return [r for r in found if r is not None]


def _write_tables(config: GlueConfig, runs: Sequence[dict[str, Any]]) -> dict[str, Path]:
    out = Path(config.output_dir)
    summary = summarize(runs, config.baseline_variant)
    files = {
        "markdown": out / "results.md",
        "csv": out / "results.csv",
        "json": out / "results.json",
    }
    write_atomic(files["markdown"], summary_markdown(summary))
    write_atomic(files["csv"], summary_csv(summary))
    write_json(
        files["json"],
        {"summary": summary, "runs": list(runs), "provenance": run_metadata()},
    )
    if config.plot and summary:
        files["plot"] = out / "results.png"
        files["report"] = out / "report.html"
        chart = figure_png(glue_results(summary), dpi=120)
        write_atomic(files["plot"], chart)
        settings = config.settings()
        if any(v != "none" for v in config.variants):
            settings.update(config.tisa_settings())
        write_glue_report(files["report"], summary, runs, settings=settings, chart_png=chart)
    return files
