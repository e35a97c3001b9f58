"""report.html of GLUE runs: tables, figures, movement of the scoring parameters, parity."""

from __future__ import annotations

import re

import pytest
from matplotlib.collections import PathCollection

from tisa.glue.report import movement_rows, paired_differences, write_glue_report
from tisa.glue.results import parity_comparison, seedwise_parity, summarize


def _run(task, variant, seed, score, moved=None):
    return {
        "task": task,
        "variant": variant,
        "seed": seed,
        "metrics": {"accuracy": score},
        "score": score,
        "positional_parameters": {
            "absolute": 64,
            "tisa": 0 if variant == "none" else 15,
            "total": 64 if variant == "none" else 79,
        },
        "tisa_movement": {}
        if moved is None
        else {
            "amplitude": {
                "count": 5,
                "mean_abs_change": moved,
                "max_abs_change": 2 * moved,
                "mean_abs_start": 0.0,
                "mean_abs_now": moved,
            },
            "offset": {
                "count": 5,
                "mean_abs_change": moved / 10,
                "max_abs_change": moved / 5,
                "mean_abs_start": 5.0,
                "mean_abs_now": 5.0,
            },
        },
    }


RUNS = [
    *(_run("rte", "none", s, 0.55 + s / 100) for s in (1, 2, 3)),
    *(_run("rte", "keep", s, 0.57 + s / 100, moved=0.1 * s) for s in (1, 2, 3)),
    *(_run("mrpc", "none", s, 0.78 - s / 100) for s in (1, 2, 3)),
    *(_run("mrpc", "keep", s, 0.77 - s / 100, moved=0.2) for s in (1, 2, 3)),
]
#: stock runs for the seed-by-seed parity: rte seed 1 as the none run, seed 2 not
STOCK_RUNS = [
    {"task": "rte", "seed": 1, "metrics": {"accuracy": 0.55 + 1 / 100}},
    {"task": "rte", "seed": 2, "metrics": {"accuracy": 0.60}},
]


def test_movement_rows_average_over_seeds():
    rows = {(r[0], r[2]): r for r in movement_rows(RUNS)}
    assert set(rows) == {
        ("mrpc", "amplitude"),
        ("mrpc", "offset"),
        ("rte", "amplitude"),
        ("rte", "offset"),
    }
    task, variant, kind, runs, count, start, mean, top = rows[("rte", "amplitude")]
    assert (variant, runs, count, start) == ("keep", 3, 5, 0.0)
    assert mean == pytest.approx(0.2)  # mean of 0.1, 0.2, 0.3
    assert top == pytest.approx(0.6)  # max over seeds of max |change|
    assert movement_rows([_run("rte", "none", 1, 0.5)]) == []


def test_paired_differences_draws_one_dot_per_seed():
    summary = summarize(RUNS, "none")
    fig = paired_differences(summary, RUNS)
    (ax,) = fig.axes
    offsets = [c.get_offsets() for c in ax.collections if isinstance(c, PathCollection)]
    assert sum(len(o) for o in offsets) == 6  # 2 tasks x 3 seeds
    ys = sorted(round(float(y), 6) for o in offsets for y in o[:, 1])
    assert ys == [-1.0] * 3 + [2.0] * 3  # keep - none x 100: mrpc -1, rte +2


def test_report_has_scores_paired_movement_parity_and_settings(tmp_path):
    summary = summarize(RUNS, "none")
    parity = parity_comparison(RUNS, "none", {"rte": {"accuracy": (0.57, 0.01, 3)}})
    path = write_glue_report(
        tmp_path / "report.html",
        summary,
        RUNS,
        settings={"epochs": 3},
        parity=parity,
        parity_name="stock Trainer",
        parity_seedwise=seedwise_parity(RUNS, "none", STOCK_RUNS),
    )
    html = path.read_text(encoding="utf-8")
    for heading in (
        "Scores",
        "Paired comparison",
        "How far the TISA scoring parameters moved",
        "Baseline parity: none against the stock Trainer",
        "Seed by seed: none against the stock Trainer",
        "1 of 2 scores identical",
        "Settings",
    ):
        assert heading in html
    assert len(re.findall(r'<img src="data:image/png;base64,', html)) == 2
    assert "3 / 0 / 0" in html and "0 / 3 / 0" in html  # rte: keep wins all, mrpc loses all
    assert "amplitude" in html and "offset" in html


def test_report_without_runs_is_refused(tmp_path):
    with pytest.raises(ValueError, match="summary"):
        write_glue_report(tmp_path / "r.html", [], [])


def test_scores_chart_with_tasks_at_different_seed_counts():
    from tisa.reports.charts import glue_results

    runs = [
        *(_run("rte", "none", s, 0.55 + s / 100) for s in (1, 2, 3)),
        _run("mrpc", "none", 1, 0.8),
    ]
    summary = summarize(runs, "none")
    glue = next(r for r in summary if r["task"] == "glue")
    # the average covers seed 1 alone, the only seed with both tasks
    assert glue["seeds"] == [1]
    assert glue["score"] == glue["score_min"] == glue["score_max"] == pytest.approx(0.68)
    fig = glue_results(summary)
    whiskers = [c for c in fig.axes[0].containers if type(c).__name__ == "ErrorbarContainer"]
    assert len(whiskers) == 1 and len(whiskers[0].lines[2][0].get_segments()) == 3
