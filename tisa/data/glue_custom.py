"""Custom tasks: a training and an evaluation file (CSV, TSV or JSON lines) read into
the canonical form of :mod:`tisa.data.glue`, with the task type (classification or
regression) and the labels inferred from the data or given.

    load_custom("train.csv", "dev.csv", text_columns=("text",))
"""

from __future__ import annotations

import contextlib
import csv
import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tisa.data.glue import TaskType, short_list, task_features
from tisa.data.glue_tasks import GlueTask, custom_task, get_task

if TYPE_CHECKING:  # datasets is imported lazily: it is slow to import
    from datasets import Dataset, DatasetDict

__all__ = ["load_custom"]

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def _quiet_datasets():
    """Silences the datasets library's own error log while it reads a file: its failure
    becomes one ValueError that names the file (see :func:`_read_table`)."""
    log = logging.getLogger("datasets")
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        log.setLevel(level)


def _read_table(path: Path, cache_dir: str | Path | None, argument: str) -> Dataset:
    """Reads a custom data file; ``argument`` (``train_file``, ...) names it in errors.

    Raises:
        FileNotFoundError: no such file.
        ValueError: an unknown suffix, a folder, an empty file, a file without rows, or one
            the CSV / JSON reader refuses (rows of another width, text that is not
            UTF-8, ...): the message names the file and what the reader said.
    """
    import datasets

    suffix = path.suffix.lower()
    kwargs: dict[str, Any] = {}
    if suffix == ".csv":
        builder = "csv"
        kwargs = {"keep_default_na": False}  # keep "NA" / empty texts as strings
    elif suffix == ".tsv":
        builder = "csv"
        kwargs = {"sep": "\t", "quoting": csv.QUOTE_NONE, "keep_default_na": False}
    elif suffix in (".jsonl", ".json"):
        builder = "json"
    else:
        raise ValueError(
            f"{argument}: expected a .csv, .tsv, .jsonl or .json file, got {str(path)!r}"
        )
    if path.is_dir():
        raise ValueError(f"{argument}: {str(path)!r} is a folder, expected a data file")
    if not path.is_file():
        raise FileNotFoundError(f"{argument}: data file {str(path)!r} not found")
    with open(path, "rb") as fh:
        if not fh.read(1 << 16).strip():
            raise ValueError(f"{argument}: {str(path)!r} is empty, expected a header and rows")
    try:
        with _quiet_datasets():
            table = datasets.load_dataset(
                builder,
                data_files=str(path),
                split="train",
                cache_dir=None if cache_dir is None else str(cache_dir),
                **kwargs,
            )
    except (datasets.exceptions.DatasetGenerationError, ValueError) as err:
        cause = err.__cause__ if err.__cause__ is not None else err
        if isinstance(cause, UnicodeDecodeError):
            reason = f"not UTF-8 text (byte {cause.start} of a chunk: {cause.reason})"
        elif "corresponds to no data" in str(cause):
            reason = "no rows below the header"
        else:
            reason = " ".join(str(cause).split()) or type(cause).__name__
        raise ValueError(f"{argument}: {str(path)!r} cannot be read: {reason}") from err
    if len(table) == 0:
        raise ValueError(f"{argument}: {str(path)!r} holds no rows")
    return table


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)


def _as_number(value: Any) -> float | None:
    """A label as a number: numbers, and strings that read as one ("0.5", " 3 "); else
    None (words, blanks, NaN)."""
    if _is_number(value):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
    else:
        return None
    return None if math.isnan(number) or math.isinf(number) else number


def _is_blank(value: Any) -> bool:
    return (
        value is None
        or (isinstance(value, str) and not value.strip())
        or (_is_number(value) and math.isnan(float(value)))
    )


def _label_key(value: Any) -> str:
    """The class name of a classification label: whole numbers without a decimal point
    (``1``, ``1.0`` and ``"1"`` are one class), other values as written."""
    number = _as_number(value)
    if number is not None:
        return str(int(number)) if number == int(number) else repr(number)
    return str(value).strip()


def _rows(values: Sequence[Any], limit: int = 5) -> str:
    """'row 3', 'rows 3, 7' ... for 0-based indices (rows count from 1, below any header)."""
    shown = ", ".join(str(i + 1) for i in values[:limit])
    more = f" and {len(values) - limit} more" if len(values) > limit else ""
    return ("row " if len(values) == 1 else "rows ") + shown + more


def _infer_task_type(labels: Sequence[Any], where: Path, label_column: str) -> str:
    """``"regression"`` or ``"classification"`` from the training labels.

    Numbers with a fractional part mean regression, whole numbers or words
    classification. Labels that mix numbers and words, or blank labels, are refused: a
    regression file with one text label, or ids mixed with names (``1, 0, neg, pos``),
    would otherwise become a classification task with the wrong classes.
    """
    blank = [i for i, v in enumerate(labels) if _is_blank(v)]
    if blank:
        raise ValueError(
            f"{where}: label column {label_column!r} is blank on {_rows(blank)}; expected a "
            "label on every row"
        )
    numbers = [i for i, v in enumerate(labels) if _as_number(v) is not None]
    words = [i for i, v in enumerate(labels) if _as_number(v) is None]
    if numbers and words:
        raise ValueError(
            f"{where}: label column {label_column!r} mixes numbers "
            f"({short_list([labels[i] for i in numbers])}) and words "
            f"({short_list([labels[i] for i in words])}, {_rows(words)}); expected numbers only "
            "(a regression target, or class ids) or words only (class names); pass "
            "task_type='classification' to take every value as a class name"
        )
    fractional = any(_as_number(labels[i]) != int(_as_number(labels[i])) for i in numbers)
    return "regression" if fractional else "classification"


def _label_id(value: Any) -> int | None:
    """``value`` as a label id (``1``, ``1.0`` or ``"1"``), else ``None``."""
    if isinstance(value, str):
        return int(value) if value.strip().isdigit() else None
    if _is_number(value) and float(value) == int(value):
        return int(value)
    return None


def load_custom(
    train_file: str | Path,
    validation_file: str | Path,
    *,
    text_columns: Sequence[str] | None = None,
    label_column: str = "label",
    task_type: TaskType = "auto",
    task: str | GlueTask | None = None,
    name: str = "custom",
    cache_dir: str | Path | None = None,
) -> tuple[GlueTask, DatasetDict]:
    """Loads a sentence(-pair) task from CSV, TSV or JSON-lines files.

    The task type, unless given, is inferred from the training labels: numbers with a
    fractional part mean regression, whole numbers or words classification with the
    sorted distinct training labels as classes. Labels that mix numbers and words, and
    blank labels, are refused (unless ``task_type="classification"`` says that every
    value is a class name). With ``task`` set to a GLUE task, its columns, labels (given
    by name or id) and metrics apply to the files instead.

    Args:
        train_file: training data (``.csv``, ``.tsv`` read without quoting, ``.jsonl``).
        validation_file: evaluation data in the same layout.
        text_columns: one or two text columns (default: the GLUE task's, else required).
        label_column: column holding the label.
        task_type: ``"auto"``, ``"classification"`` or ``"regression"``.
        task: optional GLUE task whose label set the files must match.
        name: name of the inferred task (ignored when ``task`` is given).
        cache_dir: datasets cache folder.

    Returns:
        (task, DatasetDict with splits ``train`` and ``validation`` in canonical form).

    Raises:
        ValueError: bad arguments; a file that is empty, has no rows or cannot be parsed;
            missing columns; blank or mixed labels; labels that do not match the task
            (the message names the file and the unexpected labels).
        FileNotFoundError: a file that does not exist.
    """
    from datasets import Dataset, DatasetDict

    if task_type not in ("auto", "classification", "regression"):
        raise ValueError(
            f"task_type: expected 'auto', 'classification' or 'regression', got {task_type!r}"
        )
    glue = None if task is None else (task if isinstance(task, GlueTask) else get_task(task))
    if glue is not None:
        expected = "regression" if glue.is_regression else "classification"
        if task_type not in ("auto", expected):
            raise ValueError(f"task_type: task {glue.name!r} is {expected}, got {task_type!r}")
    if text_columns is None:
        if glue is None:
            raise ValueError("text_columns: expected one or two column names, got none")
        text_columns = glue.text_columns
    text_columns = tuple(text_columns)
    if len(text_columns) not in (1, 2):
        raise ValueError(
            f"text_columns: expected one or two column names, got {list(text_columns)}"
        )
    files = {"train": Path(train_file), "validation": Path(validation_file)}
    arguments = {"train": "train_file", "validation": "validation_file"}
    tables = {s: _read_table(files[s], cache_dir, arguments[s]) for s in files}
    labels: dict[str, list] = {}
    for split, table in tables.items():
        missing = [c for c in (*text_columns, label_column) if c not in table.column_names]
        if missing:
            raise ValueError(
                f"{files[split]}: expected columns {[*text_columns, label_column]}, "
                f"missing {missing} (found {table.column_names})"
            )
        labels[split] = table[label_column]

    if glue is not None:
        out_task = GlueTask(
            name=glue.name,
            text_columns=text_columns,
            label_names=glue.label_names,
            split_metrics=glue.split_metrics,
        )
    else:
        train_labels = labels["train"]
        if task_type == "auto":
            task_type = _infer_task_type(train_labels, files["train"], label_column)
        if task_type == "regression":
            label_names = None
        else:
            blank = [i for i, v in enumerate(train_labels) if _is_blank(v)]
            if blank:
                raise ValueError(
                    f"{files['train']}: label column {label_column!r} is blank on "
                    f"{_rows(blank)}; expected a label on every row"
                )
            keys = {_label_key(v) for v in train_labels}
            numeric = all(_as_number(k) is not None for k in keys)
            label_names = sorted(keys, key=float) if numeric else sorted(keys)
            if numeric and "-1" in keys and len(keys) > 1:
                unlabelled = [i for i, v in enumerate(train_labels) if _label_key(v) == "-1"]
                logger.warning(
                    "%s: label -1 on %s is taken as a class of its own; in GLUE files -1 "
                    "means 'no label' (as on test splits): drop those rows if they have none",
                    files["train"],
                    _rows(unlabelled),
                )
        out_task = custom_task(name, text_columns, label_names)

    out = {}
    for split, table in tables.items():
        ids = _custom_labels(out_task, labels[split], files[split], allow_ids=glue is not None)
        columns = {
            c: ["" if t is None else str(t) for t in table[src]]
            for c, src in zip(out_task.text_columns, text_columns)
        }
        columns["label"] = ids
        out[split] = Dataset.from_dict(columns, features=task_features(out_task))
    return out_task, DatasetDict(out)


def _custom_labels(task: GlueTask, values: Sequence[Any], where: Path, *, allow_ids: bool) -> list:
    if task.is_regression:
        bad = [i for i, v in enumerate(values) if _as_number(v) is None]
        if bad:
            shown = short_list(["" if values[i] is None else values[i] for i in bad])
            raise ValueError(
                f"{where}: labels {shown} ({_rows(bad)}) do not match regression task "
                f"{task.name!r} (expected numbers)"
            )
        return [_as_number(v) for v in values]
    ids = {n: i for i, n in enumerate(task.label_names)}
    out, unexpected = [], []
    for v in values:
        key = str(v) if str(v) in ids else _label_key(v)
        if key in ids:
            out.append(ids[key])
        elif allow_ids and _label_id(v) in range(len(ids)):
            out.append(_label_id(v))  # a GLUE task's label given by its id
        else:
            unexpected.append(v)
    if unexpected:
        raise ValueError(
            f"{where}: labels {short_list(unexpected)} do not match task {task.name!r} "
            f"(expected {list(task.label_names)})"
        )
    return out
