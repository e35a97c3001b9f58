"""Per-token evaluation masks, sliding windows and context-curve windows."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tisa.data.corpus import ptb_lines
from tisa.data.mlm import build_blocks, mask_stream, masked_stream_blocks, token_stream
from tisa.data.tokenizer import train_wordpiece
from tisa.data.windows import context_span_starts, context_windows, sliding_windows


@pytest.fixture(scope="module")
def tokenizer():
    return train_wordpiece(ptb_lines("train")[:3000], vocab_size=800, show_progress=False)


@pytest.fixture(scope="module")
def stream(tokenizer):
    return token_stream(ptb_lines("valid")[:2000], tokenizer, progress=False)


# ------------------------------------------------------------------- per-token masks


def test_stream_masks_depend_on_the_token_index_only(tokenizer, stream):
    inputs, labels = mask_stream(stream, tokenizer, seed=3)
    again = mask_stream(stream, tokenizer, seed=3)
    assert torch.equal(inputs, again[0]) and torch.equal(labels, again[1])
    prefix = mask_stream(stream[:5000], tokenizer, seed=3)  # a shorter stream: same prefix
    assert torch.equal(prefix[0], inputs[:5000]) and torch.equal(prefix[1], labels[:5000])
    other = mask_stream(stream, tokenizer, seed=4)
    assert not torch.equal(other[1], labels)
    original = torch.as_tensor(stream)
    selected = labels != -100
    assert torch.equal(labels[selected], original[selected])
    assert torch.equal(inputs[~selected], original[~selected])
    assert abs(selected.float().mean().item() - 0.15) < 0.01
    as_mask = (inputs[selected] == tokenizer.mask_token_id).float().mean().item()
    unchanged = (inputs[selected] == original[selected]).float().mean().item()
    assert abs(as_mask - 0.8) < 0.025 and abs(unchanged - 0.1) < 0.02


def test_every_length_masks_and_scores_the_same_tokens(tokenizer, stream):
    """Blocks of 128, 256 and 512 tokens cut from one masked stream: same masked tokens."""
    inputs, labels = mask_stream(stream[:6000], tokenizer, seed=0)
    lengths = (128, 256, 512)
    covered = min((len(inputs) // (n - 2)) * (n - 2) for n in lengths)
    scored = {}
    for n in lengths:
        x, y, index = masked_stream_blocks(
            inputs, labels, tokenizer, seq_len=n, score_limit=covered
        )
        assert x.shape[1] == n and (x[:, 0] == tokenizer.cls_token_id).all()
        assert (index[:, 0] == -1).all() and (index[:, -1] == -1).all()
        text = index >= 0
        assert torch.equal(x[text], inputs[index[text]])  # each position is its stream token
        scored[n] = set(index[y != -100].tolist())
        assert torch.equal(y[y != -100], labels[index[y != -100]])
    assert scored[128] == scored[256] == scored[512]
    assert len(scored[128]) == int((labels[:covered] != -100).sum()) > 100
    # the blocks are those of build_blocks, with the masked stream's tokens in them
    plain = build_blocks(stream[:6000], tokenizer, seq_len=256)
    x, _, index = masked_stream_blocks(inputs, labels, tokenizer, seq_len=256)
    unmasked = (index >= 0) & (labels[index.clamp(min=0)] == -100)
    assert torch.equal(x[unmasked], torch.as_tensor(plain)[unmasked])


def test_stream_masks_bad_input(tokenizer, stream):
    with pytest.raises(ValueError, match="mlm_probability"):
        mask_stream(stream, tokenizer, mlm_probability=1.5)
    with pytest.raises(ValueError, match="stream"):
        mask_stream(np.zeros((2, 3), dtype=np.int64), tokenizer)
    inputs, labels = mask_stream(stream[:100], tokenizer)
    with pytest.raises(ValueError, match="fewer than one block"):
        masked_stream_blocks(inputs, labels, tokenizer, seq_len=200)


# ------------------------------------------------------------------- sliding windows


@pytest.mark.parametrize(
    "tokens,length,stride", [(100, 16, 4), (97, 16, 16), (50, 8, 7), (9, 16, 3)]
)
def test_sliding_windows_score_every_token_once(tokens, length, stride):
    windows = sliding_windows(tokens, length=length, stride=stride)
    scored = [t for w in windows for t in range(w.first, w.last)]
    if stride < length:
        assert sorted(scored) == list(range(1, tokens))  # every token but the first, once
    else:  # non-overlapping blocks: a block's first token has no context
        assert sorted(scored) == [t for t in range(1, tokens) if t % length != 0]
    for k, w in enumerate(windows):
        assert w.begin < w.first <= w.last <= w.end <= tokens and w.end - w.begin <= length
        if k > 0:  # later windows score their last tokens only, with L - S before them
            assert w.first - w.begin >= min(length - stride, w.first - w.begin)
            assert w.begin == windows[k - 1].begin + stride


def test_sliding_windows_bad_input():
    with pytest.raises(ValueError, match="stride"):
        sliding_windows(100, length=8, stride=9)
    with pytest.raises(ValueError, match="num_tokens"):
        sliding_windows(1, length=8, stride=4)


# --------------------------------------------------------------------- context curve


@pytest.mark.parametrize("causal", [True, False])
def test_context_windows_keep_the_targets_and_grow_the_context(causal):
    starts = context_span_starts(2000, max_context=512, span=32, spans=8, causal=causal)
    for c in (64, 128, 512):
        windows = context_windows(starts, context=c, span=32, causal=causal)
        for s, w in zip(starts, windows, strict=True):
            assert (w.first, w.last) == (s, s + 32) and w.end - w.begin == c
            assert 0 <= w.begin and w.end <= 2000
            if causal:
                assert w.last == w.end  # the span ends the window
            else:
                assert abs((w.first - w.begin) - (w.end - w.last)) <= 1  # in the middle
    with pytest.raises(ValueError, match="need"):
        context_span_starts(600, max_context=512, span=32, spans=8, causal=causal)
    with pytest.raises(ValueError, match="context"):
        context_windows(starts, context=16, span=32, causal=causal)
