"""The TISA attention functions as transformers calls them: errors users meet."""

from __future__ import annotations

import pytest
import torch
from transformers import BertConfig, BertForMaskedLM

import tisa.hf as th


def _bert(dropout: float):
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=50,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=20,
        max_position_embeddings=16,
        attention_probs_dropout_prob=dropout,
    )
    return th.add_tisa(BertForMaskedLM(config))


def test_tisa_flex_refuses_attention_dropout_in_train_mode():
    model = _bert(0.1)
    model.set_attn_implementation("tisa_flex")
    ids = torch.randint(3, 50, (2, 9))
    model.train()
    with pytest.raises(ValueError, match="backend='flex' has no attention dropout"):
        with torch.no_grad():
            model(input_ids=ids)
    # the other implementations apply it: two passes in train mode differ
    model.set_attn_implementation("tisa_sdpa")
    with torch.no_grad():
        a, b = model(input_ids=ids).logits, model(input_ids=ids).logits
    assert not torch.allclose(a, b)
