"""Translation invariance over training: one series per run, from checkpoints or a log.

A :class:`TrainingTI` holds, per checkpoint of a run, the TI of P P^T and the mean over
layer-1 heads of TI(F_P) (raw and through LayerNorm), with the validation loss logged by
then, and Spearman's rank correlation of each TI series with the step and with the loss
(a negative rho against the loss: more translation invariant, lower loss). It comes

* from the checkpoints of a Trainer output folder (:func:`ti_over_training`, what
  ``tisa analyze --checkpoints`` does), which also gives the off-diagonal TI of P P^T
  and, with ``null_draws``, every figure's null baselines at every checkpoint
  (:mod:`tisa.analysis.baselines`), or
* from the ``ti.jsonl`` that ``tisa pretrain`` writes while it trains
  (:func:`read_ti_log`; see :class:`tisa.pretrain.callbacks.TranslationInvarianceCallback`),
  which holds the three series of :data:`SERIES` only.

Both measure with :meth:`tisa.analysis.extract.PositionalTerms.translation_invariance`.

Why the off-diagonal series matters here: at initialisation the rows of P are random
with nearly equal norms, so TI(P P^T) with the diagonal starts near its null (about
E / (E + L)) and falls as training makes the norms unequal, whatever happens to the
structure between positions. The off-diagonal TI starts near 0 and measures only that
structure; the random null at each checkpoint shows what the norms alone give.
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

from tisa._validate import check_int
from tisa.analysis.baselines import table_nulls
from tisa.analysis.extract import LnInput, extract
from tisa.analysis.nulls import NullBaselines
from tisa.checkpoints import checkpoint_name, checkpoint_step, list_checkpoints
from tisa.files import read_jsonl
from tisa.hf.loading import load_model
from tisa.metrics import translation_invariance

__all__ = [
    "NULL_SERIES",
    "OPTIONAL_SERIES",
    "SERIES",
    "Correlation",
    "TrainingTI",
    "TI_LOG_SERIES",
    "read_ti_log",
    "ti_loss_curve",
    "spearman",
    "ti_over_training",
]

#: The TI series of a run: P P^T, and the mean over layer-1 heads of TI(F_P) from raw P
#: and from P through LayerNorm.
SERIES: tuple[str, ...] = ("ti_gram", "ti_fp_raw", "ti_fp_ln")

#: Series only checkpoints give: TI of P P^T over its entries j != i.
OPTIONAL_SERIES: tuple[str, ...] = ("ti_gram_offdiag",)

#: Series with null baselines (from checkpoints with ``null_draws``), and the figure of
#: :class:`tisa.analysis.baselines.TableNulls` each comes from.
NULL_SERIES: dict[str, str] = {
    "ti_gram": "gram",
    "ti_gram_offdiag": "gram_offdiag",
    "ti_fp_raw": "fp_raw",
    "ti_fp_ln": "fp_ln",
}


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
            of :data:`SERIES` (and of :data:`OPTIONAL_SERIES` where present) ->
            :class:`Correlation` (None: fewer than 3 points or a constant series).
        ti_gram_offdiag: TI of P P^T without its diagonal (None when the source has no
            such series, e.g. a ``ti.jsonl``).
        nulls: series of :data:`NULL_SERIES` -> one NullBaselines per checkpoint (None
            when not computed).
    """

    folder: str
    steps: tuple[int, ...]
    checkpoints: tuple[str, ...]
    eval_loss: tuple[float | None, ...]
    ti_gram: tuple[float, ...]
    ti_fp_raw: tuple[float, ...]
    ti_fp_ln: tuple[float, ...]
    spearman: Mapping[str, Correlation | None]
    ti_gram_offdiag: tuple[float, ...] | None = None
    nulls: Mapping[str, tuple[NullBaselines, ...]] | None = None

    @classmethod
    def from_rows(
        cls,
        folder: str,
        rows: Iterable[Mapping[str, Any]],
        *,
        nulls: Sequence[Mapping[str, NullBaselines]] | None = None,
    ) -> TrainingTI:
        """Built from one mapping per checkpoint (keys ``step``, ``eval_loss``, the
        :data:`SERIES` keys, optionally those of :data:`OPTIONAL_SERIES` (in every row or
        in none) and ``checkpoint``), with the correlations.

        Args:
            folder: the run's name.
            rows: one mapping per checkpoint, in any order.
            nulls: per row (in the order of ``rows``), series -> NullBaselines.
        """
        rows = list(rows)
        if nulls is not None and len(nulls) != len(rows):
            raise ValueError(f"nulls must have one entry per row: {len(nulls)} for {len(rows)}")
        order = sorted(range(len(rows)), key=lambda i: int(rows[i]["step"]))
        rows = [rows[i] for i in order]
        steps = tuple(int(r["step"]) for r in rows)
        series = {key: tuple(float(r[key]) for r in rows) for key in SERIES}
        for key in OPTIONAL_SERIES:
            present = [key in r and r[key] is not None for r in rows]
            if rows and all(present):
                series[key] = tuple(float(r[key]) for r in rows)
            elif any(present):
                raise ValueError(f"rows: {key!r} is in some rows and not in others")
        eval_loss = tuple(
            None if r.get("eval_loss") is None else float(r["eval_loss"]) for r in rows
        )
        against = {"step": steps, "eval_loss": eval_loss}
        per_series = None
        if nulls is not None and rows:
            ordered = [nulls[i] for i in order]
            per_series = {k: tuple(n[k] for n in ordered) for k in NULL_SERIES if k in series}
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
            nulls=per_series,
            **series,
        )

    def series(self) -> dict[str, tuple[float, ...]]:
        """Every TI series this run has: :data:`SERIES`, then those of
        :data:`OPTIONAL_SERIES` that are present."""
        out = {key: getattr(self, key) for key in SERIES}
        out.update({k: getattr(self, k) for k in OPTIONAL_SERIES if getattr(self, k) is not None})
        return out

    def to_dict(self) -> dict[str, Any]:
        """Plain data (the ``training`` entry of ``tisa analyze``'s metrics.json)."""
        return {
            "steps": list(self.steps),
            "checkpoints": list(self.checkpoints),
            "eval_loss": list(self.eval_loss),
            "ti_gram": list(self.ti_gram),
            "ti_fp_raw": list(self.ti_fp_raw),
            "ti_fp_ln": list(self.ti_fp_ln),
            "ti_gram_offdiag": None if self.ti_gram_offdiag is None else list(self.ti_gram_offdiag),
            "nulls": None
            if self.nulls is None
            else {k: [b.summary() for b in v] for k, v in self.nulls.items()},
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
    null_draws: int = 0,
    null_seed: int = 0,
    progress: bool = True,
) -> TrainingTI:
    """Translation invariance of every ``checkpoint-<step>/`` in a Trainer output folder.

    For each checkpoint: TI of P P^T with and without its diagonal, the mean over layer-1
    heads of TI(F_P) (raw and through LayerNorm), and the ``eval_loss`` logged at that
    step in the checkpoint's ``trainer_state.json`` (or the last one before it; None if
    never evaluated); with ``null_draws``, each figure's nulls at that checkpoint.

    Args:
        checkpoint_dir: folder holding ``checkpoint-<step>/`` subfolders.
        max_positions: positions analysed (default: the full table; pass the training
            length, since rows beyond it keep their initialisation).
        ln_input, include_bias: see :func:`tisa.analysis.extract.positional_logits`.
        null_draws: null tables per null and checkpoint (0: no nulls; else >= 2).
        null_seed: generator seed of the null tables.
        progress: show a progress bar.

    Raises:
        ValueError: the folder does not exist or holds no ``checkpoint-<step>`` folders.
    """
    from tqdm.auto import tqdm

    if check_int(null_draws, "null_draws", minimum=0) == 1:
        raise ValueError("null_draws must be 0 (no nulls) or >= 2, got 1")
    check_int(null_seed, "null_seed", minimum=0)
    folder = Path(checkpoint_dir)
    if not folder.is_dir():
        raise ValueError(f"checkpoint_dir must be an existing folder, got {str(checkpoint_dir)!r}")
    found = list_checkpoints(folder)
    if not found:
        raise ValueError(
            f"checkpoint_dir {str(checkpoint_dir)!r} holds no 'checkpoint-<step>' folders"
        )
    rows, nulls = [], []
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
                "ti_gram_offdiag": float(translation_invariance(terms.gram, exclude_diagonal=True)),
                "ti_fp_raw": ti.fp_raw_mean,
                "ti_fp_ln": ti.fp_ln_mean,
            }
        )
        if null_draws:
            found_nulls = table_nulls(
                model,
                max_positions=max_positions,
                ln_input=ln_input,
                include_bias=include_bias,
                draws=null_draws,
                seed=null_seed,
            )
            nulls.append({k: found_nulls.figures[v] for k, v in NULL_SERIES.items()})
    return TrainingTI.from_rows(folder.name, rows, nulls=nulls if null_draws else None)


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


#: TI series of the absolute run over training (ti.jsonl keys).
#: The TI series of a pretraining run's ti.jsonl that :func:`ti_loss_curve` follows.
TI_LOG_SERIES = ("ti_gram", "ti_fp_raw", "ti_gram_offdiag", "ti_cos_offdiag", "ti_fp_raw_offdiag")


def ti_loss_curve(path: Path) -> dict[str, Any]:
    """The TI a run logged at every evaluated checkpoint (``ti.jsonl``), with its nulls and
    Spearman's rho of each series against the validation loss."""
    rows = [r for r in read_jsonl(path) if r.get("eval_loss") is not None]
    curve: dict[str, Any] = {
        "steps": [r["step"] for r in rows],
        "eval_loss": [r["eval_loss"] for r in rows],
    }
    for key in TI_LOG_SERIES:
        curve[key] = [r.get(key) for r in rows]
        rho = spearman(curve[key], curve["eval_loss"])  # None with < 3 known values
        curve[f"spearman_{key}_vs_eval_loss"] = None if rho is None else rho.rho
        curve[f"spearman_{key}_vs_eval_loss_p"] = None if rho is None else rho.pvalue
    curve["nulls"] = [r.get("nulls") for r in rows]
    return curve
