"""The held-out comparison of log-n scaling settings (``experiments/length_scale.py``)."""

from __future__ import annotations

import json
import shutil

import pytest

from tisa.longeval import length_scale


def test_compares_settings_on_copies_and_chooses_by_mean_acc1(tiny_tisa, tmp_path, capsys):
    convert_dir = tmp_path / "convert"
    shutil.copytree(tiny_tisa, convert_dir / "model")
    out = tmp_path / "out"
    argv = [str(convert_dir), "--output-dir", str(out), "--lengths", "96", "--seeds", "7", "8",
            "--values", "none", "64", "--threads", "1", "--no-progress"]
    assert length_scale.main(argv) == 0
    selection = json.loads((out / "selection.json").read_text())
    assert selection["values"] == ["unscaled", "scale-64"]
    models = out / "models"
    assert json.loads((models / "unscaled" / "config.json").read_text())["tisa"][
        "length_scale"] is None
    assert json.loads((models / "scale-64" / "config.json").read_text())["tisa"][
        "length_scale"] == 64
    # only config.json differs: the same weights in both
    assert len(set(selection["weights_sha256"].values())) == 1
    means = selection["mean_acc1"]
    best = max(means, key=lambda name: (means[name]["all"], name == "unscaled"))
    assert selection["chosen"] == best
    rows = selection["against_unscaled"]
    assert {r["task"] for r in rows} == {"passkey", "needle", "passage"}
    assert all(r["model"] == "scale-64" and r["n"] == 10 for r in rows)  # 5 depths x 2 seeds
    assert all(r["p_holm"] >= r["p"] for r in rows)
    assert "chosen: " in capsys.readouterr().out
    # a changed model in the convert folder is copied again, not reused
    config = json.loads((convert_dir / "model" / "config.json").read_text())
    config["hidden_dropout_prob"] = 0.25
    (convert_dir / "model" / "config.json").write_text(json.dumps(config))
    length_scale._variant(convert_dir / "model", models / "scale-64", 64)
    copied = json.loads((models / "scale-64" / "config.json").read_text())
    assert copied["hidden_dropout_prob"] == 0.25 and copied["tisa"]["length_scale"] == 64


def test_needs_a_converted_model_and_the_unscaled_setting(tmp_path, capsys):
    with pytest.raises(SystemExit):
        length_scale.main([str(tmp_path)])
    assert "holds no converted model" in capsys.readouterr().err
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    with pytest.raises(SystemExit):
        length_scale.main([str(tmp_path), "--values", "512"])
    assert "include 'none'" in capsys.readouterr().err
