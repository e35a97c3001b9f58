"""How an encoder reads a document of L tokens: one interface, ``embed(texts, length)``.

A model with an absolute position table of n rows (512 for BERT and MiniLM) cannot read
more than n tokens at once. The usual ways around it:

* :class:`Truncate`: the first n tokens (the special tokens included), the rest dropped;
* :class:`Chunk`: the document cut into windows of n tokens (each framed by the special
  tokens), each embedded, and the embeddings averaged with the windows' token counts as
  weights (for mean pooling: the mean over all tokens, attention stopping at windows);
* :class:`Interpolate` (position interpolation, as E5-Base-4k): the table stretched
  linearly to L rows, row i taken at position i n / L of the original table, so rows at
  multiples of L / n are the original's rows;
* :class:`Copy` (Longformer's copy initialisation, applied here without training): row
  i of the L-row table is row i mod n of the original;
* :class:`ContextExtension`: the table of L rows made by the PyPI package
  ``context-extension`` (cubic-spline interpolation of each embedding dimension);
* :class:`ChunkWindows` (``chunk-W``): as :class:`Chunk` with windows of W tokens, for
  any model that reads W tokens (a converted TISA model reading a long document in a few
  windows longer than the original's n);
* :class:`Native`: the whole document at once; the only strategy for a model without a
  position table (a converted TISA model), and what every strategy does when L <= n.

Each strategy returns the model's pooled embeddings (:mod:`tisa.hf.sentence_transformers`),
one row per text, float32 on the CPU. Letters: B batch, L tokens, D hidden size, E table
width, n table rows.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from tisa.data.text_blocks import special_template
from tisa.hf.architectures import architecture_of
from tisa.hf.sentence_transformers import pool
from tisa.longeval.config import chunk_window

__all__ = [
    "STRATEGY_CLASSES",
    "Chunk",
    "ChunkWindows",
    "ContextExtension",
    "Copy",
    "Encoder",
    "Interpolate",
    "Native",
    "Strategy",
    "Truncate",
    "copy_table",
    "make_strategy",
    "stretch_table",
]


@dataclass
class Encoder:
    """A loaded encoder: base model, tokenizer, pooling and position limit.

    Attributes:
        model: the base model (no task head), in eval mode.
        tokenizer: its tokenizer (a fast one).
        pooling: the pooling mode (``"mean"``, ``"cls"``, ...).
        positions: rows of its position table that positions use (None: no table, e.g. a
            converted TISA model).
        first: the table row of position 0 (RoBERTa: ``padding_idx + 1``).
        source: the model's local folder, where it has one (for context-extension).
        batch_size: texts per forward pass.
    """

    model: nn.Module
    tokenizer: Any
    pooling: str = "mean"
    positions: int | None = None
    first: int = 0
    source: str | None = None
    batch_size: int = 1

    def content(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of each text without special tokens."""
        return self.tokenizer(list(texts), add_special_tokens=False)["input_ids"]

    def __post_init__(self) -> None:
        self._prefix, self._suffix = special_template(self.tokenizer)

    def frame(self, ids: Sequence[int]) -> list[int]:
        """``ids`` with the model's special tokens ([CLS] ... [SEP])."""
        return [*self._prefix, *ids, *self._suffix]

    @property
    def special(self) -> int:
        """Special tokens per input."""
        return len(self._prefix) + len(self._suffix)

    @torch.no_grad()
    def run(self, inputs: Sequence[Sequence[int]]) -> Tensor:
        """Pooled embeddings (N, D) of framed inputs (padded into batches)."""
        pad = self.tokenizer.pad_token_id or 0
        out = []
        for s in range(0, len(inputs), self.batch_size):
            batch = inputs[s : s + self.batch_size]
            width = max(len(x) for x in batch)
            ids = torch.full((len(batch), width), pad, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for i, x in enumerate(batch):
                ids[i, : len(x)] = torch.tensor(x, dtype=torch.long)
                mask[i, : len(x)] = 1
            hidden = self.model(input_ids=ids, attention_mask=mask).last_hidden_state  # (B, L, D)
            out.append(pool(hidden, mask, self.pooling).float())
        return torch.cat(out)


class Strategy:
    """The interface: ``embed(texts, length)`` -> (N, D) embeddings.

    ``length`` is the input length the strategy prepares for: L, the documents' length
    in tokens with the special tokens (texts are cut there first).
    """

    name: ClassVar[str] = ""
    #: raised when what a strategy computes changes, so saved cells are computed again
    version: ClassVar[int] = 1

    def __init__(self, encoder: Encoder) -> None:
        self.encoder = encoder

    def embed(self, texts: Sequence[str], length: int) -> Tensor:
        enc = self.encoder
        room = max(1, length - enc.special)
        return self._embed([ids[:room] for ids in enc.content(texts)], length)

    def prepare(self, length: int) -> None:
        """Makes what ``embed`` at ``length`` needs once (a longer table), so that timing
        ``embed`` measures reading documents only."""

    def _embed(self, content: list[list[int]], length: int) -> Tensor:
        raise NotImplementedError

    def _within(self, length: int) -> bool:
        """True when the model reads ``length`` tokens with its own table."""
        n = self.encoder.positions
        return n is None or length <= n


class Native(Strategy):
    """The whole document at once (a model without a position table, or L <= n)."""

    name = "native"

    def _embed(self, content, length):
        if not self._within(length):
            raise ValueError(
                f"strategies: native reads at most the model's {self.encoder.positions} "
                f"positions, not {length}; choose truncate, chunk, interpolate, ..."
            )
        return self.encoder.run([self.encoder.frame(ids) for ids in content])


class Truncate(Strategy):
    """The first n tokens of the document (the model's limit)."""

    name = "truncate"

    def _embed(self, content, length):
        enc = self.encoder
        keep = length if self._within(length) else enc.positions
        return enc.run([enc.frame(ids[: keep - enc.special]) for ids in content])


class Chunk(Strategy):
    """Windows of n tokens, embedded alone, averaged (weights: their token counts)."""

    name = "chunk"

    def _window(self) -> int | None:
        return self.encoder.positions

    def _embed(self, content, length):
        enc = self.encoder
        window = self._window()
        if window is None or length <= window:
            return enc.run([enc.frame(ids) for ids in content])
        room = window - enc.special
        out = []
        for ids in content:
            pieces = [enc.frame(ids[s : s + room]) for s in range(0, max(len(ids), 1), room)]
            pooled = enc.run(pieces)  # (windows, D)
            weights = torch.tensor([len(p) for p in pieces], dtype=pooled.dtype)[:, None]
            out.append((pooled * weights).sum(0) / weights.sum())
        return torch.stack(out)


class ChunkWindows(Chunk):
    """Windows of W tokens (``chunk-W``), as :class:`Chunk`, for a model that reads W."""

    def __init__(self, encoder: Encoder, window: int) -> None:
        super().__init__(encoder)
        n = encoder.positions
        if n is not None and window > n:
            raise ValueError(f"strategies: chunk-{window}: the model reads at most {n} tokens")
        if window <= encoder.special:
            raise ValueError(f"strategies: chunk-{window}: a window must hold more than the "
                             f"{encoder.special} special tokens")
        self.window = window
        self.name = f"chunk-{window}"

    def _window(self) -> int:
        return self.window


def stretch_table(table: Tensor, length: int) -> Tensor:
    """Position interpolation: (L, E) from (n, E); row i is the original read at
    position i n / L, linearly between its neighbours (the last row beyond the end).

    For L a multiple of n, row k L / n is the original's row k.
    """
    n = table.shape[0]
    x = torch.arange(length, dtype=torch.float64) * (n / length)
    lo = x.floor().long().clamp(max=n - 1)
    hi = (lo + 1).clamp(max=n - 1)
    w = (x - lo.double()).clamp(0.0, 1.0).to(table.dtype)[:, None]
    return (1 - w) * table[lo] + w * table[hi]


def copy_table(table: Tensor, length: int) -> Tensor:
    """Copy initialisation: (L, E) from (n, E), row i = row i mod n."""
    return table[torch.arange(length) % table.shape[0]]


@contextlib.contextmanager
def longer_table(model: nn.Module, rows: Tensor, first: int = 0) -> Iterator[None]:
    """The model's positions 0..L-1 use ``rows`` (L, E) while inside the block (the
    table's first ``first`` rows, RoBERTa's padding rows, are kept); restored on leaving."""
    base = getattr(model, "base_model", model)
    arch = architecture_of(base)
    old = None if arch is None else arch.position_table(base)
    if old is None:
        raise ValueError("model: no absolute position table to extend")
    emb = base.embeddings
    weight = torch.cat([old.weight.detach()[:first], rows.to(old.weight.dtype)])
    new = nn.Embedding(weight.shape[0], weight.shape[1], padding_idx=old.padding_idx)
    new.weight.data = weight
    buffers = {name: getattr(emb, name) for name in ("position_ids", "token_type_ids")}
    emb.position_embeddings = new
    for name, buffer in buffers.items():
        if isinstance(buffer, Tensor):
            size = weight.shape[0]
            value = torch.arange(size)[None] if name == "position_ids" else torch.zeros(1, size)
            setattr(emb, name, value.to(buffer.dtype))
    try:
        yield
    finally:
        emb.position_embeddings = old
        for name, buffer in buffers.items():
            if isinstance(buffer, Tensor):
                setattr(emb, name, buffer)


class _LongerTable(Strategy):
    """The whole document, with the position table made L rows long (:meth:`rows`).

    Inputs that fit the model's own table (the queries) read that table: a user who
    stretches or copies the table for long documents still has the original model for
    what it was trained on. (Version 1 read every input of a cell with the longer table,
    which squeezed a short query's positions under interpolation.)
    """

    version = 2

    def __init__(self, encoder: Encoder) -> None:
        super().__init__(encoder)
        if encoder.positions is None:
            raise ValueError(f"strategies: {self.name} needs a model with a position table")
        self._tables: dict[int, Tensor] = {}

    def original(self) -> Tensor:
        """The table rows positions use: (n, E)."""
        base = getattr(self.encoder.model, "base_model", self.encoder.model)
        table = architecture_of(base).position_table(base).weight.detach()
        return table[self.encoder.first : self.encoder.first + self.encoder.positions]

    def rows(self, length: int) -> Tensor:
        raise NotImplementedError

    def prepare(self, length: int) -> None:
        if not self._within(length):
            self.table(length)

    def table(self, length: int) -> Tensor:
        """The (L, E) table used for ``length`` (made once per length)."""
        if length not in self._tables:
            self._tables[length] = self.rows(length)
        return self._tables[length]

    def _embed(self, content, length):
        enc = self.encoder
        inputs = [enc.frame(ids) for ids in content]
        long = [i for i, x in enumerate(inputs) if not self._within(len(x))]
        short = [i for i, x in enumerate(inputs) if self._within(len(x))]
        if not long:
            return enc.run(inputs)
        with longer_table(enc.model, self.table(length), enc.first):
            read = enc.run([inputs[i] for i in long])
        if not short:
            return read
        out = torch.empty(len(inputs), read.shape[1], dtype=read.dtype)
        out[long] = read
        out[short] = enc.run([inputs[i] for i in short])
        return out


class Interpolate(_LongerTable):
    name = "interpolate"
    __doc__ = stretch_table.__doc__

    def rows(self, length):
        return stretch_table(self.original(), length)


class Copy(_LongerTable):
    name = "copy"
    __doc__ = copy_table.__doc__
    version = 1  # a short query read the original rows under version 1 as well

    def rows(self, length):
        return copy_table(self.original(), length)


class ContextExtension(_LongerTable):
    """The L-row table of the PyPI package ``context-extension`` (cubic spline)."""

    name = "context-extension"

    def __init__(self, encoder: Encoder) -> None:
        super().__init__(encoder)
        try:
            import context_extension  # noqa: F401
        except ImportError:
            raise ValueError(
                "strategies: context-extension needs the PyPI package context-extension "
                "(pip install context-extension)"
            ) from None
        if encoder.source is None:
            raise ValueError(
                "strategies: context-extension reads the model from a local folder; "
                "pass the model's folder"
            )

    def rows(self, length):
        import logging

        from context_extension.interpolate_embeddings import interpolate_embeddings

        level = logging.getLogger().level
        try:
            extended = interpolate_embeddings(
                self.encoder.source,
                max_seq_length=length,
                offset=self.encoder.first,
                interpolation_type="cubic",
                verbose=False,
            )
        finally:
            logging.getLogger().setLevel(level)
        auto = extended[0].auto_model
        table = auto.embeddings.position_embeddings.weight.detach().float()
        return table[self.encoder.first : self.encoder.first + length].clone()


STRATEGY_CLASSES: dict[str, type[Strategy]] = {
    cls.name: cls for cls in (Native, Truncate, Chunk, Interpolate, Copy, ContextExtension)
}


def make_strategy(name: str, encoder: Encoder) -> Strategy:
    """The strategy called ``name`` for ``encoder``.

    Raises:
        ValueError: an unknown name, or one the model cannot take.
    """
    window = chunk_window(name)
    if window is not None:
        return ChunkWindows(encoder, window)
    if name not in STRATEGY_CLASSES:
        raise ValueError(
            f"strategies: unknown strategy {name!r}; expected one of {', '.join(STRATEGY_CLASSES)}"
        )
    return STRATEGY_CLASSES[name](encoder)
