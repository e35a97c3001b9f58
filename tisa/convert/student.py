"""The converted model before distillation: the original without its position table, with
RBF scoring functions fitted to what the table did to each layer's attention.

Two steps:

1. :func:`build_student`: a copy of the original with ``add_tisa(position_embeddings=
   "remove")`` and zero amplitudes. The mean of the position rows that inputs of up to
   ``fold_positions`` tokens use is folded into the token-type embeddings (every row), so
   the embedding LayerNorm sees inputs of the same average level as before; that adds no
   parameter and nothing that depends on position.
2. :func:`fit_layers`: layer by layer, the offset profile of the original's attention
   logits on real text minus the student's (:mod:`tisa.convert.profiles`), with the kernels
   of the layers below already in place, is fitted by S RBF kernels per head
   (:func:`tisa.convert.fit.fit_rbf`) and written into that layer's scorer. The
   difference, not the original's profile alone, is what the scorer must add: text
   statistics make some distance dependence appear in the student's logits too. A
   student with a free table over short offsets (``near_offsets=K``) gets there what the
   kernels miss, so its profile over [-K, K] is the measured one exactly.
   ``layers="first"`` fits only the first layer (deeper scorers stay at zero);
   ``layers="none"`` fits nothing.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor, nn

import tisa.hf  # noqa: F401  (registers TISA models with the Auto classes)
from tisa._validate import check_int
from tisa.convert.fit import KernelFit, fit_rbf, weighted_r2
from tisa.convert.profiles import AttentionProfiles, attention_profiles
from tisa.hf.architectures import position_embeddings

__all__ = ["LayerFit", "build_student", "fit_layers", "mean_position_row"]

FitLayers = Literal["all", "first", "none"]


def _base(model: nn.Module) -> nn.Module:
    return getattr(model, "base_model", model)


def mean_position_row(model: nn.Module, positions: int) -> Tensor:
    """Mean of the position-table rows of positions 0..positions-1: (E,)."""
    return position_embeddings(model, max_positions=positions).mean(0)


@torch.no_grad()
def build_student(
    original: nn.Module,
    *,
    fold_positions: int | None = 128,
    length_scale: int | None = None,
    num_kernels: int = 5,
    near_offsets: int | None = None,
    content_offsets: int | None = None,
    content_beyond: str = "clip",
) -> nn.Module:
    """A TISA copy of ``original`` without absolute positions, scorers at zero.

    Args:
        original: a BERT-family model with an absolute position table (BERT, RoBERTa,
            ALBERT, ELECTRA; any head).
        fold_positions: fold the mean of the first N position rows into the token-type
            embeddings; None folds nothing.
        length_scale: log-n scaling past N tokens (``tisa.hf.TisaSettings.length_scale``);
            None: none.
        num_kernels: RBF kernels per head.
        near_offsets: K: each scorer also gets a free value per head and offset in
            [-K, K] (``RBFScoring(near_offsets=K)``); None: kernels only.
        content_offsets: K: a relative content term in every layer
            (``tisa.hf.TisaSettings.content_offsets``), zero at the start; None: none.
        content_beyond: what it gives offsets beyond +-K (``"clip"`` or ``"zero"``).

    Raises:
        ValueError: the model has no absolute position table or no token-type embeddings
            to fold into, or its architecture is not supported by :mod:`tisa.hf`.
    """
    student = copy.deepcopy(original)
    if fold_positions is not None:
        check_int(fold_positions, "fold_positions")
        types = getattr(getattr(_base(student), "embeddings", None), "token_type_embeddings", None)
        if not isinstance(types, nn.Embedding):
            raise ValueError(
                "fold_positions: the model has no token-type embeddings to fold the mean "
                "position row into; pass fold_positions=None"
            )
        row = mean_position_row(original, fold_positions).to(types.weight)
        types.weight.add_(row)
    tisa.hf.add_tisa(
        student,
        position_embeddings="remove",
        start="zero",
        length_scale=length_scale,
        num_kernels=check_int(num_kernels, "num_kernels"),
        content_offsets=check_int(content_offsets, "content_offsets", optional=True),
        content_beyond=content_beyond,
        **({} if near_offsets is None else {"near_offsets": near_offsets}),
    )
    return student


@dataclass(frozen=True)
class LayerFit:
    """What :func:`fit_layers` measured and fitted.

    Attributes:
        original: profiles of the original model (every layer).
        target: (Y, H, K) what the scorers were fitted to (original minus student).
        fitted: (Y, H, K) the fitted scorers at the same offsets, up to the constant the
            softmax ignores: the kernels, plus the free table over short offsets where
            the scorers have one (zero where not fitted).
        r2: (Y, H) weighted R^2 of the fitted scorers against the target (NaN where not
            fitted).
        fitted_layers: indices of the layers whose scorers were set.
    """

    original: AttentionProfiles
    target: Tensor
    fitted: Tensor
    r2: Tensor
    fitted_layers: tuple[int, ...]


def _set_scorer(scorer: nn.Module, fit: KernelFit, target: Tensor, offsets: Tensor) -> Tensor:
    """Writes the kernels of ``fit`` into ``scorer`` and, where it has a free table over
    short offsets, the part of ``target`` (H, K) the kernels miss there; returns the
    scorer's profile at ``offsets``, up to the fitted constant."""
    with torch.no_grad():
        for name in ("amplitude", "sharpness", "offset"):
            getattr(scorer, name).copy_(getattr(fit, name).to(getattr(scorer, name)))
        values = fit.values(offsets)  # kernels plus the fitted constant
        fitted = values - fit.constant[:, None]
        reach = getattr(scorer, "near_offsets", None)
        if reach is not None:
            inside = offsets.abs() <= reach  # every one is there (checked by fit_layers)
            miss = (target - values)[:, inside]  # offsets in ascending order
            scorer.near.copy_(miss.to(scorer.near))
            fitted[:, inside] += miss
    return fitted


def fit_layers(
    original: nn.Module,
    student: nn.Module,
    blocks: Tensor,
    *,
    layers: FitLayers = "all",
    batch_size: int = 4,
    max_iter: int = 300,
) -> LayerFit:
    """Fits the student's scorers layer by layer (see the module docstring).

    Args:
        original: the model with its position table.
        student: from :func:`build_student` (RBF scorers with S kernels per head).
        blocks: (B, L) token ids of real text (:func:`tisa.data.text_blocks.text_blocks`).
        layers: ``"all"``, ``"first"`` or ``"none"``.
        batch_size: blocks per forward pass.
        max_iter: L-BFGS iterations per layer.
    """
    if layers not in ("all", "first", "none"):
        raise ValueError(f"layers must be 'all', 'first' or 'none', got {layers!r}")
    scorers = [s for _, s in tisa.hf.iter_scorers(student)]
    if not scorers or any(getattr(s, "family", "") != "rbf" for s in scorers):
        raise ValueError("student: expected RBF scorers in every layer (build_student)")
    reach = max((getattr(s, "near_offsets", None) or 0) for s in scorers)
    if reach > blocks.shape[1] - 3:
        raise ValueError(
            f"near_offsets: {reach} reaches beyond the offsets that blocks of "
            f"{blocks.shape[1]} tokens measure (at most {blocks.shape[1] - 3}); lower it or "
            "use longer blocks"
        )
    if len({id(s) for s in scorers}) != len(scorers):
        raise ValueError("student: scorers shared across layers cannot be fitted per layer")
    reference = attention_profiles(original, blocks, batch_size=batch_size)
    depth, heads, width = reference.mean.shape
    if depth != len(scorers):
        raise ValueError(f"student has {len(scorers)} scorers but the original {depth} layers")
    todo = {"all": range(depth), "first": range(1), "none": range(0)}[layers]
    target = torch.zeros(depth, heads, width, dtype=torch.float64)
    fitted = torch.zeros_like(target)
    r2 = torch.full((depth, heads), float("nan"), dtype=torch.float64)
    for layer in todo:
        own = attention_profiles(student, blocks, batch_size=batch_size, layers=[layer])
        target[layer] = reference.mean[layer] - own.mean[0]
        fit = fit_rbf(
            target[layer],
            reference.offsets,
            reference.count.double(),
            num_kernels=scorers[layer].num_kernels,
            max_iter=max_iter,
        )
        fitted[layer] = _set_scorer(scorers[layer], fit, target[layer], reference.offsets)
        # R^2 of the scorer up to a constant, which the softmax ignores
        weights = reference.count.double()
        r2[layer] = weighted_r2(target[layer], fitted[layer] + fit.constant[:, None], weights)
    return LayerFit(
        original=reference, target=target, fitted=fitted, r2=r2, fitted_layers=tuple(todo)
    )
