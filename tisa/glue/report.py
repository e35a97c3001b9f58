"""report.html of GLUE fine-tuning (``tisa glue``, ``experiments/glue_protocol.py summary``).

One page: the median scores with their spread over seeds, the paired comparison of each
variant with the baseline (per-seed differences drawn as dots, so a gain can be told
from noise at a glance), how far the TISA scoring parameters moved in fine-tuning, and,
when given, the baseline against reference figures (parity). Everything is drawn from the
result dicts of the runs and :func:`tisa.glue.results.summarize`; nothing is
recomputed from a model.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from tisa.glue.results import (
    paired_rows,
    parity_rows,
    seedwise_parity_rows,
    summary_rows,
)
from tisa.reports.charts import glue_results
from tisa.reports.figures import figure_png
from tisa.reports.html import Image, Section, Table, write_report

__all__ = ["movement_rows", "paired_differences", "write_glue_report"]


def _name(task: str) -> str:
    return "GLUE avg" if task == "glue" else task


def paired_differences(summary: Sequence[Mapping], runs: Sequence[Mapping]) -> Figure:
    """Per-seed score differences (variant - baseline, x 100) for every task and compared
    variant: one dot per seed, the mean with its 95% interval as a bar, and zero drawn."""
    baseline = summary[0]["baseline"]
    compared = [v for v in dict.fromkeys(r["variant"] for r in summary) if v != baseline]
    tasks = [t for t in dict.fromkeys(r["task"] for r in summary) if t != "glue"]
    scores = {(r["task"], r["variant"], r["seed"]): r["score"] for r in runs}
    fig = Figure(figsize=(max(6.0, 1.2 * len(tasks) + 3.5), 3.8))
    fig.set_layout_engine("tight")
    ax = fig.subplots()
    width = 0.7 / max(1, len(compared))
    rng = np.random.default_rng(0)  # jitter only, so dots of equal value stay visible
    for i, variant in enumerate(compared):
        for x, task in enumerate(tasks):
            seeds = sorted(
                s
                for (t, v, s) in scores
                if t == task and v == variant and (t, baseline, s) in scores
            )
            diffs = np.array(
                [100 * (scores[(task, variant, s)] - scores[(task, baseline, s)]) for s in seeds]
            )
            diffs = diffs[np.isfinite(diffs)]
            if not len(diffs):
                continue
            centre = x + (i - (len(compared) - 1) / 2) * width
            jitter = rng.uniform(-0.12, 0.12, len(diffs)) * width
            ax.scatter(
                centre + jitter,
                diffs,
                s=18,
                color=f"C{i + 1}",
                alpha=0.8,
                zorder=3,
                label=variant if x == 0 else None,
            )
            row = next(r for r in summary if r["task"] == task and r["variant"] == variant)
            paired = row.get("paired") or {}
            lo, hi = paired.get("ci95", [math.nan, math.nan])
            mean = float(diffs.mean())
            if math.isfinite(lo):
                ax.errorbar(
                    centre,
                    mean,
                    yerr=[[max(0.0, mean - 100 * lo)], [max(0.0, 100 * hi - mean)]],
                    fmt="_",
                    color="black",
                    capsize=4,
                    markersize=14,
                    zorder=4,
                )
            else:
                ax.plot([centre - width / 3, centre + width / 3], [mean, mean], color="black")
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(tasks)), [_name(t) for t in tasks])
    ax.set_ylabel(f"score - {baseline} (x 100)")
    ax.set_title(f"paired over seeds against {baseline}: dots = seeds, bar = mean with 95% CI")
    ax.grid(axis="y", alpha=0.3)
    if compared:
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def movement_rows(runs: Sequence[Mapping]) -> list[list[Any]]:
    """(task, variant, kind, runs, parameters, mean |start|, mean |change|, max |change|):
    the ``tisa_movement`` of the runs averaged over seeds (max over seeds)."""
    groups: dict[tuple[str, str, str], list[Mapping]] = {}
    for r in runs:
        for kind, m in (r.get("tisa_movement") or {}).items():
            groups.setdefault((r["task"], r["variant"], kind), []).append(m)
    rows = []
    for (task, variant, kind), ms in sorted(groups.items()):
        rows.append(
            [
                task,
                variant,
                kind,
                len(ms),
                ms[0]["count"],
                float(np.mean([m["mean_abs_start"] for m in ms])),
                float(np.mean([m["mean_abs_change"] for m in ms])),
                float(max(m["max_abs_change"] for m in ms)),
            ]
        )
    return rows


def write_glue_report(
    path: str | Path,
    summary: Sequence[Mapping],
    runs: Sequence[Mapping],
    *,
    title: str = "GLUE fine-tuning",
    settings: Mapping[str, Any] | None = None,
    parity: Sequence[Mapping] | None = None,
    parity_name: str = "reference",
    parity_seedwise: Sequence[Mapping] | None = None,
    chart_png: bytes | None = None,
) -> Path:
    """Writes the report to ``path``.

    Args:
        path: the HTML file.
        summary: rows of :func:`tisa.glue.results.summarize`.
        runs: the result dicts of the single runs the summary was made from.
        title: page title.
        settings: shared hyperparameters, shown as a table.
        parity: rows of :func:`tisa.glue.results.parity_comparison`.
        parity_name: what the parity rows compare with (e.g. "stock Trainer").
        parity_seedwise: rows of :func:`tisa.glue.results.seedwise_parity`: the
            baseline against the reference's runs of the same task and seed.
        chart_png: the scores figure (:func:`tisa.reports.charts.glue_results`) as PNG
            bytes, when the caller has already rendered it; drawn here when omitted.
    """
    if not summary:
        raise ValueError("summary: no finished runs to report")
    baseline = summary[0]["baseline"]
    medians = Table(
        *summary_rows(summary),
        caption="Dev-set scores x 100: median over seeds, min - max over seeds; GLUE avg: "
        "per seed that has every task, the mean of its task scores, then the median and "
        "min - max of those over seeds.",
    )
    chart = chart_png or figure_png(glue_results(summary))
    sections = [Section("Scores", figures=[Image(chart, "Median scores and spreads.")])]
    paired_columns, compared = paired_rows(summary)
    if compared:
        paired = Table(
            paired_columns,
            compared,
            caption=f"Each variant against {baseline}, seed by seed (the same seed is the same "
            "data order and classifier initialisation); differences x 100, t interval of the "
            "mean difference, exact two-sided sign test.",
        )
        dots = Image(
            figure_png(paired_differences(summary, runs)),
            "Per-seed differences against the baseline.",
        )
        sections.append(Section("Paired comparison", tables=[paired], figures=[dots]))
    moved = movement_rows(runs)
    if moved:
        sections.append(
            Section(
                "How far the TISA scoring parameters moved",
                paragraphs=[
                    "From the start of fine-tuning to its end, per kind of scoring parameter "
                    "(RBF: amplitude a, sharpness b, offset c), averaged over seeds."
                ],
                tables=[
                    Table(
                        [
                            "task",
                            "variant",
                            "kind",
                            "runs",
                            "parameters",
                            "mean |start|",
                            "mean |change|",
                            "max |change|",
                        ],
                        moved,
                        digits=4,
                    )
                ],
            )
        )
    if parity:
        sections.append(
            Section(
                f"Baseline parity: {baseline} against the {parity_name}",
                paragraphs=[
                    "The same settings run by another implementation. Within seed noise: "
                    "the difference of the means is at most two standard errors."
                ],
                tables=[Table(*parity_rows(parity, parity_name))],
            )
        )
    if parity_seedwise:
        same = sum(r["identical"] for r in parity_seedwise)
        sections.append(
            Section(
                f"Seed by seed: {baseline} against the {parity_name}",
                paragraphs=[
                    f"The same task, seed and settings in both: {same} of "
                    f"{len(parity_seedwise)} scores identical."
                ],
                tables=[Table(*seedwise_parity_rows(parity_seedwise, parity_name))],
            )
        )
    if settings:
        sections.append(
            Section(
                "Settings",
                tables=[Table(["setting", "value"], [[k, str(v)] for k, v in settings.items()])],
            )
        )
    return write_report(path, title, sections, summary=medians)
