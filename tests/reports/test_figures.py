import math

import numpy as np
import pytest
import torch

from tisa.reports import charts, heatmaps
from tisa.reports.charts import extrapolation_curves, glue_results, loss_curves
from tisa.reports.figures import figure_png, save_figure


def _row(task, variant, score, rer=None, spread=0.01):
    nan = math.nan
    return {
        "task": task,
        "variant": variant,
        "baseline": "none",
        "score": score,
        "score_min": nan if task == "glue" else score - spread,
        "score_max": nan if task == "glue" else score + spread,
        "relative_error_reduction": rer,
        "positional_parameters": {"total": 240 if variant == "keep" else 0},
    }


def test_glue_results_bars_are_the_scores_and_error_reductions():
    summary = [
        _row("rte", "none", 0.50),
        _row("rte", "keep", 0.60, rer=0.2),
        _row("glue", "none", 0.50),
        _row("glue", "keep", 0.60, rer=0.2),
    ]
    fig = glue_results(summary)
    top, bottom = fig.axes
    heights = sorted(round(p.get_height(), 6) for p in top.patches)
    assert heights == [50.0, 50.0, 60.0, 60.0]
    assert [round(p.get_height(), 6) for p in bottom.patches] == [20.0, 20.0]
    labels = [t.get_text() for t in top.get_legend().get_texts()]
    assert labels == ["none: 0 positional params", "keep: 240 positional params"]
    assert figure_png(fig)[:8] == b"\x89PNG\r\n\x1a\n"


def test_glue_results_single_variant_has_one_panel():
    fig = glue_results([_row("cola", "none", 0.3)])
    assert len(fig.axes) == 1


def test_extrapolation_curves_skip_lengths_a_model_cannot_represent():
    curves = {"absolute": [(256, 6.1), (128, 6.0)], "tisa": [(128, 5.7), (256, 5.8), (512, 5.9)]}
    fig = extrapolation_curves(curves, [128, 256, 512], {"absolute": 128, "tisa": 128})
    (ax,) = fig.axes
    lines = {
        line.get_label(): line for line in ax.get_lines() if not line.get_label().startswith("_")
    }
    assert set(lines) == {"absolute", "tisa"}
    np.testing.assert_array_equal(lines["absolute"].get_xdata(), [128, 256])  # sorted
    np.testing.assert_array_equal(lines["tisa"].get_ydata(), [5.7, 5.8, 5.9])
    dotted = [line for line in ax.get_lines() if line.get_linestyle() == ":"]
    assert len(dotted) == 2


def test_loss_curves_one_line_per_run_and_length_check():
    fig = loss_curves({"a": ([1, 2], [3.0, 2.0]), "b": ([1, 2], [4.0, 3.5])})
    (ax,) = fig.axes
    assert [line.get_label() for line in ax.get_lines()] == ["a", "b"]
    np.testing.assert_array_equal(ax.get_lines()[1].get_ydata(), [4.0, 3.5])
    with pytest.raises(ValueError, match=r"curves\['a'\]: 2 x values but 1 y values"):
        loss_curves({"a": ([1, 2], [3.0])})


def test_plots_return_figures() -> None:
    figs = [
        heatmaps.matrices_grid(torch.randn(3, 5, 5), titles=["a", "b", "c"], ncols=2),
        heatmaps.value_heatmaps({"ti": torch.rand(2, 3)}, row_names=["x", "y"]),
        charts.offset_profiles(
            [("p", torch.arange(-2, 3), {"m": (torch.zeros(5), torch.ones(5))})]
        ),
        charts.scoring_curves(torch.arange(-3, 4), torch.randn(2, 2, 7), layers=[0, 1]),
        charts.scoring_curves(torch.arange(-3, 4), torch.randn(2, 2, 7), titles=["a", "b"]),
        charts.training_curves([1, 2, 3], {"ti": [0.1, 0.2, 0.3]}, eval_loss=[3.0, None, 2.0]),
        charts.comparison_bars(["m1", "m2"], {"ti": [0.4, None]}),
    ]
    for fig in figs:
        assert figure_png(fig).startswith(b"\x89PNG")
    with pytest.raises(ValueError, match="titles"):
        heatmaps.matrices_grid(torch.randn(2, 3, 3), titles=["a"])


def test_save_figure_writes_a_png(tmp_path):
    path = save_figure(loss_curves({"a": ([1, 2], [3.0, 2.0])}), tmp_path / "sub" / "f.png")
    assert path.read_bytes().startswith(b"\x89PNG")
