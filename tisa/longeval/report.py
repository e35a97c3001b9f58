"""report.html of ``tisa longeval``: Acc@1 against length per task, a depth x length
heatmap per task and model, and the time and peak memory per document against length.

Every number comes from results.json (:mod:`tisa.longeval.run`); nothing is computed
here beyond averages over the cells shown.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from tisa.reports.figures import figure_png
from tisa.reports.heatmaps import value_heatmaps
from tisa.reports.html import Image, Section, Table, write_report

__all__ = ["accuracy_figure", "cost_figure", "label", "write_longeval_report"]

_TASK_TEXT = {
    "passkey": "a person's pass key hidden in filler text; the query asks for it by name",
    "needle": "a fact hidden in Penn Treebank text; the query asks for it in other words",
    "passage": "the document a removed Penn Treebank passage came from",
}


def label(model: str, strategy: str) -> str:
    """``model / strategy`` with the model's name shortened to its last two parts."""
    short = "/".join(Path(model).parts[-2:]) if len(model) > 40 else model
    return f"{short} / {strategy}"


def _series(summary: Sequence[Mapping], key: str, task: str | None = None,
            name: Callable[[str, str], str] = label):
    """name -> sorted (length, value) points (averaged over tasks when task is None);
    ``name(model, strategy)`` labels a line."""
    points: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in summary:
        if (task is None or row["task"] == task) and row[key] is not None:
            points[name(row["model"], row["strategy"])][row["length"]].append(row[key])
    return {
        name: sorted((n, sum(v) / len(v)) for n, v in by_length.items())
        for name, by_length in points.items()
    }


def _length_axis(ax, lengths: Sequence[int], limits: Sequence[int]) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(lengths), [str(n) for n in lengths])
    ax.minorticks_off()
    for limit in sorted(set(limits)):
        if min(lengths) <= limit <= max(lengths):  # a table size inside the range shown
            ax.axvline(limit, color="0.5", ls=":", lw=1)
    ax.set_xlabel("document length (tokens)")
    ax.grid(alpha=0.3)


def accuracy_figure(
    summary: Sequence[Mapping],
    tasks: Sequence[str],
    lengths: Sequence[int],
    *,
    chance: float,
    limits: Sequence[int] = (),
    name: Callable[[str, str], str] = label,
) -> Figure:
    """Acc@1 against length, one panel per task, one line per (model, strategy), labelled
    ``name(model, strategy)`` (one colour per label in every panel)."""
    fig = Figure(figsize=(4.2 * len(tasks) + 2.4, 3.6), layout="constrained")
    axes = fig.subplots(1, len(tasks), squeeze=False)[0]
    names = list(dict.fromkeys(name(r["model"], r["strategy"]) for r in summary))
    colours = {n: f"C{i % 10}" for i, n in enumerate(names)}
    for ax, task in zip(axes, tasks, strict=True):
        for line, points in _series(summary, "acc1", task, name).items():
            ax.plot(*zip(*points, strict=True), marker="o", ms=3.5, lw=1.3, label=line,
                    color=colours[line])
        ax.axhline(chance, color="0.6", ls="--", lw=1)
        _length_axis(ax, lengths, limits)
        ax.set_ylim(-0.03, 1.03)
        ax.set_title(task, fontsize=10)
        ax.set_ylabel("Acc@1")
    shown = {}  # every line once, from whichever panel drew it (not every task has all)
    for ax in axes:
        for handle, line in zip(*ax.get_legend_handles_labels(), strict=True):
            shown.setdefault(line, handle)
    if shown:
        fig.legend([shown[n] for n in names if n in shown], [n for n in names if n in shown],
                   loc="outside right upper", fontsize="small")
    return fig


def cost_figure(summary: Sequence[Mapping], lengths: Sequence[int], limits=()) -> Figure:
    """Seconds and peak memory per document against length (averaged over tasks)."""
    fig = Figure(figsize=(10.5, 3.6), layout="constrained")
    axes = fig.subplots(1, 2)
    for ax, (key, title) in zip(
        axes,
        (("seconds_per_document", "seconds per document"), ("peak_memory_mb", "peak MiB")),
        strict=True,
    ):
        for name, points in _series(summary, key).items():
            ax.plot(*zip(*points, strict=True), marker="o", ms=3.5, lw=1.3, label=name)
        _length_axis(ax, lengths, limits)
        ax.set_yscale("log")
        ax.set_title(title, fontsize=10)
    handles, names = axes[0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, names, loc="outside right upper", fontsize="small")
    return fig


def _depth_panels(cells: Sequence[Mapping], task: str, depths, lengths) -> dict[str, np.ndarray]:
    """label -> (depths, lengths) Acc@1 averaged over seeds (NaN where not run)."""
    sums: dict[str, dict[tuple, list[float]]] = defaultdict(lambda: defaultdict(list))
    for c in cells:
        if c["task"] == task:
            sums[label(c["model"], c["strategy"])][(c["depth"], c["length"])].append(c["acc1"])
    panels = {}
    for name, values in sums.items():
        m = np.full((len(depths), len(lengths)), math.nan)
        for (d, n), v in values.items():
            if d in depths and n in lengths:
                m[depths.index(d), lengths.index(n)] = sum(v) / len(v)
        panels[name] = m
    return panels


def _fmt(x: float | None, digits: int = 3) -> float | None:
    return None if x is None else round(float(x), digits)


def _comparison_sections(comparisons: Sequence[Mapping]) -> list[Section]:
    """One section: each TISA model minus every alternative, per task and length."""
    if not comparisons:
        return []
    level = comparisons[0]["level"]
    unit = comparisons[0].get("unit", "seed")
    rows = [
        [
            label(r["model"], r["strategy"]),
            label(r["against"], r["against_strategy"]) + (" (best)" if r["best"] else ""),
            r["task"],
            r["length"],
            _fmt(r["acc1"]),
            _fmt(r["against_acc1"]),
            f"{r['mean']:+.3f} [{r['low']:+.3f}, {r['high']:+.3f}]",
            f"{r['p_holm']:.3g}",
            r["n"],
        ]
        for r in sorted(comparisons, key=lambda r: (r["task"], r["length"], -r["against_acc1"]))
    ]
    return [
        Section(
            "Paired comparisons",
            paragraphs=[
                "Each model without a position table against every other model and strategy, "
                "per task and length: the mean difference of Acc@1 over the cells both ran "
                "(the same depth and seed, so the same documents), its "
                f"{level:.0%} t interval and the p-value of the paired t test after Holm's "
                f"correction over every row, paired by {unit} ("
                + ("the depths of a seed read the same drawn text, so each seed's depths are "
                   "averaged first" if unit == "seed" else "every cell was drawn on its own")
                + "). (best): the alternative with the highest Acc@1 at that task and length."
            ],
            tables=[
                Table(
                    ["model", "against", "task", "length", "Acc@1", "its Acc@1",
                     "difference", "p (Holm)", f"{unit}s"],
                    rows,
                )
            ],
        )
    ]


def write_longeval_report(path: str | Path, results: Mapping[str, Any]) -> Path:
    """Writes the report of one run (``results`` as in results.json)."""
    settings, summary, cells = results["settings"], results["summary"], results["cells"]
    lengths = list(settings["lengths"])
    depths = [float(d) for d in settings["depths"]]
    tasks = [t for t in settings["tasks"] if any(r["task"] == t for r in summary)]
    limits = [m["positions"] for m in results["models"] if m["positions"] is not None]
    chance = 1.0 / settings["candidates"]
    labels = list(dict.fromkeys(label(r["model"], r["strategy"]) for r in summary))

    def table(task: str | None, key: str = "acc1", caption: str = "") -> Table:
        series = _series(summary, key, task)
        rows = [[name, *[dict(series.get(name, [])).get(n) for n in lengths]] for name in labels]
        return Table(["model / strategy", *[str(n) for n in lengths]], rows, caption=caption)

    overall = table(None, caption="Acc@1 averaged over tasks, depths and seeds")
    sections = [
        Section(
            "Accuracy against length",
            paragraphs=[
                f"Acc@1: the share of queries whose own document is the most similar of the "
                f"{settings['candidates']} candidates (cosine of pooled embeddings), over "
                f"depths {', '.join(f'{d:g}' for d in depths)} and seeds "
                f"{', '.join(map(str, settings['seeds']))}. Dashed: chance "
                f"(1/{settings['candidates']}); dotted: the models' position tables.",
                *[f"`{t}`: {_TASK_TEXT[t]}." for t in tasks],
            ],
            tables=[table(t, caption=f"{t}: Acc@1") for t in tasks],
            figures=[
                Image(
                    figure_png(
                        accuracy_figure(summary, tasks, lengths, chance=chance, limits=limits)
                    ),
                    caption="Acc@1 against document length",
                )
            ],
        ),
        Section(
            "Where the evidence sits",
            paragraphs=[
                "Acc@1 per depth (rows: 0 = the evidence at the start of the document, 1 = at "
                "the end) and length (columns), averaged over seeds."
            ],
            figures=[
                Image(
                    figure_png(
                        value_heatmaps(
                            _depth_panels(cells, t, depths, lengths),
                            suptitle=f"{t}: Acc@1",
                            row_label="depth",
                            col_label="length (tokens)",
                            row_names=[f"{d:g}" for d in depths],
                            col_names=[str(n) for n in lengths],
                        )
                    ),
                    caption=f"{t}: depth x length",
                )
                for t in tasks
            ],
        ),
        *_comparison_sections(results.get("comparisons", [])),
        Section(
            "Cost per document",
            paragraphs=[
                "Wall-clock seconds to embed one document, and the extra resident memory at "
                "the peak of embedding a cell's documents "
                f"({settings['batch_size']} per forward pass), averaged over tasks, depths "
                "and seeds."
            ],
            tables=[
                table(None, "seconds_per_document", "seconds per document"),
                table(None, "peak_memory_mb", "peak memory (MiB)"),
            ],
            figures=[Image(figure_png(cost_figure(summary, lengths, limits)))],
        ),
        Section(
            "Models and provenance",
            tables=[
                Table(
                    ["model", "type", "TISA", "positions", "pooling", "strategies",
                     "weights (SHA-256)"],
                    [
                        [
                            m["name"],
                            m["model_type"],
                            m["tisa"],
                            m["positions"],
                            m["pooling"],
                            ", ".join(m["strategies"]),
                            (m.get("weights_sha256") or "not recorded")[:12],
                        ]
                        for m in results["models"]
                    ],
                ),
                Table(
                    ["", "value"],
                    [[k, "" if v is None else str(v)] for k, v in results["provenance"].items()],
                ),
            ],
        ),
    ]
    return write_report(path, "tisa longeval", sections, summary=overall)
