"""Optimising TISA inside a pretrained model: its own learning rate, and how far it moved.

A scoring function's parameters live on another scale than the weights around them: an
RBF offset c starts with a spread of 5 positions, an amplitude near 0.1. AdamW moves every
parameter by about the learning rate per step, so at a fine-tuning learning rate (2e-5)
TISA would stay where it started. The scoring parameters therefore get a learning rate of
their own and no weight decay::

    groups = tisa.hf.parameter_groups(model, learning_rate=5e-5, tisa_learning_rate=1e-2,
                                      weight_decay=0.01)
    optimizer = torch.optim.AdamW(groups)

or, with the Hugging Face Trainer, ``tisa.hf.TisaTrainer(..., tisa_learning_rate=1e-2)``.
A model's own positional parameters (its absolute position table, found by
:func:`position_table_names`) can take a rate of their own too (``position_names`` and
``position_learning_rate``), e.g. to fine-tune with the table frozen or fast.
:func:`scoring_snapshot` and :func:`scoring_movement` measure how far the scoring
parameters moved in training (per kind: amplitude, sharpness, offset, ...).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor, nn

from tisa.hf.architectures import architecture_of, base_model
from tisa.scoring import RelativeContent, ScoringFunction

__all__ = [
    "parameter_groups",
    "position_table_names",
    "scoring_movement",
    "scoring_parameter_names",
    "scoring_snapshot",
]


def scoring_parameter_names(model: nn.Module) -> list[str]:
    """Names (as in ``model.named_parameters()``) of the TISA scoring-function parameters,
    and of the relative content terms' vectors (``content_offsets``), which share their
    learning rate."""
    names: list[str] = []
    seen: set[str] = set()
    for module_name, module in model.named_modules():
        if isinstance(module, (ScoringFunction, RelativeContent)):
            # recurse: a family may hold submodules (FIRE's MLP); a parameter counts once
            for name, _ in module.named_parameters():
                full = f"{module_name}.{name}" if module_name else name
                if full not in seen:
                    seen.add(full)
                    names.append(full)
    return names


def position_table_names(model: nn.Module) -> list[str]:
    """Names (as in ``model.named_parameters()``) of the absolute position-embedding table
    of a supported model; empty when it has none (a model without one, or after TISA
    removed it)."""
    arch = architecture_of(model)
    table = None if arch is None else arch.position_table(base_model(model))
    if table is None:
        return []
    mine = {id(p) for p in table.parameters()}
    return [name for name, p in model.named_parameters() if id(p) in mine]


def _default_no_decay(name: str) -> bool:
    """The usual convention: biases and normalisation weights take no weight decay."""
    module, _, leaf = name.rpartition(".")
    last = module.rpartition(".")[2]
    return leaf == "bias" or "norm" in module.lower() or last.startswith("ln_")


def parameter_groups(
    model: nn.Module,
    *,
    learning_rate: float,
    tisa_learning_rate: float | None = None,
    weight_decay: float = 0.0,
    decay_names: Iterable[str] | None = None,
    position_names: Iterable[str] = (),
    position_learning_rate: float | None = None,
) -> list[dict[str, Any]]:
    """Optimizer parameter groups with the scoring functions on their own learning rate.

    Args:
        model: any module; TISA scoring functions are found wherever they sit.
        learning_rate: learning rate of every other parameter.
        tisa_learning_rate: learning rate of the scoring parameters (default
            ``learning_rate``). They never get weight decay: it would pull amplitudes and
            offsets towards 0, which is not a neutral value for an offset.
        weight_decay: weight decay of the other parameters that take it.
        decay_names: names of the parameters that take weight decay (the Trainer's
            ``get_decay_parameter_names``); default: all but biases and norm weights.
        position_names: parameters that form a ``positions`` group of their own (e.g.
            :func:`position_table_names`, or a converted model's scoring parameters),
            without weight decay; it comes before the ``tisa`` group.
        position_learning_rate: learning rate of ``position_names`` (default
            ``learning_rate``).

    Returns:
        Up to four groups (``decay``, ``no_decay``, ``tisa``, ``positions``), each a dict with
        ``params``, ``lr``, ``weight_decay`` and ``name``; empty groups are left out.
        Frozen parameters (``requires_grad=False``) are left out.

    Raises:
        ValueError: a learning rate that is not positive, a negative weight decay, or a
            name in ``position_names`` that is no parameter of ``model``.
    """
    rates = (
        ("learning_rate", learning_rate),
        ("tisa_learning_rate", tisa_learning_rate),
        ("position_learning_rate", position_learning_rate),
    )
    for name, value in rates:
        if value is not None and not (isinstance(value, (int, float)) and value > 0):
            raise ValueError(f"{name} must be a positive number, got {value!r}")
    if not (isinstance(weight_decay, (int, float)) and weight_decay >= 0):
        raise ValueError(f"weight_decay must be a number >= 0, got {weight_decay!r}")
    tisa_lr = learning_rate if tisa_learning_rate is None else tisa_learning_rate
    position_lr = learning_rate if position_learning_rate is None else position_learning_rate
    positions = set(position_names)
    unknown = sorted(positions - {name for name, _ in model.named_parameters()})
    if unknown:
        raise ValueError(f"position_names: the model has no parameters {unknown[:4]}")
    scoring = set(scoring_parameter_names(model))
    decay = None if decay_names is None else set(decay_names)
    groups: dict[str, dict[str, Any]] = {
        "decay": {"params": [], "lr": learning_rate, "weight_decay": weight_decay},
        "no_decay": {"params": [], "lr": learning_rate, "weight_decay": 0.0},
        "tisa": {"params": [], "lr": tisa_lr, "weight_decay": 0.0},
        "positions": {"params": [], "lr": position_lr, "weight_decay": 0.0},
    }
    seen: set[int] = set()
    for name, param in model.named_parameters():
        if not param.requires_grad or id(param) in seen:
            continue
        seen.add(id(param))
        if name in positions:
            key = "positions"
        elif name in scoring:
            key = "tisa"
        elif (name in decay) if decay is not None else not _default_no_decay(name):
            key = "decay"
        else:
            key = "no_decay"
        groups[key]["params"].append(param)
    return [{"name": k, **g} for k, g in groups.items() if g["params"]]


def scoring_snapshot(model: nn.Module) -> dict[str, Tensor]:
    """A detached float32 copy of every scoring parameter, for :func:`scoring_movement`."""
    params = dict(model.named_parameters())
    return {
        n: params[n].detach().to(torch.float32, copy=True).cpu()
        for n in scoring_parameter_names(model)
    }


def scoring_movement(model: nn.Module, start: dict[str, Tensor]) -> dict[str, dict[str, float]]:
    """How far the scoring parameters moved since ``start`` (a :func:`scoring_snapshot`).

    Returns:
        Per kind of parameter (the attribute name: ``amplitude``, ``sharpness``,
        ``offset`` for RBF; ``bias``, ``r1``, ... for other families): ``count`` (numbers),
        ``mean_abs_change`` and ``max_abs_change`` (|now - start|), ``mean_abs_start``
        and ``mean_abs_now`` (|value|). Empty when the model has no scoring parameters.
    """
    now = scoring_snapshot(model)
    missing = sorted(set(start) ^ set(now))
    if missing:
        raise ValueError(
            f"start: the snapshot and the model disagree on scoring parameters {missing[:4]}"
        )
    kinds: dict[str, list[tuple[Tensor, Tensor]]] = {}
    for name, value in now.items():
        kinds.setdefault(name.rsplit(".", 1)[-1], []).append((start[name], value))
    out = {}
    for kind, pairs in sorted(kinds.items()):
        before = torch.cat([a.reshape(-1) for a, _ in pairs])
        after = torch.cat([b.reshape(-1) for _, b in pairs])
        change = (after - before).abs()
        out[kind] = {
            "count": int(before.numel()),
            "mean_abs_change": float(change.mean()),
            "max_abs_change": float(change.max()),
            "mean_abs_start": float(before.abs().mean()),
            "mean_abs_now": float(after.abs().mean()),
        }
    return out
