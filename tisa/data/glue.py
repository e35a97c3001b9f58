"""GLUE data: loaders for the Hugging Face hub and a classic ``glue_data`` folder (custom
files: :mod:`tisa.data.glue_custom`). The tasks and their official metrics are in
:mod:`tisa.data.glue_tasks` (their names are importable from here too).

Every loader returns a :class:`datasets.DatasetDict` in one canonical form: the task's text
columns (``sentence``, or a pair such as ``sentence1``/``sentence2``) and a ``label`` column
(``ClassLabel`` ids in the order of :attr:`GlueTask.label_names`, or ``float32`` scores for
regression). Split names follow the hub: ``train``, ``validation`` and, for MNLI,
``validation_matched`` / ``validation_mismatched``.

Sources::

    load_glue("rte")                                  # nyu-mll/glue on the HF hub
    load_glue("rte", hf_path="path/to/local/copy")    # same code path, a local hub layout
    load_glue("rte", glue_dir="glue_data")            # output of download_glue_data.py
"""

from __future__ import annotations

import csv
import logging
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

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
    "load_glue",
    "matthews_corr",
    "pearson",
    "short_list",
    "spearman",
    "task_features",
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
def task_features(task: GlueTask):
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


def short_list(values: Sequence[Any], limit: int = 10) -> str:
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
        return ds.cast(task_features(task))
    feature = ds.features["label"]
    if isinstance(feature, ClassLabel) and tuple(feature.names) != task.label_names:
        unexpected = set(feature.names) - set(task.label_names)
        if unexpected:
            raise ValueError(
                f"{where}: labels {short_list(unexpected)} do not match task {task.name!r} "
                f"(expected {list(task.label_names)})"
            )
        # same names in another order: renumber to the registry's order
        ds = ds.align_labels_with_mapping({n: i for i, n in enumerate(task.label_names)}, "label")
    bad = set(ds.unique("label")) - set(range(task.num_labels))
    if bad:
        raise ValueError(
            f"{where}: label ids {short_list(bad)} do not match task {task.name!r} "
            f"(expected 0..{task.num_labels - 1} for {list(task.label_names)})"
        )
    return ds.cast(task_features(task))


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
        out[split] = Dataset.from_dict(_parse_tsv(task, path), features=task_features(task))
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
                f"{where}: labels {short_list(bad or ['nan'])} do not match regression task "
                f"{task.name!r} (expected numbers)"
            )
        return values
    ids = {v: i for i, v in enumerate(task.tsv_label_values)}
    unexpected = set(raw) - set(ids)
    if unexpected:
        raise ValueError(
            f"{where}: labels {short_list(unexpected)} do not match task {task.name!r} "
            f"(expected {list(task.tsv_label_values)})"
        )
    return [ids[v] for v in raw]


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
