"""Standalone HTML reports: escaping, tables, embedded figures, table of contents."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tisa.reports.figures import figure_png
from tisa.reports.heatmaps import matrix_heatmap
from tisa.reports.html import Html, Image, Section, Table, render_report, write_report


def test_render_report_escapes_and_embeds(tmp_path: Path) -> None:
    png = figure_png(matrix_heatmap(torch.eye(4), title="eye"))
    assert png.startswith(b"\x89PNG")
    (tmp_path / "f.png").write_bytes(png)
    section = Section(
        "Results <1>",
        paragraphs=["a < b and `code` here", Html("<em>kept</em>")],
        tables=[Table(["x", "TI"], [["row", 0.5], ["none", None]], shade=[1])],
        figures=[Image(png, caption="one"), Image(tmp_path / "f.png", caption="two")],
        subsections=[Section("Inner")],
    )
    html = render_report("T & T", [section, Section("Other")], summary=Table(["a"], [[1]]))
    assert "Results &lt;1&gt;" in html and "a &lt; b" in html and "<code>code</code>" in html
    assert "<em>kept</em>" in html and "<h3>Inner</h3>" in html
    assert html.count("data:image/png;base64,") == 2
    assert "0.500" in html and "&ndash;" in html and 'class="num bar"' in html
    assert 'href="#results-1"' in html  # table of contents
    with pytest.raises(ValueError, match="rows"):
        Table(["a", "b"], [[1]])
    path = write_report(tmp_path / "sub" / "r.html", "t", [section])
    assert path.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
