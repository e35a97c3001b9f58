"""The Hugging Face Trainer as every training command uses it: ``TisaTrainer`` (TISA's
scoring functions on their own learning rate, see :mod:`tisa.hf.optim`), the console's
progress bar (:class:`StageProgress`, put in place by :func:`quiet_trainer`) and
:class:`LogAtCheckpoints`.

:class:`StageProgress` is the Trainer's progress on the console: one named bar with the
latest losses, one line when training ends (:func:`quiet_trainer` puts it in place of
the Trainer's own bar and log dictionaries unless ``tisa --verbose``).
"""

from __future__ import annotations

import sys
import time
from typing import Any

import torch
from tqdm.auto import tqdm
from transformers import Trainer, TrainerCallback
from transformers.trainer_callback import PrinterCallback, ProgressCallback

from tisa.console import format_seconds, stage_done, verbose
from tisa.hf.optim import parameter_groups

__all__ = ["LogAtCheckpoints", "StageProgress", "TisaTrainer", "quiet_trainer"]


class TisaTrainer(Trainer):
    """:class:`transformers.Trainer` whose optimizer trains TISA scoring parameters at
    ``tisa_learning_rate`` without weight decay; everything else as the stock Trainer
    (its optimizer class and arguments, its weight-decay names, its learning-rate schedule,
    which scales every group alike).

    Args:
        tisa_learning_rate: learning rate of the scoring parameters; ``None`` uses
            ``args.learning_rate`` (the stock Trainer's behaviour, but still no decay).
        position_names, position_learning_rate: parameters trained at a rate of their own
            (:func:`tisa.hf.optim.parameter_groups`), e.g. the model's position table.
        *args, **kwargs: as for :class:`transformers.Trainer`.
    """

    def __init__(
        self,
        *args: Any,
        tisa_learning_rate: float | None = None,
        position_names: tuple[str, ...] = (),
        position_learning_rate: float | None = None,
        **kwargs: Any,
    ):
        super().__init__(*args, **kwargs)
        rates = (
            ("tisa_learning_rate", tisa_learning_rate),
            ("position_learning_rate", position_learning_rate),
        )
        for name, value in rates:
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be a positive number, got {value!r}")
        self.tisa_learning_rate = tisa_learning_rate
        self.position_names = tuple(position_names)
        self.position_learning_rate = position_learning_rate

    def create_optimizer(self, model: torch.nn.Module | None = None) -> torch.optim.Optimizer:
        if self.optimizer is None:
            opt_model = self.model if model is None else model
            groups = parameter_groups(
                opt_model,
                learning_rate=self.args.learning_rate,
                tisa_learning_rate=self.tisa_learning_rate,
                weight_decay=self.args.weight_decay,
                decay_names=self.get_decay_parameter_names(opt_model),
                position_names=self.position_names,
                position_learning_rate=self.position_learning_rate,
            )
            if self.optimizer_cls_and_kwargs is not None:
                cls, kwargs = self.optimizer_cls_and_kwargs
            else:
                cls, kwargs = self.get_optimizer_cls_and_kwargs(self.args, opt_model)
            kwargs = {k: v for k, v in kwargs.items() if k not in ("params", "model", "lr")}
            self.optimizer = cls(groups, lr=self.args.learning_rate, **kwargs)
        return self.optimizer


class LogAtCheckpoints(TrainerCallback):
    """Logs the training loss at every checkpoint step too, so that the loss windows
    logged up to a checkpoint cover every step before it: a run resumed there can tell
    its mean loss over all steps from its ``log_history``."""

    def on_step_end(self, args, state, control, **kwargs):
        if control.should_save:
            control.should_log = True


class StageProgress(TrainerCallback):
    """One named progress bar for a Trainer's training (steps, time left, latest losses)
    and one line when it ends: ``<name>: <steps> steps in <time>, loss <x>, eval loss <y>``.

    Evaluation shows in the bar's postfix during training and as a bar of its own
    (``<name>: evaluating``) after it. Nothing is printed on processes other than the
    main one; no bar when the Trainer's ``disable_tqdm`` is set (the line still is).

    Args:
        name: the stage's name on the console (e.g. ``"pretrain tisa"``).
        summary: print the line at the end of training (off when the caller prints its
            own, e.g. a GLUE run's score).
    """

    def __init__(self, name: str, *, summary: bool = True) -> None:
        self.name = name
        self.summary = summary
        self._bar = None
        self._eval_bar = None
        self._start = time.perf_counter()
        self._first_step = 0
        self._losses: dict[str, float] = {}
        self._eval_done = 0  # batches of the evaluation under way during training

    def _tqdm(self, **kwargs):
        # into a file or a pipe, a bar below another (GLUE's runs) writes a new line per
        # refresh: refresh it rarely there, as a person reads a log, not a terminal
        every = 0.1 if sys.stderr.isatty() else 30.0
        return tqdm(dynamic_ncols=True, leave=False, mininterval=every, **kwargs)

    def on_train_begin(self, args, state, control, **kwargs):
        self._start = time.perf_counter()
        self._first_step = int(state.global_step)
        if state.is_world_process_zero and not args.disable_tqdm:
            self._bar = self._tqdm(
                total=state.max_steps, initial=state.global_step, desc=self.name, unit="step"
            )

    def on_step_end(self, args, state, control, **kwargs):
        if self._bar is not None:
            self._bar.update(state.global_step - self._bar.n)

    def on_prediction_step(self, args, state, control, eval_dataloader=None, **kwargs):
        if not state.is_world_process_zero or args.disable_tqdm:
            return
        total = len(eval_dataloader) if hasattr(eval_dataloader, "__len__") else None
        if self._bar is not None:  # evaluation during training: in the training bar
            self._eval_done += 1
            self._bar.set_postfix_str(f"evaluating {self._eval_done}/{total or '?'}")
            return
        if self._eval_bar is None:
            self._eval_bar = self._tqdm(total=total, desc=f"{self.name}: evaluating", unit="batch")
        self._eval_bar.update(1)

    def _end_evaluation(self) -> None:
        self._eval_done = 0
        if self._eval_bar is not None:
            self._eval_bar.close()
            self._eval_bar = None

    def on_evaluate(self, args, state, control, **kwargs):
        self._end_evaluation()

    def on_predict(self, args, state, control, **kwargs):
        self._end_evaluation()

    def on_log(self, args, state, control, logs=None, **kwargs):
        for key in ("loss", "eval_loss"):
            if logs and key in logs:
                self._losses[key] = float(logs[key])
        if self._bar is not None:
            shown = {k.replace("_", " "): f"{v:.4g}" for k, v in self._losses.items()}
            self._bar.set_postfix(shown)

    def on_train_end(self, args, state, control, **kwargs):
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        if not (self.summary and state.is_world_process_zero):
            return
        steps = int(state.global_step) - self._first_step
        text = f"{steps} steps in {format_seconds(time.perf_counter() - self._start)}"
        if self._first_step:
            text += f" (resumed at step {self._first_step})"
        for key, label in (("loss", "loss"), ("eval_loss", "eval loss")):
            if key in self._losses:
                text += f", {label} {self._losses[key]:.4g}"
        stage_done(self.name, text)


def quiet_trainer(trainer: Any, name: str, *, summary: bool = True) -> Any:
    """Puts :class:`StageProgress` in place of the Trainer's progress bar and log printer
    (its raw log dictionaries), unless the console is verbose (``tisa --verbose``);
    returns the trainer. The Trainer's other callbacks (metrics files) are untouched."""
    if verbose():
        return trainer
    trainer.remove_callback(ProgressCallback)
    trainer.remove_callback(PrinterCallback)
    trainer.add_callback(StageProgress(name, summary=summary))
    return trainer
