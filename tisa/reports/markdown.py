"""Markdown tables, for the ``.md`` summaries and what the commands print.

::

    markdown_table(["run", "loss"], [["tisa", "4.84"]], align="lr")
    # | run | loss |
    # |---|---:|
    # | tisa | 4.84 |
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["markdown_table"]


def markdown_table(
    columns: Sequence[str], rows: Iterable[Sequence[Any]], *, align: str | None = None
) -> str:
    """A Markdown table, one line per row, ending in a newline.

    Args:
        columns: header cells.
        rows: cells of each row, already formatted (``str()`` is applied).
        align: one letter per column, ``"l"`` (left) or ``"r"`` (right); default all left.

    Raises:
        ValueError: a row or ``align`` of another length than ``columns``.
    """
    align = align or "l" * len(columns)
    if len(align) != len(columns) or set(align) - {"l", "r"}:
        raise ValueError(
            f"align must give 'l' or 'r' for each of {len(columns)} columns, got {align!r}"
        )
    rule = {"l": "---", "r": "---:"}
    lines = [_line(columns), "|" + "|".join(rule[a] for a in align) + "|"]
    for i, row in enumerate(rows):
        if len(row) != len(columns):
            raise ValueError(f"rows[{i}] has {len(row)} cells; expected {len(columns)}")
        lines.append(_line(row))
    return "\n".join(lines) + "\n"


def _line(cells: Sequence[Any]) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"
