"""Report sections of training runs: TI over training, validation-loss curves.

:func:`ti_over_training_section` is the one presentation of a run's
:class:`~tisa.analysis.training.TrainingTI` (``tisa analyze --checkpoints``, the demo, the
position-scheme benchmark): TI against the step and against the validation loss, the values
per checkpoint and their Spearman correlations.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from tisa.files import write_atomic
from tisa.reports import charts
from tisa.reports.figures import figure_png
from tisa.reports.html import Image, Section, Table

if TYPE_CHECKING:
    from tisa.analysis.training import Correlation, TrainingTI

__all__ = ["format_correlation", "loss_curves_section", "ti_over_training_section"]

_LABELS = {
    "ti_gram": "TI P Pᵀ",
    "ti_fp_raw": "TI F_P raw (mean)",
    "ti_fp_ln": "TI F_P LN (mean)",
}


def format_correlation(c: Correlation | None) -> str:
    """``+0.93 (p = 0.001, n = 10)``, or why there is none."""
    if c is None:
        return "n/a (fewer than 3 points or a constant series)"
    return f"{c.rho:+.2f} (p = {c.pvalue:.2g}, n = {c.n})"


def ti_over_training_section(
    training: TrainingTI,
    *,
    heading: str = "Translation invariance over training",
    png: str | Path | None = None,
) -> Section:
    """TI of each checkpoint: figure, table of values and correlations.

    Args:
        training: the run's TI series.
        heading: the section heading.
        png: also write the figure there.
    """
    series = {label: getattr(training, key) for key, label in _LABELS.items()}
    fig = charts.training_curves(
        training.steps, series, eval_loss=training.eval_loss, suptitle=training.folder
    )
    data = figure_png(fig)
    if png is not None:
        write_atomic(png, data)
    rows = [
        [step, loss, gram, raw, ln]
        for step, loss, gram, raw, ln in zip(
            training.steps,
            training.eval_loss,
            training.ti_gram,
            training.ti_fp_raw,
            training.ti_fp_ln,
            strict=True,
        )
    ]
    sp = training.spearman
    corr = [
        [
            label,
            format_correlation(sp[f"{key}_vs_step"]),
            format_correlation(sp[f"{key}_vs_eval_loss"]),
        ]
        for key, label in _LABELS.items()
    ]
    return Section(
        heading,
        paragraphs=[
            f"{len(training.steps)} checkpoints of `{training.folder}`. Spearman's rank "
            "correlation: positive against the step means TI grows during training; "
            "negative against the validation loss means more translation-invariant "
            "checkpoints have lower loss.",
        ],
        tables=[
            Table(
                ["step", "eval loss", "TI P Pᵀ", "TI F_P raw", "TI F_P LN"],
                rows,
                shade=[2, 3, 4],
            ),
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
