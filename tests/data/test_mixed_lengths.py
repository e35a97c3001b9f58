"""Mixed-length training batches and causal-LM blocks."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

from tisa.data.clm import CausalBlocks, collate_causal
from tisa.data.corpus import ptb_lines
from tisa.data.mixed_lengths import MixedLengthBatches, check_mixed_lengths, collate_batch
from tisa.data.mlm import MaskedBlocks, build_blocks, collate_blocks, token_stream
from tisa.data.tokenizer import train_wordpiece

L, B = 24, 8  # B * L = 192 tokens per step: 48- and 96-token blocks divide it


@pytest.fixture(scope="module")
def tokenizer():
    return train_wordpiece(ptb_lines("train")[:2000], vocab_size=600, show_progress=False)


@pytest.fixture(scope="module")
def stream(tokenizer):
    return token_stream(ptb_lines("valid")[:1200], tokenizer, progress=False)


def _data(stream, tokenizer, **kwargs):
    options = dict(seq_len=L, batch_size=B, lengths=(48, 96), share=0.3, seed=4)
    return MixedLengthBatches(stream, tokenizer, **{**options, **kwargs})


def test_every_step_holds_the_same_tokens_and_a_share_is_long(stream, tokenizer):
    data = _data(stream, tokenizer)
    lengths = [data.step_length(s) for s in range(len(data))]
    assert set(lengths) == {24, 48, 96}
    share = sum(n > L for n in lengths) / len(lengths)
    assert abs(share - 0.3) < 0.1, share  # about 100 steps
    for step in range(6):
        batch = data[step]
        n = lengths[step]
        assert batch["input_ids"].shape == batch["labels"].shape == (B * L // n, n)
        assert batch["input_ids"].numel() == B * L
        assert (batch["input_ids"][:, 0] == tokenizer.cls_token_id).all()
        assert (batch["input_ids"][:, -1] == tokenizer.sep_token_id).all()


def test_base_steps_are_the_blocks_and_masks_of_masked_blocks(stream, tokenizer):
    data = _data(stream, tokenizer)
    blocks = build_blocks(stream, tokenizer, seq_len=L)
    reference = MaskedBlocks(blocks, tokenizer, seed=4)
    for epoch in (0, 1):
        data.set_epoch(epoch)
        reference.set_epoch(epoch)
        order = data._epoch_order()
        step = next(s for s in range(len(data)) if data.step_length(s) == L)
        batch = data[step]
        for j, index in enumerate(order[step * B : (step + 1) * B].tolist()):
            item = reference[index]
            assert torch.equal(batch["input_ids"][j], item["input_ids"])
            assert torch.equal(batch["labels"][j], item["labels"])


def test_long_blocks_are_contiguous_text(stream, tokenizer):
    data = _data(stream, tokenizer, mlm_probability=None, block_format="plain")
    step = next(s for s in range(len(data)) if data.step_length(s) == 96)
    batch = data[step]
    assert torch.equal(batch["labels"], batch["input_ids"])  # causal: nothing masked
    starts = data._epoch_order()[step * B : step * B + 2].tolist()
    for j, index in enumerate(starts):
        start = min(index * L, len(stream) - 96)
        np.testing.assert_array_equal(batch["input_ids"][j].numpy(), stream[start : start + 96])
    assert "token_type_ids" not in batch


def test_epochs_cover_each_base_block_once_and_are_reproducible(stream, tokenizer):
    data = _data(stream, tokenizer)
    order = data._epoch_order()
    assert sorted(order.tolist()) == list(range(data.num_blocks))
    first = data[3]["labels"].clone()
    data.set_epoch(1)
    assert not torch.equal(data._epoch_order(), order)
    data.set_epoch(0)
    assert torch.equal(data[3]["labels"], first)
    again = _data(stream, tokenizer)
    assert torch.equal(again[3]["labels"], first)


def test_collate_and_bad_input(stream, tokenizer):
    data = _data(stream, tokenizer)
    collate = functools.partial(collate_batch, fallback=collate_blocks)
    assert collate([data[0]]) is not None
    single = MaskedBlocks(build_blocks(stream, tokenizer, seq_len=L)[:2], tokenizer)
    assert collate([single[0], single[1]])["input_ids"].shape == (2, L)
    with pytest.raises(ValueError, match="1 at a time"):
        collate([data[0], data[1]])
    with pytest.raises(ValueError, match="longer than seq_len"):
        check_mixed_lengths([24], 0.1, seq_len=L, batch_size=B)
    with pytest.raises(ValueError, match="divide"):
        check_mixed_lengths([50], 0.1, seq_len=L, batch_size=B)
    with pytest.raises(ValueError, match="mixed_share"):
        check_mixed_lengths([48], 1.0, seq_len=L, batch_size=B)
    with pytest.raises(IndexError):
        data[len(data)]


def test_causal_blocks(stream, tokenizer):
    blocks = build_blocks(stream, tokenizer, seq_len=16, block_format="plain")
    data = CausalBlocks(blocks)
    batch = collate_causal([data[0], data[1]])
    assert set(batch) == {"input_ids", "labels"}  # no token types: GPT-2 would embed them
    assert torch.equal(batch["labels"], batch["input_ids"])
    np.testing.assert_array_equal(batch["input_ids"].reshape(-1).numpy(), stream[:32])
    with pytest.raises(ValueError, match="at least 2"):
        CausalBlocks(np.zeros((3, 1), dtype=np.int64))
    with pytest.raises(ValueError, match="same length"):
        collate_causal([data[0], {"input_ids": torch.zeros(3, dtype=torch.long)}])
