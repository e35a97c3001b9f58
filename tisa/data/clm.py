"""Causal-LM data: fixed-length blocks whose every token is a next-token target.

The blocks are those of :func:`tisa.data.mlm.build_blocks` in the ``"plain"`` format: the
split's token stream cut into consecutive blocks of L text tokens, no [CLS]/[SEP] frame,
no padding. Nothing is masked or drawn at random, so a block's loss terms are the same in
every epoch and after a resume. Labels are the inputs themselves; the model shifts them
(position t predicts token t + 1, as Hugging Face's ``*ForCausalLM`` classes do), so a
block of L tokens gives L - 1 predictions.

Letters: N blocks, L block length, B batch size.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor

__all__ = ["CausalBlocks", "collate_causal", "stack_blocks"]


class CausalBlocks(torch.utils.data.Dataset):
    """(N, L) token blocks as causal-LM examples ``{"input_ids": (L,), "labels": (L,)}``.

    Args:
        blocks: (N, L) token ids, L >= 2 (one prediction at least).

    Raises:
        ValueError: not a 2-d array, or blocks shorter than 2 tokens.
    """

    def __init__(self, blocks: np.ndarray | Tensor) -> None:
        self.blocks = torch.as_tensor(np.asarray(blocks), dtype=torch.long)
        if self.blocks.dim() != 2:
            raise ValueError(f"blocks must have shape (N, L), got {tuple(self.blocks.shape)}")
        if self.blocks.shape[1] < 2:
            raise ValueError(
                f"blocks must hold at least 2 tokens (one next-token prediction), got "
                f"length {self.blocks.shape[1]}"
            )

    def set_epoch(self, epoch: int) -> None:
        """Nothing changes between epochs (no masks); kept for the epoch callback."""

    def __len__(self) -> int:
        return self.blocks.shape[0]

    def __getitem__(self, index: int) -> dict[str, Tensor]:
        ids = self.blocks[index]
        return {"input_ids": ids, "labels": ids}


def stack_blocks(
    examples: list[dict[str, Any]], *, token_type_ids: bool = False
) -> dict[str, Tensor]:
    """Stacks B equal-length blocks, causal or masked: ``input_ids`` and ``labels``, both
    (B, L), and with ``token_type_ids`` a (B, L) tensor of zeros too.

    Raises:
        ValueError: blocks of unequal length.
    """
    lengths = {len(e["input_ids"]) for e in examples}
    if len(lengths) != 1:
        raise ValueError(f"all blocks in a batch must have the same length, got {sorted(lengths)}")
    ids = torch.stack([torch.as_tensor(e["input_ids"], dtype=torch.long) for e in examples])
    labels = torch.stack([torch.as_tensor(e["labels"], dtype=torch.long) for e in examples])
    batch = {"input_ids": ids, "labels": labels}
    if token_type_ids:
        batch["token_type_ids"] = torch.zeros_like(ids)
    return batch


def collate_causal(examples: list[dict[str, Any]]) -> dict[str, Tensor]:
    """Stacks B equal-length blocks: ``input_ids`` and ``labels``, both (B, L).

    No ``token_type_ids``: GPT-2 would look them up in its word embeddings.

    Raises:
        ValueError: blocks of unequal length.
    """
    return stack_blocks(examples)
