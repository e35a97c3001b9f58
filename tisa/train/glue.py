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
have one and resumes an interrupted run from its last checkpoint. Relative error
reduction against the baseline variant: ``(err_base - err) / err_base`` with
``err = 1 - score`` (every GLUE metric is bounded above by 1).

From Python::

    from tisa.train.glue import GlueConfig, run_glue
    results = run_glue(GlueConfig(model="bert-base-uncased", tasks=("rte",), seeds=(1,)))
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import gc
import io
import json
import math
import os
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from tqdm.auto import tqdm

from tisa._validate import check_int
from tisa.data.glue import (
    GLUE_TASKS,
    HF_GLUE,
    GlueTask,
    TaskType,
    get_task,
    load_custom,
    load_glue,
)
from tisa.files import json_ready, write_atomic, write_json

if TYPE_CHECKING:
    from datasets import DatasetDict
    from transformers import PreTrainedModel, PreTrainedTokenizerBase, TrainerCallback

    from tisa.checkpoints import RunStatus

__all__ = [
    "HELP",
    "VARIANTS",
    "GlueConfig",
    "GlueResults",
    "add_arguments",
    "config_from_args",
    "paired_comparison",
    "relative_error_reduction",
    "run_dir",
    "run",
    "run_glue",
    "summarize",
    "summary_markdown",
]

HELP = "Fine-tune on GLUE tasks (optionally with TISA) over several seeds; median results."

Variant = Literal["none", "keep", "remove"]
VARIANTS: tuple[str, ...] = ("none", "keep", "remove")

# settings that must agree between runs stored in one output folder
_SETTING_KEYS = (
    "model",
    "epochs",
    "max_steps",
    "batch_size",
    "learning_rate",
    "warmup_ratio",
    "weight_decay",
    "max_length",
    "max_train_samples",
    "max_eval_samples",
    "holdout",
    "bf16",
)
# settings of the TISA variants only: checked per variant, so an output folder can hold
# the baseline's runs before the TISA settings are chosen
_TISA_SETTING_KEYS = ("scoring", "num_kernels", "tisa_learning_rate", "tisa_start")

#: Learning rate of the TISA scoring parameters unless ``tisa_learning_rate`` is given
#: (chosen on held-out training data, docs/glue.md).
DEFAULT_TISA_LEARNING_RATE = 1e-2


# --------------------------------------------------------------------------------------
# configuration
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GlueConfig:
    """Everything a GLUE experiment needs; plain data, validated on construction.

    Attributes:
        model: HF model id or local path (a pretrained encoder or a saved TISA model).
        tasks: GLUE task names, ``("all",)`` for the nine tasks, or ``("custom",)`` / one
            GLUE task name together with ``train_file`` and ``validation_file``.
        variants: position variants to compare: ``"none"``, ``"keep"``, ``"remove"``.
        seeds: one run per seed; the median over seeds is reported.
        output_dir: run folder (results, checkpoints, tables).
        epochs: training epochs (ignored when ``max_steps`` is set).
        max_steps: number of optimiser steps, overriding ``epochs``.
        batch_size: training batch size per device.
        eval_batch_size: evaluation batch size per device (default ``batch_size``).
        learning_rate: peak AdamW learning rate (linear warmup and decay).
        warmup_ratio: share of the training steps spent warming up, in [0, 1).
        weight_decay: AdamW weight decay.
        max_length: tokens per example after truncation (pairs: longest first).
        max_train_samples: train on a subset: the first N examples after a shuffle with
            seed 0 (the same subset for every seed and variant); a dict task -> N caps
            only the tasks it names (e.g. ``{"sst2": 8000}``).
        max_eval_samples: evaluate on such a subset of each dev set.
        baseline: variant the relative error reduction is computed against (default
            ``"none"`` when compared, else the first variant).
        scoring: TISA scoring family for ``keep`` / ``remove`` (see ``tisa.scoring``).
        num_kernels: kernels per head for the ``"rbf"`` family.
        tisa_learning_rate: learning rate of the TISA scoring parameters (no weight decay);
            default :data:`DEFAULT_TISA_LEARNING_RATE`.
        tisa_start: how the RBF parameters start (:data:`tisa.hf.STARTS`); default
            :data:`tisa.hf.DEFAULT_START`.
        holdout: a share of each training set (split off with seed 0) to evaluate on
            instead of the dev sets, for choosing hyperparameters; 0 evaluates on dev.
        glue_dir: classic ``glue_data`` folder; ``None`` loads from ``hf_path``.
        hf_path: HF hub dataset (or a local folder in its layout).
        train_file: custom training file (CSV, TSV or JSON lines).
        validation_file: custom evaluation file.
        text_columns: one or two text columns of the custom files.
        label_column: label column of the custom files.
        task_type: ``"auto"``, ``"classification"`` or ``"regression"`` (custom files).
        save_steps: Trainer checkpoint interval (steps) for resuming interrupted runs.
        logging_steps: Trainer logging interval (steps).
        bf16: train in bfloat16 mixed precision (GPU).
        keep_checkpoints: keep a finished run's last checkpoint (default: delete it).
        plot: write ``results.png``.
    """

    model: str
    tasks: tuple[str, ...] = ()
    variants: tuple[Variant, ...] = ("none",)
    seeds: tuple[int, ...] = (1, 2, 3)
    output_dir: str = "glue_runs"
    epochs: float = 3.0
    max_steps: int | None = None
    batch_size: int = 32
    eval_batch_size: int | None = None
    learning_rate: float = 2e-5
    warmup_ratio: float = 0.1
    weight_decay: float = 0.01
    max_length: int = 128
    max_train_samples: int | dict[str, int] | None = None
    max_eval_samples: int | None = None
    baseline: str | None = None
    scoring: str = "rbf"
    num_kernels: int = 5
    tisa_learning_rate: float | None = None
    tisa_start: str | None = None
    holdout: float = 0.0
    glue_dir: str | None = None
    hf_path: str = HF_GLUE
    train_file: str | None = None
    validation_file: str | None = None
    text_columns: tuple[str, ...] | None = None
    label_column: str = "label"
    task_type: TaskType = "auto"
    save_steps: int = 500
    logging_steps: int = 50
    bf16: bool = False
    keep_checkpoints: bool = False
    plot: bool = True

    def __post_init__(self) -> None:
        def put(name: str, value: Any) -> None:
            object.__setattr__(self, name, value)

        if isinstance(self.model, os.PathLike):
            put("model", os.fspath(self.model))
        if not isinstance(self.model, str) or not self.model:
            raise ValueError(f"model: expected a model id or path, got {self.model!r}")
        for name in ("tasks", "variants", "seeds"):
            value = getattr(self, name)
            put(name, (value,) if isinstance(value, (str, int)) else tuple(value))
        if self.text_columns is not None:
            put("text_columns", tuple(self.text_columns))
        for name in ("output_dir", "glue_dir", "train_file", "validation_file"):
            if getattr(self, name) is not None:
                put(name, os.fspath(getattr(self, name)))

        custom = self.train_file is not None or self.validation_file is not None
        if custom and (self.train_file is None or self.validation_file is None):
            raise ValueError(
                "train_file / validation_file: expected both for a custom task, got "
                f"train_file={self.train_file!r}, validation_file={self.validation_file!r}"
            )
        tasks = tuple(str(t).lower() for t in self.tasks)
        if custom:
            tasks = tasks or ("custom",)
            if len(tasks) != 1 or (tasks[0] != "custom" and tasks[0] not in GLUE_TASKS):
                raise ValueError(
                    "tasks: with train_file / validation_file expected 'custom' or one GLUE "
                    f"task name, got {list(self.tasks)}"
                )
            if tasks[0] == "custom" and not self.text_columns:
                raise ValueError("text_columns: expected one or two column names for a custom task")
        else:
            if not tasks:
                raise ValueError(f"tasks: expected GLUE task names or 'all', got {self.tasks!r}")
            if "all" in tasks:
                tasks = tuple(GLUE_TASKS)
            tasks = tuple(dict.fromkeys(get_task(t).name for t in tasks))
        put("tasks", tasks)

        if not self.variants or any(v not in VARIANTS for v in self.variants):
            raise ValueError(f"variants: expected some of {list(VARIANTS)}, got {self.variants!r}")
        if len(set(self.variants)) != len(self.variants):
            raise ValueError(f"variants: expected distinct values, got {list(self.variants)}")
        if (
            not self.seeds
            or any(isinstance(s, bool) or not isinstance(s, (int, np.integer)) for s in self.seeds)
            or len(set(self.seeds)) != len(self.seeds)
        ):
            raise ValueError(f"seeds: expected distinct integers, got {list(self.seeds)}")
        put("seeds", tuple(int(s) for s in self.seeds))
        if self.baseline is not None and self.baseline not in self.variants:
            raise ValueError(
                f"baseline: expected one of the variants {list(self.variants)}, "
                f"got {self.baseline!r}"
            )
        for name in ("batch_size", "max_length", "num_kernels", "save_steps", "logging_steps"):
            check_int(getattr(self, name), name)
        if isinstance(self.max_train_samples, dict):
            caps = {}
            for task_name, cap in self.max_train_samples.items():
                name = get_task(str(task_name)).name if task_name != "custom" else "custom"
                caps[name] = check_int(cap, f"max_train_samples[{task_name!r}]")
            put("max_train_samples", dict(sorted(caps.items())))
        else:
            check_int(self.max_train_samples, "max_train_samples", optional=True)
        for name in ("max_steps", "max_eval_samples", "eval_batch_size"):
            check_int(getattr(self, name), name, optional=True)
        if not (self.epochs > 0):
            raise ValueError(f"epochs: expected a positive number, got {self.epochs!r}")
        if not (self.learning_rate > 0):
            raise ValueError(
                f"learning_rate: expected a positive number, got {self.learning_rate!r}"
            )
        if not (0 <= self.warmup_ratio < 1):
            raise ValueError(
                f"warmup_ratio: expected a number in [0, 1), got {self.warmup_ratio!r}"
            )
        if self.tisa_learning_rate is None:
            put("tisa_learning_rate", DEFAULT_TISA_LEARNING_RATE)
        if not (isinstance(self.tisa_learning_rate, (int, float)) and self.tisa_learning_rate > 0):
            raise ValueError(
                f"tisa_learning_rate: expected a positive number, got {self.tisa_learning_rate!r}"
            )
        put("tisa_learning_rate", float(self.tisa_learning_rate))
        if self.tisa_start is None:
            from tisa.hf import DEFAULT_START

            put("tisa_start", DEFAULT_START if self.scoring == "rbf" else "paper")
        from tisa.hf import start_options

        start_options(self.scoring, self.tisa_start)  # raises on an unknown start
        if not (isinstance(self.holdout, (int, float)) and 0 <= self.holdout < 1):
            raise ValueError(f"holdout: expected a share in [0, 1), got {self.holdout!r}")
        put("holdout", float(self.holdout))
        if not (self.weight_decay >= 0):
            raise ValueError(f"weight_decay: expected a number >= 0, got {self.weight_decay!r}")
        if self.task_type not in ("auto", "classification", "regression"):
            raise ValueError(
                "task_type: expected 'auto', 'classification' or 'regression', "
                f"got {self.task_type!r}"
            )

    @property
    def baseline_variant(self) -> str:
        """The variant relative error reductions are computed against."""
        if self.baseline is not None:
            return self.baseline
        return "none" if "none" in self.variants else self.variants[0]

    def settings(self, variant: str | None = None) -> dict[str, Any]:
        """Hyperparameters that every run in one output folder must share; with a TISA
        ``variant`` (``keep``, ``remove``) also those of its scoring functions."""
        out = {k: getattr(self, k) for k in _SETTING_KEYS}
        if variant is not None and variant != "none":
            out.update({k: getattr(self, k) for k in _TISA_SETTING_KEYS})
        return out


@dataclass
class GlueResults:
    """What :func:`run_glue` returns.

    Attributes:
        runs: one dict per finished (task, variant, seed) run, as in its result.json.
        summary: one row per (task, variant) with medians over seeds (see
            :func:`summarize`), plus a ``"glue"`` average row per variant with several tasks.
        files: name (``"markdown"``, ``"csv"``, ``"json"``, ``"plot"``) -> written path.
    """

    runs: list[dict[str, Any]]
    summary: list[dict[str, Any]]
    files: dict[str, Path] = field(default_factory=dict)


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


def _status(config: GlueConfig, task: str, variant: str, seed: int) -> RunStatus:
    """Finished (a ``result.json``), interrupted (resumes from its newest checkpoint, as
    the Trainer would pick it) or not started."""
    from tisa.checkpoints import run_status

    folder = run_dir(config.output_dir, task, variant, seed)
    return run_status(folder, finished="result.json", checkpoints="checkpoints", complete=False)


def _check_settings(config: GlueConfig, *, write: bool = False) -> None:
    """Refuses settings other than those of the runs in ``output_dir`` (the shared ones,
    and the TISA ones of each TISA variant already there); with ``write``, records them
    (done once training starts, so a run that fails its checks leaves nothing behind)."""
    path = Path(config.output_dir) / "settings.json"
    now = json_ready(config.settings())
    tisa_now = {
        v: json_ready({k: getattr(config, k) for k in _TISA_SETTING_KEYS})
        for v in config.variants
        if v != "none"
    }
    before = json.loads(path.read_text()) if path.is_file() else None
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
# data, model, one run
# --------------------------------------------------------------------------------------
def _load_task(config: GlueConfig, name: str) -> tuple[GlueTask, DatasetDict]:
    if config.train_file is not None:
        return load_custom(
            config.train_file,
            config.validation_file,
            text_columns=config.text_columns,
            label_column=config.label_column,
            task_type=config.task_type,
            task=None if name == "custom" else name,
            name=name,
        )
    return get_task(name), load_glue(name, glue_dir=config.glue_dir, hf_path=config.hf_path)


def _encode(
    config: GlueConfig, task: GlueTask, data: DatasetDict, tokenizer: PreTrainedTokenizerBase
) -> DatasetDict:
    """Subsets (if asked) and tokenizes: text columns -> input_ids, attention_mask, ..."""
    from datasets import DatasetDict

    if config.holdout > 0:  # model selection: evaluate on a part of train, never on dev
        parts = data["train"].train_test_split(test_size=config.holdout, seed=0)
        held = {split: parts["test"] for split in task.eval_splits}
        data = DatasetDict({"train": parts["train"], **held})
    cap = config.max_train_samples
    limits = {"train": cap.get(task.name) if isinstance(cap, dict) else cap}
    limits.update({s: config.max_eval_samples for s in task.eval_splits})
    parts = {}
    for split, limit in limits.items():
        ds = data[split]
        if limit is not None and limit < len(ds):
            ds = ds.shuffle(seed=0).select(range(limit))  # the same subset for every run
        parts[split] = ds

    def tokenize(batch: dict[str, list]) -> dict[str, list]:
        texts = [batch[c] for c in task.text_columns]  # one text or a pair
        return tokenizer(*texts, truncation=True, max_length=config.max_length)

    return DatasetDict(parts).map(
        tokenize, batched=True, remove_columns=list(task.text_columns), desc=f"tokenize {task.name}"
    )


def _build_model(
    config: GlueConfig, task: GlueTask, variant: str, tokenizer: PreTrainedTokenizerBase
) -> PreTrainedModel:
    from transformers import AutoModelForSequenceClassification

    import tisa.hf  # registers TISA models with the Auto classes

    kwargs: dict[str, Any] = {
        "num_labels": task.num_labels,
        "problem_type": "regression" if task.is_regression else "single_label_classification",
    }
    if not task.is_regression:
        kwargs["id2label"] = dict(enumerate(task.label_names))
        kwargs["label2id"] = {n: i for i, n in enumerate(task.label_names)}
    model = AutoModelForSequenceClassification.from_pretrained(
        config.model, ignore_mismatched_sizes=True, **kwargs
    )
    if model.config.pad_token_id is None:
        model.config.pad_token_id = tokenizer.pad_token_id
    if variant != "none":
        kernels = config.num_kernels if tisa.hf.takes_num_kernels(config.scoring) else None
        tisa.hf.add_tisa(
            model,
            tisa.hf.TisaSettings(
                scoring=config.scoring, num_kernels=kernels, position_embeddings=variant
            ),
            start=config.tisa_start,
        )
    return model


def _check_max_length(config: GlueConfig) -> None:
    """Absolute position embeddings cap the sequence length (unless TISA replaces them)."""
    from transformers import AutoConfig

    limit = getattr(AutoConfig.from_pretrained(config.model), "max_position_embeddings", None)
    capped = [v for v in config.variants if v != "remove"]
    if limit is not None and capped and config.max_length > limit:
        raise ValueError(
            f"max_length: {config.max_length} exceeds the {limit} positions of "
            f"{config.model!r} (variants {capped} keep its position embeddings); "
            f"expected at most {limit}"
        )


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

    from tisa.data.glue import compute_metrics
    from tisa.hf import TisaTrainer, positional_parameters, scoring_movement, scoring_snapshot

    folder = run_dir(config.output_dir, task.name, variant, seed)
    checkpoints = folder / "checkpoints"
    last = _status(config, task.name, variant, seed).checkpoint

    set_seed(seed)  # the classifier head and TISA parameters start from this seed
    model = _build_model(config, task, variant, tokenizer)
    positional = positional_parameters(model)
    start = scoring_snapshot(model)  # taken before a resume loads trained values
    args = TrainingArguments(
        output_dir=str(checkpoints),
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
        bf16=config.bf16,
        dataloader_pin_memory=torch.cuda.is_available(),
    )
    extra = {} if variant == "none" else {"tisa_learning_rate": config.tisa_learning_rate}
    trainer = (Trainer if variant == "none" else TisaTrainer)(
        model=model,
        args=args,
        train_dataset=encoded["train"],
        data_collator=DataCollatorWithPadding(tokenizer),
        processing_class=tokenizer,
        callbacks=list(callbacks),
        **extra,
    )
    train_output = trainer.train(resume_from_checkpoint=None if last is None else str(last))

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
        "train_loss": float(train_output.training_loss),
        "train_runtime_s": float(train_output.metrics.get("train_runtime", float("nan"))),
        "resumed_from": None if last is None else last.name,
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
def _read_result(path: Path) -> dict[str, Any]:
    result = json.loads(path.read_text())
    result["metrics"] = {k: _nan(v) for k, v in result["metrics"].items()}
    result["score"] = _nan(result["score"])
    return result


def run_glue(config: GlueConfig, *, callbacks: Sequence[TrainerCallback] = ()) -> GlueResults:
    """Runs every (task, variant, seed) of ``config`` not finished yet, then summarises.

    Finished runs (a ``result.json`` in their folder) are skipped; an interrupted run
    resumes from its last Trainer checkpoint. Tables and the plot are rewritten after
    every finished run, so they always show what is done.

    Args:
        config: the experiment.
        callbacks: extra ``transformers.TrainerCallback`` objects given to every Trainer.

    Returns:
        The runs, the summary rows and the paths of the written tables.

    Raises:
        ValueError: bad settings or data (also settings that differ from those of the
            runs already in ``config.output_dir``).
        FileNotFoundError: missing data (the message says how to get it).
    """
    from transformers import AutoTokenizer

    _check_settings(config)
    main = _is_main_process()
    plan = [(t, v, s) for t in config.tasks for v in config.variants for s in config.seeds]

    def done(t: str, v: str, s: int) -> bool:
        return _status(config, t, v, s).finished

    pending_tasks = [t for t in config.tasks if not all(done(*r) for r in plan if r[0] == t)]
    # load every pending task first, so missing data fails before hours of training
    with _main_process_first():  # downloads and dataset caches: once, by rank 0
        data = {t: _load_task(config, t) for t in pending_tasks}
    tokenizer = None
    if pending_tasks:
        import tisa.hf  # noqa: F401  (AutoTokenizer / Auto models read saved TISA models)

        _check_max_length(config)
        tokenizer = AutoTokenizer.from_pretrained(config.model)
        if tokenizer.pad_token is None:  # e.g. GPT-2: pad with the end-of-text token
            tokenizer.pad_token = tokenizer.eos_token
        _check_settings(config, write=True)  # every check passed: training starts

    files: dict[str, Path] = {}
    with tqdm(
        total=len(plan),
        initial=sum(done(*r) for r in plan),
        desc="GLUE runs",
        unit="run",
        disable=not main,
    ) as bar:
        for task_name in pending_tasks:
            task, dataset = data[task_name]
            with _main_process_first():
                encoded = _encode(config, task, dataset, tokenizer)
            for variant in config.variants:
                for seed in config.seeds:
                    if done(task_name, variant, seed):
                        continue
                    bar.set_postfix_str(f"{task_name} {variant} seed {seed}")
                    result = _fine_tune(config, task, encoded, tokenizer, variant, seed, callbacks)
                    if main:
                        folder = run_dir(config.output_dir, task_name, variant, seed)
                        write_json(folder / "result.json", result)
                        if not config.keep_checkpoints:
                            shutil.rmtree(folder / "checkpoints", ignore_errors=True)
                        files = _write_tables(config, _collect(config, plan))
                    bar.update()

    runs = _collect(config, plan)
    summary = summarize(runs, config.baseline_variant)
    if main and runs:
        files = _write_tables(config, runs)
    return GlueResults(runs=runs, summary=summary, files=files)


def _collect(config: GlueConfig, plan: Sequence[tuple[str, str, int]]) -> list[dict[str, Any]]:
    runs = []
    for t, v, s in plan:
        path = run_dir(config.output_dir, t, v, s) / "result.json"
        if path.is_file():
            runs.append(_read_result(path))
    return runs


# --------------------------------------------------------------------------------------
# summary: tables and plot
# --------------------------------------------------------------------------------------
def relative_error_reduction(score: float, baseline_score: float) -> float:
    """``(err_base - err) / err_base`` with ``err = 1 - score`` (scores bounded by 1).

    Positive when ``score`` beats the baseline: 0.05 means 5% of the baseline's error
    is gone. NaN when the baseline has no error.
    """
    err, err_base = 1.0 - score, 1.0 - baseline_score
    if err_base == 0 or math.isnan(err_base) or math.isnan(err):
        return float("nan")
    return (err_base - err) / err_base


def paired_comparison(
    scores: dict[int, float], baseline_scores: dict[int, float]
) -> dict[str, Any]:
    """Compares a variant with the baseline seed by seed (same seed = same data order and
    head initialisation, so the seeds pair up).

    Args:
        scores: seed -> task score of the variant.
        baseline_scores: seed -> task score of the baseline.

    Returns:
        ``seeds`` (paired), ``n``, ``mean_diff`` and ``median_diff`` (variant - baseline),
        ``ci95`` (a t interval of the mean difference; NaN with fewer than 2 pairs),
        ``wins`` / ``losses`` / ``ties``, ``sign_test_p`` (two-sided exact binomial test of
        wins against losses) and ``median_rer`` (median over seeds of the relative error
        reduction).
    """
    from scipy import stats

    seeds = sorted(set(scores) & set(baseline_scores))
    diffs = np.array([scores[s] - baseline_scores[s] for s in seeds], dtype=float)
    rers = [relative_error_reduction(scores[s], baseline_scores[s]) for s in seeds]
    nan = float("nan")
    out: dict[str, Any] = {
        "seeds": seeds,
        "n": len(seeds),
        "mean_diff": float(diffs.mean()) if len(seeds) else nan,
        "median_diff": float(np.median(diffs)) if len(seeds) else nan,
        "ci95": [nan, nan],
        "wins": int((diffs > 0).sum()),
        "losses": int((diffs < 0).sum()),
        "ties": int((diffs == 0).sum()),
        "sign_test_p": nan,
        "median_rer": float(np.nanmedian(rers)) if any(not math.isnan(r) for r in rers) else nan,
    }
    if len(seeds) >= 2:
        half = stats.t.ppf(0.975, len(seeds) - 1) * diffs.std(ddof=1) / math.sqrt(len(seeds))
        out["ci95"] = [float(diffs.mean() - half), float(diffs.mean() + half)]
    decided = out["wins"] + out["losses"]
    if decided:
        out["sign_test_p"] = float(stats.binomtest(out["wins"], decided, 0.5).pvalue)
    return out


def summarize(runs: Sequence[dict[str, Any]], baseline: str) -> list[dict[str, Any]]:
    """Median over seeds per (task, variant), and a GLUE average row per variant.

    Args:
        runs: result dicts of single runs (keys task, variant, seed, metrics, score,
            positional_parameters).
        baseline: variant the relative error reduction is computed against.

    Returns:
        Rows with keys task, variant, seeds, metrics (median of each metric), score
        (median of the per-seed task scores), score_min, score_max, positional_parameters,
        relative_error_reduction (of the medians; NaN for the baseline itself or without a
        baseline), paired (:func:`paired_comparison` against the baseline, None for the
        baseline itself) and baseline. With several tasks, each variant that has all of
        them gets a row with task ``"glue"``: the mean of its task scores (the GLUE
        average); its paired comparison is over the per-seed averages of the seeds that
        have every task.
    """
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in runs:
        groups.setdefault((r["task"], r["variant"]), []).append(r)
    rows = []
    per_seed: dict[tuple[str, str], dict[int, float]] = {}
    for (task, variant), rs in groups.items():
        rs = sorted(rs, key=lambda r: r["seed"])
        scores = np.array([r["score"] for r in rs], dtype=float)
        per_seed[(task, variant)] = {r["seed"]: float(r["score"]) for r in rs}
        rows.append(
            {
                "task": task,
                "variant": variant,
                "seeds": [r["seed"] for r in rs],
                "metrics": {
                    m: float(np.median([r["metrics"][m] for r in rs])) for m in rs[0]["metrics"]
                },
                "score": float(np.median(scores)),
                "score_min": float(scores.min()),
                "score_max": float(scores.max()),
                "positional_parameters": rs[0]["positional_parameters"],
            }
        )
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    if len(tasks) > 1:
        for variant in dict.fromkeys(r["variant"] for r in rows):
            mine = {r["task"]: r for r in rows if r["variant"] == variant}
            if set(mine) == set(tasks):
                complete = set.intersection(*(set(per_seed[(t, variant)]) for t in tasks))
                averages = {
                    seed: float(np.mean([per_seed[(t, variant)][seed] for t in tasks]))
                    for seed in sorted(complete)
                }
                per_seed[("glue", variant)] = averages
                rows.append(
                    {
                        "task": "glue",
                        "variant": variant,
                        "seeds": sorted({s for r in mine.values() for s in r["seeds"]}),
                        "metrics": {},
                        "score": float(np.mean([r["score"] for r in mine.values()])),
                        "score_min": min(averages.values(), default=float("nan")),
                        "score_max": max(averages.values(), default=float("nan")),
                        "positional_parameters": next(iter(mine.values()))["positional_parameters"],
                    }
                )
    base = {r["task"]: r["score"] for r in rows if r["variant"] == baseline}
    for r in rows:
        task, variant = r["task"], r["variant"]
        if variant == baseline or task not in base:
            r["relative_error_reduction"] = float("nan")
            r["paired"] = None
        else:
            r["relative_error_reduction"] = relative_error_reduction(r["score"], base[task])
            r["paired"] = paired_comparison(per_seed[(task, variant)], per_seed[(task, baseline)])
        r["baseline"] = baseline
    return rows


def _pct(value: float, digits: int = 2) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{100 * value:.{digits}f}"


def summary_markdown(summary: Sequence[dict[str, Any]]) -> str:
    """The summary as a Markdown table (scores and metrics x 100), and with several
    variants the paired comparison over seeds."""
    from tisa.reports.markdown import markdown_table

    baseline = summary[0]["baseline"] if summary else "none"
    rows = []
    for r in summary:
        metrics = ", ".join(f"{k} {_pct(v)}" for k, v in r["metrics"].items()) or "GLUE average"
        spread = (
            "" if math.isnan(r["score_min"]) else f"{_pct(r['score_min'])} - {_pct(r['score_max'])}"
        )
        pos = r["positional_parameters"]
        rer = r["relative_error_reduction"]
        rows.append(
            [
                r["task"],
                r["variant"],
                len(r["seeds"]),
                metrics,
                _pct(r["score"]),
                spread,
                f"{pos['absolute']:,} / {pos['tisa']:,} / {pos['total']:,}",
                "-" if math.isnan(rer) else f"{100 * rer:+.1f}%",
            ]
        )
    columns = ["task", "variant", "seeds", "metrics (median)", "score (median)", "min - max"]
    columns += [
        "positional params (absolute / TISA / total)",
        f"rel. error reduction vs {baseline}",
    ]
    text = markdown_table(columns, rows, align="llllrlrr")
    paired = [r for r in summary if r.get("paired")]
    if not paired:
        return text
    rows = []
    for r in paired:
        p = r["paired"]
        lo, hi = p["ci95"]
        ci = "" if math.isnan(lo) else f" [{100 * lo:+.2f}, {100 * hi:+.2f}]"
        rows.append(
            [
                r["task"],
                r["variant"],
                p["n"],
                f"{100 * p['mean_diff']:+.2f}{ci}",
                f"{100 * p['median_diff']:+.2f}",
                f"{p['wins']} / {p['losses']}",
                "n/a" if math.isnan(p["sign_test_p"]) else f"{p['sign_test_p']:.3g}",
                "n/a" if math.isnan(p["median_rer"]) else f"{100 * p['median_rer']:+.1f}%",
            ]
        )
    columns = ["task", "variant", "pairs", "mean diff [95% CI]", "median diff"]
    columns += ["wins / losses", "sign test p", "median rel. error reduction"]
    return (
        text + f"\nPaired over seeds against {baseline} (difference of scores x 100; same seed = "
        "same data order and head initialisation):\n\n"
        + markdown_table(columns, rows, align="llrlrrrr")
    )


def _summary_csv(summary: Sequence[dict[str, Any]]) -> str:
    metric_names = list(dict.fromkeys(m for r in summary for m in r["metrics"]))
    header = [
        "task",
        "variant",
        "n_seeds",
        "seeds",
        "score",
        "score_min",
        "score_max",
        *metric_names,
        "positional_absolute",
        "positional_tisa",
        "positional_total",
        "relative_error_reduction",
        "baseline",
    ]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=header, lineterminator="\n")
    writer.writeheader()
    for r in summary:
        pos = r["positional_parameters"]
        row = {
            "task": r["task"],
            "variant": r["variant"],
            "n_seeds": len(r["seeds"]),
            "seeds": " ".join(str(s) for s in r["seeds"]),
            "score": r["score"],
            "score_min": r["score_min"],
            "score_max": r["score_max"],
            **{m: r["metrics"].get(m, "") for m in metric_names},
            "positional_absolute": pos["absolute"],
            "positional_tisa": pos["tisa"],
            "positional_total": pos["total"],
            "relative_error_reduction": r["relative_error_reduction"],
            "baseline": r["baseline"],
        }
        writer.writerow(
            {k: "" if isinstance(v, float) and math.isnan(v) else v for k, v in row.items()}
        )
    return buffer.getvalue()


def _write_tables(config: GlueConfig, runs: Sequence[dict[str, Any]]) -> dict[str, Path]:
    out = Path(config.output_dir)
    summary = summarize(runs, config.baseline_variant)
    files = {
        "markdown": out / "results.md",
        "csv": out / "results.csv",
        "json": out / "results.json",
    }
    write_atomic(files["markdown"], summary_markdown(summary))
    write_atomic(files["csv"], _summary_csv(summary))
    write_json(files["json"], {"summary": summary, "runs": list(runs)})
    if config.plot and summary:
        files["plot"] = out / "results.png"
        from tisa.reports.charts import glue_results
        from tisa.reports.figures import save_figure

        save_figure(glue_results(summary), files["plot"], dpi=120)
    return files


# --------------------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds the ``tisa glue`` options to ``parser``."""
    g = parser.add_argument_group("what to run")
    g.add_argument(
        "--task",
        nargs="+",
        default=None,
        metavar="TASK",
        choices=[*GLUE_TASKS, "all", "custom"],
        help=f"GLUE task(s): {', '.join(GLUE_TASKS)}, or all; 'custom' with --train-file",
    )
    g.add_argument("--model", required=True, help="HF model id or local path")
    g.add_argument(
        "--tisa",
        nargs="+",
        default=["none"],
        choices=VARIANTS,
        help="position variant(s) to compare: none (model as is), keep (TISA next to the "
        "position embeddings), remove (TISA instead of them); default: none",
    )
    g.add_argument("--scoring", default="rbf", help="TISA scoring family (default: rbf)")
    g.add_argument("--num-kernels", type=int, default=5, help="RBF kernels per head (default: 5)")
    g.add_argument(
        "--tisa-learning-rate",
        type=float,
        default=None,
        help="learning rate of the TISA scoring parameters, which get no weight decay "
        f"(default: {DEFAULT_TISA_LEARNING_RATE:g})",
    )
    g.add_argument(
        "--tisa-start",
        default=None,
        choices=["paper", "zero", "spread"],
        help="how RBF scorers start: paper (the paper's initialisation), zero (zero "
        "amplitudes), spread (zero amplitudes, offsets over [-10, 10]); default: spread",
    )
    g.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3], help="default: 1 2 3")
    g.add_argument(
        "--baseline",
        default=None,
        choices=VARIANTS,
        help="variant the relative error reduction is computed against (default: none "
        "when it is compared, else the first --tisa value)",
    )

    g = parser.add_argument_group("training")
    length = g.add_mutually_exclusive_group()
    length.add_argument("--epochs", type=float, default=3.0, help="default: 3")
    length.add_argument("--max-steps", type=int, default=None, help="steps instead of epochs")
    g.add_argument("--batch-size", type=int, default=32, help="per device (default: 32)")
    g.add_argument("--eval-batch-size", type=int, default=None, help="default: --batch-size")
    g.add_argument("--learning-rate", type=float, default=2e-5, help="default: 2e-5")
    g.add_argument("--warmup-ratio", type=float, default=0.1, help="default: 0.1")
    g.add_argument("--weight-decay", type=float, default=0.01, help="default: 0.01")
    g.add_argument("--max-length", type=int, default=128, help="tokens (default: 128)")
    g.add_argument(
        "--max-train-samples",
        nargs="+",
        default=None,
        metavar="N|TASK=N",
        help="train on the first N examples after a shuffle with seed 0; TASK=N caps only "
        "that task (e.g. sst2=8000)",
    )
    g.add_argument("--max-eval-samples", type=int, default=None, help="likewise for dev sets")
    g.add_argument(
        "--holdout",
        type=float,
        default=0.0,
        help="evaluate on this share of each training set (split off with seed 0) instead "
        "of the dev sets: for choosing hyperparameters (default: 0, evaluate on dev)",
    )
    g.add_argument("--bf16", action="store_true", help="bfloat16 mixed precision (GPU)")
    g.add_argument("--save-steps", type=int, default=500, help="checkpoint every N steps")
    g.add_argument("--logging-steps", type=int, default=50, help="log every N steps")

    g = parser.add_argument_group("data")
    g.add_argument(
        "--glue-dir",
        default=None,
        help="classic glue_data folder (default: the HF hub dataset nyu-mll/glue)",
    )
    g.add_argument("--hf-path", default=HF_GLUE, help=f"hub dataset (default: {HF_GLUE})")
    g.add_argument("--train-file", default=None, help="custom task: .csv, .tsv or .jsonl")
    g.add_argument("--validation-file", default=None, help="custom task: evaluation file")
    g.add_argument("--text-columns", nargs="+", default=None, help="custom task: 1 or 2 columns")
    g.add_argument("--label-column", default="label", help="custom task (default: label)")
    g.add_argument(
        "--task-type",
        default="auto",
        choices=["auto", "classification", "regression"],
        help="custom task (default: inferred from the labels)",
    )

    g = parser.add_argument_group("output")
    g.add_argument("--output-dir", default="glue_runs", help="default: glue_runs")
    g.add_argument(
        "--keep-checkpoints", action="store_true", help="keep finished runs' checkpoints"
    )
    g.add_argument("--no-plot", action="store_true", help="do not write results.png")


def _parse_caps(values: Sequence[str] | None) -> int | dict[str, int] | None:
    """``--max-train-samples N`` (every task) or ``TASK=N ...`` (the tasks named)."""
    if not values:
        return None
    if len(values) == 1 and "=" not in values[0]:
        return _int_arg(values[0], "--max-train-samples")
    caps = {}
    for value in values:
        task, sep, number = value.partition("=")
        if not sep or not task:
            raise ValueError(
                f"--max-train-samples: expected N or TASK=N values, got {list(values)}"
            )
        caps[task.lower()] = _int_arg(number, f"--max-train-samples {task}")
    return caps


def _int_arg(text: str, name: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{name}: expected an integer, got {text!r}") from None


def config_from_args(args: argparse.Namespace) -> GlueConfig:
    """The :class:`GlueConfig` described by parsed ``tisa glue`` arguments."""
    return GlueConfig(
        model=args.model,
        tasks=tuple(args.task or ()),
        variants=tuple(args.tisa),
        seeds=tuple(args.seeds),
        output_dir=args.output_dir,
        epochs=args.epochs,
        max_steps=args.max_steps,
        batch_size=args.batch_size,
        eval_batch_size=args.eval_batch_size,
        learning_rate=args.learning_rate,
        warmup_ratio=args.warmup_ratio,
        weight_decay=args.weight_decay,
        max_length=args.max_length,
        max_train_samples=_parse_caps(args.max_train_samples),
        max_eval_samples=args.max_eval_samples,
        baseline=args.baseline,
        scoring=args.scoring,
        num_kernels=args.num_kernels,
        tisa_learning_rate=args.tisa_learning_rate,
        tisa_start=args.tisa_start,
        holdout=args.holdout,
        glue_dir=args.glue_dir,
        hf_path=args.hf_path,
        train_file=args.train_file,
        validation_file=args.validation_file,
        text_columns=None if args.text_columns is None else tuple(args.text_columns),
        label_column=args.label_column,
        task_type=args.task_type,
        save_steps=args.save_steps,
        logging_steps=args.logging_steps,
        bf16=args.bf16,
        keep_checkpoints=args.keep_checkpoints,
        plot=not args.no_plot,
    )


def run(args: argparse.Namespace) -> int:
    """``tisa glue``: runs the experiment and prints the results table."""
    try:
        config = config_from_args(args)
        results = run_glue(config)
    except (ValueError, FileNotFoundError) as err:
        print(f"tisa glue: error: {err}", file=sys.stderr)
        return 2
    if _is_main_process():
        print(summary_markdown(results.summary), end="")
        for name, path in results.files.items():
            print(f"{name}: {path}")
    return 0
