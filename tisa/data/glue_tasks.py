"""GLUE tasks: the registry (columns, labels, evaluation splits, glue_data layout) and the
official metrics.

Metrics (scipy / scikit-learn): CoLA Matthews correlation; STS-B Pearson and Spearman;
MRPC and QQP accuracy and F1 (positive class 1: equivalent / duplicate); MNLI accuracy on
the matched and the mismatched dev set; the other tasks accuracy. All are fractions with
an upper bound of 1. A task's score is the unweighted mean of its metrics, and the GLUE
average is the mean of the task scores, as on the GLUE leaderboard.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats
from sklearn import metrics as skm

__all__ = [
    "GLUE_TASKS",
    "METRICS",
    "GlueTask",
    "accuracy",
    "compute_metrics",
    "custom_task",
    "f1",
    "get_task",
    "glue_average",
    "matthews_corr",
    "pearson",
    "spearman",
    "task_score",
]


# --------------------------------------------------------------------------------------
# metrics
# --------------------------------------------------------------------------------------
def _arrays(predictions: ArrayLike, labels: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    p, y = np.asarray(predictions), np.asarray(labels)
    if p.shape != y.shape or p.ndim != 1:
        raise ValueError(
            f"predictions and labels: expected two 1-D arrays of equal length, got shapes "
            f"{p.shape} and {y.shape}"
        )
    if p.size == 0:
        raise ValueError("predictions: expected at least one example, got none")
    return p, y


def accuracy(predictions: ArrayLike, labels: ArrayLike) -> float:
    """Share of predicted class ids equal to the labels. Inputs: (N,) integer arrays."""
    p, y = _arrays(predictions, labels)
    return float(skm.accuracy_score(y, p))


def f1(predictions: ArrayLike, labels: ArrayLike) -> float:
    """Binary F1 of the positive class 1 (MRPC: equivalent, QQP: duplicate). Inputs: (N,)."""
    p, y = _arrays(predictions, labels)
    return float(skm.f1_score(y, p, pos_label=1, average="binary", zero_division=0.0))


def matthews_corr(predictions: ArrayLike, labels: ArrayLike) -> float:
    """Matthews correlation coefficient (CoLA); 0 when a side is constant. Inputs: (N,)."""
    p, y = _arrays(predictions, labels)
    return float(skm.matthews_corrcoef(y, p))


def pearson(predictions: ArrayLike, labels: ArrayLike) -> float:
    """Pearson correlation (STS-B); NaN when a side is constant. Inputs: (N,) floats."""
    p, y = _arrays(predictions, labels)
    return float(stats.pearsonr(p.astype(np.float64), y.astype(np.float64)).statistic)


def spearman(predictions: ArrayLike, labels: ArrayLike) -> float:
    """Spearman rank correlation (STS-B); NaN when a side is constant. Inputs: (N,)."""
    p, y = _arrays(predictions, labels)
    return float(stats.spearmanr(p.astype(np.float64), y.astype(np.float64)).statistic)


METRICS: dict[str, Callable[[ArrayLike, ArrayLike], float]] = {
    "accuracy": accuracy,
    "f1": f1,
    "matthews_corr": matthews_corr,
    "pearson": pearson,
    "spearman": spearman,
}


def task_score(metrics: Mapping[str, float]) -> float:
    """A task's GLUE score: the unweighted mean of its metrics (NaN if any is NaN)."""
    if not metrics:
        raise ValueError("metrics: expected at least one metric, got none")
    return float(np.mean([float(v) for v in metrics.values()]))


def glue_average(metrics_by_task: Mapping[str, Mapping[str, float]]) -> float:
    """GLUE-style average: per task the mean of its metrics, then the mean over tasks.

    Args:
        metrics_by_task: task name -> that task's official metrics, e.g.
            ``{"mrpc": {"accuracy": 0.8, "f1": 0.9}, "cola": {"matthews_corr": 0.5}}``
            gives ``((0.8 + 0.9) / 2 + 0.5) / 2 = 0.675``.
    """
    if not metrics_by_task:
        raise ValueError("metrics_by_task: expected at least one task, got none")
    return float(np.mean([task_score(m) for m in metrics_by_task.values()]))


# --------------------------------------------------------------------------------------
# task registry
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GlueTask:
    """One sentence(-pair) task: columns, labels, metrics and its ``glue_data`` layout.

    Attributes:
        name: registry name (``"rte"``), also the hub config name.
        text_columns: one or two canonical text columns, in the order fed to the tokenizer.
        label_names: class names in label-id order (the hub's ``ClassLabel`` names), or
            ``None`` for a regression task.
        split_metrics: names in :data:`METRICS` computed on every evaluation split.
        eval_splits: evaluation splits (dev sets; MNLI has a matched and a mismatched one).
        folder: folder name in ``glue_data`` (``None`` for custom tasks).
        tsv_header: whether the TSV files start with a header line (CoLA's do not).
        tsv_text: TSV columns (header names, or indices without a header) holding the text
            columns, in the order of ``text_columns``.
        tsv_label: TSV column holding the label.
        tsv_label_values: raw TSV label strings in label-id order (classification only).
    """

    name: str
    text_columns: tuple[str, ...]
    label_names: tuple[str, ...] | None
    split_metrics: tuple[str, ...]
    eval_splits: tuple[str, ...] = ("validation",)
    folder: str | None = None
    tsv_header: bool = True
    tsv_text: tuple[str | int, ...] = ()
    tsv_label: str | int = "label"
    tsv_label_values: tuple[str, ...] | None = None

    @property
    def is_regression(self) -> bool:
        return self.label_names is None

    @property
    def num_labels(self) -> int:
        """Output size of the classifier head (1 for regression)."""
        return 1 if self.label_names is None else len(self.label_names)

    @property
    def metric_names(self) -> tuple[str, ...]:
        """Official metric names; with several eval splits suffixed by the split
        (MNLI: ``accuracy_matched``, ``accuracy_mismatched``)."""
        if len(self.eval_splits) == 1:
            return self.split_metrics
        return tuple(
            f"{m}_{_split_suffix(s)}" for s in self.eval_splits for m in self.split_metrics
        )

    def score(self, metrics: Mapping[str, float]) -> float:
        """The task's score: mean of its official metrics (extra keys are ignored)."""
        missing = [m for m in self.metric_names if m not in metrics]
        if missing:
            raise ValueError(
                f"metrics: task {self.name!r} expects {list(self.metric_names)}, missing {missing}"
            )
        return task_score({m: metrics[m] for m in self.metric_names})


def _split_suffix(split: str) -> str:
    return split.removeprefix("validation_")


_NLI2 = ("entailment", "not_entailment")

GLUE_TASKS: dict[str, GlueTask] = {
    t.name: t
    for t in (
        GlueTask(
            name="cola",
            text_columns=("sentence",),
            label_names=("unacceptable", "acceptable"),
            split_metrics=("matthews_corr",),
            folder="CoLA",
            tsv_header=False,  # source, label, original judgement, sentence
            tsv_text=(3,),
            tsv_label=1,
            tsv_label_values=("0", "1"),
        ),
        GlueTask(
            name="sst2",
            text_columns=("sentence",),
            label_names=("negative", "positive"),
            split_metrics=("accuracy",),
            folder="SST-2",
            tsv_text=("sentence",),
            tsv_label_values=("0", "1"),
        ),
        GlueTask(
            name="mrpc",
            text_columns=("sentence1", "sentence2"),
            label_names=("not_equivalent", "equivalent"),
            split_metrics=("accuracy", "f1"),
            folder="MRPC",
            tsv_text=("#1 String", "#2 String"),
            tsv_label="Quality",
            tsv_label_values=("0", "1"),
        ),
        GlueTask(
            name="stsb",
            text_columns=("sentence1", "sentence2"),
            label_names=None,
            split_metrics=("pearson", "spearman"),
            folder="STS-B",
            tsv_text=("sentence1", "sentence2"),
            tsv_label="score",
        ),
        GlueTask(
            name="qqp",
            text_columns=("question1", "question2"),
            label_names=("not_duplicate", "duplicate"),
            split_metrics=("accuracy", "f1"),
            folder="QQP",
            tsv_text=("question1", "question2"),
            tsv_label="is_duplicate",
            tsv_label_values=("0", "1"),
        ),
        GlueTask(
            name="mnli",
            text_columns=("premise", "hypothesis"),
            label_names=("entailment", "neutral", "contradiction"),
            split_metrics=("accuracy",),
            eval_splits=("validation_matched", "validation_mismatched"),
            folder="MNLI",
            tsv_text=("sentence1", "sentence2"),
            tsv_label="gold_label",
            tsv_label_values=("entailment", "neutral", "contradiction"),
        ),
        GlueTask(
            name="qnli",
            text_columns=("question", "sentence"),
            label_names=_NLI2,
            split_metrics=("accuracy",),
            folder="QNLI",
            tsv_text=("question", "sentence"),
            tsv_label_values=_NLI2,
        ),
        GlueTask(
            name="rte",
            text_columns=("sentence1", "sentence2"),
            label_names=_NLI2,
            split_metrics=("accuracy",),
            folder="RTE",
            tsv_text=("sentence1", "sentence2"),
            tsv_label_values=_NLI2,
        ),
        GlueTask(
            name="wnli",
            text_columns=("sentence1", "sentence2"),
            label_names=("not_entailment", "entailment"),
            split_metrics=("accuracy",),
            folder="WNLI",
            tsv_text=("sentence1", "sentence2"),
            tsv_label_values=("0", "1"),
        ),
    )
}


def get_task(name: str) -> GlueTask:
    """The registered GLUE task ``name`` (case-insensitive; ``"SST-2"`` works too)."""
    key = str(name).lower().replace("-", "")
    if key not in GLUE_TASKS:
        raise ValueError(f"task: unknown GLUE task {name!r}; expected one of {list(GLUE_TASKS)}")
    return GLUE_TASKS[key]


def custom_task(
    name: str, text_columns: Sequence[str], label_names: Sequence[str] | None
) -> GlueTask:
    """A task read from custom files: accuracy for classification, Pearson and Spearman
    for regression (``label_names=None``)."""
    text_columns = tuple(text_columns)
    if len(text_columns) not in (1, 2):
        raise ValueError(
            f"text_columns: expected one or two column names, got {list(text_columns)}"
        )
    return GlueTask(
        name=name,
        text_columns=text_columns,
        label_names=None if label_names is None else tuple(str(n) for n in label_names),
        split_metrics=("accuracy",) if label_names is not None else ("pearson", "spearman"),
    )


def compute_metrics(
    task: GlueTask, predictions: Mapping[str, ArrayLike], labels: Mapping[str, ArrayLike]
) -> dict[str, float]:
    """The task's official metrics from per-split predictions.

    Args:
        task: the task.
        predictions: eval split -> (N,) predicted class ids, or (N,) scores for regression.
        labels: eval split -> (N,) gold labels.

    Returns:
        metric name (see :attr:`GlueTask.metric_names`) -> value.
    """
    missing = [s for s in task.eval_splits if s not in predictions or s not in labels]
    if missing:
        raise ValueError(
            f"predictions: task {task.name!r} is evaluated on {list(task.eval_splits)}, "
            f"missing {missing}"
        )
    several = len(task.eval_splits) > 1
    out = {}
    for split in task.eval_splits:
        for name in task.split_metrics:
            key = f"{name}_{_split_suffix(split)}" if several else name
            out[key] = METRICS[name](predictions[split], labels[split])
    return out
