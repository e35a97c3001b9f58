"""What a GLUE experiment is: :class:`GlueConfig`, one declaration of every setting.

The settings that runs in one output folder must share (:meth:`GlueConfig.settings`) are
recorded in its ``settings.json``, the TISA ones per TISA variant (``tisa_variants``), so
an output folder can hold the baseline's runs before the TISA settings are chosen.
``tisa glue`` derives its options from these fields (:mod:`tisa.cli.args`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from tisa._validate import check_int
from tisa.data.glue import GLUE_TASKS, HF_GLUE, TaskType, get_task

__all__ = [
    "VARIANTS",
    "GlueConfig",
    "parse_train_caps",
]

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
    "position_learning_rate",  # absent from older settings.json, where it was None
)
# settings of the TISA variants only: checked per variant, so an output folder can hold
# the baseline's runs before the TISA settings are chosen
TISA_SETTING_KEYS = ("scoring", "num_kernels", "tisa_learning_rate", "tisa_start")


def parse_train_caps(values: Sequence[str]) -> int | dict[str, int] | None:
    """``--max-train-samples N`` (every task) or ``TASK=N ...`` (the tasks named).

    Raises:
        ValueError: a value that is neither N nor TASK=N.
    """
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


@dataclass(frozen=True)
class GlueConfig:
    """Everything a GLUE experiment needs; plain data, validated on construction.

    Attributes:
        model: HF model id or local path (a pretrained encoder or a saved TISA model).
        model_name: the name recorded for the model in ``settings.json`` and every result,
            and compared when an output folder is resumed (default: ``model``); for a
            local model whose path differs between machines.
        tasks: GLUE task names (cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte, wnli), or
            all for the nine; with train_file and validation_file: custom, or one GLUE
            task name.
        variants: position variants to compare: none (the model as loaded), keep (TISA
            next to the position embeddings), remove (TISA instead of them).
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
            only the tasks it names (``{"sst2": 8000}``; on the command line sst2=8000).
        max_eval_samples: evaluate on such a subset of each dev set.
        baseline: variant the relative error reduction is computed against (default: none
            when it is compared, else the first variant).
        scoring: TISA scoring family of keep / remove (a tisa.scoring family: rbf, alibi,
            t5, kerple_log, free).
        num_kernels: kernels per head of the rbf family.
        tisa_learning_rate: learning rate of the TISA scoring parameters, which get no
            weight decay (default: learning_rate, the backbone's).
        position_learning_rate: learning rate of the model's own positional parameters:
            its absolute position table, and under the variant none the scoring functions
            of a ``tisa convert`` output. They get no weight decay; 0 freezes them.
            Default (None): trained with the other weights, as the stock Trainer does.
        tisa_start: how RBF scorers start (:data:`tisa.hf.STARTS`): paper (the paper's
            initialisation), zero (zero amplitudes), spread (zero amplitudes, offsets over
            [-10, 10]); default paper.
        holdout: a share of each training set (split off with seed 0) to evaluate on
            instead of the dev sets, for choosing hyperparameters; 0 evaluates on dev.
        glue_dir: classic glue_data folder; default: load from hf_path.
        hf_path: HF hub dataset (or a local folder in its layout).
        train_file: custom training file (CSV, TSV or JSON lines).
        validation_file: custom evaluation file.
        text_columns: one or two text columns of the custom files.
        label_column: label column of the custom files.
        task_type: custom files: classification or regression (auto: from the labels).
        save_steps: Trainer checkpoint interval (steps) for resuming interrupted runs.
        logging_steps: Trainer logging interval (steps).
        bf16: train under bfloat16 autocast: fast on GPUs with bf16 and on CPUs with
            AVX512-BF16 or AMX; elsewhere emulated, many times slower, and warned about
            (:mod:`tisa.hf.precision`).
        keep_checkpoints: keep a finished run's last checkpoint (default: delete it).
        plot: write ``results.png``.
    """

    model: str
    tasks: tuple[str, ...] = field(
        default=(),
        metadata={
            "cli": {"flag": "--task", "choices": [*GLUE_TASKS, "all", "custom"], "metavar": "TASK"}
        },
    )
    variants: tuple[Variant, ...] = field(default=("none",), metadata={"cli": {"flag": "--tisa"}})
    seeds: tuple[int, ...] = (1, 2, 3)
    output_dir: str = "runs/glue"
    epochs: float = 3.0
    max_steps: int | None = None
    batch_size: int = 32
    eval_batch_size: int | None = None
    learning_rate: float = 2e-5
    warmup_ratio: float = 0.1
    weight_decay: float = 0.01
    max_length: int = 128
    max_train_samples: int | dict[str, int] | None = field(
        default=None,
        metadata={"cli": {"nargs": "+", "metavar": "N|TASK=N", "parse": parse_train_caps}},
    )
    max_eval_samples: int | None = None
    baseline: str | None = field(default=None, metadata={"cli": {"choices": list(VARIANTS)}})
    scoring: str = "rbf"
    num_kernels: int = 5
    tisa_learning_rate: float | None = None
    position_learning_rate: float | None = None
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
    model_name: str | None = None

    def __post_init__(self) -> None:
        def put(name: str, value: Any) -> None:
            object.__setattr__(self, name, value)

        if isinstance(self.model, os.PathLike):
            put("model", os.fspath(self.model))
        if not isinstance(self.model, str) or not self.model:
            raise ValueError(f"model: expected a model id or path, got {self.model!r}")
        if self.model_name is not None and (
            not isinstance(self.model_name, str) or not self.model_name.strip()
        ):
            raise ValueError(f"model_name: expected a non-empty name, got {self.model_name!r}")
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
            # the backbone's rate: chosen on held-out training data (docs/glue.md, "Sweep")
            put("tisa_learning_rate", self.learning_rate)
        if not (isinstance(self.tisa_learning_rate, (int, float)) and self.tisa_learning_rate > 0):
            raise ValueError(
                f"tisa_learning_rate: expected a positive number, got {self.tisa_learning_rate!r}"
            )
        put("tisa_learning_rate", float(self.tisa_learning_rate))
        rate = self.position_learning_rate
        if rate is not None:
            if isinstance(rate, bool) or not (isinstance(rate, (int, float)) and rate >= 0):
                raise ValueError(f"position_learning_rate: expected a number >= 0, got {rate!r}")
            put("position_learning_rate", float(rate))
        # torch and transformers load here, when a config is checked: importing it stays light
        from tisa.hf import DEFAULT_START, start_options

        if self.tisa_start is None:
            put("tisa_start", DEFAULT_START if self.scoring == "rbf" else "paper")
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
        out["model"] = self.model_name or self.model
        if variant is not None and variant != "none":
            out.update(self.tisa_settings())
        return out

    def tisa_settings(self) -> dict[str, Any]:
        """The settings of the TISA variants (``settings.json``'s ``tisa_variants``)."""
        return {k: getattr(self, k) for k in TISA_SETTING_KEYS}
