"""Models with TISA still return what transformers records on request: every hidden state
and, on the eager path, every layer's attention probabilities."""

from __future__ import annotations

import copy

import pytest
import torch

import tisa.hf as th
from tests.hf.test_optim import MODELS, _ids, _model


@pytest.mark.parametrize("arch", sorted(MODELS))
def test_hidden_states_and_attentions_are_recorded_after_add_tisa(arch):
    stock = _model(arch)
    stock.set_attn_implementation("eager")
    model = th.add_tisa(copy.deepcopy(stock), start="spread")  # computes what stock does
    model.set_attn_implementation("tisa_eager")
    ids = _ids()
    with torch.no_grad():
        want = stock(ids, output_hidden_states=True, output_attentions=True)
        got = model(ids, output_hidden_states=True, output_attentions=True)
    assert got.hidden_states is not None and got.attentions is not None
    assert len(got.hidden_states) == len(want.hidden_states) == 3  # embeddings + 2 layers
    assert len(got.attentions) == 2 and got.attentions[0].shape == (3, 4, 13, 13)
    for a, b in zip(got.hidden_states + got.attentions, want.hidden_states + want.attentions):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)
