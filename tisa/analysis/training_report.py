"""Report sections of training runs: TI over training, validation-loss curves.

:func:`ti_over_training_section` is the one presentation of a run's
:class:`~tisa.analysis.training.TrainingTI` (``tisa analyze --checkpoints``, the demo, the
position-scheme benchmark): TI against the step and against the validation loss, the values
per checkpoint and their Spearman correlations.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tisa.files import write_atomic
from tisa.reports import charts
from tisa.reports.figures import figure_png
from tisa.reports.html import Image, Section, Table

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from tisa.analysis.nulls import NullBaselines
    from tisa.analysis.training import Correlation, TrainingTI

__all__ = [
    "format_correlation",
    "format_z",
    "loss_curves_section",
    "ti_over_training_section",
    "training_figure",
]


def format_z(z: float) -> str:
    """A z-score for a table: one decimal below 100, whole numbers above, ∞ for inf."""
    if math.isinf(z):
        return "∞" if z > 0 else "-∞"
    return f"{z:.1f}" if abs(z) < 100 else f"{z:,.0f}"


_LABELS = {
    "ti_gram": "TI P Pᵀ",
    "ti_gram_offdiag": "TI P Pᵀ off-diag.",
    "ti_fp_raw": "TI F_P raw (mean)",
    "ti_fp_ln": "TI F_P LN (mean)",
}


def format_correlation(c: Correlation | None) -> str:
    """``+0.93 (p = 0.001, n = 10)``, or why there is none."""
    if c is None:
        return "n/a (fewer than 3 points or a constant series)"
    return f"{c.rho:+.2f} (p = {c.pvalue:.2g}, n = {c.n})"


def _null_band(b: NullBaselines) -> tuple[float, float]:
    """The larger null's mean ± 2 std: the range a table without order reaches."""
    worst = b.random if b.random.mean >= b.shuffled.mean else b.shuffled
    return worst.mean - 2 * worst.std, worst.mean + 2 * worst.std


def training_figure(training: TrainingTI) -> Figure:
    """TI of every series against the step (and the validation loss), with each series'
    null band (mean ± 2 std of the higher null) shaded in the series' colour."""
    series = {_LABELS[k]: v for k, v in training.series().items()}
    fig = charts.training_curves(
        training.steps, series, eval_loss=training.eval_loss, suptitle=training.folder
    )
    if training.nulls:
        ax = fig.axes[0]
        colours = {line.get_label(): line.get_color() for line in ax.get_lines()}
        for key, per_checkpoint in training.nulls.items():
            lo, hi = zip(*(_null_band(b) for b in per_checkpoint), strict=True)
            ax.fill_between(
                training.steps, lo, hi, color=colours.get(_LABELS[key]), alpha=0.18, lw=0
            )
        ax.set_title("TI over training (shaded: null mean ± 2 std)", fontsize=10)
    return fig


def ti_over_training_section(
    training: TrainingTI,
    *,
    heading: str = "Translation invariance over training",
    png: str | Path | None = None,
    paragraphs: Sequence[str] = (),
) -> Section:
    """TI of each checkpoint: figure, table of values (with nulls where computed) and
    correlations.

    Args:
        training: the run's TI series.
        heading: the section heading.
        png: also write the figure there.
        paragraphs: text shown before the standard explanation.
    """
    data = figure_png(training_figure(training))
    if png is not None:
        write_atomic(png, data)
    series = training.series()
    nulls = training.nulls or {}
    columns, shade = ["step", "eval loss"], []
    for key in series:
        shade.append(len(columns))
        columns.append(_LABELS[key].replace(" (mean)", ""))
        if key in nulls:
            columns += ["null", "z"]
    rows = []
    for i, (step, loss) in enumerate(zip(training.steps, training.eval_loss, strict=True)):
        row: list[Any] = [step, loss]
        for key, values in series.items():
            row.append(values[i])
            if key in nulls:
                b = nulls[key][i]
                row += [
                    max(b.random.mean, b.shuffled.mean),
                    format_z(min(b.random.z, b.shuffled.z)),
                ]
        rows.append(row)
    sp = training.spearman
    corr = [
        [
            _LABELS[key],
            format_correlation(sp[f"{key}_vs_step"]),
            format_correlation(sp[f"{key}_vs_eval_loss"]),
        ]
        for key in series
    ]
    text = [
        *paragraphs,
        f"{len(training.steps)} checkpoints of `{training.folder}`. Spearman's rank "
        "correlation: positive against the step means TI grows during training; "
        "negative against the validation loss means more translation-invariant "
        "checkpoints have lower loss.",
    ]
    if training.ti_gram_offdiag is not None:
        text.append(
            "TI P Pᵀ counts the diagonal of squared norms, which random rows of equal "
            "norm (the initialisation) already get right; the off-diagonal TI measures "
            "only how the positions relate to each other."
        )
    else:
        text.append(
            "This series comes from the run's ti.jsonl, which holds TI with the diagonal "
            "only; `tisa analyze --checkpoints` measures the off-diagonal TI and its nulls "
            "from the checkpoints."
        )
    if nulls:
        b = next(iter(nulls.values()))[0]
        text.append(
            "null: the higher mean of the two null baselines at that checkpoint (random "
            "directions with the rows' norms, the rows shuffled; "
            f"{len(b.random.draws)} draws each), z the lower of the two z-scores."
        )
    return Section(
        heading,
        paragraphs=text,
        tables=[
            Table(columns, rows, shade=shade),
            Table(["series", "Spearman ρ vs step", "Spearman ρ vs eval loss"], corr),
        ],
        figures=[Image(data, "TI per checkpoint.")],
    )


def loss_curves_section(
    heading: str,
    curves: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    *,
    paragraphs: Sequence[str] = (),
    caption: str = "Validation loss during training.",
) -> Section:
    """Validation loss against the step, one line per run."""
    fig = charts.loss_curves(curves, title="Validation MLM loss")
    return Section(heading, paragraphs=paragraphs, figures=[Image(figure_png(fig), caption)])
