"""The figures of tisa longeval and the merging of several runs' summaries."""

from __future__ import annotations

from tisa.longeval.report import accuracy_figure
from tisa.longeval.results import merge_summaries


def _row(model, strategy, task, length, acc1):
    return {"model": model, "strategy": strategy, "task": task, "length": length,
            "acc1": acc1}


def test_merge_keeps_the_first_file_and_says_where_a_later_one_differs():
    a = {"summary": [_row("m", "chunk", "passkey", 4096, 0.9),
                     _row("m", "chunk", "needle", 4096, 1.0)]}
    b = {"summary": [_row("m", "chunk", "passkey", 4096, 0.9),  # the same: no line
                     _row("m", "chunk", "needle", 4096, 0.5),   # differs: kept a's, a line
                     _row("m", "chunk", "passkey", 8192, 0.7)]}  # new: joins
    rows, notes = merge_summaries([a, b], ["a.json", "b.json"])
    got = {(r["task"], r["length"]): (r["acc1"], r["source"]) for r in rows}
    assert got == {("passkey", 4096): (0.9, "a.json"), ("needle", 4096): (1.0, "a.json"),
                   ("passkey", 8192): (0.7, "b.json")}
    assert len(notes) == 1
    assert notes[0].startswith("b.json: m, chunk, needle, 4096: Acc@1 0.5000; kept 1.0000")


def test_accuracy_figure_names_each_line_once_with_one_colour_in_every_panel():
    summary = [_row("orig", "chunk", "passkey", n, 0.9) for n in (512, 1024)]
    summary += [_row("orig", "chunk", "needle", n, 0.8) for n in (512, 1024)]
    summary += [_row("conv", "native", "needle", n, 1.0) for n in (512, 1024)]  # needle only
    fig = accuracy_figure(summary, ["passkey", "needle"], [512, 1024], chance=1 / 16,
                          name=lambda m, s: f"{m}: {s}")
    legend = fig.legends[0]
    # the line drawn only in the second panel is named too, once
    assert [t.get_text() for t in legend.get_texts()] == ["orig: chunk", "conv: native"]
    colour = {ax.get_title(): {ln.get_label(): ln.get_color() for ln in ax.get_lines()
                               if not ln.get_label().startswith("_")}
              for ax in fig.axes}
    assert colour["passkey"]["orig: chunk"] == colour["needle"]["orig: chunk"]
    assert colour["needle"]["conv: native"] != colour["needle"]["orig: chunk"]
