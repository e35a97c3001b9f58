"""Trainer callbacks of pretraining: masks per epoch, metrics files in the run folder,
translation invariance over training (the console's progress bar: :mod:`tisa.hf.trainer`).

:class:`EpochCallback` tells the training data which epoch begins, so that masked-LM masks
change from epoch to epoch and are the same again after a resume.

:class:`MetricsCallback` appends every log event (training loss, evaluation loss, learning
rate, tokens per second of pure training time) to ``metrics.jsonl`` and ``metrics.csv``.

:class:`TranslationInvarianceCallback` measures (with the measure its caller hands it,
:func:`tisa.analysis.positional_ti.position_table_ti` for ``tisa pretrain``), at every
checkpoint of a model with absolute position embeddings, how translation invariant its
positional machinery is (Wennberg & Henter, 2021) and appends one JSON line to
``ti.jsonl``:

* ``ti_gram``: TI of P P^T, with P the position embeddings of the trained positions;
* ``ti_fp_raw``: mean over layer-1 heads of TI(F_P^h), F_P^h = P~ W_Q^h (W_K^h)^T P~^T /
  sqrt(d_h), P~ = P mapped to the hidden size by the linear part of ALBERT's embedding
  projection (the term the paper analyses); ``ti_fp_raw_heads`` holds each head's value;
* ``ti_fp_ln``: the same with P~ as it reaches layer 1 (through the embedding LayerNorm);
* ``ti_gram_offdiag``, ``ti_cos_offdiag``, ``ti_fp_raw_offdiag``: TI over the entries
  off the diagonal only, and ``nulls``: each of them next to matched null tables (random
  directions with the same norms; the rows shuffled), see :mod:`tisa.analysis.positional_ti`;
* ``step`` and ``eval_loss``: the step and the latest evaluation loss logged by then.

TI(M) = 1 - ||M - T(M)||^2 / ||M - mean(M)||^2 with T(M) the least-squares Toeplitz
approximation (:func:`tisa.metrics.translation_invariance`).
"""

from __future__ import annotations

import csv
import json
import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from tisa.files import append_jsonl, read_jsonl, write_atomic
from tisa.pretrain.config import PretrainConfig

__all__ = [
    "METRIC_COLUMNS",
    "EpochCallback",
    "MetricsCallback",
    "TranslationInvarianceCallback",
    "elapsed_before",
    "latest_eval_loss",
    "tensorboard_callbacks",
    "truncate_after",
]

#: Columns of ``metrics.csv``.
METRIC_COLUMNS: tuple[str, ...] = (
    "step",
    "epoch",
    "loss",
    "eval_loss",
    "eval_perplexity",
    "learning_rate",
    "grad_norm",
    "tokens_per_s",
    "elapsed_s",
    "elapsed_total_s",
)


def elapsed_before(run_dir: str | os.PathLike[str], step: int) -> float:
    """Seconds of training the run's ``metrics.jsonl`` records up to ``step`` (0.0 when it
    records none): what a run resumed at ``step`` had spent before, in all its parts."""
    rows = [r for r in read_jsonl(Path(run_dir) / "metrics.jsonl") if int(r.get("step", 0)) <= step]
    return max(
        (float(r.get("elapsed_total_s", r.get("elapsed_s", 0.0))) for r in rows), default=0.0
    )


def truncate_after(run_dir: str | os.PathLike[str], step: int) -> None:
    """Drops rows logged after ``step`` from the run's metrics and TI files.

    Used when a killed run resumes from the checkpoint at ``step``: what it logged after
    that checkpoint is redone, so it must not appear twice.
    """
    run = Path(run_dir)
    for name in ("metrics.jsonl", "ti.jsonl"):
        path = run / name
        if path.is_file():
            rows = [r for r in read_jsonl(path) if int(r.get("step", 0)) <= step]
            write_atomic(path, "".join(json.dumps(r) + "\n" for r in rows))
    path = run / "metrics.csv"
    if path.is_file():
        write_atomic(path, _csv_text(read_jsonl(run / "metrics.jsonl")))


def _csv_text(rows: list[dict[str, Any]]) -> str:
    import io

    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=METRIC_COLUMNS, extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in METRIC_COLUMNS})
    return buf.getvalue()


def latest_eval_loss(log_history: list[dict[str, Any]]) -> float | None:
    """The last ``eval_loss`` in a Trainer ``log_history`` (None if none yet)."""
    for entry in reversed(log_history):
        if "eval_loss" in entry:
            return float(entry["eval_loss"])
    return None


class EpochCallback(TrainerCallback):
    """Tells a dataset which epoch begins (``dataset.set_epoch(epoch)``).

    :class:`tisa.data.mlm.MaskedBlocks` draws new masks each epoch from (seed, epoch,
    block); the Trainer passes the epoch on to its sampler only. At ``on_epoch_begin`` the
    state's epoch is the loop's epoch (``epoch + steps done / steps per epoch``, whole at
    an epoch's start, also after a resume), so a resumed run sees the same masks.

    Args:
        dataset: a dataset with ``set_epoch(int)``.
    """

    def __init__(self, dataset: Any) -> None:
        if not hasattr(dataset, "set_epoch"):
            raise ValueError(f"dataset must have set_epoch(epoch), got {type(dataset).__name__}")
        self.dataset = dataset

    def on_epoch_begin(self, args, state, control, **kwargs):
        self.dataset.set_epoch(int(state.epoch or 0))


class MetricsCallback(TrainerCallback):
    """Writes log events to ``metrics.jsonl`` / ``metrics.csv`` in the run folder.

    Tokens per second count only the time spent inside training steps (forward,
    backward, optimiser), not evaluation or checkpointing. The training loss is also
    logged at every checkpoint step (not only every ``logging_steps``), so a resumed run
    logs exactly what an uninterrupted one logs.

    Args:
        run_dir: the run folder.
        tokens_per_step: tokens consumed by one optimiser step over all processes
            (batch size x sequence length x processes x accumulation steps).
    """

    def __init__(self, run_dir: str | os.PathLike[str], tokens_per_step: int) -> None:
        self.run_dir = Path(run_dir)
        self.tokens_per_step = int(tokens_per_step)
        self._step_start: float | None = None
        self._train_time = 0.0
        self._steps = 0
        self._t0 = time.perf_counter()
        self._before = 0.0

    def on_train_begin(self, args, state, control, **kwargs):
        self._t0 = time.perf_counter()
        # a resumed run: the time of its earlier parts (their rows up to the checkpoint)
        self._before = elapsed_before(self.run_dir, state.global_step) if state.global_step else 0.0

    def on_step_begin(self, args, state, control, **kwargs):
        self._step_start = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        if self._step_start is not None:
            self._train_time += time.perf_counter() - self._step_start
            self._steps += 1
            self._step_start = None
        # Log at every checkpoint, so that no logging window spans one: a run resumed
        # there starts a fresh window (the Trainer keeps no partial loss sum in a
        # checkpoint), and only then does it log the same mean losses as an
        # uninterrupted run.
        if control.should_save:
            control.should_log = True

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs:
            return
        row: dict[str, Any] = {
            "step": int(state.global_step),
            "epoch": None if state.epoch is None else round(float(state.epoch), 4),
            "elapsed_s": round(time.perf_counter() - self._t0, 3),  # this process
        }
        row["elapsed_total_s"] = round(self._before + row["elapsed_s"], 3)  # every part
        for key in ("loss", "eval_loss", "learning_rate", "grad_norm"):
            if key in logs:
                row[key] = float(logs[key])
        if "eval_loss" in logs:
            row["eval_perplexity"] = _perplexity(float(logs["eval_loss"]))
        if "loss" in logs and self._steps and self._train_time > 0:
            row["tokens_per_s"] = round(self._steps * self.tokens_per_step / self._train_time, 1)
            self._steps, self._train_time = 0, 0.0
        if len(row) <= 4:  # nothing we track (e.g. the final train summary)
            return
        append_jsonl(self.run_dir / "metrics.jsonl", row)
        csv_path = self.run_dir / "metrics.csv"
        new = not csv_path.is_file()
        with open(csv_path, "a", encoding="utf-8", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=METRIC_COLUMNS, extrasaction="ignore")
            if new:
                writer.writeheader()
            writer.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in METRIC_COLUMNS})


def _perplexity(loss: float) -> float:
    return math.exp(loss) if loss < 700 else math.inf


class TranslationInvarianceCallback(TrainerCallback):
    """Appends the TI of P P^T and of layer-1 F_P, with and without the diagonal and with
    their nulls, to ``ti.jsonl`` at every checkpoint.

    Does nothing for models without absolute position embeddings (the measure returns
    None for them).

    Args:
        run_dir: the run folder.
        measure: ``measure(model, max_positions=, draws=, seed=)`` -> plain data or None
            (:func:`tisa.analysis.positional_ti.position_table_ti`).
        max_positions: positions analysed (the training length: rows beyond it are never
            trained and would only measure the initialisation).
        null_draws: null tables per null and figure (:mod:`tisa.analysis.positional_ti`).
        null_seed: seed of the null draws (the same at every checkpoint).
    """

    def __init__(
        self,
        run_dir: str | os.PathLike[str],
        max_positions: int,
        *,
        measure: Callable[..., dict[str, Any] | None],
        null_draws: int = 32,
        null_seed: int = 0,
    ) -> None:
        self.run_dir = Path(run_dir)
        self._measure = measure
        self.max_positions = int(max_positions)
        self.null_draws = int(null_draws)
        self.null_seed = int(null_seed)

    def measure(self, model) -> dict[str, Any] | None:
        """TI values of ``model`` (None when it has no absolute position embeddings)."""
        return self._measure(
            model, max_positions=self.max_positions, draws=self.null_draws, seed=self.null_seed
        )

    def on_save(self, args, state, control, model=None, **kwargs):
        if not state.is_world_process_zero or model is None:
            return
        values = self.measure(model)
        if values is None:
            return
        row = {
            "step": int(state.global_step),
            "eval_loss": latest_eval_loss(state.log_history),
            **values,
        }
        append_jsonl(self.run_dir / "ti.jsonl", row)


def _tensorboard_wanted(flag: bool | None) -> bool:
    if flag is False:
        return False
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        if flag:
            raise ValueError("tensorboard=True but the tensorboard package is not installed")
        return False
    return True


def tensorboard_callbacks(config: PretrainConfig, run: Path) -> list[Any]:
    """TensorBoard logging into ``<run>/runs/<date>_<host>`` (the Trainer's own default
    would follow ``output_dir``, which is the staging folder)."""
    if not _tensorboard_wanted(config.tensorboard):
        return []
    from transformers.integrations import TensorBoardCallback
    from transformers.integrations.integration_utils import default_logdir

    callback = TensorBoardCallback()
    if callback.logging_dir is None:  # TENSORBOARD_LOGGING_DIR, when set, wins
        callback.logging_dir = str(run / default_logdir())
    return [callback]
