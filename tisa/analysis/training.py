"""Translation invariance over training: one series per run, from checkpoints or a log.

A :class:`TrainingTI` holds, per checkpoint of a run, the TI of P P^T and the mean over
layer-1 heads of TI(F_P) (raw and through LayerNorm), with the validation loss logged by
then, and Spearman's rank correlation of each TI series with the step and with the loss
(a negative rho against the loss: more translation invariant, lower loss). It comes

* from the checkpoints of a Trainer output folder (:func:`ti_over_training`, what
  ``tisa analyze --checkpoints`` does), or
* from the ``ti.jsonl`` that ``tisa pretrain`` writes while it trains
  (:func:`read_ti_log`; see :class:`tisa.train.callbacks.TranslationInvarianceCallback`).

Both measure with :meth:`tisa.analysis.extract.PositionalTerms.translation_invariance`.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tisa.analysis.extract import LnInput, extract
from tisa.checkpoints import checkpoint_name, checkpoint_step, list_checkpoints
from tisa.files import read_jsonl

__all__ = [
    "SERIES",
    "Correlation",
    "TrainingTI",
    "read_ti_log",
    "spearman",
    "ti_over_training",
]

#: The TI series of a run: P P^T, and the mean over layer-1 heads of TI(F_P) from raw P
#: and from P through LayerNorm.
SERIES: tuple[str, ...] = ("ti_gram", "ti_fp_raw", "ti_fp_ln")


@dataclass(frozen=True)
class Correlation:
    """A rank correlation: Spearman's rho, its two-sided p-value and the pairs used."""

    rho: float
    pvalue: float
    n: int

    def to_dict(self) -> dict[str, Any]:
        return {"rho": self.rho, "pvalue": self.pvalue, "n": self.n}


def spearman(x: Sequence[float | None], y: Sequence[float | None]) -> Correlation | None:
    """Spearman's rank correlation of the pairs where both values are known.

    Returns:
        None with fewer than 3 such pairs or a constant series (no correlation to speak
        of), else the :class:`Correlation`.
    """
    from scipy.stats import spearmanr

    pairs = [(a, b) for a, b in zip(x, y, strict=True) if a is not None and b is not None]
    if len(pairs) < 3:
        return None
    xs, ys = zip(*pairs, strict=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a constant input warns and gives NaN
        res = spearmanr(xs, ys)
    rho, pvalue = float(res.statistic), float(res.pvalue)
    if math.isnan(rho):
        return None
    return Correlation(rho=rho, pvalue=pvalue, n=len(pairs))


@dataclass(frozen=True)
class TrainingTI:
    """TI of one run at each checkpoint (one entry per checkpoint, in step order).

    Attributes:
        folder: the run's name (its folder name).
        steps: training step of each checkpoint.
        checkpoints: checkpoint folder names.
        eval_loss: validation loss logged by that step (None where never evaluated).
        ti_gram: TI of P P^T.
        ti_fp_raw: mean over layer-1 heads of TI(F_P), raw P.
        ti_fp_ln: the same through LayerNorm.
        spearman: ``"<series>_vs_step"`` and ``"<series>_vs_eval_loss"`` for each series
            of :data:`SERIES` -> :class:`Correlation` (None: fewer than 3 points or a
            constant series).
    """

    folder: str
    steps: tuple[int, ...]
    checkpoints: tuple[str, ...]
    eval_loss: tuple[float | None, ...]
    ti_gram: tuple[float, ...]
    ti_fp_raw: tuple[float, ...]
    ti_fp_ln: tuple[float, ...]
    spearman: Mapping[str, Correlation | None]

    @classmethod
    def from_rows(cls, folder: str, rows: Iterable[Mapping[str, Any]]) -> TrainingTI:
        """Built from one mapping per checkpoint (keys ``step``, ``eval_loss``, the
        :data:`SERIES` keys and optionally ``checkpoint``), with the correlations."""
        rows = sorted(rows, key=lambda r: int(r["step"]))
        steps = tuple(int(r["step"]) for r in rows)
        series = {key: tuple(float(r[key]) for r in rows) for key in SERIES}
        eval_loss = tuple(
            None if r.get("eval_loss") is None else float(r["eval_loss"]) for r in rows
        )
        against = {"step": steps, "eval_loss": eval_loss}
        return cls(
            folder=folder,
            steps=steps,
            checkpoints=tuple(str(r.get("checkpoint", checkpoint_name(r["step"]))) for r in rows),
            eval_loss=eval_loss,
            spearman={
                f"{key}_vs_{name}": spearman(values, against[name])
                for key, values in series.items()
                for name in ("step", "eval_loss")
            },
            **series,
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain data (the ``training`` entry of ``tisa analyze``'s metrics.json)."""
        return {
            "steps": list(self.steps),
            "checkpoints": list(self.checkpoints),
            "eval_loss": list(self.eval_loss),
            "ti_gram": list(self.ti_gram),
            "ti_fp_raw": list(self.ti_fp_raw),
            "ti_fp_ln": list(self.ti_fp_ln),
            "spearman": {k: None if c is None else c.to_dict() for k, c in self.spearman.items()},
            "folder": self.folder,
        }


def _eval_loss(checkpoint: Path, step: int) -> float | None:
    """eval_loss logged at ``step`` (or the last one before it) in trainer_state.json."""
    state_file = checkpoint / "trainer_state.json"
    if not state_file.is_file():
        return None
    try:
        history = json.loads(state_file.read_text()).get("log_history", [])
    except (json.JSONDecodeError, AttributeError):
        return None
    evals = [
        (int(e.get("step", -1)), float(e["eval_loss"]))
        for e in history
        if isinstance(e, dict) and "eval_loss" in e
    ]
    exact = [loss for s, loss in evals if s == step]
    if exact:
        return exact[-1]
    before = [(s, loss) for s, loss in evals if s <= step]
    return max(before)[1] if before else None


def ti_over_training(
    checkpoint_dir: str | os.PathLike[str],
    *,
    max_positions: int | None = None,
    ln_input: LnInput = "position+type",
    include_bias: bool = False,
    progress: bool = True,
) -> TrainingTI:
    """Translation invariance of every ``checkpoint-<step>/`` in a Trainer output folder.

    For each checkpoint: TI of P P^T, the mean over layer-1 heads of TI(F_P) (raw and
    through LayerNorm), and the ``eval_loss`` logged at that step in the checkpoint's
    ``trainer_state.json`` (or the last one before it; None if never evaluated).

    Args:
        checkpoint_dir: folder holding ``checkpoint-<step>/`` subfolders.
        max_positions: positions analysed (default: the full table).
        ln_input, include_bias: see :func:`tisa.analysis.extract.positional_logits`.
        progress: show a progress bar.

    Raises:
        ValueError: the folder does not exist or holds no ``checkpoint-<step>`` folders.
    """
    from tqdm.auto import tqdm

    from tisa.analysis.loading import load_model

    folder = Path(checkpoint_dir)
    if not folder.is_dir():
        raise ValueError(f"checkpoint_dir must be an existing folder, got {str(checkpoint_dir)!r}")
    found = list_checkpoints(folder)
    if not found:
        raise ValueError(
            f"checkpoint_dir {str(checkpoint_dir)!r} holds no 'checkpoint-<step>' folders"
        )
    rows = []
    for path in tqdm(found, desc="checkpoints", disable=not progress, leave=False):
        step = checkpoint_step(path)
        model, _ = load_model(path, tokenizer=False, eager=False)
        terms = extract(
            model, max_positions=max_positions, ln_input=ln_input, include_bias=include_bias
        )
        ti = terms.translation_invariance()
        rows.append(
            {
                "step": step,
                "checkpoint": path.name,
                "eval_loss": _eval_loss(path, step),
                "ti_gram": ti.gram,
                "ti_fp_raw": ti.fp_raw_mean,
                "ti_fp_ln": ti.fp_ln_mean,
            }
        )
    return TrainingTI.from_rows(folder.name, rows)


def read_ti_log(path: str | os.PathLike[str], *, evaluated_only: bool = False) -> TrainingTI:
    """The TI series a pretraining run logged in ``ti.jsonl``.

    Args:
        path: the ``ti.jsonl`` file (the run folder's name labels the series).
        evaluated_only: keep only checkpoints with a validation loss.
    """
    rows = read_jsonl(path)
    if evaluated_only:
        rows = [r for r in rows if r.get("eval_loss") is not None]
    return TrainingTI.from_rows(Path(path).parent.name, rows)
