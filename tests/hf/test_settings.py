"""TisaSettings: one validated declaration of TISA's options, stored as config.tisa."""

from __future__ import annotations

import pytest
from transformers import BertConfig, BertModel

import tisa.hf as th
from tisa.hf.settings import stored_settings

CONFIG = BertConfig(hidden_size=32, num_attention_heads=4, num_hidden_layers=2)


def test_defaults_are_the_papers_rbf_next_to_the_embeddings():
    stored = th.TisaSettings().to_config(CONFIG)
    assert stored["scoring"]["name"] == "rbf" and stored["scoring"]["num_kernels"] == 5
    assert stored["scoring"]["num_heads"] == 4 and stored["scoring"]["amplitude_mean"] == 0.1
    assert stored["position_embeddings"] == "keep" and stored["backend"] == "auto"


def test_keywords_split_into_fields_and_scoring_options():
    s = th.TisaSettings.from_options(scoring="rbf", num_kernels=3, amplitude_mean=0.0)
    assert s.num_kernels == 3 and dict(s.scoring_options) == {"amplitude_mean": 0.0}
    assert s.to_config(CONFIG)["scoring"]["num_kernels"] == 3
    with pytest.raises(AttributeError):
        s.scoring = "t5"  # frozen


def test_num_kernels_only_for_kernel_families():
    assert th.takes_num_kernels("rbf") and not th.takes_num_kernels("alibi")
    assert not th.takes_num_kernels(None)
    th.TisaSettings(scoring="alibi")  # no num_kernels given: fine
    with pytest.raises(ValueError, match="num_kernels applies to kernel scoring functions"):
        th.TisaSettings(scoring="alibi", num_kernels=5)  # also the value that used to pass
    with pytest.raises(ValueError, match="num_kernels.*scoring is None"):
        th.TisaSettings(scoring=None, num_kernels=5, position_embeddings="remove")
    with pytest.raises(ValueError, match="its own field"):
        th.TisaSettings(scoring_options={"num_kernels": 3})


def test_starts_go_under_explicit_options():
    s = th.TisaSettings(scoring_options={"offset_std": 1.0}).with_start("spread")
    assert s.scoring_options == {
        "amplitude_mean": 0.0,
        "amplitude_std": 0.0,
        "offset_range": 10.0,
        "offset_std": 1.0,
    }


def test_stored_settings_round_trip_and_check():
    stored = th.TisaSettings(scoring="t5", position_embeddings="remove").to_config(CONFIG)
    config = th.tisa_config(CONFIG, scoring="t5", position_embeddings="remove")
    assert config.tisa == stored and stored_settings(config) == stored
    config.tisa = {**stored, "colour": "red"}
    with pytest.raises(ValueError, match="unknown keys"):
        stored_settings(config)
    with pytest.raises(ValueError, match="either settings or keyword options"):
        th.tisa_config(CONFIG, th.TisaSettings(), scoring="t5")
    with pytest.raises(ValueError, match="settings must be a TisaSettings"):
        th.add_tisa(BertModel(CONFIG), "rbf")  # the old positional scoring argument
