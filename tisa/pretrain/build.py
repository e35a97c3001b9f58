"""Building every pretraining model: the config of a named size (ALBERT, BERT or GPT-2)
and its position scheme (:mod:`tisa.pretrain.schemes`).

ALBERT and BERT become masked-only MLMs (:mod:`tisa.pretrain.masked_lm`); GPT-2 is the
stock ``GPT2LMHeadModel`` (:mod:`tisa.pretrain.causal_lm`), of which only the config is
chosen here. Everything except ``absolute`` is applied with :func:`tisa.hf.add_tisa`;
scoring options (``scoring_options``, e.g. ``{"learn_tail": False}``) go to the scheme's
family.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from transformers import (
    AlbertConfig,
    BertConfig,
    GPT2Config,
    GPT2LMHeadModel,
    PretrainedConfig,
    PreTrainedModel,
)

from tisa._validate import check_int
from tisa.hf import TisaSettings, add_tisa
from tisa.hf.architectures import architecture_of
from tisa.hf.settings import takes_num_kernels
from tisa.pretrain.masked_lm import MASKED_LM_CLASSES
from tisa.pretrain.schemes import POSITIONS, PRETRAIN_ARCHS, SCHEMES, SIZES, Arch, scoring_family

__all__ = ["apply_position_scheme", "build_causal_config", "build_config", "build_model"]


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

    GPT-2 (``arch="gpt2"``): see :func:`build_causal_config`.
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
    if arch not in PRETRAIN_ARCHS:
        raise ValueError(f"arch must be one of {PRETRAIN_ARCHS}, got {arch!r}")
    if size not in SIZES:
        raise ValueError(f"size must be one of {tuple(SIZES)}, got {size!r}")
    check_int(vocab_size, "vocab_size")
    check_int(max_positions, "max_positions")
    if arch == "gpt2":
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
    _, embeddings, rotary = SCHEMES[position]
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
    pad_token_id: int | None = 0,
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
        model = GPT2LMHeadModel(config)
    else:
        model = MASKED_LM_CLASSES[arch](config)
    return apply_position_scheme(
        model, position, num_kernels=num_kernels, scoring_options=scoring_options
    )


def build_causal_config(
    *,
    size: str = "small",
    vocab_size: int = 30000,
    max_positions: int = 512,
    pad_token_id: int | None = 0,
    **overrides: Any,
) -> GPT2Config:
    """GPT-2 config of a named size (hidden size, layers, heads and feed-forward width of
    :data:`tisa.pretrain.schemes.SIZES`).

    No dropout (as the ALBERT masked LMs, so the two settings differ in their objective and
    attention direction, not in regularisation); the tanh-approximated GELU of GPT-2
    (``gelu_new``) computed by the fused ``gelu_pytorch_tanh``.

    Args:
        size: one of :data:`tisa.pretrain.schemes.SIZES`.
        vocab_size: V, from the tokenizer.
        max_positions: rows of the absolute position table ``wpe`` (``n_positions``).
        pad_token_id: the tokenizer's padding id (None: inputs without padding).
        **overrides: any other config field (``bos_token_id``, ``n_layer``, ...).

    Raises:
        ValueError: unknown size, or a non-positive vocab_size / max_positions.
    """
    if size not in SIZES:
        raise ValueError(f"size must be one of {tuple(SIZES)}, got {size!r}")
    check_int(vocab_size, "vocab_size")
    check_int(max_positions, "max_positions")
    s = SIZES[size]
    params: dict[str, Any] = dict(
        vocab_size=vocab_size,
        n_embd=s.hidden_size,
        n_layer=s.num_layers,
        n_head=s.num_heads,
        n_inner=s.intermediate_size,
        n_positions=max_positions,
        activation_function="gelu_pytorch_tanh",
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        pad_token_id=pad_token_id,
        # GPT-2's own 50256 lies outside any other vocabulary: callers with a tokenizer
        # pass its ids
        bos_token_id=None,
        eos_token_id=None,
    )
    params.update(overrides)
    return GPT2Config(**params)
