"""Masked-LM models for pretraining: named sizes, position schemes, a masked-only MLM head.

The masked-LM loss only looks at the ~15% of positions that were masked, yet the stock
``AlbertForMaskedLM`` / ``BertForMaskedLM`` project *every* position onto the full
vocabulary (a (B, L, V) logit tensor, V = 30000) before the loss throws 85% of it away.
:class:`AlbertForMaskedOnlyLM` and :class:`BertForMaskedOnlyLM` gather the masked
positions (``labels != -100``) first and run the prediction head on those rows only. Their
weights, configs and ``save_pretrained`` / ``from_pretrained`` are those of the stock
classes (they add no parameters), so a saved model reloads with
``AutoModelForMaskedLM`` and the loss is the same number (see the tests).

Position schemes (``position``):

``absolute``       stock learned absolute position embeddings.
``none``           no position information at all (embeddings removed, no bias).
``tisa``           the paper's RBF scoring functions, position embeddings removed.
``absolute+tisa``  RBF scoring functions alongside the embeddings (the paper's setting).
``alibi``, ``t5``, ``kerple_log``  those scoring families, embeddings removed.
``rbf_linear``, ``rbf_log``, ``rbf_logdist``  RBF kernels plus a monotone tail (the
                   length-extrapolation families of :mod:`tisa.scoring`), embeddings removed.
``alibi_learned``  ALiBi with learned slopes (ALiBi's at the start), embeddings removed.
``fire``           FIRE (Li et al., 2024), embeddings removed: the paper's query-position
                   normaliser in a causal LM, the translation-invariant variant
                   (``normalizer="length"``) in a masked LM, unless ``normalizer`` is given.
``rope``           rotary position embeddings on queries and keys, embeddings removed.

Everything except ``absolute`` is applied with :func:`tisa.hf.add_tisa`; scoring options
(``scoring_options``, e.g. ``{"learn_tail": False}``) go to the scheme's family.

``arch="gpt2"`` builds a GPT-2-style decoder for causal language modelling instead
(:mod:`tisa.train.causal_lm`); sizes and position schemes are the same.

Letters: B batch, L sequence length, D hidden size, E embedding size, V vocabulary,
N number of masked positions in the batch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from transformers import (
    AlbertConfig,
    AlbertForMaskedLM,
    BertConfig,
    BertForMaskedLM,
    PretrainedConfig,
    PreTrainedModel,
)
from transformers.modeling_outputs import MaskedLMOutput

from tisa._validate import check_int

__all__ = [
    "ARCHITECTURES",
    "POSITIONS",
    "SIZES",
    "AlbertForMaskedOnlyLM",
    "BertForMaskedOnlyLM",
    "ModelSize",
    "apply_position_scheme",
    "build_config",
    "build_model",
    "load_masked_lm",
    "masked_lm_forward",
    "mlm_parts",
    "scoring_family",
]

Arch = Literal["albert", "bert", "gpt2"]

#: Masked-LM encoders, and GPT-2 (a causal decoder, :mod:`tisa.train.causal_lm`).
ARCHITECTURES: tuple[str, ...] = ("albert", "bert", "gpt2")
POSITIONS: tuple[str, ...] = (
    "absolute",
    "none",
    "tisa",
    "absolute+tisa",
    "alibi",
    "t5",
    "kerple_log",
    "rbf_linear",
    "rbf_log",
    "rbf_logdist",
    "alibi_learned",
    "fire",
    "rope",
)

#: position scheme -> (scoring family or None, position embeddings, rotary)
_SCHEMES: dict[str, tuple[str | None, str, bool]] = {
    "none": (None, "remove", False),
    "tisa": ("rbf", "remove", False),
    "absolute+tisa": ("rbf", "keep", False),
    "alibi": ("alibi", "remove", False),
    "t5": ("t5", "remove", False),
    "kerple_log": ("kerple_log", "remove", False),
    "rbf_linear": ("rbf_linear", "remove", False),
    "rbf_log": ("rbf_log", "remove", False),
    "rbf_logdist": ("rbf_logdist", "remove", False),
    "alibi_learned": ("alibi_learned", "remove", False),
    "fire": ("fire", "remove", False),
    "rope": (None, "remove", True),
}


def scoring_family(position: str) -> str | None:
    """The scoring family a position scheme installs (None: no scoring function).

    Raises:
        ValueError: unknown ``position``.
    """
    if position not in POSITIONS:
        raise ValueError(f"position must be one of {POSITIONS}, got {position!r}")
    return None if position == "absolute" else _SCHEMES[position][0]


@dataclass(frozen=True)
class ModelSize:
    """Shape of a named model size.

    Attributes:
        hidden_size: D.
        num_layers: transformer layers (ALBERT shares their weights).
        num_heads: attention heads H.
        intermediate_size: feed-forward width.
        embedding_size: E, ALBERT's factorised embedding size (BERT uses D).
    """

    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    embedding_size: int


SIZES: dict[str, ModelSize] = {
    "tiny": ModelSize(32, 2, 2, 64, 16),
    "small": ModelSize(256, 4, 4, 1024, 128),
    "base": ModelSize(768, 12, 12, 3072, 128),  # ALBERT-base (BERT-base with E = D)
}


class _MaskedOnlyMixin:
    """forward() that runs the vocabulary projection on masked positions only."""

    # The loss is a mean over this micro-batch's masked tokens; the Trainer scales it for
    # gradient accumulation itself (no ``num_items_in_batch`` handling here).
    accepts_loss_kwargs = False

    def forward(
        self,
        input_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        position_ids: Tensor | None = None,
        inputs_embeds: Tensor | None = None,
        labels: Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
    ) -> MaskedLMOutput:
        """Masked-LM forward pass.

        Args:
            input_ids: (B, L) token ids (or ``inputs_embeds`` (B, L, E)).
            attention_mask: optional (B, L), 1 for real tokens.
            token_type_ids: optional (B, L).
            position_ids: optional (B, L) or (1, L).
            inputs_embeds: optional (B, L, E) instead of ``input_ids``.
            labels: optional (B, L) target ids, -100 where no loss is computed.
            output_attentions: also return attention weights.
            output_hidden_states: also return hidden states.

        Returns:
            ``MaskedLMOutput``. With ``labels``: ``loss`` is the mean cross-entropy over
            the N masked positions (exactly the stock model's loss) and ``logits`` is
            (N, V), one row per masked position in row-major (batch, position) order,
            i.e. aligned with ``labels[labels != -100]``. Without ``labels``: ``logits``
            is the full (B, L, V) tensor, as in the stock model.
        """
        return masked_lm_forward(
            self,
            labels=labels,
            input_ids=input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
        )


class AlbertForMaskedOnlyLM(_MaskedOnlyMixin, AlbertForMaskedLM):
    """``AlbertForMaskedLM`` whose loss projects only the masked positions onto V."""


class BertForMaskedOnlyLM(_MaskedOnlyMixin, BertForMaskedLM):
    """``BertForMaskedLM`` whose loss projects only the masked positions onto V."""


_CLASSES: dict[str, type[PreTrainedModel]] = {
    "albert": AlbertForMaskedOnlyLM,
    "bert": BertForMaskedOnlyLM,
}


def mlm_parts(model: nn.Module) -> tuple[nn.Module, nn.Module] | None:
    """(encoder, MLM head) of an ALBERT- or BERT-style masked LM, or None if not found.

    The head maps (..., D) hidden states to (..., V) logits: ``model.predictions`` for
    ALBERT, ``model.cls`` for BERT (and models derived from them).
    """
    base = getattr(model, "base_model", None)
    for name in ("predictions", "cls"):
        head = getattr(model, name, None)
        if isinstance(head, nn.Module) and base is not None and base is not model:
            return base, head
    return None


def masked_lm_forward(
    model: nn.Module, *, labels: Tensor | None = None, **inputs: Any
) -> MaskedLMOutput:
    """Masked-LM loss of any ALBERT/BERT-style model, projecting masked positions only.

    Works on the stock classes too (used to evaluate models reloaded with
    ``AutoModelForMaskedLM``). Models without a recognisable head fall back to their own
    forward.

    Args:
        model: an ALBERT- or BERT-style masked LM.
        labels: (B, L) targets with -100 at unmasked positions, or None.
        **inputs: encoder inputs (``input_ids`` (B, L), ``attention_mask``, ...).

    Returns:
        ``MaskedLMOutput`` as described in :meth:`_MaskedOnlyMixin.forward`. When no
        position is masked the loss is 0 (connected to the graph), not NaN.
    """
    inputs = {k: v for k, v in inputs.items() if v is not None}
    parts = mlm_parts(model)
    if parts is None:  # unknown layout: the model's own (full-vocabulary) forward
        return model(labels=labels, **inputs)
    encoder, head = parts
    out = encoder(**inputs, return_dict=True)
    hidden = out.last_hidden_state  # (B, L, D)
    if labels is None:
        logits = head(hidden)  # (B, L, V)
        return MaskedLMOutput(
            logits=logits, hidden_states=out.hidden_states, attentions=out.attentions
        )
    selected = (labels != -100).reshape(-1)  # (B*L,)
    index = selected.nonzero().squeeze(-1)  # (N,)
    rows = hidden.reshape(-1, hidden.shape[-1]).index_select(0, index)  # (N, D)
    targets = labels.reshape(-1).index_select(0, index)  # (N,)
    logits = head(rows)  # (N, V)
    if index.numel() == 0:
        loss = logits.sum() * 0.0
    else:
        loss = F.cross_entropy(logits.float(), targets)
    return MaskedLMOutput(
        loss=loss, logits=logits, hidden_states=out.hidden_states, attentions=out.attentions
    )


def build_config(
    *,
    arch: Arch = "albert",
    size: str = "small",
    vocab_size: int = 30000,
    max_positions: int = 512,
    pad_token_id: int = 0,
    **overrides: Any,
) -> PretrainedConfig:
    """Config of a named size.

    GPT-2 (``arch="gpt2"``): see :func:`tisa.train.causal_lm.build_causal_config`.
    ALBERT follows albert-base-v2 (no dropout; its tanh-approximated GELU ``gelu_new`` is
    computed by the fused ``gelu_pytorch_tanh``, the same function to float rounding and
    a large part of the training time on CPUs); BERT follows bert-base (gelu, dropout
    0.1, embedding size = hidden size).

    Args:
        arch: ``"albert"``, ``"bert"`` or ``"gpt2"``.
        size: one of :data:`SIZES`.
        vocab_size: V, from the tokenizer.
        max_positions: rows of the absolute position table (also the longest sequence an
            ``absolute`` model can take).
        pad_token_id: the tokenizer's padding id.
        **overrides: any other config field.

    Raises:
        ValueError: unknown arch or size, or a non-positive vocab_size / max_positions.
    """
    if arch not in ARCHITECTURES:
        raise ValueError(f"arch must be one of {ARCHITECTURES}, got {arch!r}")
    if size not in SIZES:
        raise ValueError(f"size must be one of {tuple(SIZES)}, got {size!r}")
    check_int(vocab_size, "vocab_size")
    check_int(max_positions, "max_positions")
    if arch == "gpt2":
        from tisa.train.causal_lm import build_causal_config

        return build_causal_config(
            size=size,
            vocab_size=vocab_size,
            max_positions=max_positions,
            pad_token_id=pad_token_id,
            **overrides,
        )
    s = SIZES[size]
    common = dict(
        vocab_size=vocab_size,
        hidden_size=s.hidden_size,
        num_hidden_layers=s.num_layers,
        num_attention_heads=s.num_heads,
        intermediate_size=s.intermediate_size,
        max_position_embeddings=max_positions,
        type_vocab_size=2,
        pad_token_id=pad_token_id,
    )
    if arch == "albert":
        params = dict(
            common,
            embedding_size=s.embedding_size,
            hidden_act="gelu_pytorch_tanh",
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
            classifier_dropout_prob=0.1,
        )
        params.update(overrides)
        return AlbertConfig(**params)
    params = dict(common, hidden_act="gelu")
    params.update(overrides)
    return BertConfig(**params)


def apply_position_scheme(
    model: PreTrainedModel,
    position: str,
    *,
    num_kernels: int = 5,
    scoring_options: Mapping[str, Any] | None = None,
):
    """Turns a freshly built absolute-position model into ``position`` (in place).

    Args:
        model: an ALBERT/BERT masked LM or a GPT-2 causal LM with absolute position
            embeddings.
        position: one of :data:`POSITIONS`.
        num_kernels: kernels per head, for every family built from kernels (``tisa``,
            ``absolute+tisa``, ``rbf_linear``, ``rbf_log``, ``rbf_logdist``).
        scoring_options: further options of the scheme's scoring family (e.g.
            ``{"learn_tail": False}``). T5 buckets are one-sided in a causal model unless
            ``bidirectional`` is given; FIRE takes the paper's query normaliser in a causal
            model and the translation-invariant one otherwise, unless ``normalizer`` is
            given.

    Returns:
        The same model.

    Raises:
        ValueError: unknown ``position``, or options the family does not take (or a
            scheme without a scoring family given options).
    """
    scoring = scoring_family(position)
    options = dict(scoring_options or {})
    if scoring is None:
        if options:
            raise ValueError(
                f"scoring_options {sorted(options)} were given, but position={position!r} "
                "has no scoring function"
            )
        if position == "absolute":
            return model
    from tisa.hf import TisaSettings, add_tisa
    from tisa.hf.architectures import architecture_of
    from tisa.hf.settings import takes_num_kernels

    _, embeddings, rotary = _SCHEMES[position]
    arch = architecture_of(model)
    if scoring == "t5" and arch is not None and arch.causal:
        options.setdefault("bidirectional", False)  # a decoder never sees k > 0
    if scoring == "fire":  # the paper's normaliser is the causal query position
        options.setdefault("normalizer", "query" if arch is not None and arch.causal else "length")
    settings = TisaSettings(
        scoring=scoring,
        num_kernels=num_kernels if takes_num_kernels(scoring) else None,
        position_embeddings=embeddings,
        rotary=rotary,
        scoring_options=options,
    )
    # the scorers start from their families' own initialisation (the paper's, for RBF)
    return add_tisa(model, settings, start="paper")


def build_model(
    *,
    arch: Arch = "albert",
    size: str = "small",
    position: str = "absolute",
    vocab_size: int = 30000,
    max_positions: int = 512,
    pad_token_id: int = 0,
    num_kernels: int = 5,
    scoring_options: Mapping[str, Any] | None = None,
    attn_implementation: str | None = "sdpa",
    seed: int | None = None,
    **overrides: Any,
) -> PreTrainedModel:
    """A freshly initialised masked-only MLM (or, with ``arch="gpt2"``, a causal LM) of a
    named size with a position scheme.

    Args:
        arch, size, vocab_size, max_positions, pad_token_id, **overrides: see
            :func:`build_config`.
        position: one of :data:`POSITIONS`.
        num_kernels, scoring_options: see :func:`apply_position_scheme`.
        attn_implementation: transformers attention implementation of the stock layers
            (``"sdpa"`` or ``"eager"``); TISA layers use their own.
        seed: seeds the initialisation when given.

    Raises:
        ValueError: unknown arch, size or position.
    """
    if position not in POSITIONS:
        raise ValueError(f"position must be one of {POSITIONS}, got {position!r}")
    config = build_config(
        arch=arch,
        size=size,
        vocab_size=vocab_size,
        max_positions=max_positions,
        pad_token_id=pad_token_id,
        **overrides,
    )
    if attn_implementation is not None:
        config._attn_implementation = attn_implementation
    if seed is not None:
        torch.manual_seed(seed)
    if arch == "gpt2":
        from transformers import GPT2LMHeadModel

        model = GPT2LMHeadModel(config)
    else:
        model = _CLASSES[arch](config)
    return apply_position_scheme(
        model, position, num_kernels=num_kernels, scoring_options=scoring_options
    )


def load_masked_lm(path: str, *, device: str | torch.device = "cpu") -> PreTrainedModel:
    """Loads a saved masked LM (stock or TISA) for evaluation, in eval mode.

    TISA models load through the Auto classes (:mod:`tisa.hf` registers them). Use
    :func:`masked_lm_forward` on the result to score masked positions only.

    Raises:
        ValueError: ``path`` holds no loadable model.
    """
    from transformers import AutoModelForMaskedLM

    import tisa.hf  # noqa: F401  (registers TISA models with the Auto classes)
    from tisa.analysis.loading import load_pretrained

    model = load_pretrained(AutoModelForMaskedLM, str(path))
    return model.to(device).eval()
