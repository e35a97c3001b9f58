"""Text corpora for masked-LM pretraining: Penn Treebank, plain text files, HF datasets.

Every loader returns a :class:`datasets.DatasetDict` with one ``text`` column (one line or
document per row, empty rows removed) and the splits ``train``, ``validation`` and, when
the source has one, ``test``::

    load_corpus()                                          # Penn Treebank (default)
    load_corpus(train_file="a.txt", validation_file="b.txt")
    load_corpus(dataset="wikitext", dataset_config="wikitext-103-raw-v1")

Penn Treebank comes from the installed ``treebank`` package (Mikolov's language-modelling
version: one sentence per line, lower case, numbers as ``N``, rare words as ``<unk>``).
Its ``<unk>`` is rewritten to ``[UNK]`` so that a BERT-style tokenizer reads it as its own
unknown-word token instead of splitting it into ``<``, ``unk``, ``>``.

Plain text files are read with the ``text`` builder of :func:`datasets.load_dataset`, one
example per line. HF datasets go through :func:`datasets.load_dataset` with the name (a
Hub id, or a local folder in the same layout) and configuration; a split called ``valid``
is renamed ``validation``. When a source has no validation split, a seeded random
``validation_fraction`` of the training rows is held out.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # datasets is imported lazily: it is slow to import
    from datasets import DatasetDict

__all__ = ["PTB", "load_corpus", "load_texts", "ptb_lines"]

#: Name of the built-in Penn Treebank source.
PTB = "ptb"
_PTB_SPLITS = {"train": "train", "validation": "valid", "test": "test"}


def ptb_lines(split: str = "train", *, unk: str | None = "[UNK]") -> list[str]:
    """Sentences of one Penn Treebank split.

    Args:
        split: ``"train"``, ``"validation"`` (or ``"valid"``) or ``"test"``.
        unk: what PTB's rare-word marker ``<unk>`` becomes (default ``[UNK]``, the
            tokenizers' own unknown token); None drops the marker (sentences left empty
            are dropped).

    Raises:
        ValueError: unknown split.
    """
    key = "validation" if split == "valid" else split
    if key not in _PTB_SPLITS:
        raise ValueError(f"split must be one of {tuple(_PTB_SPLITS)}, got {split!r}")
    import treebank

    lines = treebank.penn[_PTB_SPLITS[key]].splitlines()
    if unk is not None:
        return [line.strip().replace("<unk>", unk) for line in lines if line.strip()]
    kept = (" ".join(w for w in line.split() if w != "<unk>") for line in lines)
    return [line for line in kept if line]


def _check_file(path: str | os.PathLike[str], argument: str) -> str:
    p = Path(path).expanduser()
    if not p.is_file():
        raise ValueError(f"{argument}: no such file: {str(path)!r}")
    return str(p)


def load_corpus(
    *,
    dataset: str = PTB,
    dataset_config: str | None = None,
    train_file: str | os.PathLike[str] | None = None,
    validation_file: str | os.PathLike[str] | None = None,
    test_file: str | os.PathLike[str] | None = None,
    text_column: str = "text",
    validation_fraction: float = 0.05,
    seed: int = 0,
    cache_dir: str | None = None,
    progress: bool = True,
) -> DatasetDict:
    """Loads a corpus as a DatasetDict with a ``text`` column.

    Args:
        dataset: ``"ptb"`` (default) or a name for :func:`datasets.load_dataset` (Hub id
            or local folder). Ignored when ``train_file`` is given.
        dataset_config: configuration name of an HF dataset (e.g.
            ``"wikitext-103-raw-v1"``).
        train_file: plain text file, one example per line; selects the file source.
        validation_file: plain text file for the validation split.
        test_file: plain text file for the test split.
        text_column: column holding the text in an HF dataset.
        validation_fraction: share of training rows held out when the source has no
            validation split (in (0, 0.5]).
        seed: seed of that hold-out split.
        cache_dir: ``datasets`` cache folder.
        progress: show the progress bars of ``datasets``.

    Returns:
        DatasetDict with ``train`` and ``validation`` (and ``test`` when available), each
        with a single ``text`` column and no empty rows.

    Raises:
        ValueError: missing file, unknown dataset or configuration, missing text column.
    """
    import datasets

    was_enabled = not datasets.are_progress_bars_disabled()
    if not progress:
        datasets.disable_progress_bars()
    try:
        return _load(
            datasets,
            dataset=dataset,
            dataset_config=dataset_config,
            train_file=train_file,
            validation_file=validation_file,
            test_file=test_file,
            text_column=text_column,
            validation_fraction=validation_fraction,
            seed=seed,
            cache_dir=cache_dir,
        )
    finally:
        if was_enabled and not progress:
            datasets.enable_progress_bars()


def _load(
    datasets,
    *,
    dataset,
    dataset_config,
    train_file,
    validation_file,
    test_file,
    text_column,
    validation_fraction,
    seed,
    cache_dir,
) -> DatasetDict:
    if not 0.0 < validation_fraction <= 0.5:
        raise ValueError(f"validation_fraction must be in (0, 0.5], got {validation_fraction!r}")
    if train_file is None and (validation_file is not None or test_file is not None):
        raise ValueError("validation_file/test_file need a train_file as well")
    if train_file is not None:
        files = {"train": _check_file(train_file, "train_file")}
        if validation_file is not None:
            files["validation"] = _check_file(validation_file, "validation_file")
        if test_file is not None:
            files["test"] = _check_file(test_file, "test_file")
        raw = datasets.load_dataset("text", data_files=files, cache_dir=cache_dir)
        text_column = "text"
    elif dataset == PTB:
        if dataset_config is not None:
            raise ValueError(
                f"dataset_config is not used with dataset='ptb', got {dataset_config!r}"
            )
        raw = datasets.DatasetDict(
            {split: datasets.Dataset.from_dict({"text": ptb_lines(split)}) for split in _PTB_SPLITS}
        )
    else:
        try:
            raw = datasets.load_dataset(dataset, dataset_config, cache_dir=cache_dir)
        except (FileNotFoundError, ValueError, ConnectionError, OSError) as err:
            raise ValueError(
                f"dataset {dataset!r} (config {dataset_config!r}) could not be loaded: "
                f"{str(err).splitlines()[0] if str(err) else type(err).__name__}"
            ) from err
        if not isinstance(raw, datasets.DatasetDict):
            raw = datasets.DatasetDict({"train": raw})
    return _canonical(raw, text_column, validation_fraction, seed)


def _canonical(raw, text_column: str, validation_fraction: float, seed: int) -> DatasetDict:
    import datasets

    if "valid" in raw and "validation" not in raw:
        raw["validation"] = raw.pop("valid")
    if "train" not in raw:
        raise ValueError(f"the corpus has no 'train' split; splits found: {sorted(raw)}")
    out = {}
    for split in ("train", "validation", "test"):
        if split not in raw:
            continue
        ds = raw[split]
        if text_column not in ds.column_names:
            raise ValueError(
                f"text_column {text_column!r} not in the {split!r} split; "
                f"columns: {ds.column_names}"
            )
        ds = ds.select_columns([text_column])
        if text_column != "text":
            ds = ds.rename_column(text_column, "text")
        ds = ds.filter(_nonempty, batched=True, desc=f"dropping empty {split} rows")
        out[split] = ds
    if "validation" not in out:
        parts = out["train"].train_test_split(test_size=validation_fraction, seed=seed)
        out["train"], out["validation"] = parts["train"], parts["test"]
    for split, ds in out.items():
        if len(ds) == 0:
            raise ValueError(f"the {split!r} split of the corpus is empty")
    return datasets.DatasetDict(out)


def _nonempty(batch: dict[str, list]) -> list[bool]:
    return [isinstance(t, str) and bool(t.strip()) for t in batch["text"]]


def load_texts(
    eval_file: str | os.PathLike[str] | None = None, *, split: str = "test"
) -> Sequence[str]:
    """Held-out text lines: a plain text file (one example per line) or a PTB split.

    Args:
        eval_file: plain text file; default the Penn Treebank ``split``.
        split: Penn Treebank split used when ``eval_file`` is None.

    Raises:
        ValueError: missing or empty file.
    """
    if eval_file is None:
        return ptb_lines(split)
    path = _check_file(eval_file, "eval_file")
    with open(path, encoding="utf-8") as f:
        lines = [line.strip() for line in f if line.strip()]
    if not lines:
        raise ValueError(f"eval_file {str(eval_file)!r} holds no text")
    return lines
