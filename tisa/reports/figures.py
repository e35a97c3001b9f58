"""Figures as PNG: the one place where a matplotlib figure becomes bytes or a file.

Every figure of the toolkit is built with :class:`matplotlib.figure.Figure` directly (the
Agg canvas, no pyplot state), so drawing works headless and never changes the caller's
backend: :mod:`tisa.reports.heatmaps` (matrices) and :mod:`tisa.reports.charts` (curves
and bars) return figures; :func:`figure_png` turns one into PNG bytes and
:func:`save_figure` writes it atomically. Drawing code never computes a metric: every
number comes in computed.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from tisa.files import write_atomic

__all__ = ["DPI", "figure_png", "save_figure", "to_numpy"]

DPI = 110


def to_numpy(x: Any) -> np.ndarray:
    """A tensor or array-like as a float64 NumPy array (detached, on the CPU)."""
    if hasattr(x, "detach"):
        x = x.detach().cpu().double().numpy()
    return np.asarray(x, dtype=float)


def figure_png(fig: Figure, *, dpi: int = DPI) -> bytes:
    """PNG bytes of a figure."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight", facecolor="white")
    return buf.getvalue()


def save_figure(fig: Figure, path: str | Path, *, dpi: int = DPI) -> Path:
    """Writes ``fig`` as PNG to ``path`` atomically (parent folders are created)."""
    return write_atomic(path, figure_png(fig, dpi=dpi))
