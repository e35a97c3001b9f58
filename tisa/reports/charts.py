"""Line and bar charts: offset profiles, scoring functions, training curves, GLUE scores,
length extrapolation.

Letters: H heads, N layers, K offsets.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from tisa.reports.figures import to_numpy as _np

__all__ = [
    "comparison_bars",
    "extrapolation_curves",
    "glue_results",
    "loss_curves",
    "offset_profiles",
    "scoring_curves",
    "training_curves",
]


def offset_profiles(
    panels: Sequence[tuple[str, object, Mapping[str, tuple[object, object | None]]]],
    *,
    suptitle: str | None = None,
    xlabel: str = "offset k = j - i",
    ylabel: str | Sequence[str] = "mean over the diagonal",
    max_legend: int = 12,
    ncols: int = 2,
) -> Figure:
    """Line plots of values against the offset k, one panel per group.

    Args:
        panels: (title, offsets (K,), {label: (mean (K,), std (K,) or None)}) triples; a
            std draws a shaded +-1 std band.
        suptitle: figure title.
        xlabel: x label.
        ylabel: y label (one for all panels or one per panel).
        max_legend: legends with more entries are left out.
        ncols: panels per row.
    """
    n = len(panels)
    ncols = max(1, min(ncols, n))
    nrows = math.ceil(n / ncols)
    fig = Figure(figsize=(5.4 * ncols, 3.7 * nrows + 0.3), layout="constrained")
    grid = fig.subplots(nrows, ncols, squeeze=False).flat
    axes = list(grid)
    for ax in axes[n:]:
        ax.axis("off")
    labels = [ylabel] * n if isinstance(ylabel, str) else list(ylabel)
    for ax, (title, offsets, curves), yl in zip(axes[:n], panels, labels, strict=True):
        k = _np(offsets)
        many = len(curves) > 6
        for label, (mean, std) in curves.items():
            m = _np(mean)
            (line,) = ax.plot(k, m, lw=1.0 if many else 1.5, label=label)
            if std is not None:
                s = _np(std)
                ax.fill_between(k, m - s, m + s, color=line.get_color(), alpha=0.2, lw=0)
        ax.axvline(0, color="0.6", lw=0.8, ls=":")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel(xlabel, fontsize=9)
        ax.set_ylabel(yl, fontsize=9)
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3)
        if 1 < len(curves) <= max_legend:
            ax.legend(fontsize=7, ncol=2 if len(curves) > 4 else 1, frameon=False)
    if suptitle:
        fig.suptitle(suptitle, fontsize=11)
    return fig


def scoring_curves(
    offsets: object,
    values: object,
    *,
    layers: Sequence[int] | None = None,
    titles: Sequence[str] | None = None,
    suptitle: str | None = None,
    ncols: int = 4,
    symlog: bool = False,
    marks: Sequence[float] = (),
) -> Figure:
    """f_h(k) of every head, one panel per layer (or per scoring function).

    Args:
        offsets: (K,) offsets.
        values: (N, H, K) f_h(k) per panel and head.
        layers: N layer indices (0-based; panels titled "layer 1", ...).
        titles: N panel titles instead (e.g. scoring family names).
        suptitle: figure title.
        ncols: panels per row.
        symlog: offsets on a symmetric log axis (linear within +-1), so that short
            offsets stay readable next to long ones.
        marks: offsets to mark with a dashed line (e.g. minus the training length).
    """
    k = _np(offsets)
    v = _np(values)
    n = v.shape[0]
    if titles is None:
        titles = [f"layer {i + 1}" for i in (layers if layers is not None else range(n))]
    if len(titles) != n:
        raise ValueError(f"titles/layers must have {n} entries, got {len(titles)}")
    ncols = max(1, min(ncols, n))
    nrows = math.ceil(n / ncols)
    fig = Figure(figsize=(3.6 * ncols, 2.8 * nrows + 0.4), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    for idx, ax in enumerate(axes.flat):
        if idx >= n:
            ax.axis("off")
            continue
        for h in range(v.shape[1]):
            ax.plot(k, v[idx, h], lw=1.0, label=f"h{h + 1}")
        ax.axvline(0, color="0.6", lw=0.8, ls=":")
        for mark in marks:
            ax.axvline(mark, color="0.3", lw=0.8, ls="--")
        if symlog:
            ax.set_xscale("symlog", linthresh=1.0)
            ax.set_xlim(float(k.min()), float(k.max()))
        ax.set_title(titles[idx], fontsize=9)
        ax.set_xlabel("offset k = j - i", fontsize=8)
        ax.set_ylabel("f_h(k)", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    if v.shape[1] <= 16:
        axes.flat[0].legend(fontsize=6, ncol=2, frameon=False)
    if suptitle:
        fig.suptitle(suptitle, fontsize=11)
    return fig


def training_curves(
    steps: Sequence[float],
    series: Mapping[str, Sequence[float]],
    *,
    eval_loss: Sequence[float | None] | None = None,
    suptitle: str | None = None,
) -> Figure:
    """TI against training step, and against validation loss when given.

    Args:
        steps: training step of each checkpoint.
        series: label -> one TI value per checkpoint.
        eval_loss: validation loss per checkpoint (None entries are skipped).
        suptitle: figure title.
    """
    has_loss = eval_loss is not None and any(x is not None for x in eval_loss)
    fig = Figure(figsize=(10.4 if has_loss else 5.4, 3.7), layout="constrained")
    axes = fig.subplots(1, 2 if has_loss else 1, squeeze=False)[0]
    for label, values in series.items():
        axes[0].plot(steps, values, marker="o", lw=1.5, label=label)
    axes[0].set_xlabel("training step", fontsize=9)
    axes[0].set_ylabel("translation invariance", fontsize=9)
    axes[0].set_title("TI over training", fontsize=10)
    if has_loss:
        ax = axes[1]
        for label, values in series.items():
            pts = [(x, y) for x, y in zip(eval_loss, values, strict=True) if x is not None]
            xs, ys = zip(*pts, strict=True)
            ax.plot(xs, ys, marker="o", lw=0.8, ls="--", label=label)
        ax.set_xlabel("validation loss", fontsize=9)
        ax.set_ylabel("translation invariance", fontsize=9)
        ax.set_title("TI against validation loss", fontsize=10)
        ax.invert_xaxis()  # better (lower) loss to the right
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=8)
        ax.legend(fontsize=8, frameon=False)
    if suptitle:
        fig.suptitle(suptitle, fontsize=11)
    return fig


def comparison_bars(
    groups: Sequence[str],
    series: Mapping[str, Sequence[float | None]],
    *,
    title: str | None = None,
    ylabel: str = "translation invariance",
    ylim: tuple[float, float] | None = (0.0, 1.0),
) -> Figure:
    """Grouped bars: one group per model, one bar per metric (missing values skipped).

    Args:
        groups: group (model) names.
        series: metric label -> one value per group (``None`` when not available).
        title: figure title.
        ylabel: y label.
        ylim: y range.
    """
    n_series = max(1, len(series))
    width = 0.8 / n_series
    x = np.arange(len(groups))
    fig = Figure(figsize=(max(5.5, 1.1 * len(groups) * n_series / 2 + 3.5), 3.8))
    fig.set_layout_engine("constrained")
    ax = fig.subplots()
    for idx, (label, values) in enumerate(series.items()):
        vals = np.array([np.nan if v is None else float(v) for v in values])
        pos = x - 0.4 + width * (idx + 0.5)
        bars = ax.bar(pos, vals, width=width * 0.95, label=label)
        for rect, v in zip(bars, vals, strict=True):
            if np.isfinite(v):
                ax.text(
                    rect.get_x() + rect.get_width() / 2,
                    v,
                    f"{v:.2f}",
                    ha="center",
                    va="bottom",
                    fontsize=7,
                )
    ax.set_xticks(x, groups, fontsize=8, rotation=15 if len(groups) > 3 else 0)
    ax.set_ylabel(ylabel, fontsize=9)
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    if title:
        ax.set_title(title, fontsize=11)
    return fig


def glue_results(summary: Sequence[Mapping]) -> Figure:
    """GLUE dev scores per task and variant, and relative error reductions.

    Top: bars of the median score (x 100) per task and variant with min - max over seeds.
    Bottom (with several variants): the relative error reduction of each variant against
    the baseline. A variant has the same colour in both panels.

    Args:
        summary: rows of :func:`tisa.glue.results.summarize`: ``task``, ``variant``,
            ``baseline``, ``score``, ``score_min``, ``score_max`` (``nan`` where
            undefined), ``relative_error_reduction`` and ``positional_parameters``.
    """
    tasks = list(dict.fromkeys(r["task"] for r in summary))
    variants = list(dict.fromkeys(r["variant"] for r in summary))
    color = {v: f"C{i}" for i, v in enumerate(variants)}
    baseline = summary[0]["baseline"]
    compared = [v for v in variants if v != baseline]
    rows = {(r["task"], r["variant"]): r for r in summary}
    names = ["GLUE avg" if t == "glue" else t for t in tasks]
    x = np.arange(len(tasks))
    fig = Figure(figsize=(max(7.0, 1.1 * len(tasks) + 4.5), 7.0 if compared else 4.0))
    fig.set_layout_engine("tight")
    axes = fig.subplots(2 if compared else 1, 1, squeeze=False)[:, 0]

    def value(task: str, variant: str, key: str) -> float:
        row = rows.get((task, variant))
        return np.nan if row is None or row[key] is None else 100 * row[key]

    ax = axes[0]
    width = 0.8 / len(variants)
    for i, v in enumerate(variants):
        centres = x + (i - (len(variants) - 1) / 2) * width
        score = np.array([value(t, v, "score") for t in tasks])
        low = np.array([value(t, v, "score_min") for t in tasks])
        high = np.array([value(t, v, "score_max") for t in tasks])
        pos = next((rows[(t, v)]["positional_parameters"] for t in tasks if (t, v) in rows), None)
        label = v if pos is None else f"{v}: {pos['total']:,} positional params"
        ax.bar(centres, score, width, label=label, color=color[v])
        # the GLUE average's score is the median of its per-seed averages, inside their range
        spread = np.isfinite(score) & np.isfinite(low) & np.isfinite(high)
        ax.errorbar(
            centres[spread],
            score[spread],
            yerr=np.vstack([score - low, high - score])[:, spread],
            fmt="none",
            ecolor="black",
            capsize=3,
        )
    ax.set_xticks(x, names)
    ax.set_ylabel("score x 100")
    ax.set_title("GLUE dev scores: median over seeds, bars min - max")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(axis="y", alpha=0.3)

    if compared:
        ax = axes[1]
        width = 0.8 / len(compared)
        for i, v in enumerate(compared):
            rer = [value(t, v, "relative_error_reduction") for t in tasks]
            centres = x + (i - (len(compared) - 1) / 2) * width
            ax.bar(centres, rer, width, label=v, color=color[v])
        ax.axhline(0, color="black", linewidth=0.8)
        ax.set_xticks(x, names)
        ax.set_ylabel("%")
        ax.set_title(f"relative error reduction of the medians vs {baseline}: "
                     "(err_base - err) / err_base")
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
        ax.grid(axis="y", alpha=0.3)
    return fig


def extrapolation_curves(
    curves: Mapping[str, Sequence[tuple[int, float]]],
    lengths: Sequence[int],
    train_lengths: Mapping[str, int | None] | None = None,
    *,
    xlabel: str = "evaluation length (tokens)",
    ylabel: str = "masked-LM loss (nats)",
    title: str = "Length extrapolation (dotted: training length)",
    styles: Mapping[str, Mapping[str, Any]] | None = None,
) -> Figure:
    """Masked-LM loss against evaluation length, one line per model.

    Args:
        curves: model label -> (length, loss) points; lengths the model cannot represent
            are simply absent.
        lengths: every evaluated length (the x ticks; log2 axis).
        train_lengths: model label -> training length, drawn as a dotted line in the
            model's colour.
        xlabel, ylabel, title: the axis labels and title (e.g. for a loss-against-context
            curve).
        styles: model label -> keyword arguments of its line (``color``, ``linestyle``),
            e.g. one colour for two variants of a model.
    """
    train_lengths, styles = train_lengths or {}, styles or {}
    fig = Figure(figsize=(6.4, 4.2))
    fig.set_layout_engine("constrained")
    ax = fig.subplots()
    for label, points in curves.items():
        points = sorted(points)
        if not points:
            continue
        style = {"marker": "o", **styles.get(label, {})}
        (line,) = ax.plot(*zip(*points, strict=True), label=label, **style)
        if train_lengths.get(label) is not None:
            ax.axvline(train_lengths[label], color=line.get_color(), linestyle=":", alpha=0.6)
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(lengths), [str(n) for n in lengths])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize="small")
    return fig


def loss_curves(
    curves: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    *,
    xlabel: str = "training step",
    ylabel: str = "validation loss (nats)",
    title: str | None = None,
) -> Figure:
    """One line per run: e.g. validation loss against training step.

    Args:
        curves: run label -> (x values, y values) of equal length.
        xlabel: x label.
        ylabel: y label.
        title: axes title.
    """
    fig = Figure(figsize=(6.4, 4.2))
    fig.set_layout_engine("constrained")
    ax = fig.subplots()
    for label, (xs, ys) in curves.items():
        if len(xs) != len(ys):
            raise ValueError(f"curves[{label!r}]: {len(xs)} x values but {len(ys)} y values")
        ax.plot(xs, ys, marker="o", markersize=3, lw=1.3, label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize="small")
    return fig
