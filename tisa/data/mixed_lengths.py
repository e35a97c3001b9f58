"""Training batches of mixed lengths: most steps at the training length, a share longer.

A scoring function only learns the offsets it sees: trained on blocks of L tokens, it has
never been asked about |k| >= L. :class:`MixedLengthBatches` lets a share of the steps
(``share``, e.g. 15%) train on longer blocks, of a length n drawn uniformly from
``lengths`` (e.g. 256 and 512), with the batch shrunk to B * L / n blocks, so that every
step holds the same B * L tokens (same cost per step in the feed-forward layers, same
number of masked tokens on average).

Each item of the dataset is one whole training batch (the Trainer runs it with a batch
size of 1 and :func:`collate_batch`). Epoch e and step s are a pure function of
(seed, e, s), so a resumed run draws the same batches:

* the epoch's order: a permutation of the N base blocks of length L, seeded by
  (seed, e); step s owns base blocks ``perm[s*B : (s+1)*B]``, so over an epoch every
  base block is owned once (the last N mod B are left out, as a Trainer with
  ``drop_last`` would);
* the step's length: n = L with probability 1 - share, else one of ``lengths``, drawn
  with a generator seeded by (seed, e, s);
* at n = L the batch is those B base blocks, masked exactly as
  :class:`tisa.data.mlm.MaskedBlocks` masks them in epoch e; at n > L it is B * L / n
  blocks of n tokens, the j-th starting where the step's j-th base block starts in the
  token stream (moved back so that it fits), i.e. contiguous text, masked with seeds
  (seed, e, block, n).

Causal LMs (``mlm_probability=None``) get the same blocks unmasked, labels = inputs.

Letters: N base blocks, L the training length, n a step's length, B the batch size.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor
from transformers import PreTrainedTokenizerBase

from tisa._validate import check_int
from tisa.data.mlm import _masker, _seed, block_content_length, special_ids

__all__ = ["MixedLengthBatches", "check_mixed_lengths", "collate_batch"]


def check_mixed_lengths(
    lengths: Sequence[int], share: float, *, seq_len: int, batch_size: int
) -> tuple[int, ...]:
    """Checks the mixed training lengths; returns them as a sorted tuple.

    Raises:
        ValueError: a length not above ``seq_len``, one that does not divide the tokens of
            a batch (``batch_size * seq_len``) into whole blocks, or a share outside
            (0, 1).
    """
    out = []
    for n in lengths:
        check_int(n, "mixed_lengths")
        if n <= seq_len:
            raise ValueError(f"mixed_lengths must be longer than seq_len ({seq_len}), got {n}")
        if (batch_size * seq_len) % n:
            raise ValueError(
                f"mixed_lengths: a batch holds batch_size x seq_len = {batch_size * seq_len} "
                f"tokens, which {n}-token blocks do not divide evenly"
            )
        out.append(int(n))
    if len(set(out)) != len(out):
        raise ValueError(f"mixed_lengths must be distinct, got {list(lengths)}")
    if not (isinstance(share, int | float) and 0.0 < share < 1.0):
        raise ValueError(f"mixed_share must be in (0, 1), got {share!r}")
    return tuple(sorted(out))


class MixedLengthBatches(torch.utils.data.Dataset):
    """Whole training batches, a ``share`` of them of a longer length (see the module
    docstring).

    Args:
        stream: (T,) the split's text tokens (:func:`tisa.data.mlm.token_stream`).
        tokenizer: the tokenizer ([CLS]/[SEP] for ``"cls_sep"``, [MASK] for masking).
        seq_len: L, the training length.
        batch_size: B, blocks per batch at length L.
        lengths: the longer lengths n (each > L, dividing B * L).
        share: probability that a step is long.
        seed: seed of order, lengths and masks.
        block_format: ``"cls_sep"`` or ``"plain"`` (:mod:`tisa.data.mlm`).
        mlm_probability: share of positions masked; None for causal-LM batches.
        max_blocks: use only the first N base blocks (as ``max_train_blocks``).

    Raises:
        ValueError: bad lengths or share, or text too short for one batch, or for one
            block of the longest length.
    """

    def __init__(
        self,
        stream: np.ndarray,
        tokenizer: PreTrainedTokenizerBase,
        *,
        seq_len: int,
        batch_size: int,
        lengths: Sequence[int],
        share: float,
        seed: int = 0,
        block_format: str = "cls_sep",
        mlm_probability: float | None = 0.15,
        max_blocks: int | None = None,
    ) -> None:
        self.seq_len = check_int(seq_len, "seq_len")
        self.batch_size = check_int(batch_size, "batch_size")
        self.lengths = check_mixed_lengths(lengths, share, seq_len=seq_len, batch_size=batch_size)
        self.share = float(share)
        self.seed = int(seed)
        self.block_format = block_format
        self.stream = torch.as_tensor(np.asarray(stream, dtype=np.int64))
        self.content = block_content_length(seq_len, block_format)
        n = len(self.stream) // self.content
        if max_blocks is not None:
            n = min(n, check_int(max_blocks, "max_blocks"))
        self.num_blocks = n
        if n < batch_size:
            raise ValueError(
                f"the text gives {n} blocks of {seq_len} tokens, fewer than one batch "
                f"({batch_size})"
            )
        # long blocks may read past the base blocks (never past the text)
        self._end = len(self.stream) if max_blocks is None else n * self.content
        longest = block_content_length(max(self.lengths), block_format)
        if longest > len(self.stream):
            raise ValueError(
                f"the text has {len(self.stream)} tokens, fewer than one block of "
                f"{max(self.lengths)}"
            )
        self._end = max(self._end, longest)
        self.epoch = 0
        self._tokenizer = tokenizer
        self._masker = None
        if mlm_probability is not None:  # BERT's 80/10/10, as MaskedBlocks
            self._masker = _masker(tokenizer, mlm_probability, 0.8, 0.1)
        self._special = torch.tensor(special_ids(tokenizer), dtype=torch.long)
        self._order_epoch: int | None = None
        self._order: Tensor | None = None

    def set_epoch(self, epoch: int) -> None:
        """Selects the epoch whose batches :meth:`__getitem__` returns."""
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return self.num_blocks // self.batch_size

    def _epoch_order(self) -> Tensor:
        if self._order_epoch != self.epoch:
            g = torch.Generator().manual_seed(_seed(self.seed, self.epoch))
            self._order = torch.randperm(self.num_blocks, generator=g)
            self._order_epoch = self.epoch
        return self._order

    def step_length(self, step: int) -> int:
        """The length n of step ``step`` in the current epoch."""
        g = torch.Generator().manual_seed(_seed(self.seed, self.epoch, step, 1))
        long, pick = torch.rand(2, generator=g, dtype=torch.float64).tolist()
        if long >= self.share:
            return self.seq_len
        return self.lengths[min(int(pick * len(self.lengths)), len(self.lengths) - 1)]

    def _block(self, start: int, length: int) -> Tensor:
        """(length,) block whose text starts at stream position ``start`` (or earlier)."""
        content = block_content_length(length, self.block_format)
        start = min(start, self._end - content)
        body = self.stream[start : start + content]
        if self.block_format == "plain":
            return body
        tok = self._tokenizer
        frame = torch.tensor([tok.cls_token_id]), torch.tensor([tok.sep_token_id])
        return torch.cat([frame[0], body, frame[1]])

    def __getitem__(self, step: int) -> dict[str, Tensor]:
        if not 0 <= step < len(self):
            raise IndexError(f"step {step} out of range for {len(self)} steps per epoch")
        owned = self._epoch_order()[step * self.batch_size : (step + 1) * self.batch_size]
        length = self.step_length(step)
        count = self.batch_size * self.seq_len // length
        ids, labels = [], []
        for index in owned[:count].tolist():
            block = self._block(index * self.content, length)[None, :]  # (1, n)
            key = (self.seed, self.epoch, index) + (() if length == self.seq_len else (length,))
            if self._masker is None:
                ids.append(block[0])
                labels.append(block[0])
                continue
            self._masker.generator = torch.Generator().manual_seed(_seed(*key))
            x, y = self._masker.torch_mask_tokens(
                block.clone(), special_tokens_mask=torch.isin(block, self._special)
            )
            ids.append(x[0])
            labels.append(y[0])
        batch = {"input_ids": torch.stack(ids), "labels": torch.stack(labels)}
        if self._masker is not None:  # masked LMs take token types (see collate_blocks)
            batch["token_type_ids"] = torch.zeros_like(batch["input_ids"])
        return batch


def collate_batch(
    items: list[dict[str, Any]],
    fallback: Callable[[list[dict[str, Any]]], dict[str, Tensor]] | None = None,
) -> dict[str, Tensor]:
    """The one item of a loader batch of size 1 when it is a whole batch (a
    :class:`MixedLengthBatches` item, (B, n) tensors); single blocks go to ``fallback``
    (e.g. :func:`tisa.data.mlm.collate_blocks` for the evaluation data).

    Raises:
        ValueError: several whole batches at once (the loader's batch size must be 1), or
            single blocks without a ``fallback``.
    """
    if not items or items[0]["input_ids"].dim() == 1:
        if fallback is None:
            raise ValueError("collate_batch: single blocks need a fallback collate function")
        return fallback(items)
    if len(items) != 1:
        raise ValueError(
            f"mixed-length batches are whole batches: the loader must pass 1 at a time, "
            f"got {len(items)}"
        )
    return items[0]
