"""The position-scheme experiment's run specs, targets and TI-over-training summary."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "position_schemes.py"
_spec = importlib.util.spec_from_file_location("position_schemes", _PATH)
ps = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("position_schemes", ps)  # dataclasses look their module up
_spec.loader.exec_module(ps)


def test_specs_split_settings_from_scoring_options():
    assert ps.parse_spec("tisa") == ps.RunSpec("tisa", "tisa", {}, ())
    spec = ps.parse_spec(
        "mixed=rbf_linear:learn_tail=false:mixed_lengths=256,512:tisa_learning_rate=3e-3"
    )
    assert spec.label == "mixed" and spec.position == "rbf_linear"
    assert spec.settings == {"mixed_lengths": (256, 512), "tisa_learning_rate": 3e-3}
    assert spec.scoring_options == ("learn_tail=false",)
    for bad in ("=tisa", "a/b=tisa", "x=tisa:far_offset"):
        with pytest.raises(ValueError):
            ps.parse_spec(bad)


def _run(losses, params):
    return {
        "test_loss": dict(zip((128, 1024, 2048), losses)),
        "positional_parameters": {"total": params},
    }


def test_targets_follow_their_definitions():
    runs = {
        "absolute": _run((5.0, None, None), 65536),
        "alibi": _run((5.0, 5.3, 5.6), 0),
        "tisa": _run((4.9, 6.0, 7.0), 240),
        "good": _run((4.8, 4.9, 5.0), 300),  # +2.1% at 8x, +4.2% at 16x
        "big": _run((4.8, 4.9, 5.0), 700),  # over 1% of the table
    }
    out = ps._targets(runs, [128, 1024, 2048])
    assert "absolute" in out and out["absolute"]["rise_8x"] is None
    assert out["good"]["rise_8x"] == pytest.approx(4.9 / 4.8 - 1)
    assert out["good"]["all"] and not out["big"]["all"]
    assert not out["big"]["under_1pct_of_table"]
    assert not out["tisa"]["within_3pct_8x"] and not out["tisa"]["at_or_below_alibi"]
    assert out["tisa"]["at_or_below_rbf_at_train_length"]


def test_ti_curve_correlates_every_series_with_the_loss(tmp_path):
    rows = [
        {"step": s, "eval_loss": 6.0 - s / 100, "ti_gram": s / 1000, "ti_fp_raw": 0.0}
        | {"ti_gram_offdiag": 0.1 + s / 1000, "nulls": {"gram_offdiag": {}}}
        for s in (100, 200, 300, 400)
    ]
    rows.insert(1, {"step": 150, "ti_gram": 0.9})  # no eval: left out
    path = tmp_path / "ti.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    curve = ps._ti_curve(path)
    assert curve["steps"] == [100, 200, 300, 400]
    assert curve["spearman_ti_gram_vs_eval_loss"] == pytest.approx(-1.0)
    assert curve["spearman_ti_gram_offdiag_vs_eval_loss"] == pytest.approx(-1.0)
    assert curve["spearman_ti_fp_raw_vs_eval_loss"] is None  # constant: no correlation
    assert curve["spearman_ti_cos_offdiag_vs_eval_loss"] is None  # not logged
    assert not math.isnan(curve["spearman_ti_gram_vs_eval_loss_p"])


def test_summary_names_its_folder_relative_to_the_working_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert ps._shown(tmp_path / "runs" / "ps") == str(Path("runs") / "ps")
    assert ps._shown(Path("runs/ps")) == str(Path("runs") / "ps")
    elsewhere = tmp_path.parent / "other"
    assert ps._shown(elsewhere) == str(elsewhere)  # outside: as given
