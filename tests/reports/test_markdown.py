"""Markdown tables."""

from __future__ import annotations

import pytest

from tisa.reports.markdown import accuracy_cell, markdown_table, percent


def test_table_lines_and_alignment():
    text = markdown_table(["run", "loss"], [["tisa", 4.84], ["absolute", ""]], align="lr")
    assert text == "| run | loss |\n|---|---:|\n| tisa | 4.84 |\n| absolute |  |\n"
    assert markdown_table(["a"], []) == "| a |\n|---|\n"


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError, match="rows\\[0\\] has 1 cells"):
        markdown_table(["a", "b"], [["x"]])
    with pytest.raises(ValueError, match="align"):
        markdown_table(["a", "b"], [], align="lc")


def test_percent_and_accuracy_cells():
    assert percent(None) == "n/a"
    assert percent({"mean": 0.837, "sd": None}) == "83.7"
    assert percent({"mean": 0.837, "sd": 0.021}) == "83.7 ± 2.1"
    within = {"status": "ok", "accuracy": {"mean": 0.5, "sd": 0.1}, "accuracy_beyond_train": None}
    assert accuracy_cell(within) == "50.0 ± 10.0"
    beyond = within | {"accuracy_beyond_train": {"mean": 0.25, "sd": None}}
    assert accuracy_cell(beyond) == "50.0 ± 10.0 (25.0)"
    assert accuracy_cell({"status": "n/a", "reason": "128 positions"}) == "n/a"
