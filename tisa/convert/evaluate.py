"""How good a converted model is: fidelity to the original, STS-B zero-shot, long inputs.

* :func:`sentence_embeddings`: mean-pooled last hidden states (the pooling of
  sentence-transformers models such as all-MiniLM-L6-v2); :func:`layer_embeddings`, the
  same for every layer.
* :func:`fidelity`: cosine between the original's and the converted model's embeddings of
  the same texts.
* :func:`sts_spearman`: STS-B-style zero-shot quality, the Spearman correlation between
  the cosine similarity of two sentences' embeddings and the gold similarity.
* :func:`long_inputs`: the converted model on inputs longer than the original's position
  table: time, peak memory, and agreement with the original run on 512-token chunks.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from tisa._validate import check_int
from tisa.memory import peak_memory

__all__ = [
    "LengthPoint",
    "fidelity",
    "layer_embeddings",
    "long_inputs",
    "mean_pool",
    "sentence_embeddings",
    "sts_spearman",
]


def mean_pool(hidden: Tensor, mask: Tensor) -> Tensor:
    """Mean of ``hidden`` (B, L, D) over the tokens where ``mask`` (B, L) is 1: (B, D)."""
    m = mask.to(hidden.dtype)[..., None]
    return (hidden * m).sum(1) / m.sum(1).clamp_min(1.0)


def _base(model: nn.Module) -> nn.Module:
    return getattr(model, "base_model", model)


def sentence_embeddings(model: nn.Module, tokenizer, texts: Sequence[str], **options) -> Tensor:
    """Mean-pooled last hidden states of ``texts``: (N, D) float32.

    ``options`` are those of :func:`layer_embeddings` (``batch_size``, ``max_length``).
    """
    return _pooled(model, tokenizer, texts, every_layer=False, **options)[0]


def layer_embeddings(
    model: nn.Module,
    tokenizer,
    texts: Sequence[str],
    *,
    batch_size: int = 64,
    max_length: int = 128,
) -> Tensor:
    """Mean-pooled hidden states of every layer, the embeddings' output first:
    (layers + 1, N, D) float32, in input order.

    Texts are sorted by length into batches (less padding) and truncated to
    ``max_length`` tokens.
    """
    return _pooled(
        model, tokenizer, texts, every_layer=True, batch_size=batch_size, max_length=max_length
    )


@torch.no_grad()
def _pooled(
    model, tokenizer, texts, *, every_layer: bool, batch_size: int = 64, max_length: int = 128
) -> Tensor:
    """(K, N, D): every layer's mean-pooled states (K = layers + 1) or the last one's
    (K = 1, without keeping the other layers' states)."""
    check_int(batch_size, "batch_size")
    base = _base(model)
    was_training = base.training
    base.eval()
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    out: Tensor | None = None
    device = next(base.parameters()).device
    try:
        for s in range(0, len(order), batch_size):
            idx = order[s : s + batch_size]
            enc = tokenizer(
                [texts[i] for i in idx],
                padding=True,
                truncation=True,
                max_length=max_length,
                return_tensors="pt",
            ).to(device)
            result = base(**enc, output_hidden_states=every_layer)
            states = result.hidden_states if every_layer else (result.last_hidden_state,)
            pooled = torch.stack([mean_pool(h, enc["attention_mask"]) for h in states])
            if out is None:
                out = torch.empty(len(states), len(texts), pooled.shape[-1])
            out[:, idx] = pooled.float().cpu()
    finally:
        base.train(was_training)
    if out is None:
        raise ValueError("texts: expected at least one text, got none")
    return out


def _cosine(a: Tensor, b: Tensor) -> Tensor:
    return nn.functional.cosine_similarity(a, b, dim=-1)


def fidelity(
    original: nn.Module, converted: nn.Module, tokenizer, texts: Sequence[str], **options
) -> dict[str, float]:
    """Cosine between both models' embeddings of each text: mean, min, 5th percentile."""
    cos = _cosine(
        sentence_embeddings(original, tokenizer, texts, **options),
        sentence_embeddings(converted, tokenizer, texts, **options),
    )
    return {
        "mean": float(cos.mean()),
        "min": float(cos.min()),
        "p05": float(cos.quantile(0.05)),
        "texts": len(texts),
    }


def sts_spearman(
    model: nn.Module,
    tokenizer,
    first: Sequence[str],
    second: Sequence[str],
    gold: Sequence[float],
    **options,
) -> float:
    """Spearman correlation of cos(embedding(first), embedding(second)) with ``gold``."""
    from scipy.stats import spearmanr

    if not (len(first) == len(second) == len(gold)) or not first:
        raise ValueError(
            f"first, second, gold: expected equal non-zero lengths, got {len(first)}, "
            f"{len(second)}, {len(gold)}"
        )
    emb = sentence_embeddings(model, tokenizer, [*first, *second], **options)
    cos = _cosine(emb[: len(first)], emb[len(first) :])
    return float(spearmanr(cos.numpy(), list(gold)).statistic)


@dataclass(frozen=True)
class LengthPoint:
    """The converted model on one input length.

    Attributes:
        length: tokens (with the special tokens).
        seconds: median forward time of one input.
        peak_memory_mb: extra resident memory at the peak of one forward (None where it
            cannot be measured).
        agreement: cosine between the converted model's embedding of the whole input and
            the mean of the original's embeddings of its 512-token chunks (how close the
            long-input embedding stays to what the original says about the same text).
        finite: every output value is finite.
    """

    length: int
    seconds: float
    peak_memory_mb: float | None
    agreement: float
    finite: bool


@torch.no_grad()
def long_inputs(
    original: nn.Module,
    converted: nn.Module,
    body: Tensor,
    lengths: Sequence[int],
    *,
    first: int,
    last: int,
    chunk: int = 512,
    repeats: int = 2,
) -> list[LengthPoint]:
    """Runs ``converted`` on ``[first] body[:L - 2] [last]`` for each L in ``lengths``.

    Args:
        original: the model with its position table (run on chunks of at most ``chunk``
            tokens, each framed by ``first`` and ``last``).
        converted: the model without it (run on the whole input).
        body: (N,) token ids of real text without special tokens, N >= max(lengths).
        lengths: input lengths to try.
        first, last: the special tokens that frame an input ([CLS], [SEP]).
        chunk: the original's limit (its position-table size).
        repeats: timed forwards per length (median).
    """
    if body.dim() != 1 or body.numel() < max(lengths):
        raise ValueError(f"body: expected at least {max(lengths)} token ids, got {body.numel()}")
    check_int(chunk, "chunk", minimum=3)

    def framed(piece: Tensor) -> Tensor:
        return torch.cat([piece.new_tensor([first]), piece, piece.new_tensor([last])])[None]

    out = []
    for length in lengths:
        check_int(length, "lengths", minimum=3)
        text = body[: length - 2]
        x = framed(text)
        base = _base(converted).eval()
        result: dict[str, Tensor] = {}

        def run() -> None:
            result["h"] = base(input_ids=x).last_hidden_state

        times = []
        for _ in range(max(1, repeats)):
            start = time.perf_counter()
            run()
            times.append(time.perf_counter() - start)
        peak = peak_memory(run)
        hidden = result.pop("h")[0]
        pooled, sizes = [], []
        for s in range(0, text.numel(), chunk - 2):
            piece = framed(text[s : s + chunk - 2])
            pooled.append(_base(original).eval()(input_ids=piece).last_hidden_state[0].mean(0))
            sizes.append(piece.numel())
        w = torch.tensor(sizes, dtype=torch.float32)[:, None]
        reference = (torch.stack(pooled) * w).sum(0) / w.sum()
        out.append(
            LengthPoint(
                length=int(length),
                seconds=sorted(times)[len(times) // 2],
                peak_memory_mb=None if peak is None else peak / 2**20,
                agreement=float(_cosine(hidden.mean(0), reference)),
                finite=bool(torch.isfinite(hidden).all()),
            )
        )
    return out
