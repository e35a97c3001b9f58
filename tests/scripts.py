"""Loading the repository's scripts (benchmarks/, experiments/) as modules in tests."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

#: the repository root
ROOT = Path(__file__).resolve().parents[1]


def load_script(path: str | Path, name: str | None = None) -> ModuleType:
    """The script at ``path`` (relative to the repository root) imported as ``name``
    (default: its file name without ``.py``)."""
    path = ROOT / path
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
