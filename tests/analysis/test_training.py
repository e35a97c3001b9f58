"""TI over training: the Spearman helper and the series read from a pretraining log."""

from __future__ import annotations

import pytest
from scipy.stats import spearmanr

from tisa.analysis.nulls import NullBaselines, NullComparison
from tisa.analysis.training import TrainingTI, read_ti_log, spearman
from tisa.files import append_jsonl


def test_spearman_uses_complete_pairs_only():
    x, y = [1.0, 2.0, None, 4.0, 5.0], [5.0, 3.0, 2.0, None, 1.0]
    c = spearman(x, y)
    ref = spearmanr([1.0, 2.0, 5.0], [5.0, 3.0, 1.0])
    assert c.n == 3 and c.rho == pytest.approx(ref.statistic) and c.pvalue == ref.pvalue
    assert spearman([1.0, 2.0], [2.0, 1.0]) is None  # fewer than 3 pairs
    assert spearman([1.0, 2.0, 3.0], [4.0, 4.0, 4.0]) is None  # a constant series


def test_read_ti_log(tmp_path):
    log = tmp_path / "absolute" / "ti.jsonl"
    for step, loss, ti in ((30, None, 0.3), (10, 4.0, 0.1), (20, 3.0, 0.2), (40, 2.0, 0.4)):
        append_jsonl(
            log,
            {
                "step": step,
                "eval_loss": loss,
                "ti_gram": ti,
                "ti_fp_raw": ti / 2,
                "ti_fp_ln": ti / 3,
            },
        )
    all_rows = read_ti_log(log)
    assert all_rows.folder == "absolute" and all_rows.steps == (10, 20, 30, 40)
    assert all_rows.checkpoints[0] == "checkpoint-10" and all_rows.eval_loss[2] is None
    assert all_rows.spearman["ti_gram_vs_step"].rho == pytest.approx(1.0)
    assert all_rows.spearman["ti_fp_raw_vs_eval_loss"].n == 3
    evaluated = read_ti_log(log, evaluated_only=True)
    assert evaluated.steps == (10, 20, 40)
    assert evaluated.to_dict()["spearman"]["ti_gram_vs_eval_loss"]["rho"] == pytest.approx(-1.0)
    assert all_rows.ti_gram_offdiag is None and all_rows.nulls is None  # a log has neither
    assert list(all_rows.series()) == ["ti_gram", "ti_fp_raw", "ti_fp_ln"]


def _baselines(value: float) -> NullBaselines:
    def one(null: str) -> NullComparison:
        return NullComparison(null, value, 0.0, 0.1, value / 0.1, 1.0, (0.0, 0.1), 0)

    return NullBaselines(observed=value, random=one("random"), shuffled=one("shuffled"))


def test_rows_with_the_off_diagonal_series_and_nulls():
    rows = [
        {
            "step": s,
            "eval_loss": 5.0 - s / 100,
            "ti_gram": 0.5,
            "ti_fp_raw": v,
            "ti_fp_ln": v,
            "ti_gram_offdiag": v,
        }
        for s, v in ((300, 0.3), (100, 0.1), (200, 0.2))
    ]
    keys = ("ti_gram", "ti_gram_offdiag", "ti_fp_raw", "ti_fp_ln")
    nulls = [{k: _baselines(r["ti_gram_offdiag"]) for k in keys} for r in rows]
    ti = TrainingTI.from_rows("run", rows, nulls=nulls)
    assert ti.steps == (100, 200, 300) and ti.ti_gram_offdiag == (0.1, 0.2, 0.3)
    # the nulls follow their rows into step order
    assert [b.observed for b in ti.nulls["ti_gram_offdiag"]] == [0.1, 0.2, 0.3]
    assert ti.spearman["ti_gram_offdiag_vs_step"].rho == pytest.approx(1.0)
    assert ti.spearman["ti_gram_vs_step"] is None  # constant
    plain = ti.to_dict()
    assert plain["nulls"]["ti_gram_offdiag"][2]["observed"] == 0.3
    assert plain["ti_gram_offdiag"] == [0.1, 0.2, 0.3]
    with pytest.raises(ValueError, match="ti_gram_offdiag"):
        TrainingTI.from_rows(
            "run", [rows[0], {k: v for k, v in rows[1].items() if k != "ti_gram_offdiag"}]
        )
    with pytest.raises(ValueError, match="one entry per row"):
        TrainingTI.from_rows("run", rows, nulls=nulls[:2])
