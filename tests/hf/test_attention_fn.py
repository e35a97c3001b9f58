"""The TISA attention functions as transformers calls them: errors users meet."""

from __future__ import annotations

import math

import pytest
import torch
from transformers import BertConfig, BertForMaskedLM

import tisa.hf as th
from tisa.hf.attention_fn import keys_seen, length_factor


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


# ------------------------------------------------------------------- log-n scaling


def test_keys_seen_counts_visible_keys_in_every_mask_form():
    keep = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)[:, None, None, :]
    assert keys_seen(keep, False, 5, 5).flatten().tolist() == [3, 5]
    additive = torch.zeros(keep.shape).masked_fill(~keep, torch.finfo(torch.float32).min)
    assert keys_seen(additive, False, 5, 5).flatten().tolist() == [3, 5]
    assert keys_seen(None, False, 2, 6).flatten().tolist() == [6, 6]
    # causal: the last Lq of Lk positions, query i seeing keys 0..i
    assert keys_seen(None, True, 3, 6).flatten().tolist() == [4, 5, 6]
    factor = length_factor(torch.tensor([0.0, 1.0, 8.0, 64.0]), 8)
    torch.testing.assert_close(factor, torch.tensor([1.0, 1.0, 1.0, 2.0]))


@pytest.mark.parametrize("form", ["none", "causal", "padding", "rows"])
def test_keys_seen_in_a_window_counts_the_kept_keys_within_reach(form):
    """With attention_window W, log-n scaling counts the keys a query sees in its window:
    against brute force, for every mask form, queries the last Lq of Lk positions."""
    lq, lk, w = 5, 12, 2
    g = torch.Generator().manual_seed(0)
    mask = {"none": None, "causal": None,
            "padding": torch.rand(3, 1, 1, lk, generator=g) > 0.3,
            "rows": torch.rand(2, 1, lq, lk, generator=g) > 0.3}[form]
    causal = form == "causal"
    got = keys_seen(mask, causal, lq, lk, w)
    keep = torch.ones(1, 1, lq, lk, dtype=torch.bool) if mask is None else mask
    keep = keep.expand(-1, -1, lq, -1)
    offset = torch.arange(lk)[None] - torch.arange(lk - lq, lk)[:, None]  # (Lq, Lk): j - i
    reach = (offset.abs() <= w) & ((offset <= 0) if causal else True)
    torch.testing.assert_close(got.expand(keep.shape[:-1]), (keep & reach).sum(-1).float())
    additive = torch.zeros(keep.shape).masked_fill(~keep, torch.finfo(torch.float32).min)
    if mask is not None:  # the additive form counts alike
        torch.testing.assert_close(keys_seen(additive, False, lq, lk, w), got)


def _scaled_pair(length_scale):
    plain, scaled = _bert(0.0).eval(), _bert(0.0).eval()
    scaled.config.tisa["length_scale"] = length_scale
    for model in (plain, scaled):  # sharper attention than a random start's, so it shows
        with torch.no_grad():
            model.bert.encoder.layer[0].attention.self.key.weight.mul_(100)
    return plain, scaled


def test_length_scale_leaves_short_inputs_alone_and_scales_the_logits_of_long_ones():
    """Up to N keys nothing changes; beyond, the model equals one whose queries are
    multiplied by log n / log N (here with padding: n is each example's own length)."""
    plain, scaled = _scaled_pair(4)
    ids = torch.randint(3, 50, (2, 9))
    mask = torch.ones(2, 9, dtype=torch.long)
    mask[0, 3:] = 0  # 3 real tokens: at most N, unscaled; the second has 9
    with torch.no_grad():
        short = scaled.bert(input_ids=ids[:, :4]).last_hidden_state
        torch.testing.assert_close(short, plain.bert(input_ids=ids[:, :4]).last_hidden_state)
        out = scaled.bert(input_ids=ids, attention_mask=mask).last_hidden_state
        base = plain.bert(input_ids=ids, attention_mask=mask).last_hidden_state
    torch.testing.assert_close(out[0, :3], base[0, :3])  # only 3 keys seen: factor 1
    assert (out[1] - base[1]).abs().max() > 1e-4
    # the same as scaling the query projection by log 9 / log 4 for the long example
    query = plain.bert.encoder.layer[0].attention.self.query
    with torch.no_grad():
        query.weight.mul_(math.log(9) / math.log(4))
        query.bias.mul_(math.log(9) / math.log(4))
        expected = plain.bert(input_ids=ids[1:], attention_mask=mask[1:]).last_hidden_state
    torch.testing.assert_close(out[1:], expected, atol=1e-5, rtol=1e-5)


def test_length_scale_is_saved_checked_and_set_by_add_tisa(tmp_path):
    from transformers import AutoModelForMaskedLM

    config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=20, max_position_embeddings=16)
    model = th.add_tisa(BertForMaskedLM(config), position_embeddings="remove", length_scale=8)
    assert model.config.tisa["length_scale"] == 8
    model.save_pretrained(tmp_path)
    loaded = AutoModelForMaskedLM.from_pretrained(tmp_path)
    assert loaded.config.tisa["length_scale"] == 8
    for bad in (1, 2.5, True, "512"):
        with pytest.raises(ValueError, match="length_scale must be None or a whole number"):
            th.TisaSettings(length_scale=bad)


# ----------------------------------------------------------------------- clipped offsets


def test_clip_distance_gives_far_keys_the_bias_of_the_furthest_kept_offset(tmp_path):
    """A free table of offsets up to 12, read with clip_distance 3, is the same model as one
    whose table holds the value of +-3 at every offset beyond: for every input length and
    attention implementation; and the setting is saved and checked."""
    from transformers import AutoModelForMaskedLM

    torch.manual_seed(0)

    def bert(**clip):  # each model its own config: add_tisa writes into it
        config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2,
                            num_attention_heads=2, intermediate_size=20,
                            max_position_embeddings=16)
        return th.add_tisa(BertForMaskedLM(config), scoring="free", max_offset=12,
                           position_embeddings="remove", **clip).eval()

    clipped, flat, unclipped = bert(clip_distance=3), bert(), bert()
    with torch.no_grad():
        for scorer in clipped.bert.tisa_scorers:
            scorer.values.normal_(0, 3.0)  # a bias that shows
        flat.load_state_dict(clipped.state_dict())
        unclipped.load_state_dict(clipped.state_dict())
        for scorer in flat.bert.tisa_scorers:  # columns 0..24 hold offsets -12..12
            scorer.values[:, :9] = scorer.values[:, 9:10].clone()
            scorer.values[:, 16:] = scorer.values[:, 15:16].clone()
    ids = torch.randint(3, 50, (2, 14))
    for implementation in ("tisa_eager", "tisa_sdpa"):
        for model in (clipped, flat, unclipped):
            model.set_attn_implementation(implementation)
        with torch.no_grad():
            out = clipped(input_ids=ids).logits
            torch.testing.assert_close(out, flat(input_ids=ids).logits)
            assert (out - unclipped(input_ids=ids).logits).abs().max() > 1e-3
            torch.testing.assert_close(  # up to K + 1 tokens there is nothing to clip
                clipped(input_ids=ids[:, :4]).logits, unclipped(input_ids=ids[:, :4]).logits)
    clipped.save_pretrained(tmp_path)
    assert AutoModelForMaskedLM.from_pretrained(tmp_path).config.tisa["clip_distance"] == 3


@pytest.mark.parametrize("name", ["clip_distance", "attention_window"])
def test_reading_settings_are_checked_on_construction_and_at_the_forward(name):
    """clip_distance and attention_window: whole numbers >= 1, only with a scoring
    function, and checked again when changed by hand on a loaded model."""
    for bad in (0, 2.5, True, "512"):
        with pytest.raises(ValueError, match=f"{name} must be None or a whole number"):
            th.TisaSettings(**{name: bad})
    with pytest.raises(ValueError, match=rf"\['{name}'\] were given but scoring is None"):
        th.TisaSettings(scoring=None, rotary=True, **{name: 3})
    model = _bert(0.0).eval()
    model.config.tisa[name] = 0  # changed by hand on a loaded model
    with pytest.raises(ValueError, match=rf"config.tisa\['{name}'\] must be an integer"):
        model(input_ids=torch.randint(3, 50, (1, 9)))


@pytest.mark.parametrize("scoring, setting", [
    ("fire", "clip_distance"), ("rbf_linear", "clip_distance"), ("rbf_linear", "attention_window")])
def test_reading_settings_decoding_with_a_cache_match_the_full_pass(scoring, setting):
    """Token by token with a key/value cache (the queries the last of the keys), the
    clipped bias is the one the whole sequence gets, FIRE's query normaliser included, and
    under a window each new token sees the W keys before it and itself, as in the pass over
    the whole sequence."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=40, n_embd=16, n_layer=2, n_head=2, n_positions=8)
    model = th.add_tisa(GPT2LMHeadModel(config), scoring=scoring, position_embeddings="remove",
                        **{setting: 3}, **({"init_threshold": 4.0} if scoring == "fire" else {}))
    model.eval()
    ids = torch.randint(0, 40, (1, 12))
    with torch.no_grad():
        full = model(input_ids=ids).logits
        cache, steps = None, []
        for t in range(12):
            out = model(input_ids=ids[:, t:t + 1], cache=cache, use_cache=True)
            cache = out.cache
            steps.append(out.logits)
        torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-5)
        model.config.tisa[setting] = None
        assert (model(input_ids=ids).logits - full).abs().max() > 1e-4


# ----------------------------------------------------------------------- attention window


def test_attention_window_keeps_far_tokens_out_of_reach(tmp_path):
    """With attention_window W, a token's output in an L-layer model does not depend on a
    token further than L * W from it, on every implementation; inputs of up to W + 1
    tokens are unchanged; the setting is saved only when set, and checked."""
    from transformers import AutoModelForMaskedLM

    def bert(**window):
        config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2,
                            num_attention_heads=2, intermediate_size=20,
                            max_position_embeddings=16)
        torch.manual_seed(0)
        options = {"scoring": "rbf", **window}
        return th.add_tisa(BertForMaskedLM(config), position_embeddings="remove",
                           **options).eval()

    windowed, full = bert(attention_window=3), bert()
    assert "attention_window" not in full.config.tisa
    ids = torch.randint(3, 50, (2, 40))
    changed = ids.clone()
    changed[:, -1] = (ids[:, -1] + 1 - 3) % 47 + 3  # the last token only
    for implementation in ("tisa_eager", "tisa_sdpa"):
        for model in (windowed, full):
            model.set_attn_implementation(implementation)
        with torch.no_grad():
            a, b = windowed(input_ids=ids).logits, windowed(input_ids=changed).logits
            # tokens 0 .. 32 are more than 2 * 3 from token 39
            torch.testing.assert_close(a[:, :33], b[:, :33])
            assert (a[:, 33:] - b[:, 33:]).abs().max() > 1e-4
            full_a = full(input_ids=ids).logits
            assert (full_a[:, :33] - full(input_ids=changed).logits[:, :33]).abs().max() > 1e-6
            torch.testing.assert_close(  # up to W + 1 tokens every key is in the window
                windowed(input_ids=ids[:, :4]).logits, full(input_ids=ids[:, :4]).logits)
    windowed.save_pretrained(tmp_path)
    assert AutoModelForMaskedLM.from_pretrained(tmp_path).config.tisa["attention_window"] == 3
    rotary = bert(scoring=None, rotary=True)  # no scores to put -inf into
    rotary.config.tisa["attention_window"] = 3
    with pytest.raises(ValueError, match="attention_window'\\] needs a scoring function"):
        rotary(input_ids=ids)
