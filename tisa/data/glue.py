"""GLUE data: loaders for the Hugging Face hub, a classic ``glue_data`` folder and custom
files. The tasks and their official metrics are in :mod:`tisa.data.glue_tasks` (their
names are importable from here too).

Every loader returns a :class:`datasets.DatasetDict` in one canonical form: the task's text
columns (``sentence``, or a pair such as ``sentence1``/``sentence2``) and a ``label`` column
(``ClassLabel`` ids in the order of :attr:`GlueTask.label_names`, or ``float32`` scores for
regression). Split names follow the hub: ``train``, ``validation`` and, for MNLI,
``validation_matched`` / ``validation_mismatched``.

Sources::

    load_glue("rte")                                  # nyu-mll/glue on the HF hub
    load_glue("rte", hf_path="path/to/local/copy")    # same code path, a local hub layout
    load_glue("rte", glue_dir="glue_data")            # output of download_glue_data.py
    load_custom("train.csv", "dev.csv", text_columns=("text",))
"""

from __future__ import annotations

import contextlib
import csv
import logging
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from tisa.data.glue_tasks import (
    GLUE_TASKS,
    METRICS,
    GlueTask,
    accuracy,
    compute_metrics,
    custom_task,
    f1,
    get_task,
    glue_average,
    matthews_corr,
    pearson,
    spearman,
    task_score,
)
from tisa.hub import hub_offline_reason, offline_mode_set

logger = logging.getLogger(__name__)

if TYPE_CHECKING:  # datasets is imported lazily: it is slow to import
    from datasets import Dataset, DatasetDict

__all__ = [
    "GLUE_TASKS",
    "HF_GLUE",
    "HOW_TO_GET_GLUE",
    "METRICS",
    "TaskType",
    "GlueTask",
    "accuracy",
    "compute_metrics",
    "custom_task",
    "f1",
    "find_glue_dir",
    "get_task",
    "glue_average",
    "load_custom",
    "load_glue",
    "matthews_corr",
    "pearson",
    "spearman",
    "task_score",
]

TaskType = Literal["auto", "classification", "regression"]

HF_GLUE = "nyu-mll/glue"
HOW_TO_GET_GLUE = (
    "Get the data either from the Hugging Face hub (needs network access once: leave "
    f"glue_dir unset / omit --glue-dir and the task loads from {HF_GLUE!r} through the "
    "datasets library, which caches it), or with the GLUE download script "
    "(`python download_glue_data.py --data_dir glue_data --tasks all`) and pass that "
    "glue_data folder as glue_dir / --glue-dir."
)


# split -> file name in a glue_data task folder
_TSV_FILES = {
    "train": "train.tsv",
    "validation": "dev.tsv",
    "validation_matched": "dev_matched.tsv",
    "validation_mismatched": "dev_mismatched.tsv",
}


# --------------------------------------------------------------------------------------
# loaders
# --------------------------------------------------------------------------------------
def _features(task: GlueTask):
    from datasets import ClassLabel, Features, Value

    label = Value("float32") if task.is_regression else ClassLabel(names=list(task.label_names))
    return Features({**{c: Value("string") for c in task.text_columns}, "label": label})


def _check_splits(task: GlueTask, splits: Sequence[str] | None) -> tuple[str, ...]:
    allowed = ("train", *task.eval_splits)
    if splits is None:
        return allowed
    splits = tuple(splits)
    bad = [s for s in splits if s not in allowed]
    if bad or not splits:
        raise ValueError(
            f"splits: task {task.name!r} has labelled splits {list(allowed)}, got {list(splits)}"
        )
    return splits


def _show(values: Sequence[Any], limit: int = 10) -> str:
    values = sorted({repr(v) for v in values})
    more = f" and {len(values) - limit} more" if len(values) > limit else ""
    return ", ".join(values[:limit]) + more


def load_glue(
    task: str | GlueTask,
    *,
    glue_dir: str | Path | None = None,
    hf_path: str = HF_GLUE,
    splits: Sequence[str] | None = None,
    cache_dir: str | Path | None = None,
) -> DatasetDict:
    """Loads a GLUE task in canonical form (see the module docstring).

    Args:
        task: task name or :class:`GlueTask`.
        glue_dir: a classic ``glue_data`` folder (``CoLA/train.tsv``, ...). When ``None``,
            the task loads through :func:`datasets.load_dataset` from ``hf_path``.
        hf_path: hub id, or a local folder in the hub's layout (a README.md whose YAML
            ``configs`` map each task to ``<task>/<split>-*.parquet`` files).
        splits: labelled splits to load (default: train and the eval splits).
        cache_dir: datasets cache folder for the hub path.

    Raises:
        ValueError: unknown task or split; labels that do not match the task.
        FileNotFoundError: data absent (the message says how to get it).
    """
    task = task if isinstance(task, GlueTask) else get_task(task)
    if task.folder is None:
        raise ValueError(f"task: {task.name!r} is a custom task; load it with load_custom")
    splits = _check_splits(task, splits)
    if glue_dir is not None:
        return _load_glue_dir(task, Path(glue_dir), splits)
    return _load_hub(task, hf_path, splits, cache_dir)


def _load_hub(
    task: GlueTask, hf_path: str, splits: tuple[str, ...], cache_dir: str | Path | None
) -> DatasetDict:
    where = f"could not load GLUE task {task.name!r} from {hf_path!r}"
    offline = None if Path(hf_path).expanduser().is_dir() else hub_offline_reason()
    if offline is not None and offline_mode_set() is None:
        # the libraries are not in offline mode: they would retry for tens of seconds
        raise FileNotFoundError(
            f"{where}: {offline} (set HF_HUB_OFFLINE=1 to use the datasets cache). "
            + HOW_TO_GET_GLUE
        )
    import datasets

    try:
        loaded = datasets.load_dataset(
            hf_path, task.name, cache_dir=None if cache_dir is None else str(cache_dir)
        )
    except (FileNotFoundError, ConnectionError) as err:
        why = f"{offline} and it is not in the datasets cache" if offline else str(err)
        raise FileNotFoundError(f"{where}: {why}. " + HOW_TO_GET_GLUE) from err
    out = {}
    for split in splits:
        if split not in loaded:
            raise ValueError(
                f"hf_path: {hf_path!r} config {task.name!r} has splits {list(loaded)}, "
                f"expected {split!r}"
            )
        out[split] = _canonical_hub_split(task, loaded[split], f"{hf_path} [{task.name}/{split}]")
    return datasets.DatasetDict(out)


def _canonical_hub_split(task: GlueTask, ds: Dataset, where: str) -> Dataset:
    from datasets import ClassLabel

    missing = [c for c in (*task.text_columns, "label") if c not in ds.column_names]
    if missing:
        raise ValueError(
            f"{where}: expected columns {[*task.text_columns, 'label']}, "
            f"missing {missing} (found {ds.column_names})"
        )
    ds = ds.select_columns([*task.text_columns, "label"])
    if task.is_regression:
        return ds.cast(_features(task))
    feature = ds.features["label"]
    if isinstance(feature, ClassLabel) and tuple(feature.names) != task.label_names:
        unexpected = set(feature.names) - set(task.label_names)
        if unexpected:
            raise ValueError(
                f"{where}: labels {_show(unexpected)} do not match task {task.name!r} "
                f"(expected {list(task.label_names)})"
            )
        # same names in another order: renumber to the registry's order
        ds = ds.align_labels_with_mapping({n: i for i, n in enumerate(task.label_names)}, "label")
    bad = set(ds.unique("label")) - set(range(task.num_labels))
    if bad:
        raise ValueError(
            f"{where}: label ids {_show(bad)} do not match task {task.name!r} "
            f"(expected 0..{task.num_labels - 1} for {list(task.label_names)})"
        )
    return ds.cast(_features(task))


def _read_tsv(path: Path, header: bool) -> tuple[list[str] | None, list[list[str]]]:
    """Reads a GLUE TSV: tab separated, no quoting, optional UTF-8 BOM (MRPC)."""
    try:
        with open(path, encoding="utf-8-sig", newline="") as fh:
            rows = [r for r in csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE) if r]
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: not UTF-8 text (byte {err.start}: {err.reason})") from None
    except csv.Error as err:  # e.g. a NUL byte: not a text file
        raise ValueError(f"{path}: not a TSV text file ({err})") from None
    if header:
        if not rows:
            raise ValueError(f"{path}: empty file, expected a header line")
        head, body = rows[0], rows[1:]
    else:
        head, body = None, rows
    if not body:
        raise ValueError(f"{path}: no rows of data")
    return head, body


def _load_glue_dir(task: GlueTask, glue_dir: Path, splits: tuple[str, ...]) -> DatasetDict:
    from datasets import Dataset, DatasetDict

    if not glue_dir.is_dir():
        raise FileNotFoundError(f"glue_dir: folder {str(glue_dir)!r} not found. " + HOW_TO_GET_GLUE)
    folder = glue_dir / task.folder
    out = {}
    for split in splits:
        path = folder / _TSV_FILES[split]
        if not path.is_file():
            present = sorted(p.name for p in folder.glob("*.tsv")) if folder.is_dir() else []
            raise FileNotFoundError(
                f"glue_dir: task {task.name!r} split {split!r} needs "
                f"{task.folder}/{_TSV_FILES[split]} in {str(glue_dir)!r}, which is missing "
                f"(present in {task.folder}/: {present or 'nothing'}). " + HOW_TO_GET_GLUE
            )
        out[split] = Dataset.from_dict(_parse_tsv(task, path), features=_features(task))
    return DatasetDict(out)


def _parse_tsv(task: GlueTask, path: Path) -> dict[str, list]:
    header, rows = _read_tsv(path, task.tsv_header)
    wanted = (*task.tsv_text, task.tsv_label)
    if header is None:
        width = max(int(c) for c in wanted) + 1
        index = [int(c) for c in wanted]
    else:
        width = len(header)
        absent = [c for c in wanted if c not in header]
        if absent:
            raise ValueError(f"{path}: expected columns {list(wanted)}, missing {absent}")
        index = [header.index(c) for c in wanted]
    columns: dict[str, list] = {c: [] for c in task.text_columns}
    raw_labels = []
    first = 2 if header is not None else 1
    for line, row in enumerate(rows, start=first):
        # without a header only the needed columns must exist; with one, every field
        bad_width = len(row) < width if header is None else len(row) != width
        if bad_width:
            raise ValueError(
                f"{path}:{line}: expected {width} tab-separated fields, got {len(row)}"
            )
        for column, i in zip(task.text_columns, index[:-1]):
            columns[column].append(row[i])
        raw_labels.append(row[index[-1]].strip())
    columns["label"] = _labels_from_raw(task, raw_labels, path)
    return columns


def _labels_from_raw(task: GlueTask, raw: Sequence[str], where: Path | str) -> list:
    if task.is_regression:
        values, bad = [], []
        for value in raw:
            try:
                values.append(float(value))
            except ValueError:
                bad.append(value)
        if bad or any(math.isnan(v) for v in values):
            raise ValueError(
                f"{where}: labels {_show(bad or ['nan'])} do not match regression task "
                f"{task.name!r} (expected numbers)"
            )
        return values
    ids = {v: i for i, v in enumerate(task.tsv_label_values)}
    unexpected = set(raw) - set(ids)
    if unexpected:
        raise ValueError(
            f"{where}: labels {_show(unexpected)} do not match task {task.name!r} "
            f"(expected {list(task.tsv_label_values)})"
        )
    return [ids[v] for v in raw]


# --------------------------------------------------------------------------------------
# custom tasks
# --------------------------------------------------------------------------------------
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
            f"({_show([labels[i] for i in numbers])}) and words "
            f"({_show([labels[i] for i in words])}, {_rows(words)}); expected numbers only "
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
        out[split] = Dataset.from_dict(columns, features=_features(out_task))
    return out_task, DatasetDict(out)


def _custom_labels(task: GlueTask, values: Sequence[Any], where: Path, *, allow_ids: bool) -> list:
    if task.is_regression:
        bad = [i for i, v in enumerate(values) if _as_number(v) is None]
        if bad:
            shown = _show(["" if values[i] is None else values[i] for i in bad])
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
            f"{where}: labels {_show(unexpected)} do not match task {task.name!r} "
            f"(expected {list(task.label_names)})"
        )
    return out


def find_glue_dir() -> Path | None:
    """A classic glue_data folder: ``$GLUE_DIR``, or ``shared/data/glue`` in the working
    folder or one above it; None when there is none."""

    candidates = [os.environ.get("GLUE_DIR")] if os.environ.get("GLUE_DIR") else []
    here = Path.cwd().resolve()
    for base in (here, *here.parents):
        candidates.append(str(base / "shared" / "data" / "glue"))
    for c in candidates:
        if c and (Path(c) / "SST-2" / "dev.tsv").is_file():
            return Path(c)
    return None
