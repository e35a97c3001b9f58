"""Atomic writes: result files, and whole folders such as checkpoints.

A reader (or a resumed run) sees the old version or the new one, never half of one. A
file's data goes to a temporary file beside the target, is flushed to disk and replaces
the target in one ``os.replace``; a folder is written completely under another name, its
files flushed to disk, and renamed into place (:func:`replace_folder`).

(Named ``files`` rather than ``io``: modules that write results often need the standard
library's ``io`` too.)
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "append_jsonl",
    "fsync_folder",
    "fsync_tree",
    "json_ready",
    "read_jsonl",
    "replace_folder",
    "write_atomic",
    "write_json",
]


def json_ready(obj: Any) -> Any:
    """Plain JSON data: numpy scalars to Python numbers, NaN to None, keys to strings."""
    if isinstance(obj, float | np.floating):
        return None if math.isnan(obj) else float(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, dict):
        return {str(k): json_ready(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [json_ready(v) for v in obj]
    return obj


def write_atomic(path: str | os.PathLike[str], data: str | bytes) -> Path:
    """Writes ``data`` (text as UTF-8) to ``path`` atomically; creates the parent folder.

    The temporary file has a name of its own (several processes may write the same file,
    e.g. the tables of runs sharing an output folder): the last complete write wins.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_json(path: str | os.PathLike[str], obj: Any) -> Path:
    """Writes ``obj`` as indented JSON (see :func:`json_ready`) atomically."""
    return write_atomic(path, json.dumps(json_ready(obj), indent=2) + "\n")


def read_jsonl(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Rows of a JSON-lines file ([] when it does not exist).

    A last line cut short by a killed process is skipped.
    """
    p = Path(path)
    if not p.is_file():
        return []
    rows = []
    for line in p.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line:
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:  # a line cut short by a killed process
                continue
    return rows


def append_jsonl(path: str | os.PathLike[str], row: dict[str, Any]) -> None:
    """Appends one JSON line to ``path`` (a log: rows are only ever added at the end)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(row) + "\n")


def fsync_folder(path: str | os.PathLike[str]) -> None:
    """Flushes a folder's entries (names, renames) to disk; a no-op where unsupported."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def fsync_tree(path: str | os.PathLike[str]) -> None:
    """Flushes every file below ``path``, and every folder's entries, to disk."""
    for root, _, names in os.walk(path):
        for name in names:
            try:
                with open(os.path.join(root, name), "rb") as fh:
                    os.fsync(fh.fileno())
            except OSError:
                pass
        fsync_folder(root)


def replace_folder(staged: str | os.PathLike[str], final: str | os.PathLike[str]) -> Path:
    """Moves the complete folder ``staged`` to ``final`` in one rename, durably.

    The files are flushed to disk first, so that after a crash a folder named ``final``
    is always complete. An existing ``final`` (the same checkpoint saved again after a
    resume) is removed first.

    Returns:
        ``final`` as a path.
    """
    staged, final = Path(staged), Path(final)
    if final.is_dir():
        shutil.rmtree(final)
    fsync_tree(staged)
    os.replace(staged, final)
    fsync_folder(final.parent)
    return final
