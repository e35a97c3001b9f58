"""Attention probes: what every layer and head attends to when only position varies.

Two probes, both averaged into one (L, L) attention matrix per layer and head:

``"repeated"``
    One sequence of a single token repeated L times (the model's mask token, or "the"
    for models without one) and no special tokens: every position carries the same
    content, so any structure in the attention comes from position alone.
``"sentences"``
    Real text: sentences of the Penn Treebank validation split
    (:func:`tisa.data.corpus.ptb_lines`, ``<unk>`` markers dropped), tokenised,
    concatenated and cut into ``num_sequences`` chunks that fill L tokens exactly with the
    tokenizer's special tokens around them (``[CLS] ... [SEP]`` for BERT). Averaging over
    different texts washes out content, so what remains is mostly positional.

For each averaged matrix we report TI (:func:`tisa.metrics.translation_invariance`,
on the j <= i triangle for causal models), its off-diagonal version, locality and
symmetry (Chen et al., 2023), and for each layer the head-averaged attention along each
diagonal (its offset profile). The model is switched to eager attention when needed
(other implementations do not return attention weights).

Where the diagonal is special
    A token's attention to itself, A[i, i], can be large whatever the order of the
    position table: query and key come from the same input vector, so a table without
    order still gives a diagonal that stands out from the rest of each row, and that
    diagonal alone already counts as translation invariant. The off-diagonal TI
    (``ti_offdiag``, entries j != i only) is therefore the probe's figure of translation
    invariance; TI with the diagonal is kept for comparison. Locality keeps its
    published definition (it weighs A[i, i] most, by design) and symmetry never looks at
    d = 0; both get nulls.

Null baselines (:func:`probe_nulls`)
    The same probe inputs run through the model with the rows of positions 0..L-1
    replaced (:func:`tisa.analysis.extract.swapped_positions`) by each null table of
    :mod:`tisa.analysis.nulls`: random directions with the rows' norms, or the rows in
    random order. Every metric, averaged over layers and heads and per layer, is then
    reported next to its null mean, standard deviation and z-score.

Letters: N layers, H heads, L probe length, B batch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from tisa import metrics
from tisa._validate import check_int
from tisa.analysis.extract import (
    has_absolute_positions,
    is_causal,
    num_positions,
    position_embeddings,
    swapped_positions,
)
from tisa.analysis.nulls import NullBaselines, compare_many_to_nulls
from tisa.data.corpus import ptb_lines
from tisa.data.text_blocks import text_blocks

__all__ = [
    "PROBE_METRICS",
    "ProbeNulls",
    "ProbeResult",
    "attention_probe",
    "mean_attention",
    "probe_inputs",
    "probe_nulls",
    "repeated_token_ids",
    "sentence_ids",
    "summarize_attention",
]

#: The metrics of each averaged attention matrix (:func:`summarize_attention`).
PROBE_METRICS: tuple[str, ...] = ("ti", "ti_offdiag", "locality", "symmetry")


@dataclass(frozen=True)
class ProbeNulls:
    """One probe's metrics next to the same probe with null position tables.

    Attributes:
        mean: metric (:data:`PROBE_METRICS`) -> NullBaselines of its mean over layers
            and heads.
        per_layer: metric -> one NullBaselines per layer (mean over that layer's heads).
        draws: null tables per null.
        seed: generator seed of the draws.
    """

    mean: Mapping[str, NullBaselines]
    per_layer: Mapping[str, tuple[NullBaselines, ...]]
    draws: int
    seed: int

    def to_dict(self) -> dict[str, Any]:
        """Plain data (no individual draws)."""
        return {
            "draws": self.draws,
            "seed": self.seed,
            "mean": {k: v.summary() for k, v in self.mean.items()},
            "per_layer": {k: [b.summary() for b in v] for k, v in self.per_layer.items()},
        }


@dataclass(frozen=True)
class ProbeResult:
    """Mean attention of one probe and its metrics.

    Attributes:
        name: ``"repeated"`` or ``"sentences"``.
        description: what the input was, in words.
        attention: (N, H, L, L) attention averaged over the probe's sequences.
        ti: (N, H) translation invariance of each averaged matrix.
        ti_offdiag: (N, H) the same over the entries j != i (module docstring: the
            probe's figure of translation invariance).
        locality: (N, H) locality (Chen et al., 2023).
        symmetry: (N, H) mirror symmetry (``method="mass"``).
        causal: whether TI was measured on the j <= i triangle.
        profile: per layer, the attention averaged over heads along each diagonal
            (``mean`` (N, 2L-1) by offset).
        nulls: the metrics with null position tables (None when not computed).
    """

    name: str
    description: str
    attention: Tensor
    ti: Tensor
    ti_offdiag: Tensor
    locality: Tensor
    symmetry: Tensor
    causal: bool
    profile: metrics.OffsetProfile
    nulls: ProbeNulls | None = None

    def summary(self) -> dict[str, Any]:
        """Plain-data metrics (no attention matrices)."""
        return {
            "description": self.description,
            "length": self.attention.shape[-1],
            "causal": self.causal,
            "ti": self.ti.tolist(),
            "ti_mean": float(self.ti.mean()),
            "ti_per_layer": self.ti.mean(-1).tolist(),
            "ti_offdiag": self.ti_offdiag.tolist(),
            "ti_offdiag_mean": float(self.ti_offdiag.mean()),
            "ti_offdiag_per_layer": self.ti_offdiag.mean(-1).tolist(),
            "locality": self.locality.tolist(),
            "locality_mean": float(self.locality.mean()),
            "symmetry": self.symmetry.tolist(),
            "symmetry_mean": float(self.symmetry.mean()),
            "nulls": None if self.nulls is None else self.nulls.to_dict(),
        }


def _check_length(length: int, name: str = "length") -> int:
    return check_int(length, name, minimum=2)


def repeated_token_ids(tokenizer: Any, length: int) -> tuple[Tensor, str]:
    """(1, L) ids of one token repeated L times, and that token as text.

    The mask token when the tokenizer has one, otherwise the first token of " the".
    """
    _check_length(length)
    token_id = getattr(tokenizer, "mask_token_id", None)
    if token_id is None:
        ids = tokenizer(" the", add_special_tokens=False)["input_ids"]
        if not ids:
            raise ValueError("tokenizer: cannot find a token to repeat (no mask token, no 'the')")
        token_id = ids[0]
    text = tokenizer.convert_ids_to_tokens(int(token_id))
    return torch.full((1, length), int(token_id), dtype=torch.long), str(text)


def sentence_ids(
    tokenizer: Any, length: int, num_sequences: int, texts: Sequence[str] | None = None
) -> Tensor:
    """(num_sequences, L) ids of real text packed to exactly L tokens per sequence.

    Texts are tokenised without special tokens, concatenated in order, cut into chunks of
    ``L - tokenizer.num_special_tokens_to_add()`` tokens and wrapped with the special
    tokens (``[CLS] chunk [SEP]`` for BERT; nothing for GPT-2).

    Args:
        tokenizer: a Hugging Face tokenizer.
        length: L.
        num_sequences: number of sequences (>= 1).
        texts: sentences to use; default the first 2000 Penn Treebank validation
            sentences (:func:`tisa.data.corpus.ptb_lines`, ``<unk>`` dropped).

    Raises:
        ValueError: too little text for the requested sequences.
    """
    _check_length(length)
    check_int(num_sequences, "num_sequences")
    sentences = list(texts) if texts is not None else _ptb_validation()
    return text_blocks(tokenizer, sentences, length=length, count=num_sequences)


def _ptb_validation(limit: int = 2000) -> list[str]:
    return ptb_lines("validation", unk=None)[:limit]


_FUSED = ("sdpa", "flash_attention_2", "flash_attention_3", "flex_attention")


def _ensure_eager(model: nn.Module) -> None:
    """Switches stock fused attention to eager, which returns attention weights.

    Custom implementations (TISA's) are left alone: switching would drop their bias, and
    they return weights themselves when asked.
    """
    config = getattr(model, "config", None)
    if getattr(config, "_attn_implementation", None) not in _FUSED:
        return
    try:
        model.set_attn_implementation("eager")
    except (ValueError, AttributeError, NotImplementedError):
        pass  # mean_attention reports a model that returns no weights


@torch.no_grad()
def mean_attention(
    model: nn.Module, input_ids: Tensor, *, batch_size: int = 8, progress: bool = False
) -> Tensor:
    """Attention weights of every layer and head averaged over sequences: (N, H, L, L).

    Args:
        model: a Hugging Face model in eval mode.
        input_ids: (B, L) token ids (no padding: all positions are attended).
        batch_size: sequences per forward pass.
        progress: show a progress bar.

    Raises:
        ValueError: the model does not return attention weights.
    """
    from tqdm.auto import tqdm

    if input_ids.dim() != 2 or input_ids.shape[0] < 1:
        raise ValueError(f"input_ids must have shape (B, L), B >= 1, got {tuple(input_ids.shape)}")
    _ensure_eager(model)
    total: Tensor | None = None
    starts = range(0, input_ids.shape[0], batch_size)
    for start in tqdm(starts, desc="attention", disable=not progress, leave=False):
        ids = input_ids[start : start + batch_size]
        out = model(input_ids=ids, attention_mask=torch.ones_like(ids), output_attentions=True)
        attentions = getattr(out, "attentions", None)
        if not attentions or any(a is None for a in attentions):
            raise ValueError(
                f"{type(model).__name__} returned no attention weights; load it with "
                "attn_implementation='eager'"
            )
        batch_sum = torch.stack([a.float().sum(0) for a in attentions])  # (N, H, L, L)
        total = batch_sum if total is None else total + batch_sum
    return total / input_ids.shape[0]  # type: ignore[operator]


def summarize_attention(attention: Tensor, *, causal: bool = False) -> dict[str, Tensor]:
    """The :data:`PROBE_METRICS` of (..., L, L) attention matrices: each (...).

    ``ti`` and ``ti_offdiag`` (j != i only) are measured on the j <= i triangle with
    ``causal``.
    """
    return {
        "ti": metrics.translation_invariance(attention, causal=causal).float(),
        "ti_offdiag": metrics.translation_invariance(
            attention, causal=causal, exclude_diagonal=True
        ).float(),
        "locality": metrics.locality(attention).float(),
        "symmetry": metrics.symmetry(attention).float(),
    }


def probe_inputs(
    tokenizer: Any, *, length: int, num_sequences: int, texts: Sequence[str] | None = None
) -> dict[str, tuple[Tensor, str]]:
    """The inputs of both probes: {"repeated": (ids (1, L), text), "sentences": (ids
    (num_sequences, L), text)}, each with a description in words."""
    repeated, token = repeated_token_ids(tokenizer, length)
    real = sentence_ids(tokenizer, length, num_sequences, texts)
    source = "given texts" if texts is not None else "Penn Treebank validation sentences"
    return {
        "repeated": (repeated, f"the token {token!r} repeated {length} times"),
        "sentences": (real, f"{num_sequences} sequences of {length} tokens of {source}"),
    }


def probe_nulls(
    model: nn.Module,
    inputs: Mapping[str, Tensor],
    *,
    causal: bool = False,
    draws: int = 8,
    seed: int = 0,
    batch_size: int = 8,
    progress: bool = False,
) -> dict[str, ProbeNulls]:
    """Every probe's metrics with null tables at positions 0..L-1 (module docstring).

    Each null table (random directions with the norms of the model's rows 0..L-1, or
    those rows in random order) is swapped into the model's position embeddings and
    every probe input is run again; the model's own table is run the same way for the
    observed values. Costs ``2 * draws + 1`` forward passes of every input.

    Args:
        model: a Hugging Face model with absolute position embeddings, in eval mode.
        inputs: probe name -> (B, L) token ids, all of the same length L.
        causal: measure TI on the j <= i triangle.
        draws: null tables per null (>= 2).
        seed: generator seed (>= 0).
        batch_size: sequences per forward pass.
        progress: show a progress bar over the forward passes.

    Returns:
        probe name -> :class:`ProbeNulls`.

    Raises:
        ValueError: no inputs, inputs of different lengths, or a model without an
            absolute position table.
    """
    from tqdm.auto import tqdm

    n = check_int(draws, "draws", minimum=2)
    check_int(seed, "seed", minimum=0)
    if not inputs:
        raise ValueError("inputs must name at least one probe input")
    lengths = {int(ids.shape[-1]) for ids in inputs.values()}
    if len(lengths) != 1:
        raise ValueError(f"inputs must all have the same length L, got lengths {sorted(lengths)}")
    (length,) = lengths
    table = position_embeddings(model, length)  # (L, E): the rows the probes use
    bar = tqdm(total=2 * n + 1, desc="probe nulls", disable=not progress, leave=False)

    def statistics(rows: Tensor) -> dict[str, float]:
        out: dict[str, float] = {}
        with swapped_positions(model, rows):
            for name, ids in inputs.items():
                att = mean_attention(model, ids, batch_size=batch_size)
                for metric, values in summarize_attention(att, causal=causal).items():
                    out[f"{name}/{metric}"] = float(values.mean())
                    for layer, v in enumerate(values.mean(-1).tolist()):
                        out[f"{name}/{metric}/{layer}"] = v
        bar.update(1)
        return out

    try:
        found = compare_many_to_nulls(table, statistics, draws=n, seed=seed)
    finally:
        bar.close()
    results = {}
    for name in inputs:
        per_layer = {}
        for metric in PROBE_METRICS:
            prefix = f"{name}/{metric}/"
            keys = sorted(
                (k for k in found if k.startswith(prefix)), key=lambda k: int(k[len(prefix) :])
            )
            per_layer[metric] = tuple(found[k] for k in keys)
        results[name] = ProbeNulls(
            mean={m: found[f"{name}/{m}"] for m in PROBE_METRICS},
            per_layer=per_layer,
            draws=n,
            seed=int(seed),
        )
    return results


def attention_probe(
    model: nn.Module,
    tokenizer: Any,
    *,
    length: int = 128,
    num_sequences: int = 8,
    texts: Sequence[str] | None = None,
    causal: bool | None = None,
    batch_size: int = 8,
    null_draws: int = 0,
    null_seed: int = 0,
    progress: bool = False,
) -> dict[str, ProbeResult]:
    """Runs both probes: {"repeated": ProbeResult, "sentences": ProbeResult}.

    Args:
        model: a Hugging Face model (switched to eager attention if needed).
        tokenizer: its tokenizer.
        length: probe length L (at most the model's number of positions).
        num_sequences: real-text sequences to average over.
        texts: sentences for the real-text probe (default: Penn Treebank validation).
        causal: measure TI on j <= i only; default: :func:`~tisa.analysis.extract.is_causal`.
        batch_size: sequences per forward pass.
        null_draws: null tables per null for :func:`probe_nulls` (0: no nulls; else
            >= 2). Models without an absolute position table get none.
        null_seed: generator seed of the null tables.
        progress: show progress bars.
    """
    _check_length(length)
    draws = check_int(null_draws, "null_draws", minimum=0)
    if draws == 1:
        raise ValueError("null_draws must be 0 (no nulls) or >= 2, got 1")
    check_int(null_seed, "null_seed", minimum=0)
    absolute = has_absolute_positions(model)
    if absolute and length > num_positions(model):
        raise ValueError(
            f"length must be <= the model's {num_positions(model)} positions, got {length}"
        )
    if causal is None:
        causal = is_causal(model)
    inputs = probe_inputs(tokenizer, length=length, num_sequences=num_sequences, texts=texts)
    found = None
    if draws and absolute:
        found = probe_nulls(
            model,
            {name: ids for name, (ids, _) in inputs.items()},
            causal=causal,
            draws=draws,
            seed=null_seed,
            batch_size=batch_size,
            progress=progress,
        )
    results = {}
    for name, (ids, description) in inputs.items():
        att = mean_attention(model, ids, batch_size=batch_size, progress=progress)
        stats = summarize_attention(att, causal=causal)
        results[name] = ProbeResult(
            name=name,
            description=description,
            attention=att,
            ti=stats["ti"],
            ti_offdiag=stats["ti_offdiag"],
            locality=stats["locality"],
            symmetry=stats["symmetry"],
            causal=causal,
            profile=metrics.offset_profile(att.mean(1)),  # (N, L, L): per layer
            nulls=None if found is None else found[name],
        )
    return results
