"""Markdown tables."""

from __future__ import annotations

import pytest

from tisa.reports.markdown import markdown_table


def test_table_lines_and_alignment():
    text = markdown_table(["run", "loss"], [["tisa", 4.84], ["absolute", ""]], align="lr")
    assert text == "| run | loss |\n|---|---:|\n| tisa | 4.84 |\n| absolute |  |\n"
    assert markdown_table(["a"], []) == "| a |\n|---|\n"


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError, match="rows\\[0\\] has 1 cells"):
        markdown_table(["a", "b"], [["x"]])
    with pytest.raises(ValueError, match="align"):
        markdown_table(["a", "b"], [], align="lc")
