"""sentence-transformers folders: pooling read and written, and a TISA model run through
``model.forward`` directly (as sentence-transformers calls it)."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import BertConfig, BertModel

import tisa.hf
from tisa.hf.sentence_transformers import pool, read_pooling, write_sentence_transformers_files


def test_forward_called_directly_gets_the_scorers():
    config = BertConfig(
        vocab_size=40,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=32,
        max_position_embeddings=32,
    )
    torch.manual_seed(0)
    model = tisa.hf.add_tisa(BertModel(config), position_embeddings="remove").eval()
    ids = torch.randint(5, 40, (1, 50))
    with torch.no_grad():
        called = model(input_ids=ids).last_hidden_state
        direct = model.forward(input_ids=ids).last_hidden_state
        # the stock forward with no scorers: what "direct" would be without them
        without = BertModel.forward(model, input_ids=ids, tisa_scorers=torch.nn.ModuleList())
    torch.testing.assert_close(direct, called)
    assert not torch.allclose(without.last_hidden_state, called)  # the scorers count


def test_pooling_files_round_trip(tmp_path):
    assert read_pooling(None).mode == "mean" and read_pooling(tmp_path).mode == "mean"
    original = tmp_path / "original"
    (original / "1_Pooling").mkdir(parents=True)
    (original / "modules.json").write_text(
        json.dumps(
            [
                {
                    "idx": 0,
                    "name": "0",
                    "path": "",
                    "type": "sentence_transformers.models.Transformer",
                },
                {
                    "idx": 1,
                    "name": "1",
                    "path": "1_Pooling",
                    "type": "sentence_transformers.models.Pooling",
                },
                {
                    "idx": 2,
                    "name": "2",
                    "path": "2_Normalize",
                    "type": "sentence_transformers.models.Normalize",
                },
            ]
        )
    )
    (original / "1_Pooling" / "config.json").write_text(
        json.dumps({"pooling_mode_max_tokens": True})
    )
    saved = tmp_path / "saved"
    saved.mkdir()
    write_sentence_transformers_files(saved, hidden_size=16, max_seq_length=8192, original=original)
    back = read_pooling(saved)
    assert (back.mode, back.normalize) == ("max", True)
    assert json.loads((saved / "sentence_bert_config.json").read_text())["max_seq_length"] == 8192
    assert (
        json.loads((saved / "1_Pooling" / "config.json").read_text())["word_embedding_dimension"]
        == 16
    )


def test_pool_modes():
    hidden = torch.tensor([[[1.0, 2.0], [3.0, -4.0], [100.0, 100.0]]])
    mask = torch.tensor([[1, 1, 0]])
    torch.testing.assert_close(pool(hidden, mask, "mean"), torch.tensor([[2.0, -1.0]]))
    torch.testing.assert_close(pool(hidden, mask, "cls"), torch.tensor([[1.0, 2.0]]))
    torch.testing.assert_close(pool(hidden, mask, "max"), torch.tensor([[3.0, 2.0]]))
    torch.testing.assert_close(
        pool(hidden, mask, "mean_sqrt_len"), torch.tensor([[4.0, -2.0]]) / 2**0.5
    )
    with pytest.raises(ValueError, match="pooling: expected one of"):
        pool(hidden, mask, "last")
