"""What every table module shares: the registry, the result-file reader and the number
formats. A table module registers its renderers with :func:`table`."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RESULTS = "benchmarks/results"

MARKER = re.compile(
    r"(?P<open><!-- table: (?P<name>[a-z0-9-]+) -->\n)(?P<body>.*?)(?P<close><!-- /table -->)",
    re.DOTALL,
)


@dataclass(frozen=True)
class DocTable:
    """One generated table: its name in the markers, the files it reads, its renderer."""

    name: str
    sources: tuple[str, ...]
    render: Callable[[Path], str]


TABLES: dict[str, DocTable] = {}


def table(name: str, *sources: str) -> Callable[[Callable[[Path], str]], Callable[[Path], str]]:
    """Registers a renderer as the table ``name`` over the files matching ``sources``."""

    def register(fn: Callable[[Path], str]) -> Callable[[Path], str]:
        if name in TABLES:
            raise ValueError(f"table {name!r} is registered twice")
        TABLES[name] = DocTable(name, tuple(sources), fn)
        return fn

    return register


def read_json(root: Path, path: str) -> Any:
    """The parsed JSON file ``path`` (relative to ``root``); one-line errors."""
    file = root / path
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: the result file of a table is missing") from None
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not valid JSON ({err})") from None


def x100(v: float | None, digits: int = 2) -> str:
    return "n/a" if v is None else f"{100 * v:.{digits}f}"


def signed(v: float, digits: int = 2) -> str:
    return f"{v:+.{digits}f}"


def grouped(n: int) -> str:
    return f"{n:,}"
