"""``TisaTrainer``: the Hugging Face Trainer with TISA's scoring functions on their own
learning rate (see :mod:`tisa.hf.optim`)."""

from __future__ import annotations

from typing import Any

import torch
from transformers import Trainer

from tisa.hf.optim import parameter_groups

__all__ = ["TisaTrainer"]


class TisaTrainer(Trainer):
    """:class:`transformers.Trainer` whose optimizer trains TISA scoring parameters at
    ``tisa_learning_rate`` without weight decay; everything else as the stock Trainer
    (its optimizer class and arguments, its weight-decay names, its learning-rate schedule,
    which scales every group alike).

    Args:
        tisa_learning_rate: learning rate of the scoring parameters; ``None`` uses
            ``args.learning_rate`` (the stock Trainer's behaviour, but still no decay).
        *args, **kwargs: as for :class:`transformers.Trainer`.
    """

    def __init__(self, *args: Any, tisa_learning_rate: float | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        if tisa_learning_rate is not None and not tisa_learning_rate > 0:
            raise ValueError(
                f"tisa_learning_rate must be a positive number, got {tisa_learning_rate!r}"
            )
        self.tisa_learning_rate = tisa_learning_rate

    def create_optimizer(self, model: torch.nn.Module | None = None) -> torch.optim.Optimizer:
        if self.optimizer is None:
            opt_model = self.model if model is None else model
            groups = parameter_groups(
                opt_model,
                learning_rate=self.args.learning_rate,
                tisa_learning_rate=self.tisa_learning_rate,
                weight_decay=self.args.weight_decay,
                decay_names=self.get_decay_parameter_names(opt_model),
            )
            if self.optimizer_cls_and_kwargs is not None:
                cls, kwargs = self.optimizer_cls_and_kwargs
            else:
                cls, kwargs = self.get_optimizer_cls_and_kwargs(self.args, opt_model)
            kwargs = {k: v for k, v in kwargs.items() if k not in ("params", "model", "lr")}
            self.optimizer = cls(groups, lr=self.args.learning_rate, **kwargs)
        return self.optimizer
