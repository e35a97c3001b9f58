"""Atomic file writes shared by every command that records results.

A reader (or a resumed run) sees the old file or the new one, never half of one: the data
goes to a temporary file beside the target, is flushed to disk, and replaces the target in
one ``os.replace``.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["json_ready", "write_atomic", "write_json"]


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
    """Writes ``data`` (text as UTF-8) to ``path`` atomically; creates the parent folder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        fh.write(data.encode("utf-8") if isinstance(data, str) else data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    return path


def write_json(path: str | os.PathLike[str], obj: Any) -> Path:
    """Writes ``obj`` as indented JSON (see :func:`json_ready`) atomically."""
    return write_atomic(path, json.dumps(json_ready(obj), indent=2) + "\n")
