"""Offset profiles of attention on text, and the student: table removed, mean row folded,
scorers fitted layer by layer."""

from __future__ import annotations

import copy

import pytest
import torch
from transformers import AutoModel, AutoTokenizer

import tisa.hf
from tisa import bias as bias_lib
from tisa.convert.profiles import attention_profiles
from tisa.convert.student import build_student, fit_layers
from tisa.data.text_blocks import text_blocks
from tisa.metrics import offset_profile


@pytest.fixture(scope="module")
def parts(tiny_bert, texts):
    model = AutoModel.from_pretrained(tiny_bert, attn_implementation="eager").eval()
    tokenizer = AutoTokenizer.from_pretrained(tiny_bert)
    lines = open(texts[0]).read().splitlines()
    return model, tokenizer, lines


def test_text_blocks_frame_consecutive_pieces(parts):
    _, tok, lines = parts
    blocks = text_blocks(tok, lines, length=10, count=3)
    assert blocks.shape == (3, 10)
    assert (blocks[:, 0] == tok.cls_token_id).all() and (blocks[:, -1] == tok.sep_token_id).all()
    stream = tok(lines[0], add_special_tokens=False)["input_ids"]
    assert blocks[0, 1:9].tolist() == stream[:8] and blocks[1, 1:9].tolist() == stream[8:16]
    with pytest.raises(ValueError, match="need"):
        text_blocks(tok, lines[:1], length=64, count=1000)


def test_profile_difference_is_the_row_centred_bias(parts):
    """Layer 1 of a TISA model with a live scorer against the same model at zero: the
    profiles differ by exactly the row-centred Toeplitz bias (same content logits)."""
    model, tok, lines = parts
    live = tisa.hf.add_tisa(
        copy.deepcopy(model),
        position_embeddings="remove",
        start="paper",
        amplitude_mean=1.0,
        amplitude_std=0.5,
    )
    dead = tisa.hf.add_tisa(copy.deepcopy(model), position_embeddings="remove", start="zero")
    blocks = text_blocks(tok, lines, length=20, count=4)
    live.set_attn_implementation("tisa_sdpa")
    a = attention_profiles(live, blocks, layers=[0])
    b = attention_profiles(dead, blocks, layers=[0])
    scorer = next(tisa.hf.iter_scorers(live))[1]
    dense = bias_lib.expand(bias_lib.table(scorer, 18), 18, 18).double()  # interior 18 x 18
    expected = offset_profile(dense - dense.mean(-1, keepdim=True)).mean
    torch.testing.assert_close(a.mean[0] - b.mean[0], expected, atol=1e-4, rtol=0)
    assert a.length == 20 and a.offsets.tolist() == list(range(-17, 18))
    assert live.config._attn_implementation == "tisa_sdpa"  # switched back after measuring


def test_build_student_removes_the_table_and_folds_its_mean(parts):
    model, tok, lines = parts
    student = build_student(model, fold_positions=16)
    counts = tisa.hf.positional_parameters(student)
    assert counts["absolute"] == 0 and counts["tisa"] == 3 * 5 * 4 * 2
    for _, scorer in tisa.hf.iter_scorers(student):
        assert torch.count_nonzero(scorer.amplitude) == 0
    # the student computes what the original computes with every position row set to the
    # mean of the first 16 rows
    flat = copy.deepcopy(model)
    table = flat.embeddings.position_embeddings.weight
    with torch.no_grad():
        table.copy_(table[:16].mean(0).expand_as(table))
    ids = text_blocks(tok, lines, length=30, count=2)
    with torch.no_grad():
        torch.testing.assert_close(
            student(input_ids=ids).last_hidden_state,
            flat(input_ids=ids).last_hidden_state,
            atol=1e-5,
            rtol=0,
        )
    assert model.embeddings.position_embeddings.weight.std() > 0  # the original is untouched


def test_fit_layers_moves_each_layer_towards_the_original(parts):
    model, tok, lines = parts
    blocks = text_blocks(tok, lines, length=48, count=6)
    student = build_student(model)
    before = attention_profiles(student, blocks)
    fit = fit_layers(model, student, blocks, layers="all")
    after = attention_profiles(student, blocks)
    assert fit.fitted_layers == (0, 1) and fit.r2.shape == (2, 4)
    assert torch.isfinite(fit.r2).all() and (fit.r2 <= 1).all()
    w = fit.original.count.double()
    for layer in range(2):
        gap_before = ((fit.original.mean[layer] - before.mean[layer]).pow(2) * w).sum()
        gap_after = ((fit.original.mean[layer] - after.mean[layer]).pow(2) * w).sum()
        assert gap_after < gap_before
    first = fit_layers(model, build_student(model), blocks, layers="first")
    assert first.fitted_layers == (0,) and torch.isnan(first.r2[1]).all()


def test_a_near_table_takes_the_profile_exactly_on_short_offsets(parts):
    """With ``near_offsets=K`` the fit writes the kernels of the default student and, on
    [-K, K], what they miss: the student's profile there is the target up to the fitted
    constant, and beyond it the kernels' alone."""
    model, tok, lines = parts
    blocks = text_blocks(tok, lines, length=32, count=4)
    default = build_student(model)
    plain = fit_layers(model, default, blocks, layers="first")
    student = build_student(model, near_offsets=3)
    fit = fit_layers(model, student, blocks, layers="first")
    scorer = next(tisa.hf.iter_scorers(student))[1]
    kernels = next(tisa.hf.iter_scorers(default))[1]
    k = fit.original.offsets
    inside = k.abs() <= 3
    target, fitted = fit.target[0], fit.fitted[0]
    # exact on [-K, K] up to one constant per head; the kernels' fit beyond
    gap = (target - fitted)[:, inside]
    torch.testing.assert_close(gap, gap[:, :1].expand_as(gap), rtol=0, atol=1e-9)
    torch.testing.assert_close(fitted[:, ~inside], plain.fitted[0][:, ~inside])
    torch.testing.assert_close(scorer(k).double(), fitted, rtol=0, atol=1e-5)
    assert (fit.r2[0] >= plain.r2[0] - 1e-12).all()
    # the kernels are the default student's; the near table is what they missed
    for name in ("amplitude", "sharpness", "offset"):
        assert torch.equal(getattr(scorer, name), getattr(kernels, name))
    assert scorer.near.abs().sum() > 0 and kernels.near_offsets is None
    with pytest.raises(ValueError, match="near_offsets: 40 reaches beyond .* blocks of 32 tokens"):
        fit_layers(model, build_student(model, near_offsets=40), blocks, layers="first")


def test_bad_students(parts):
    model, tok, lines = parts
    blocks = text_blocks(tok, lines, length=16, count=2)
    alibi = tisa.hf.add_tisa(copy.deepcopy(model), scoring="alibi", position_embeddings="remove")
    with pytest.raises(ValueError, match="expected RBF scorers"):
        fit_layers(model, alibi, blocks)
    with pytest.raises(ValueError, match="layers must be"):
        fit_layers(model, build_student(model), blocks, layers="some")
    with pytest.raises(ValueError, match="no absolute position|absolute"):
        build_student(alibi)


def test_layer_embeddings_pool_every_layer_in_input_order(tiny_bert):
    """layer_embeddings: one mean-pooled row per text and layer, in input order; its last
    layer is sentence_embeddings."""
    from tisa.convert.evaluate import layer_embeddings, mean_pool, sentence_embeddings

    model, tok = AutoModel.from_pretrained(tiny_bert), AutoTokenizer.from_pretrained(tiny_bert)
    texts = ["the cat sat on the mat", "a", "it was the best of times and the worst", "an ox"]
    every = layer_embeddings(model, tok, texts, batch_size=2)
    assert every.shape == (model.config.num_hidden_layers + 1, len(texts), 16)
    torch.testing.assert_close(every[-1], sentence_embeddings(model, tok, texts, batch_size=3))
    enc = tok(texts[2:3], return_tensors="pt")
    with torch.no_grad():
        states = model(**enc, output_hidden_states=True).hidden_states
    for layer, h in enumerate(states):
        torch.testing.assert_close(every[layer, 2], mean_pool(h, enc["attention_mask"])[0])
    with pytest.raises(ValueError, match="texts"):
        layer_embeddings(model, tok, [])


def test_each_head_gets_its_own_fitted_kernels(parts, monkeypatch):
    """After fit_layers, every head's scorer parameters are that head's fitted kernels
    (layer by layer, head by head, none swapped), and the scorer computes the profile the
    fit reports."""
    from tisa.convert import student as student_lib

    model, tok, lines = parts
    blocks = text_blocks(tok, lines, length=32, count=4)
    fits, fit_rbf = [], student_lib.fit_rbf

    def recording_fit(*args, **kwargs):
        fits.append(fit_rbf(*args, **kwargs))
        return fits[-1]

    monkeypatch.setattr(student_lib, "fit_rbf", recording_fit)
    student = build_student(model)
    fit = fit_layers(model, student, blocks, layers="all")
    scorers = [s for _, s in tisa.hf.iter_scorers(student)]
    assert len(fits) == len(scorers) == 2
    offsets = fit.original.offsets
    for layer, (scorer, kernels) in enumerate(zip(scorers, fits)):
        assert kernels.amplitude.shape == scorer.amplitude.shape == (4, 5)
        for head in range(4):
            for name in ("amplitude", "sharpness", "offset"):
                got = getattr(scorer, name)[head].detach().double()
                torch.testing.assert_close(got, getattr(kernels, name)[head], atol=1e-6, rtol=1e-6)
        values = scorer(offsets).detach().double()  # (H, K)
        torch.testing.assert_close(values, fit.fitted[layer], atol=1e-4, rtol=1e-4)
        # distinct heads were fitted to distinct profiles: a swap would show above
        assert not torch.allclose(values[0], values[1])
