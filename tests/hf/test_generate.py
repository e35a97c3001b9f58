"""Greedy generation with TISA: a static cache, a dynamic cache and no cache agree.

A static cache hands the attention function all its slots (Lk = the cache size) with one
query per decode step, so the query's position must come from the cache, not from Lk.
"""

from __future__ import annotations

import copy

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

import tisa.hf as th

VOCAB = 61
PROMPT = 7
NEW_TOKENS = 5
# tisa_flex compiles a kernel for each shape generation meets (about a minute in all): slow
IMPLEMENTATIONS = [
    "tisa",
    "tisa_eager",
    "tisa_sdpa",
    pytest.param("tisa_flex", marks=pytest.mark.slow),
]
CACHES = {
    "static": {"cache_implementation": "static"},
    "dynamic": {},
    "none": {"use_cache": False},
}


@pytest.fixture(scope="module", params=["remove", "keep"])
def model(request):
    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=VOCAB,
        n_embd=32,
        n_layer=2,
        n_head=4,
        n_positions=32,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
        initializer_range=1.0,  # far from uniform logits: varied greedy tokens, clear margins
    )
    # large amplitudes: a query put at the wrong position changes the logits visibly
    return th.add_tisa(
        GPT2LMHeadModel(config).eval(),
        position_embeddings=request.param,
        amplitude_mean=2.0,
        amplitude_std=1.0,
    )


def _prompt(padded: bool) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(1, VOCAB, (2, PROMPT), generator=g)
    mask = torch.ones(2, PROMPT, dtype=torch.long)
    if padded:
        mask[1, :3] = 0  # left padding, as for generation
        ids[1, :3] = 0
    return ids, mask


def _generate(model, ids, mask, cache: str):
    out = model.generate(
        input_ids=ids,
        attention_mask=mask,
        max_new_tokens=NEW_TOKENS,
        do_sample=False,
        output_scores=True,
        return_dict_in_generate=True,
        **CACHES[cache],
    )
    return out.sequences, torch.stack(out.scores, 1)  # (B, P + T), (B, T, V)


@pytest.mark.parametrize("padded", [False, True], ids=["unpadded", "left-padded"])
@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_static_dynamic_and_no_cache_generate_the_same(model, implementation, padded):
    model = copy.copy(model)
    model.set_attn_implementation(implementation)
    ids, mask = _prompt(padded)
    runs = {cache: _generate(model, ids, mask, cache) for cache in CACHES}
    tokens, scores = runs["none"]  # every step a full recompute: the reference
    for cache in ("static", "dynamic"):
        assert torch.equal(runs[cache][0], tokens), (implementation, cache)
        torch.testing.assert_close(runs[cache][1], scores, atol=1e-4, rtol=0)
    # the generated tokens are not one repeated token (the comparison can fail)
    assert len(set(tokens[:, PROMPT:].flatten().tolist())) > 2


def test_the_positional_bias_drives_the_scores(model):
    """The comparison above can fail: the TISA bias moves the scores far more than its
    tolerance, so a query put at a wrong offset shows."""
    ids, mask = _prompt(True)
    _, scores = _generate(model, ids, mask, "dynamic")
    flat = copy.deepcopy(model)
    for _, scorer in th.iter_scorers(flat):
        scorer.amplitude.data.zero_()
    _, flat_scores = _generate(flat, ids, mask, "dynamic")
    assert (flat_scores[:, 0] - scores[:, 0]).abs().max() > 0.1
