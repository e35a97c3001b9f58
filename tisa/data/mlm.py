"""Masked-LM data: fixed-length blocks and BERT masking (15%, 80/10/10).

Blocks
    A split's texts are tokenized without special tokens, concatenated in corpus order
    into one token stream and cut into consecutive blocks of ``seq_len`` tokens; the
    final partial block is dropped (so no block needs padding). Two formats:

    ``"cls_sep"`` (default)  ``[CLS] t_1 ... t_{L-2} [SEP]``: L-2 text tokens per block,
                             framed like BERT's single-segment inputs.
    ``"plain"``              ``t_1 ... t_L``: text tokens only.

    Line and document boundaries are not marked (as in Hugging Face's ``run_mlm``
    ``group_texts``); blocks start wherever the previous one ended.

Masking
    Each non-special position is selected with probability ``mlm_probability`` (15%);
    selected positions become ``[MASK]`` 80% of the time, a random token 10% and stay
    unchanged 10%; labels are the original ids at selected positions and -100 elsewhere.
    ``[CLS]``, ``[SEP]``, ``[PAD]`` and ``[MASK]`` are never selected; ``[UNK]`` is an
    ordinary word here (Penn Treebank's rare-word token), so it can be. The sampling is
    that of transformers' :class:`~transformers.DataCollatorForLanguageModeling`, driven
    by a :class:`torch.Generator` seeded per block:

    * training (:class:`MaskedBlocks`): block ``i`` in epoch ``e`` is masked with the seed
      ``(seed, e, i)``: a fresh mask every epoch, yet a pure function of those three
      numbers, so a resumed run draws exactly the masks of an uninterrupted one whatever
      the batching, prefetching or number of processes;
    * evaluation (:func:`mask_blocks`): the masks of epoch 0 for a fixed evaluation seed,
      so every run, batch size and number of blocks sees the same masks for the same
      text;
    * evaluation across lengths (:func:`mask_stream`): whether a token is masked, and
      what replaces it, is decided per token of the stream, from the seed and the
      token's index in the stream alone. Blocks of any length cut from the masked stream
      (:func:`masked_stream_blocks`) therefore mask exactly the same tokens, so losses at
      different lengths are over the same targets.

Letters: N blocks, L block length (``seq_len``), B batch size.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import torch
from torch import Tensor
from transformers import DataCollatorForLanguageModeling, PreTrainedTokenizerBase

from tisa._validate import check_int
from tisa.data.clm import stack_blocks

if TYPE_CHECKING:
    from datasets import Dataset

__all__ = [
    "BLOCK_FORMATS",
    "BlockDataset",
    "MaskedBlocks",
    "block_content_length",
    "build_blocks",
    "collate_blocks",
    "mask_blocks",
    "mask_stream",
    "masked_eval_dataset",
    "masked_stream_blocks",
    "special_ids",
    "token_stream",
]

BlockFormat = Literal["cls_sep", "plain"]
BLOCK_FORMATS: tuple[str, ...] = ("cls_sep", "plain")


def block_content_length(seq_len: int, block_format: str = "cls_sep") -> int:
    """Number of text tokens per block: L - 2 for ``"cls_sep"``, L for ``"plain"``.

    Raises:
        ValueError: unknown format or a length too short for the format.
    """
    if block_format not in BLOCK_FORMATS:
        raise ValueError(f"block_format must be one of {BLOCK_FORMATS}, got {block_format!r}")
    minimum = 3 if block_format == "cls_sep" else 1
    check_int(seq_len, f"seq_len (block_format {block_format!r})", minimum=minimum)
    return seq_len - 2 if block_format == "cls_sep" else seq_len


def special_ids(tokenizer: PreTrainedTokenizerBase) -> list[int]:
    """Ids that are never masked: [CLS], [SEP], [PAD], [MASK] (those the tokenizer has)."""
    ids = [
        tokenizer.cls_token_id,
        tokenizer.sep_token_id,
        tokenizer.pad_token_id,
        tokenizer.mask_token_id,
    ]
    return sorted({int(i) for i in ids if i is not None})


def token_stream(
    texts: Dataset | Sequence[str],
    tokenizer: PreTrainedTokenizerBase,
    *,
    max_tokens: int | None = None,
    batch_size: int = 1000,
    progress: bool = True,
) -> np.ndarray:
    """All texts tokenized (no special tokens) and concatenated: (T,) int64.

    Args:
        texts: a Dataset with a ``text`` column or a sequence of strings.
        tokenizer: a (fast) tokenizer.
        max_tokens: stop once this many tokens are collected (the stream is cut there).
        batch_size: texts tokenized per call.
        progress: show a progress bar.
    """
    from tqdm.auto import tqdm

    if hasattr(texts, "column_names"):
        if "text" not in texts.column_names:
            raise ValueError(f"texts needs a 'text' column, got columns {texts.column_names}")
        n = len(texts)

        def chunk(i: int) -> list[str]:
            return texts[i : i + batch_size]["text"]
    else:
        n = len(texts)

        def chunk(i: int) -> list[str]:
            return list(texts[i : i + batch_size])

    pieces: list[np.ndarray] = []
    total = 0
    for start in tqdm(
        range(0, n, batch_size), desc="tokenizing", disable=not progress, leave=False
    ):
        enc = tokenizer(chunk(start), add_special_tokens=False, verbose=False)["input_ids"]
        for ids in enc:
            if ids:
                pieces.append(np.asarray(ids, dtype=np.int64))
                total += len(ids)
        if max_tokens is not None and total >= max_tokens:
            break
    stream = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int64)
    return stream[:max_tokens] if max_tokens is not None else stream


def build_blocks(
    texts: Dataset | Sequence[str] | np.ndarray,
    tokenizer: PreTrainedTokenizerBase,
    *,
    seq_len: int,
    block_format: str = "cls_sep",
    max_blocks: int | None = None,
    progress: bool = True,
) -> np.ndarray:
    """Cuts the concatenated token stream into fixed-length blocks: (N, L) int64.

    Args:
        texts: a Dataset with a ``text`` column, a sequence of strings, or an already
            tokenized (T,) stream from :func:`token_stream`.
        tokenizer: the tokenizer (its [CLS]/[SEP] frame ``"cls_sep"`` blocks).
        seq_len: L, tokens per block including [CLS]/[SEP].
        block_format: ``"cls_sep"`` or ``"plain"`` (see the module docstring).
        max_blocks: keep only the first blocks.
        progress: show a progress bar while tokenizing.

    Raises:
        ValueError: bad seq_len/format/max_blocks, or text too short for one block.
    """
    content = block_content_length(seq_len, block_format)
    check_int(max_blocks, "max_blocks", optional=True)
    if isinstance(texts, np.ndarray):
        stream = texts.astype(np.int64, copy=False)
    else:
        limit = None if max_blocks is None else max_blocks * content
        stream = token_stream(texts, tokenizer, max_tokens=limit, progress=progress)
    n = len(stream) // content
    if max_blocks is not None:
        n = min(n, max_blocks)
    if n == 0:
        raise ValueError(
            f"the text has {len(stream)} tokens, fewer than one block of {content} text "
            f"tokens (seq_len={seq_len}, block_format={block_format!r})"
        )
    body = stream[: n * content].reshape(n, content)
    if block_format == "plain":
        return np.ascontiguousarray(body)
    cls = np.full((n, 1), tokenizer.cls_token_id, dtype=np.int64)
    sep = np.full((n, 1), tokenizer.sep_token_id, dtype=np.int64)
    return np.concatenate([cls, body, sep], axis=1)


def _masker(
    tokenizer: PreTrainedTokenizerBase,
    mlm_probability: float,
    mask_replace_prob: float,
    random_replace_prob: float,
) -> DataCollatorForLanguageModeling:
    if not 0.0 < mlm_probability < 1.0:
        raise ValueError(f"mlm_probability must be in (0, 1), got {mlm_probability!r}")
    if tokenizer.mask_token_id is None:
        raise ValueError("the tokenizer has no mask token; masked-LM needs one")
    return DataCollatorForLanguageModeling(
        tokenizer,
        mlm=True,
        mlm_probability=mlm_probability,
        mask_replace_prob=mask_replace_prob,
        random_replace_prob=random_replace_prob,
        return_tensors="pt",
    )


def _seed(*key: int) -> int:
    """A 63-bit seed mixed from integers (SeedSequence keeps nearby keys far apart)."""
    state = np.random.SeedSequence([int(k) for k in key]).generate_state(1, dtype=np.uint64)
    return int(state[0] >> np.uint64(1))


class MaskedBlocks(torch.utils.data.Dataset):
    """Blocks masked on the fly, reproducibly: block i in epoch e gets mask (seed, e, i).

    Dynamic masking (a new mask every epoch) that is a pure function of the seed, the
    epoch and the block index, so it does not depend on the order in which batches are
    drawn, on data-loader workers or prefetching, on the number of processes, or on
    whether a run was interrupted and resumed. The trainer calls :meth:`set_epoch`.

    Each item is ``{"input_ids": (L,), "labels": (L,)}`` (long tensors).

    Args:
        blocks: (N, L) token ids.
        tokenizer: the tokenizer.
        seed: masking seed.
        mlm_probability, mask_replace_prob, random_replace_prob: see the module
            docstring.
    """

    def __init__(
        self,
        blocks: np.ndarray | Tensor,
        tokenizer: PreTrainedTokenizerBase,
        *,
        seed: int = 0,
        mlm_probability: float = 0.15,
        mask_replace_prob: float = 0.8,
        random_replace_prob: float = 0.1,
    ) -> None:
        self.blocks = torch.as_tensor(np.asarray(blocks), dtype=torch.long)
        if self.blocks.dim() != 2:
            raise ValueError(f"blocks must have shape (N, L), got {tuple(self.blocks.shape)}")
        self.seed = int(seed)
        self.epoch = 0
        self._masker = _masker(tokenizer, mlm_probability, mask_replace_prob, random_replace_prob)
        self._special = torch.tensor(special_ids(tokenizer), dtype=torch.long)

    def set_epoch(self, epoch: int) -> None:
        """Selects the epoch whose masks :meth:`__getitem__` returns."""
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return self.blocks.shape[0]

    def __getitem__(self, index: int) -> dict[str, Tensor]:
        ids = self.blocks[index : index + 1].clone()  # (1, L)
        self._masker.generator = torch.Generator().manual_seed(_seed(self.seed, self.epoch, index))
        inputs, labels = self._masker.torch_mask_tokens(
            ids, special_tokens_mask=torch.isin(ids, self._special)
        )
        return {"input_ids": inputs[0], "labels": labels[0]}


class BlockDataset(torch.utils.data.Dataset):
    """Fixed (already masked) blocks: items ``{"input_ids": (L,), "labels": (L,)}``."""

    def __init__(self, input_ids: Tensor, labels: Tensor) -> None:
        if input_ids.shape != labels.shape or input_ids.dim() != 2:
            raise ValueError(
                f"input_ids and labels must both be (N, L), got {tuple(input_ids.shape)} "
                f"and {tuple(labels.shape)}"
            )
        self.input_ids, self.labels = input_ids, labels

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    def __getitem__(self, index: int) -> dict[str, Tensor]:
        return {"input_ids": self.input_ids[index], "labels": self.labels[index]}


def mask_blocks(
    blocks: np.ndarray | Tensor,
    tokenizer: PreTrainedTokenizerBase,
    *,
    seed: int = 0,
    mlm_probability: float = 0.15,
    mask_replace_prob: float = 0.8,
    random_replace_prob: float = 0.1,
    progress: bool = False,
) -> tuple[Tensor, Tensor]:
    """Seeded masking for evaluation: block i always gets the same mask for a seed.

    The masks are those of :class:`MaskedBlocks` in epoch 0, so they do not depend on
    how many blocks there are or how they are batched.

    Args:
        blocks: (N, L) token ids.
        tokenizer: the tokenizer.
        seed: masking seed.
        mlm_probability, mask_replace_prob, random_replace_prob: see the module
            docstring.
        progress: show a progress bar.

    Returns:
        (input_ids, labels), both (N, L) long tensors.
    """
    from tqdm.auto import tqdm

    data = MaskedBlocks(
        blocks,
        tokenizer,
        seed=seed,
        mlm_probability=mlm_probability,
        mask_replace_prob=mask_replace_prob,
        random_replace_prob=random_replace_prob,
    )
    inputs, labels = torch.empty_like(data.blocks), torch.empty_like(data.blocks)
    for i in tqdm(range(len(data)), desc="masking", disable=not progress, leave=False):
        item = data[i]
        inputs[i], labels[i] = item["input_ids"], item["labels"]
    return inputs, labels


#: Tokens per chunk of the per-token masking stream: chunk c of the stream draws its random
#: numbers from a generator seeded with (seed, c), so a token's draw depends only on the
#: seed and its index in the stream (not on how long the stream is).
_STREAM_CHUNK = 4096


def mask_stream(
    stream: np.ndarray | Tensor,
    tokenizer: PreTrainedTokenizerBase,
    *,
    seed: int = 0,
    mlm_probability: float = 0.15,
    mask_replace_prob: float = 0.8,
    random_replace_prob: float = 0.1,
) -> tuple[Tensor, Tensor]:
    """BERT masking decided per token of a (T,) stream, by the seed and the token's index.

    Token t is selected with probability ``mlm_probability`` (never a special token, see
    :func:`special_ids`); a selected token becomes ``[MASK]`` with probability
    ``mask_replace_prob``, a random token of the vocabulary with ``random_replace_prob``
    and stays itself otherwise. All draws for token t come from chunk ``t // 4096`` of
    generators seeded with ``(seed, chunk)``: the masks of a prefix of a stream are the
    masks of the whole stream's prefix, whatever its length.

    Args:
        stream: (T,) token ids (:func:`token_stream`).
        tokenizer: the tokenizer (its [MASK] id and vocabulary size).
        seed: masking seed.
        mlm_probability, mask_replace_prob, random_replace_prob: as above.

    Returns:
        (input_ids, labels), both (T,) long: inputs with the replacements, labels the
        original ids at selected tokens and -100 elsewhere.

    Raises:
        ValueError: probabilities out of range, or a tokenizer without a mask token.
    """
    if not 0.0 < mlm_probability < 1.0:
        raise ValueError(f"mlm_probability must be in (0, 1), got {mlm_probability!r}")
    if not (0.0 <= mask_replace_prob and 0.0 <= random_replace_prob):
        raise ValueError("mask_replace_prob and random_replace_prob must be >= 0")
    if mask_replace_prob + random_replace_prob > 1.0:
        raise ValueError(
            "mask_replace_prob + random_replace_prob must be <= 1, got "
            f"{mask_replace_prob} + {random_replace_prob}"
        )
    if tokenizer.mask_token_id is None:
        raise ValueError("the tokenizer has no mask token; masked-LM needs one")
    ids = torch.as_tensor(np.asarray(stream), dtype=torch.long)
    if ids.dim() != 1:
        raise ValueError(f"stream must have shape (T,), got {tuple(ids.shape)}")
    t = ids.shape[0]
    draws = torch.empty(3, t, dtype=torch.float64)  # (selection, replacement kind, token)
    for c, start in enumerate(range(0, t, _STREAM_CHUNK)):
        stop = min(start + _STREAM_CHUNK, t)
        gen = torch.Generator().manual_seed(_seed(seed, c))
        chunk = torch.rand(3, _STREAM_CHUNK, generator=gen, dtype=torch.float64)
        draws[:, start:stop] = chunk[:, : stop - start]
    special = torch.isin(ids, torch.tensor(special_ids(tokenizer), dtype=torch.long))
    selected = (draws[0] < mlm_probability) & ~special  # (T,)
    labels = torch.where(selected, ids, torch.full_like(ids, -100))
    to_mask = selected & (draws[1] < mask_replace_prob)
    to_random = (
        selected
        & (draws[1] >= mask_replace_prob)
        & (draws[1] < mask_replace_prob + random_replace_prob)
    )
    vocab = len(tokenizer)
    random_ids = (draws[2] * vocab).long().clamp_(max=vocab - 1)
    inputs = ids.clone()
    inputs[to_mask] = tokenizer.mask_token_id
    inputs[to_random] = random_ids[to_random]
    return inputs, labels


def masked_stream_blocks(
    inputs: Tensor,
    labels: Tensor,
    tokenizer: PreTrainedTokenizerBase,
    *,
    seq_len: int,
    block_format: str = "cls_sep",
    max_blocks: int | None = None,
    score_limit: int | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """Cuts a masked stream (:func:`mask_stream`) into blocks, as :func:`build_blocks` does.

    Block i holds stream tokens ``i * C .. (i + 1) * C - 1`` (C text tokens per block,
    :func:`block_content_length`), framed by [CLS] / [SEP] for ``"cls_sep"``.

    Args:
        inputs: (T,) masked input ids.
        labels: (T,) labels (-100 where nothing is scored).
        tokenizer: the tokenizer ([CLS] and [SEP] ids).
        seq_len: L, tokens per block including [CLS] / [SEP].
        block_format: ``"cls_sep"`` or ``"plain"``.
        max_blocks: keep only the first blocks.
        score_limit: score only tokens whose stream index is below this (their labels
            beyond it become -100; they stay in the blocks as context).

    Returns:
        (input_ids, labels, index): (N, L) long each; ``index`` holds each position's
        index in the stream, -1 at [CLS] / [SEP].

    Raises:
        ValueError: bad lengths or format, or a stream too short for one block.
    """
    content = block_content_length(seq_len, block_format)
    check_int(max_blocks, "max_blocks", optional=True)
    check_int(score_limit, "score_limit", minimum=0, optional=True)
    if inputs.shape != labels.shape or inputs.dim() != 1:
        raise ValueError(
            f"inputs and labels must both be (T,), got {tuple(inputs.shape)} and "
            f"{tuple(labels.shape)}"
        )
    n = inputs.shape[0] // content
    if max_blocks is not None:
        n = min(n, max_blocks)
    if n == 0:
        raise ValueError(
            f"the stream has {inputs.shape[0]} tokens, fewer than one block of {content} "
            f"text tokens (seq_len={seq_len}, block_format={block_format!r})"
        )
    index = torch.arange(n * content).reshape(n, content)
    x, y = inputs[index], labels[index].clone()
    if score_limit is not None:
        y[index >= score_limit] = -100
    if block_format == "cls_sep":
        cls = torch.full((n, 1), tokenizer.cls_token_id, dtype=torch.long)
        sep = torch.full((n, 1), tokenizer.sep_token_id, dtype=torch.long)
        none = torch.full((n, 1), -100, dtype=torch.long)
        x = torch.cat([cls, x, sep], dim=1)
        y = torch.cat([none, y, none], dim=1)
        index = torch.cat([none.clone().fill_(-1), index, none.clone().fill_(-1)], dim=1)
    return x, y, index


def masked_eval_dataset(
    blocks: np.ndarray | Tensor,
    tokenizer: PreTrainedTokenizerBase,
    *,
    seed: int = 0,
    mlm_probability: float = 0.15,
) -> BlockDataset:
    """Seeded-masked blocks (:func:`mask_blocks`) as a dataset for evaluation."""
    inputs, labels = mask_blocks(blocks, tokenizer, seed=seed, mlm_probability=mlm_probability)
    return BlockDataset(inputs, labels)


def collate_blocks(examples: list[dict[str, Any]]) -> dict[str, Tensor]:
    """Stacks B equal-length masked blocks into a batch.

    Returns:
        ``input_ids`` (B, L), ``labels`` (B, L) and ``token_type_ids`` (B, L) of zeros
        (passed explicitly so that models accept lengths beyond their internal buffers).

    Raises:
        ValueError: blocks of unequal length.
    """
    return stack_blocks(examples, token_type_ids=True)
