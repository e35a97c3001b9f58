"""Loading models: damaged weights and configs that do not match them, in one line."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.tiny_bert import save_tiny_bert
from tisa.analysis.loading import ModelLoadError, load_model
from tisa.cli import main
from tisa.train.masked_lm import load_masked_lm


@pytest.fixture(scope="module")
def broken(tmp_path_factory):
    """(weights cut short, config.json with another hidden size) copies of a tiny BERT."""
    root = tmp_path_factory.mktemp("broken")
    good = root / "good"
    save_tiny_bert(good, "BertForMaskedLM")
    cut, wrong = root / "cut", root / "wrong"
    shutil.copytree(good, cut)
    data = (good / "model.safetensors").read_bytes()
    (cut / "model.safetensors").write_bytes(data[: len(data) // 2])
    shutil.copytree(good, wrong)
    config = json.loads((wrong / "config.json").read_text())
    (wrong / "config.json").write_text(json.dumps({**config, "hidden_size": 32}))
    return cut, wrong


def test_damaged_weights_and_mismatched_configs_are_one_line(broken):
    cut, wrong = broken
    for load in (load_model, load_masked_lm):
        with pytest.raises(ModelLoadError, match=r"model.safetensors is cut short .*copy or") as e:
            load(str(cut))
        assert "\n" not in str(e.value)
        with pytest.raises(ModelLoadError, match=r"do not match config.json.*restore") as e:
            load(str(wrong))
        assert "\n" not in str(e.value)


@pytest.mark.parametrize("which", [0, 1])
def test_analyze_says_so_in_one_line_and_writes_nothing(broken, which, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["analyze", str(broken[which]), "--output-dir", str(out), "--quiet"]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.startswith("tisa analyze: error: ") and "\n" not in err
    assert ("cut short" if which == 0 else "do not match config.json") in err
    assert not out.exists()  # nothing created for a run that could not start
