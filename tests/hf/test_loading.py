"""Loading models: damaged weights and configs that do not match them, in one line."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.tiny_bert import save_tiny_bert
from tisa.cli import main
from tisa.hf.loading import ModelLoadError, load_model
from tisa.pretrain.masked_lm import load_masked_lm


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


def test_a_run_folder_loads_its_model_and_says_so(broken, tmp_path, caplog):
    run = tmp_path / "run"
    shutil.copytree(broken[0].parent / "good", run / "model")  # as tisa pretrain leaves it
    (run / "metrics.jsonl").write_text("")
    with caplog.at_level("WARNING", logger="tisa.hf.loading"):
        model, tokenizer = load_model(str(run))
    assert model.config.hidden_size == 16 and tokenizer is not None
    said = [r.getMessage() for r in caplog.records]
    assert said == [f"{run} is a run folder: loading its final model, {run / 'model'}"]


def test_max_positions_beyond_the_table_is_said(broken, tmp_path, caplog):
    good = str(broken[0].parent / "good")
    argv = ["analyze", good, "--output-dir", str(tmp_path / "out"), "--quiet", "--no-probe"]
    argv += ["--null-draws", "0", "--max-positions", "100000"]
    with caplog.at_level("WARNING", logger="tisa.analysis.pipeline"):
        assert main(argv) == 0
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and said[0].startswith("max_positions: ")
    assert said[0].endswith("has 64 positions, fewer than 100000; using 64")
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["models"][0]["position_embeddings"]["length"] == 64
