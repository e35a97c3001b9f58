"""Heatmaps of matrices: P Pᵀ, F_P of every head, attention maps, TI tables.

Letters: L positions, H heads, N layers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.colors import PowerNorm
from matplotlib.figure import Figure

from tisa.reports.figures import to_numpy as _np

__all__ = ["matrices_grid", "matrix_heatmap", "matrix_heatmaps", "value_heatmaps"]

_ATTENTION_CMAP = "magma"
_MATRIX_CMAP = "viridis"
_SIGNED_CMAP = "RdBu_r"
_TI_CMAP = "YlGnBu"


def _limits(m: np.ndarray, mode: str) -> tuple[float, float]:
    finite = m[np.isfinite(m)]
    if finite.size == 0:
        return 0.0, 1.0
    if mode == "signed":
        v = float(np.quantile(np.abs(finite), 0.995)) or 1.0
        return -v, v
    if mode == "attention":
        return 0.0, float(np.quantile(finite, 0.99)) or 1.0
    return float(np.quantile(finite, 0.005)), float(np.quantile(finite, 0.995))


def _cmap(mode: str) -> str:
    return {"signed": _SIGNED_CMAP, "attention": _ATTENTION_CMAP}.get(mode, _MATRIX_CMAP)


def _show(ax, m: np.ndarray, mode: str, limits: tuple[float, float]):
    """imshow with the colour scaling of ``mode``.

    Attention uses a square-root colour scale: a few "sink" columns (the first token)
    take most of the weight, and a linear scale would hide everything else.
    """
    lo, hi = limits
    if mode == "attention":
        norm = PowerNorm(gamma=0.5, vmin=max(lo, 0.0), vmax=hi, clip=True)
        return ax.imshow(m, cmap=_cmap(mode), norm=norm, interpolation="antialiased")
    return ax.imshow(m, cmap=_cmap(mode), vmin=lo, vmax=hi, interpolation="antialiased")


def matrix_heatmaps(
    matrices: Sequence[tuple[str, object]],
    *,
    suptitle: str | None = None,
    mode: str = "matrix",
    xlabel: str = "key position j",
    ylabel: str = "query position i",
    panel_size: float = 4.0,
) -> Figure:
    """Side-by-side heatmaps, one colour bar each.

    Args:
        matrices: (title, (L, L) array) pairs.
        suptitle: figure title.
        mode: ``"matrix"`` (viridis, 0.5-99.5% range), ``"signed"`` (diverging, centred
            on 0) or ``"attention"`` (magma, square-root scale from 0 to the 99th
            percentile).
        xlabel, ylabel: axis labels.
        panel_size: inches per panel.
    """
    n = len(matrices)
    fig = Figure(figsize=(panel_size * n + 0.6 * n, panel_size), layout="constrained")
    axes = fig.subplots(1, n, squeeze=False)[0]
    for ax, (title, m) in zip(axes, matrices, strict=True):
        m = _np(m)
        im = _show(ax, m, mode, _limits(m, mode))
        ax.set_title(title, fontsize=10)
        ax.set_xlabel(xlabel, fontsize=9)
        ax.set_ylabel(ylabel, fontsize=9)
        ax.tick_params(labelsize=8)
        fig.colorbar(im, ax=ax, shrink=0.85)
    if suptitle:
        fig.suptitle(suptitle, fontsize=12)
    return fig


def matrix_heatmap(
    matrix: object, *, title: str, mode: str = "matrix", suptitle: str | None = None
) -> Figure:
    """One (L, L) heatmap; see :func:`matrix_heatmaps` for ``mode``."""
    return matrix_heatmaps([(title, matrix)], suptitle=suptitle, mode=mode)


def matrices_grid(
    matrices: object,
    *,
    titles: Sequence[str],
    suptitle: str | None = None,
    ncols: int = 6,
    mode: str = "signed",
    shared_scale: bool = False,
    row_labels: Sequence[str] | None = None,
) -> Figure:
    """A grid of small heatmaps, e.g. F_P of every head: (n, L, L), one title each.

    Args:
        matrices: (n, L, L) array.
        titles: n panel titles.
        suptitle: figure title.
        ncols: panels per row.
        mode: colour scheme (see :func:`matrix_heatmaps`); each panel is scaled on its own
            unless ``shared_scale``.
        shared_scale: one colour range for all panels (and one colour bar).
        row_labels: optional label per row of panels (drawn as the first panel's y label).
    """
    arr = _np(matrices)
    n = arr.shape[0]
    if len(titles) != n:
        raise ValueError(f"titles must have {n} entries, got {len(titles)}")
    ncols = max(1, min(ncols, n))
    nrows = math.ceil(n / ncols)
    fig = Figure(figsize=(2.1 * ncols + 0.8, 2.2 * nrows + 0.5), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    shared = _limits(arr, mode) if shared_scale else None
    im = None
    for idx, ax in enumerate(axes.flat):
        if idx >= n:
            ax.axis("off")
            continue
        im = _show(ax, arr[idx], mode, shared or _limits(arr[idx], mode))
        ax.set_title(titles[idx], fontsize=8)
        ax.set_xticks([])
        ax.set_yticks([])
        if row_labels is not None and idx % ncols == 0:
            ax.set_ylabel(row_labels[idx // ncols], fontsize=9)
    if shared_scale and im is not None:
        fig.colorbar(im, ax=axes, shrink=0.6)
    if suptitle:
        fig.suptitle(suptitle, fontsize=11)
    return fig


def value_heatmaps(
    panels: Mapping[str, object],
    *,
    suptitle: str | None = None,
    row_label: str = "layer",
    col_label: str = "head",
    vmin: float = 0.0,
    vmax: float = 1.0,
    annotate: bool = True,
    cmap: str = _TI_CMAP,
    row_start: int = 1,
    col_start: int = 1,
    row_names: Sequence[str] | None = None,
    col_names: Sequence[str] | None = None,
) -> Figure:
    """Annotated heatmaps of small tables, e.g. TI per layer (rows) and head (columns).

    Args:
        panels: title -> (rows, cols) array; panels sit side by side.
        suptitle: figure title.
        row_label, col_label: axis labels.
        vmin, vmax: colour range (0..1 for TI).
        annotate: write each value (2 decimals) into its cell.
        cmap: colour map.
        row_start, col_start: number of the first row / column in tick labels.
        row_names: tick labels for the rows instead of numbers.
        col_names: tick labels for the columns instead of numbers.
    """
    items = [(t, _np(v)) for t, v in panels.items()]
    for title, v in items:
        if v.ndim != 2:
            raise ValueError(f"panel {title!r} must be 2-D (rows, cols), got shape {v.shape}")
    extra = 0.6 if row_names else 0.0
    width = sum(max(2.5, 0.42 * v.shape[1] + 1.2 + extra) for _, v in items)
    height = max(2.0, 0.42 * max(v.shape[0] for _, v in items) + 1.3)
    fig = Figure(figsize=(width + 0.8, height), layout="constrained")
    axes = fig.subplots(1, len(items), squeeze=False)[0]
    im = None
    for ax, (title, v) in zip(axes, items, strict=True):
        im = ax.imshow(v, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel(col_label, fontsize=9)
        ax.set_ylabel(row_label, fontsize=9)
        cols = col_names or [str(i + col_start) for i in range(v.shape[1])]
        ax.set_xticks(range(v.shape[1]), list(cols))
        rows = row_names or [str(i + row_start) for i in range(v.shape[0])]
        ax.set_yticks(range(v.shape[0]), list(rows))
        ax.tick_params(labelsize=8)
        if annotate and v.size <= 400:
            mid = (vmin + vmax) / 2
            for (r, c), val in np.ndenumerate(v):
                color = "white" if val > mid else "black"
                ax.text(c, r, f"{val:.2f}", ha="center", va="center", fontsize=6.5, color=color)
    if im is not None:
        fig.colorbar(im, ax=axes, shrink=0.8)
    if suptitle:
        fig.suptitle(suptitle, fontsize=11)
    return fig
