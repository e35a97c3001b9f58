"""report.html of ``tisa convert``: what was fitted, how distillation went, what it gives.

Figures are drawn here from numbers :func:`tisa.convert.convert.convert` computed (never
recomputed): the fitted kernels against the measured profiles per layer and head, the
distillation curve, and the converted model against input length.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from tisa.convert.student import LayerFit
from tisa.reports.figures import figure_png
from tisa.reports.html import Image, Section, Table, write_report

__all__ = [
    "SUMMARY_COLUMNS",
    "distillation_figure",
    "length_figure",
    "profile_grid",
    "summary_rows",
    "write_convert_report",
]

#: Columns of :func:`summary_rows`.
SUMMARY_COLUMNS = (
    "model",
    "STS-B dev Spearman",
    "fidelity (mean cosine)",
    "absolute params",
    "TISA params",
)


def summary_rows(metrics: dict[str, Any], *, converted: str = "converted") -> list[list[Any]]:
    """Original, fitted and converted model: STS-B, fidelity and positional parameters.

    Args:
        metrics: a conversion's metrics.json.
        converted: the label of the converted model's row.
    """
    pos = metrics["positional_parameters"]
    orig, fitted, conv = metrics["original"], metrics["fitted"], metrics["converted"]
    before, after = pos["original"], pos["converted"]
    return [
        ["original", orig.get("sts_spearman"), None, before["absolute"], before["tisa"]],
        [
            "fitted (before distillation)",
            fitted.get("sts_spearman"),
            fitted["fidelity"]["mean"],
            after["absolute"],
            after["tisa"],
        ],
        [
            converted,
            conv.get("sts_spearman"),
            conv["fidelity"]["mean"],
            after["absolute"],
            after["tisa"],
        ],
    ]


def profile_grid(fit: LayerFit, *, max_offset: int = 64) -> Figure:
    """One panel per (layer, head): the target profile and the fitted kernels, |k| <= max."""
    k = fit.original.offsets.numpy()
    keep = np.abs(k) <= max_offset
    depth, heads, _ = fit.target.shape
    fig = Figure(figsize=(1.55 * heads, 1.25 * depth + 0.6), layout="constrained")
    axes = fig.subplots(depth, heads, squeeze=False, sharex=True)
    for layer in range(depth):
        for h in range(heads):
            ax = axes[layer, h]
            target = fit.target[layer, h].numpy()
            ax.plot(k[keep], (target - np.median(target))[keep], color="0.45", lw=0.9)
            if layer in fit.fitted_layers:
                fitted = fit.fitted[layer, h].numpy()
                ax.plot(k[keep], fitted[keep] - np.median(fitted), color="tab:red", lw=0.9)
                r2 = float(fit.r2[layer, h])
                ax.set_title(f"L{layer + 1} h{h + 1}  R²={r2:.2f}", fontsize=6)
            else:
                ax.set_title(f"L{layer + 1} h{h + 1}  (not fitted)", fontsize=6)
            ax.tick_params(labelsize=5)
            ax.axvline(0, color="0.8", lw=0.5)
    fig.suptitle(
        "positional term of the attention logits per layer and head: measured (grey) and "
        f"fitted scorers (red), offsets |k| <= {max_offset}",
        fontsize=9,
    )
    return fig


def distillation_figure(curve: list[dict]) -> Figure:
    """Loss and pooled-embedding cosine per step (with a running mean); with the long-input
    term, the long block's as well."""
    fig = Figure(figsize=(9, 3.2), layout="constrained")
    ax1, ax2 = fig.subplots(1, 2)
    long = bool(curve) and "long" in curve[0]
    for ax, key, label, color in (
        (ax1, "hidden", "hidden-state loss (relative MSE)", "tab:blue"),
        (ax2, "pooled_cosine", "cosine of pooled embeddings", "tab:blue"),
        *(((ax1, "long", "", "tab:orange"), (ax2, "long_pooled_cosine", "", "tab:orange"))
          if long else ()),
    ):
        kept = [c for c in curve if key in c]  # a long block on every long_every-th step
        at, values = np.array([c["step"] for c in kept]), np.array([c[key] for c in kept])
        ax.plot(at, values, color="0.75", lw=0.8, label="per step" if not label else None)
        window = max(1, len(values) // 20)
        smooth = np.convolve(values, np.ones(window) / window, mode="valid")
        block = "long block" if key.startswith("long") else "blocks up to the table"
        ax.plot(at[window - 1 :], smooth, color=color, lw=1.5,
                label=f"mean of {window}" + (f", {block}" if long else ""))
        ax.set_xlabel("step")
        if label:
            ax.set_title(label, fontsize=9)
        ax.grid(alpha=0.3)
    ax1.set_yscale("log")
    ax1.legend(fontsize=7)
    return fig


def length_figure(points: list[dict], table_size: int) -> Figure:
    """Agreement with the original, time and memory against input length."""
    fig = Figure(figsize=(11, 3.2), layout="constrained")
    axes = fig.subplots(1, 3)
    n = [p["length"] for p in points]
    series = (
        ("agreement", "cosine with the original (512-token chunks)"),
        ("seconds", "seconds per input"),
        ("peak_memory_mb", "peak memory (MiB)"),
    )
    for ax, (key, title) in zip(axes, series):
        values = [math.nan if p[key] is None else p[key] for p in points]
        ax.plot(n, values, marker="o", color="tab:green")
        ax.axvline(table_size, color="0.5", ls=":", lw=1)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("input length (tokens)")
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3)
    axes[0].text(table_size, axes[0].get_ylim()[0], " original's limit", fontsize=7, color="0.4")
    return fig


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def write_convert_report(path: str | Path, metrics: dict[str, Any], fit: LayerFit) -> Path:
    """Writes the report of one conversion (``metrics`` as in metrics.json)."""
    has_sts = "sts_spearman" in metrics["original"]
    rows = summary_rows(metrics)
    summary = Table(
        list(SUMMARY_COLUMNS),
        rows,
        digits=4,
        caption=f"{metrics['model']}: converted / original STS-B = {_pct(metrics['sts_relative'])}",
        notes=""
        if has_sts
        else "STS-B dev was not found (no glue_data folder), so its figures are missing.",
    )
    lengths = metrics["lengths"]
    length_rows = [
        [p["length"], p["agreement"], p["seconds"], p["peak_memory_mb"], p["finite"]]
        for p in lengths
    ]
    t = metrics["timings"]
    r2 = np.array(metrics["fit"]["r2"], dtype=float)
    sections = [
        Section(
            "What was done",
            paragraphs=[
                "The position table was removed, its mean row folded into the token-type "
                "embeddings, and every layer got RBF scoring functions f_h(j - i). Each "
                "layer's kernels were fitted (least squares) to the offset profile of the "
                "original's attention logits on Penn Treebank text minus the converted "
                "model's own, with the layers below already fitted; then the converted "
                "model was distilled towards the original on blocks of mixed lengths.",
                f"Fit {t['fit_s']:.0f} s, distillation {t['distill_s']:.0f} s "
                f"({metrics['settings']['distill']['steps']} steps, training "
                f"{metrics['settings']['distill']['train']!r} parameters).",
            ],
            tables=[summary],
        ),
        Section(
            "Fitted profiles",
            paragraphs=[
                f"R² of the fitted scorers per head: median {np.nanmedian(r2):.3f}, "
                f"min {np.nanmin(r2):.3f} (layers fitted: "
                f"{', '.join(str(i + 1) for i in metrics['fit']['fitted_layers']) or 'none'})."
            ],
            figures=[Image(figure_png(profile_grid(fit)), caption="measured vs fitted")],
        ),
    ]
    if metrics["distillation"]:
        sections.append(
            Section(
                "Distillation",
                figures=[Image(figure_png(distillation_figure(metrics["distillation"])))],
            )
        )
    sections.append(
        Section(
            "Long inputs",
            paragraphs=[
                "The converted model has no position table, so it runs on inputs of any "
                "length. Agreement: cosine between its mean-pooled embedding of the whole "
                "input and the length-weighted mean of the original's embeddings of the "
                "input's 512-token chunks."
            ],
            tables=[
                Table(
                    ["tokens", "agreement", "seconds", "peak MiB", "finite"], length_rows, digits=3
                )
            ],
            figures=[Image(figure_png(length_figure(lengths, metrics["positions"])))],
        )
    )
    return write_report(path, "tisa convert", sections, summary=summary)
