"""The relative content term (``content_offsets``): its formula against a loop over query-key
pairs, its translation invariance, and what a model with it does (zero start, backends,
padding, causality, training, saving and loading, the parameter counts)."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModel, BertConfig, BertModel, GPT2Config, GPT2LMHeadModel

import tisa.hf
from tisa.hf.settings import stored_settings
from tisa.scoring import RelativeContent


def _bert(seed: int = 0) -> BertModel:
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=40, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=48, max_position_embeddings=64)
    return BertModel(config).eval()


def _random_vectors(model, seed: int = 1) -> None:
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for term in model.base_model.tisa_content:
            for p in (term.key_vectors, term.query_vectors):
                p.copy_(torch.randn(p.shape, generator=generator))


def _pair_by_pair(term: RelativeContent, q, k, scale: float):
    """The term as its formula, one query-key pair at a time."""
    lq, lk, max_offset = q.shape[-2], k.shape[-2], term.max_offset
    want = torch.zeros(q.shape[0], q.shape[1], lq, lk, dtype=q.dtype)
    for i in range(lq):
        for j in range(lk):
            offset = j - (lk - lq + i)  # the queries are the last lq of lk positions
            if term.beyond == "zero" and abs(offset) > max_offset:
                continue  # no term beyond +-K
            row = max(-max_offset, min(max_offset, offset)) + max_offset
            want[:, :, i, j] = scale * (
                (q[:, :, i] * term.key_vectors[:, row]).sum(-1)
                + (k[:, :, j] * term.query_vectors[:, row]).sum(-1)
            )
    return want


@pytest.mark.parametrize("beyond", ["clip", "zero"])
def test_the_term_is_the_formula_summed_pair_by_pair(beyond):
    torch.manual_seed(0)
    term = RelativeContent(num_heads=3, head_dim=5, max_offset=2, beyond=beyond)
    with torch.no_grad():
        term.key_vectors.normal_()
        term.query_vectors.normal_()
    q, k = torch.randn(2, 3, 4, 5), torch.randn(2, 3, 7, 5)  # 4 queries after a cache
    torch.testing.assert_close(term(q, k, 0.3), _pair_by_pair(term, q, k, 0.3))


@pytest.mark.parametrize("beyond", ["clip", "zero"])
@pytest.mark.parametrize(("lq", "lk", "max_offset"), [(5, 5, 2), (3, 8, 2), (1, 1, 3), (2, 4, 6)])
def test_the_term_s_gradients_are_exact(beyond, lq, lk, max_offset):
    """Gradients to q, k and both vector sets against finite differences (in float64),
    with fewer keys than offsets, a single position and queries after a cache."""
    torch.manual_seed(0)
    term = RelativeContent(num_heads=2, head_dim=3, max_offset=max_offset, beyond=beyond).double()
    with torch.no_grad():
        term.key_vectors.normal_()
        term.query_vectors.normal_()
    q = torch.randn(2, 2, lq, 3, dtype=torch.float64, requires_grad=True)
    k = torch.randn(2, 2, lk, 3, dtype=torch.float64, requires_grad=True)

    # the vectors enter as parameters: check them through a functional call
    def functional(q, k, rk, rq):
        return torch.func.functional_call(term, {"key_vectors": rk, "query_vectors": rq},
                                          (q, k, 0.7))

    rk = term.key_vectors.detach().clone().requires_grad_(True)
    rq = term.query_vectors.detach().clone().requires_grad_(True)
    assert torch.autograd.gradcheck(functional, (q, k, rk, rq))


@pytest.mark.parametrize("block", [1, 2])
@pytest.mark.parametrize(("lq", "lk", "max_offset"), [(7, 10, 1), (7, 7, 2), (5, 6, 8), (6, 9, 3)])
def test_the_clipped_term_in_blocks_of_rows_is_the_formula(monkeypatch, block, lq, lk,
                                                            max_offset):
    """The clipped term is written in blocks of rows, each with its strip around the band:
    with blocks of 1 and 2 rows (strips cut at the first and last key, K beyond the input)
    it is the formula, with exact gradients."""
    from tisa.scoring import content

    monkeypatch.setattr(content, "_BLOCK", block)
    torch.manual_seed(0)
    term = RelativeContent(num_heads=2, head_dim=3, max_offset=max_offset, beyond="clip").double()
    with torch.no_grad():
        term.key_vectors.normal_()
        term.query_vectors.normal_()
    q = torch.randn(2, 2, lq, 3, dtype=torch.float64, requires_grad=True)
    k = torch.randn(2, 2, lk, 3, dtype=torch.float64, requires_grad=True)
    with torch.no_grad():
        torch.testing.assert_close(term(q, k, 0.7), _pair_by_pair(term, q, k, 0.7))
    rk = term.key_vectors.detach().clone().requires_grad_(True)
    rq = term.query_vectors.detach().clone().requires_grad_(True)
    assert torch.autograd.gradcheck(
        lambda q, k, rk, rq: torch.func.functional_call(
            term, {"key_vectors": rk, "query_vectors": rq}, (q, k, 0.7)),
        (q, k, rk, rq))


def test_more_queries_than_keys_is_refused():
    term = RelativeContent(num_heads=2, head_dim=3, max_offset=2)
    with pytest.raises(ValueError, match="more queries .* than keys"):
        term(torch.randn(1, 2, 5, 3), torch.randn(1, 2, 4, 3), 1.0)


def test_the_term_depends_on_content_and_offset_only():
    torch.manual_seed(0)
    term = RelativeContent(num_heads=2, head_dim=4, max_offset=3)
    with torch.no_grad():
        term.key_vectors.normal_()
        term.query_vectors.normal_()
    x = torch.randn(1, 2, 12, 4)
    whole = term(x, x, 1.0)
    part = term(x[:, :, 5:10], x[:, :, 5:10], 1.0)  # the same tokens, 5 positions earlier
    torch.testing.assert_close(part, whole[:, :, 5:10, 5:10])


def test_a_model_with_the_term_at_zero_computes_what_one_without_computes():
    tokens = torch.randint(5, 40, (2, 19))
    keep = torch.ones_like(tokens)
    keep[1, 12:] = 0
    plain = tisa.hf.add_tisa(_bert(), position_embeddings="remove", start="spread")
    content = tisa.hf.add_tisa(_bert(), position_embeddings="remove", start="spread",
                               content_offsets=4)
    assert all(float(p.abs().sum()) == 0 for p in content.base_model.tisa_content.parameters())
    torch.testing.assert_close(content(input_ids=tokens, attention_mask=keep).last_hidden_state,
                               plain(input_ids=tokens, attention_mask=keep).last_hidden_state)


@pytest.mark.parametrize("implementation", ["tisa_sdpa", "tisa"])
def test_backends_agree_with_eager_and_padding_is_kept_out(implementation):
    model = tisa.hf.add_tisa(_bert(), position_embeddings="remove", content_offsets=3)
    _random_vectors(model)
    tokens = torch.randint(5, 40, (2, 23))
    keep = torch.ones_like(tokens)
    keep[1, 15:] = 0
    model.set_attn_implementation("tisa_eager")
    want = model(input_ids=tokens, attention_mask=keep).last_hidden_state
    model.set_attn_implementation(implementation)
    got = model(input_ids=tokens, attention_mask=keep).last_hidden_state
    torch.testing.assert_close(got, want, atol=2e-5, rtol=1e-4)
    # the padded tokens change nothing in the rest
    other = tokens.clone()
    other[1, 15:] = 7
    again = model(input_ids=other, attention_mask=keep).last_hidden_state
    torch.testing.assert_close(again[1, :15], got[1, :15], atol=2e-5, rtol=1e-4)
    # and the vectors do change the outputs
    _random_vectors(model, seed=2)
    moved = model(input_ids=tokens, attention_mask=keep).last_hidden_state
    assert float((moved - got).abs().max()) > 1e-3


@pytest.mark.parametrize("beyond", ["zero", "clip"])
@pytest.mark.parametrize("implementation", ["tisa_sdpa", "tisa"])
def test_in_inference_the_term_is_added_by_rows_like_eager(monkeypatch, implementation, beyond):
    """With nothing training, attention gets the term as its band (and the clipped term's
    sides) and the sdpa backend adds it to its blocks of rows: the outputs are eager's
    (which builds the dense term), padding included."""
    from tisa.attention import sdpa as sdpa_module

    calls = []
    by_rows = sdpa_module._with_band
    monkeypatch.setattr(sdpa_module, "_with_band", lambda *a: calls.append(1) or by_rows(*a))
    model = tisa.hf.add_tisa(_bert(), position_embeddings="remove", content_offsets=3,
                             content_beyond=beyond)
    _random_vectors(model)
    tokens = torch.randint(5, 40, (2, 23))
    keep = torch.ones_like(tokens)
    keep[1, 15:] = 0
    with torch.no_grad():
        model.set_attn_implementation("tisa_eager")
        want = model(input_ids=tokens, attention_mask=keep).last_hidden_state
        assert not calls
        model.set_attn_implementation(implementation)
        got = model(input_ids=tokens, attention_mask=keep).last_hidden_state
    assert calls  # the band, by rows
    torch.testing.assert_close(got, want, atol=2e-5, rtol=1e-4)
    calls.clear()
    model(input_ids=tokens, attention_mask=keep).last_hidden_state.sum().backward()
    assert not calls  # training: the dense term, whose gradient the backend returns
    assert model.base_model.tisa_content[0].key_vectors.grad.abs().sum() > 0


def test_a_causal_model_stays_causal_with_the_term():
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=40, n_embd=32, n_layer=2, n_head=4, n_positions=64)
    model = tisa.hf.add_tisa(GPT2LMHeadModel(config).eval(), position_embeddings="remove",
                             content_offsets=2)
    _random_vectors(model)
    tokens = torch.randint(0, 40, (1, 16))
    logits = model(input_ids=tokens).logits
    changed = tokens.clone()
    changed[0, 10:] = (changed[0, 10:] + 1) % 40
    later = model(input_ids=changed).logits
    torch.testing.assert_close(later[0, :10], logits[0, :10], atol=1e-5, rtol=1e-4)
    assert float((later[0, 10:] - logits[0, 10:]).abs().max()) > 1e-3


def test_the_vectors_train_at_the_scoring_rate_and_round_trip(tmp_path):
    model = tisa.hf.add_tisa(_bert(), position_embeddings="remove", content_offsets=2)
    names = tisa.hf.scoring_parameter_names(model)
    assert "tisa_content.0.key_vectors" in names and "tisa_content.1.query_vectors" in names
    counts = tisa.hf.positional_parameters(model)
    assert counts["tisa"] == 2 * (4 * 3 * 5) + 2 * 2 * (4 * 5 * 8)  # kernels + vectors
    model.train()
    tokens = torch.randint(5, 40, (2, 9))
    model(input_ids=tokens).last_hidden_state.pow(2).mean().backward()
    grads = [p.grad for p in model.base_model.tisa_content.parameters()]
    assert all(g is not None and float(g.abs().sum()) > 0 for g in grads)
    model.eval()
    _random_vectors(model)
    want = model(input_ids=tokens).last_hidden_state
    model.save_pretrained(tmp_path)
    loaded = AutoModel.from_pretrained(tmp_path).eval()
    assert loaded.config.tisa["content_offsets"] == 2
    torch.testing.assert_close(loaded(input_ids=tokens).last_hidden_state, want)


def test_zero_beyond_leaves_distant_keys_alone_and_round_trips(tmp_path):
    model = tisa.hf.add_tisa(_bert(), position_embeddings="remove", content_offsets=2,
                             content_beyond="zero")
    assert model.config.tisa["content_beyond"] == "zero"
    _random_vectors(model)
    tokens = torch.randint(5, 40, (1, 12))
    want = model(input_ids=tokens).last_hidden_state
    model.save_pretrained(tmp_path)
    loaded = AutoModel.from_pretrained(tmp_path).eval()
    assert loaded.base_model.tisa_content[0].beyond == "zero"
    torch.testing.assert_close(loaded(input_ids=tokens).last_hidden_state, want)


def test_a_model_saved_before_content_beyond_reads_clip():
    model = tisa.hf.add_tisa(_bert(), position_embeddings="remove", content_offsets=2)
    stored = dict(model.config.tisa)
    assert stored.pop("content_beyond") == "clip"
    model.config.tisa = stored
    assert stored_settings(model.config)["content_beyond"] == "clip"


def test_content_beyond_is_checked():
    with pytest.raises(ValueError, match="content_beyond must be one of"):
        tisa.hf.TisaSettings(content_offsets=2, content_beyond="far")
    with pytest.raises(ValueError, match="needs content_offsets"):
        tisa.hf.TisaSettings(content_beyond="zero")


def test_shared_across_layers_builds_one_term():
    model = tisa.hf.add_tisa(_bert(), position_embeddings="remove", content_offsets=2,
                             share_across_layers=True)
    assert len(model.base_model.tisa_content) == 1


def test_models_without_the_term_store_no_key():
    model = tisa.hf.add_tisa(_bert(), position_embeddings="remove")
    assert "content_offsets" not in model.config.tisa
    assert not hasattr(model.base_model, "tisa_content")


@pytest.mark.parametrize("value", [0, -1, 2.5, True, "4"])
def test_bad_content_offsets_are_refused_in_one_line(value):
    with pytest.raises(ValueError, match="content_offsets must be None or a whole number"):
        tisa.hf.TisaSettings(content_offsets=value)


def test_the_term_alone_is_something_to_add():
    settings = tisa.hf.TisaSettings(scoring=None, content_offsets=2)
    model = tisa.hf.add_tisa(_bert(), settings)
    assert len(model.base_model.tisa_scorers) == 0 and len(model.base_model.tisa_content) == 2
