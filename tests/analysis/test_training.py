"""TI over training: the Spearman helper and the series read from a pretraining log."""

from __future__ import annotations

import pytest
from scipy.stats import spearmanr

from tisa.analysis.training import read_ti_log, spearman
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
