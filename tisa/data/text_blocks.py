"""Real text as token blocks a model reads whole: the stream of a list of texts tokenised
without special tokens, cut into consecutive pieces, each framed by the tokenizer's own
special tokens (``[CLS] .. [SEP]`` for BERT, ``<s> .. </s>`` for RoBERTa, nothing for
GPT-2).

What the analysis probes, the conversion's fit and the long-input strategies feed their
models; the pretraining data (:mod:`tisa.data.mlm`, :mod:`tisa.data.clm`) builds its own
blocks from whole corpora.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from tisa._validate import check_int

__all__ = ["special_template", "text_blocks"]


def special_template(tokenizer: Any) -> tuple[list[int], list[int]]:
    """(ids before, ids after) a single text that the tokenizer adds: ([CLS], [SEP]) for
    BERT, ([], []) for GPT-2.

    Raises:
        ValueError: the tokenizer changes a text's own tokens when it adds special tokens.
    """
    probe = "hello world"
    inner = tokenizer(probe, add_special_tokens=False)["input_ids"]
    full = tokenizer(probe, add_special_tokens=True)["input_ids"]
    for start in range(len(full) - len(inner) + 1):
        if full[start : start + len(inner)] == inner:
            return list(full[:start]), list(full[start + len(inner) :])
    raise ValueError("tokenizer: cannot find where it places the text among its special tokens")


def _stream_ids(tokenizer: Any, texts: Sequence[str], need: int, *, batch: int = 64) -> list[int]:
    """The ids of ``texts`` in order, without special tokens, tokenised ``batch`` texts at
    a time until at least ``need`` ids are there (or the texts end)."""
    stream: list[int] = []
    for start in range(0, len(texts), batch):
        for ids in tokenizer(list(texts[start : start + batch]), add_special_tokens=False)[
            "input_ids"
        ]:
            stream.extend(ids)
        if len(stream) >= need:
            break
    return stream


def text_blocks(
    tokenizer: Any, texts: Sequence[str], *, length: int, count: int, start: int = 0
) -> Tensor:
    """``count`` blocks of exactly ``length`` tokens from the concatenated ``texts``.

    Each block is the tokenizer's prefix, ``length - (special tokens)`` consecutive ids of
    the stream from id ``start`` on, and its suffix (:func:`special_template`).

    Returns:
        (count, length) long tensor.

    Raises:
        ValueError: a length that leaves no room for text, or too little text.
    """
    length = check_int(length, "length")
    count = check_int(count, "count")
    start = check_int(start, "start", minimum=0)
    prefix, suffix = special_template(tokenizer)
    inner = length - len(prefix) - len(suffix)
    if inner < 1:
        raise ValueError(
            f"length must exceed the tokenizer's {len(prefix) + len(suffix)} special tokens, "
            f"got {length}"
        )
    need = start + inner * count
    stream = _stream_ids(tokenizer, texts, need)
    if len(stream) < need:
        raise ValueError(
            f"texts hold {len(stream)} tokens; {count} blocks of {length} from token {start} "
            f"need {need}"
        )
    rows = [prefix + stream[start + i * inner : start + (i + 1) * inner] + suffix
            for i in range(count)]
    return torch.tensor(rows, dtype=torch.long)
