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

For each averaged matrix we report TI (:func:`tisa.analysis.metrics.translation_invariance`,
on the j <= i triangle for causal models), locality and symmetry (Chen et al., 2023), and
for each layer the head-averaged attention along each diagonal (its offset profile).
The model is switched to eager attention when needed (other implementations do not
return attention weights).

Letters: N layers, H heads, L probe length, B batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from tisa._validate import check_int
from tisa.analysis import metrics

__all__ = [
    "ProbeResult",
    "attention_probe",
    "mean_attention",
    "repeated_token_ids",
    "sentence_ids",
    "summarize_attention",
]


@dataclass(frozen=True)
class ProbeResult:
    """Mean attention of one probe and its metrics.

    Attributes:
        name: ``"repeated"`` or ``"sentences"``.
        description: what the input was, in words.
        attention: (N, H, L, L) attention averaged over the probe's sequences.
        ti: (N, H) translation invariance of each averaged matrix.
        locality: (N, H) locality (Chen et al., 2023).
        symmetry: (N, H) mirror symmetry (``method="mass"``).
        causal: whether TI was measured on the j <= i triangle.
        profile: per layer, the attention averaged over heads along each diagonal
            (``mean`` (N, 2L-1) by offset).
    """

    name: str
    description: str
    attention: Tensor
    ti: Tensor
    locality: Tensor
    symmetry: Tensor
    causal: bool
    profile: metrics.OffsetProfile

    def summary(self) -> dict[str, Any]:
        """Plain-data metrics (no attention matrices)."""
        return {
            "description": self.description,
            "length": self.attention.shape[-1],
            "causal": self.causal,
            "ti": self.ti.tolist(),
            "ti_mean": float(self.ti.mean()),
            "ti_per_layer": self.ti.mean(-1).tolist(),
            "locality": self.locality.tolist(),
            "locality_mean": float(self.locality.mean()),
            "symmetry": self.symmetry.tolist(),
            "symmetry_mean": float(self.symmetry.mean()),
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
    specials = tokenizer.num_special_tokens_to_add(pair=False)
    chunk = length - specials
    if chunk < 1:
        raise ValueError(f"length must exceed the {specials} special tokens, got {length}")
    need = chunk * num_sequences
    stream: list[int] = []
    sentences = list(texts) if texts is not None else _ptb_validation()
    step = 64
    for start in range(0, len(sentences), step):
        batch = tokenizer(sentences[start : start + step], add_special_tokens=False)
        for ids in batch["input_ids"]:
            stream.extend(ids)
        if len(stream) >= need:
            break
    if len(stream) < need:
        raise ValueError(
            f"texts hold {len(stream)} tokens; {num_sequences} sequences of length {length} "
            f"need {need}"
        )
    prefix, suffix = _special_template(tokenizer)
    if len(prefix) + len(suffix) != specials:
        raise ValueError(f"tokenizer: cannot place its {specials} special tokens around a text")
    rows = [prefix + stream[i * chunk : (i + 1) * chunk] + suffix for i in range(num_sequences)]
    return torch.tensor(rows, dtype=torch.long)


def _ptb_validation(limit: int = 2000) -> list[str]:
    from tisa.data.corpus import ptb_lines

    return ptb_lines("validation", unk=None)[:limit]


def _special_template(tokenizer: Any) -> tuple[list[int], list[int]]:
    """Special token ids the tokenizer puts before and after a single text."""
    probe = "hello world"
    inner = tokenizer(probe, add_special_tokens=False)["input_ids"]
    full = tokenizer(probe, add_special_tokens=True)["input_ids"]
    for start in range(len(full) - len(inner) + 1):
        if full[start : start + len(inner)] == inner:
            return list(full[:start]), list(full[start + len(inner) :])
    raise ValueError("tokenizer: cannot find where it places the text among its special tokens")


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
    """TI, locality and symmetry of (..., L, L) attention matrices: each (...)."""
    return {
        "ti": metrics.translation_invariance(attention, causal=causal).float(),
        "locality": metrics.locality(attention).float(),
        "symmetry": metrics.symmetry(attention).float(),
    }


def attention_probe(
    model: nn.Module,
    tokenizer: Any,
    *,
    length: int = 128,
    num_sequences: int = 8,
    texts: Sequence[str] | None = None,
    causal: bool | None = None,
    batch_size: int = 8,
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
        progress: show progress bars.
    """
    from tisa.analysis.extract import has_absolute_positions, is_causal, num_positions

    _check_length(length)
    if has_absolute_positions(model) and length > num_positions(model):
        raise ValueError(
            f"length must be <= the model's {num_positions(model)} positions, got {length}"
        )
    if causal is None:
        causal = is_causal(model)
    repeated, token = repeated_token_ids(tokenizer, length)
    real = sentence_ids(tokenizer, length, num_sequences, texts)
    source = "given texts" if texts is not None else "Penn Treebank validation sentences"
    inputs = {
        "repeated": (repeated, f"the token {token!r} repeated {length} times"),
        "sentences": (real, f"{num_sequences} sequences of {length} tokens of {source}"),
    }
    results = {}
    for name, (ids, description) in inputs.items():
        att = mean_attention(model, ids, batch_size=batch_size, progress=progress)
        stats = summarize_attention(att, causal=causal)
        results[name] = ProbeResult(
            name=name,
            description=description,
            attention=att,
            ti=stats["ti"],
            locality=stats["locality"],
            symmetry=stats["symmetry"],
            causal=causal,
            profile=metrics.offset_profile(att.mean(1)),  # (N, L, L): per layer
        )
    return results
