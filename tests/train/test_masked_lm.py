"""Masked-only MLM models: the same loss as the stock heads, every position scheme."""

from __future__ import annotations

import pytest
import torch
from transformers import AlbertForMaskedLM, AutoModelForMaskedLM, BertForMaskedLM

from tisa.analysis.extract import has_absolute_positions
from tisa.hf import positional_parameters
from tisa.train.masked_lm import (
    POSITIONS,
    build_config,
    build_model,
    load_masked_lm,
    masked_lm_forward,
)


def _batch(vocab: int, b: int = 3, n: int = 20, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (b, n), generator=g)
    labels = torch.where(torch.rand(b, n, generator=g) < 0.3, ids, torch.full_like(ids, -100))
    return ids, labels


@pytest.mark.parametrize(
    "arch, stock_class", [("albert", AlbertForMaskedLM), ("bert", BertForMaskedLM)]
)
def test_masked_only_loss_equals_stock(arch, stock_class):
    model = build_model(arch=arch, size="tiny", vocab_size=97, max_positions=32, seed=0)
    stock = stock_class(model.config)
    stock.load_state_dict(model.state_dict())
    model.eval(), stock.eval()  # BERT has dropout
    ids, labels = _batch(97)
    ours = model(input_ids=ids, labels=labels)
    ref = stock(input_ids=ids, labels=labels)
    torch.testing.assert_close(ours.loss, ref.loss, atol=1e-6, rtol=1e-6)
    selected = labels != -100
    assert ours.logits.shape == (int(selected.sum()), 97)  # only masked rows projected
    torch.testing.assert_close(ours.logits, ref.logits[selected], atol=1e-5, rtol=1e-5)
    ours.loss.backward()
    ref.loss.backward()
    for (name, p), q in zip(model.named_parameters(), stock.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, atol=1e-6, rtol=1e-5, msg=name)


def test_masked_only_without_labels_and_without_masks():
    model = build_model(size="tiny", vocab_size=50, max_positions=32, seed=0)
    ids, _ = _batch(50)
    assert model(input_ids=ids).logits.shape == (3, 20, 50)
    out = model(input_ids=ids, labels=torch.full_like(ids, -100))
    assert out.loss.item() == 0.0 and out.logits.shape == (0, 50)
    out.loss.backward()  # connected to the graph, no NaN


def test_saved_model_reloads_with_auto_classes(tmp_path):
    model = build_model(size="tiny", vocab_size=50, max_positions=32, seed=1).eval()
    model.save_pretrained(tmp_path)
    again = load_masked_lm(tmp_path)
    assert isinstance(again, AlbertForMaskedLM)
    ids, labels = _batch(50, seed=2)
    with torch.no_grad():
        expected = model(input_ids=ids, labels=labels).loss
        assert torch.allclose(masked_lm_forward(again, labels=labels, input_ids=ids).loss, expected)
        assert torch.allclose(again(input_ids=ids, labels=labels).loss, expected, atol=1e-6)
    assert isinstance(AutoModelForMaskedLM.from_pretrained(tmp_path), AlbertForMaskedLM)


@pytest.mark.parametrize("position", POSITIONS)
def test_every_position_scheme_trains(position):
    model = build_model(size="tiny", position=position, vocab_size=60, max_positions=16, seed=0)
    counts = positional_parameters(model)
    absolute = position in ("absolute", "absolute+tisa")
    assert has_absolute_positions(model) == absolute
    assert (counts["absolute"] > 0) == absolute
    learned = ("tisa", "absolute+tisa", "t5", "kerple_log", "rbf_linear", "rbf_log", "rbf_logdist")
    assert (counts["tisa"] > 0) == (position in learned)
    if position in ("tisa", "absolute+tisa"):
        assert counts["tisa"] == 3 * 5 * 2 * 2  # 3 parameters x S kernels x H heads x layers
    length = 16 if absolute else 40  # beyond the table when there is none
    ids, labels = _batch(60, n=length)
    out = model(input_ids=ids, labels=labels, token_type_ids=torch.zeros_like(ids))
    out.loss.backward()
    assert torch.isfinite(out.loss)
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_model_bad_input():
    with pytest.raises(ValueError, match="arch"):
        build_config(arch="gpt")
    with pytest.raises(ValueError, match="size"):
        build_config(size="huge")
    with pytest.raises(ValueError, match="position"):
        build_model(size="tiny", position="sinusoidal", vocab_size=10)
