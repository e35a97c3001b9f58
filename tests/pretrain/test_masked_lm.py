"""Masked-only MLM models: the same loss as the stock heads, every position scheme."""

from __future__ import annotations

import pytest
import torch
from transformers import AlbertForMaskedLM, AutoModelForMaskedLM, BertForMaskedLM

from tisa.analysis.extract import has_absolute_positions
from tisa.hf import iter_scorers, positional_parameters
from tisa.pretrain.build import build_config, build_model
from tisa.pretrain.masked_lm import load_masked_lm, masked_lm_forward
from tisa.pretrain.schemes import POSITIONS


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
    learned = ("tisa", "absolute+tisa", "t5", "kerple_log", "rbf_linear", "rbf_log", "rbf_logdist",
               "alibi_learned", "fire")
    assert (counts["tisa"] > 0) == (position in learned)
    if position in ("tisa", "absolute+tisa"):
        assert counts["tisa"] == 3 * 5 * 2 * 2  # 3 parameters x S kernels x H heads x layers
    length = 16 if absolute else 40  # beyond the table when there is none
    ids, labels = _batch(60, n=length)
    out = model(input_ids=ids, labels=labels, token_type_ids=torch.zeros_like(ids))
    out.loss.backward()
    assert torch.isfinite(out.loss)
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


@pytest.mark.parametrize(
    "position, per_layer",
    [
        ("tisa", 3 * 3 * 2),  # 3 parameters x S kernels x H heads
        ("rbf_linear", 3 * 3 * 2 + 2),  # + one slope per head
        ("rbf_log", 3 * 3 * 2 + 2 * 2),  # + r1 and r2 per head
        ("rbf_logdist", 3 * 3 * 2 + 2 * 2),
    ],
)
def test_kernel_families_take_num_kernels(position, per_layer):
    model = build_model(size="tiny", position=position, vocab_size=60, num_kernels=3, seed=0)
    assert positional_parameters(model)["tisa"] == per_layer * 2  # 2 layers
    scorers = [s for _, s in iter_scorers(model)]
    assert all(s.num_kernels == 3 for s in scorers)
    if position == "tisa":  # the paper's start when training from scratch, not zero bumps
        assert all(s.amplitude.abs().min() > 0.05 for s in scorers)


def test_scoring_options_reach_the_family():
    fixed = build_model(
        size="tiny",
        position="rbf_linear",
        vocab_size=60,
        scoring_options={"learn_tail": False, "far_offset": 40},
        seed=0,
    )
    assert positional_parameters(fixed)["tisa"] == 3 * 5 * 2 * 2  # the slopes are fixed
    scorer = next(s for _, s in iter_scorers(fixed))
    assert scorer.far_offset == 40 and not scorer.learn_tail
    with pytest.raises(ValueError, match="tail_scale|do not apply"):
        build_model(size="tiny", position="tisa", vocab_size=60, scoring_options={"tail_scale": 2})
    with pytest.raises(ValueError, match="no scoring function"):
        build_model(size="tiny", position="none", vocab_size=60, scoring_options={"far_offset": 3})


@pytest.mark.parametrize("position", ["absolute", "tisa", "t5", "rbf_log", "alibi"])
def test_gpt2_schemes_are_causal(position):
    """A change at position t never changes the logits before t (every scheme, any length)."""
    model = build_model(
        arch="gpt2", size="tiny", position=position, vocab_size=60, max_positions=32, seed=0
    ).eval()
    length = 32 if position == "absolute" else 45
    ids = torch.randint(5, 60, (2, length), generator=torch.Generator().manual_seed(1))
    changed = ids.clone()
    changed[:, 20] = (ids[:, 20] + 1) % 60
    with torch.no_grad():
        a, b = model(input_ids=ids).logits, model(input_ids=changed).logits
    torch.testing.assert_close(a[:, :20], b[:, :20])
    assert not torch.allclose(a[:, 20:], b[:, 20:])
    if position == "t5":  # one-sided buckets: no parameters for keys after the query
        scorer = next(s for _, s in iter_scorers(model))
        assert scorer.config()["bidirectional"] is False


def test_next_token_loss_is_the_shifted_cross_entropy():
    from tisa.pretrain.causal_lm import next_token_loss

    model = build_model(arch="gpt2", size="tiny", position="tisa", vocab_size=60, seed=0).eval()
    ids = torch.randint(5, 60, (3, 17), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        loss, count = next_token_loss(model, ids)
        logits = model(input_ids=ids).logits
        naive = torch.stack(
            [
                -torch.log_softmax(logits[b, t], -1)[ids[b, t + 1]]
                for b in range(3)
                for t in range(16)
            ]
        ).mean()
        stock = model(input_ids=ids, labels=ids).loss  # transformers' own shifted loss
    assert count == 3 * 16
    torch.testing.assert_close(loss, naive)
    torch.testing.assert_close(loss, stock)
    with pytest.raises(ValueError, match="L >= 2"):
        next_token_loss(model, ids[:, :1])


def test_model_bad_input():
    with pytest.raises(ValueError, match="arch"):
        build_config(arch="gpt")
    with pytest.raises(ValueError, match="size"):
        build_config(size="huge")
    with pytest.raises(ValueError, match="position"):
        build_model(size="tiny", position="sinusoidal", vocab_size=10)
