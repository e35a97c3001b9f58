"""Markdown tables, for the ``.md`` summaries and what the commands print.

::

    markdown_table(["run", "loss"], [["tisa", "4.84"]], align="lr")
    # | run | loss |
    # |---|---:|
    # | tisa | 4.84 |
    accuracy_cell({"status": "ok", "accuracy": {"mean": 0.837, "sd": 0.021},
                   "accuracy_beyond_train": None})
    # '83.7 ± 2.1'
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["accuracy_cell", "markdown_table", "percent"]


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


def percent(stat: Mapping[str, Any] | None) -> str:
    """A ``{"mean", "sd"}`` fraction x 100 as ``"mean ± sd"`` (no sd when it is None);
    ``"n/a"`` for None."""
    if stat is None:
        return "n/a"
    sd = stat["sd"]
    return f"{100 * stat['mean']:.1f}" + ("" if sd is None else f" ± {100 * sd:.1f}")


def accuracy_cell(cell: Mapping[str, Any]) -> str:
    """One length of a summarised evaluation: its accuracy (:func:`percent`), then the
    accuracy on the positions beyond the training length in brackets when it has one;
    ``"n/a"`` when the length was not scored (``status`` other than ``"ok"``)."""
    if cell["status"] != "ok":
        return "n/a"
    if cell["accuracy_beyond_train"] is None:
        return percent(cell["accuracy"])
    return f"{percent(cell['accuracy'])} ({percent(cell['accuracy_beyond_train'])})"
