"""Length extrapolation of masked LMs: ``tisa extrapolate``.

    tisa extrapolate runs/absolute runs/tisa --lengths 128 256 512 1024 2048

For every run and evaluation length L the held-out text (Penn Treebank test by default,
or ``--eval-file``) is tokenized with the run's own tokenizer, cut into blocks of L tokens
in the run's block format (:mod:`tisa.data.mlm`) and masked with one seed for all runs
and lengths (block i of a given text and length always gets the same mask). The masked-LM
loss is the mean cross-entropy over all masked tokens (token-weighted, not averaged per
batch); perplexity is its exponential. Each length uses the first ``max_tokens`` tokens of
the text, so all lengths score the same text.

Lengths a model cannot represent, namely longer than its absolute position table, are
reported as not applicable (``n/a``). A run whose forward pass fails at some length is
reported as ``error`` for that length (the command then exits with 1) and the others go on.

Outputs in ``--output-dir``: ``extrapolation.md`` (a table: runs x lengths, "loss (ppl)"),
``extrapolation.csv`` and ``extrapolation.json`` (one row per run and length) and
``extrapolation.png`` (loss against length, one line per run, its training length marked).

A RUN is a folder written by ``tisa pretrain`` (its ``model/`` is used, or its newest
checkpoint when training has not finished) or any saved ALBERT/BERT masked-LM folder with
its tokenizer.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import json
import logging
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tisa._validate import check_int
from tisa.files import write_atomic, write_json

__all__ = [
    "ExtrapolateConfig",
    "ExtrapolationResults",
    "ExtrapolationRow",
    "RunInfo",
    "extrapolate",
    "extrapolate_config",
    "resolve_run",
]

logger = logging.getLogger(__name__)

Status = Literal["ok", "n/a", "error"]
DEFAULT_LENGTHS: tuple[int, ...] = (128, 256, 512, 1024, 2048)


@dataclass(frozen=True)
class ExtrapolateConfig:
    """Settings of an extrapolation evaluation (validated on construction).

    Attributes:
        runs: run folders (from ``tisa pretrain``) or saved model folders.
        lengths: evaluation lengths L (tokens per block, special tokens included).
        eval_file: plain text file (one example per line); default Penn Treebank test.
        max_tokens: text tokens scored per run and length (the first ones of the text).
        mask_seed: seed of the evaluation masks (the same for all runs and lengths).
        mlm_probability: share of positions masked.
        batch_tokens: tokens per forward pass (the batch is max(1, batch_tokens // L)).
        output_dir: folder for the table and plot; None writes nothing.
        device: torch device (cpu, cuda, ...); default: CUDA when available.
        progress: show progress bars.
    """

    runs: tuple[str, ...] = field(metadata={"cli": {"positional": True, "metavar": "RUN"}})
    lengths: tuple[int, ...] = DEFAULT_LENGTHS
    eval_file: str | None = None
    max_tokens: int = 65536
    mask_seed: int = 0
    mlm_probability: float = 0.15
    batch_tokens: int = 16384
    output_dir: str | None = "runs/extrapolate"
    device: str | None = None
    progress: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "runs", tuple(str(r) for r in self.runs))
        object.__setattr__(self, "lengths", tuple(self.lengths))
        if not self.runs:
            raise ValueError("runs must name at least one run or model folder")
        if not self.lengths:
            raise ValueError("lengths must hold at least one length")
        for length in self.lengths:
            check_int(length, "lengths", minimum=3)
        if len(set(self.lengths)) != len(self.lengths):
            raise ValueError(f"lengths must be distinct, got {list(self.lengths)}")
        for name in ("max_tokens", "batch_tokens"):
            check_int(getattr(self, name), name)
        check_int(self.mask_seed, "mask_seed", minimum=0)
        if not 0.0 < self.mlm_probability < 1.0:
            raise ValueError(f"mlm_probability must be in (0, 1), got {self.mlm_probability!r}")
        if self.eval_file is not None and not Path(self.eval_file).is_file():
            raise ValueError(f"eval_file: no such file: {self.eval_file!r}")


@dataclass(frozen=True)
class RunInfo:
    """Where a run's model lives and how it was trained.

    Attributes:
        label: short unique name used in tables and plots.
        path: the folder given.
        model_dir: the folder the model and tokenizer are loaded from.
        train_seq_len: training length (None when unknown).
        block_format: ``"cls_sep"`` or ``"plain"``.
        position: position scheme (None when unknown).
    """

    label: str
    path: str
    model_dir: str
    train_seq_len: int | None
    block_format: str
    position: str | None


@dataclass(frozen=True)
class ExtrapolationRow:
    """The result of one run at one length.

    Attributes:
        run: the run's label.
        length: evaluation length L.
        status: ``"ok"``, ``"n/a"`` (the model cannot represent L) or ``"error"``.
        loss: mean masked-LM cross-entropy (nats), None unless ok.
        perplexity: exp(loss), None unless ok.
        blocks: blocks scored.
        masked_tokens: masked positions scored.
        reason: why n/a or error.
    """

    run: str
    length: int
    status: Status
    loss: float | None = None
    perplexity: float | None = None
    blocks: int = 0
    masked_tokens: int = 0
    reason: str | None = None

    def cell(self) -> str:
        """Table cell: ``"loss (ppl)"``, ``"n/a"`` or ``"error"``."""
        if self.status != "ok" or self.loss is None or self.perplexity is None:
            return self.status
        return f"{self.loss:.3f} ({self.perplexity:.1f})"


@dataclass(frozen=True)
class ExtrapolationResults:
    """All rows of an evaluation, with the runs and settings that produced them."""

    config: ExtrapolateConfig
    runs: tuple[RunInfo, ...]
    rows: tuple[ExtrapolationRow, ...]

    def row(self, run: str, length: int) -> ExtrapolationRow:
        """The row of run label ``run`` at ``length``.

        Raises:
            KeyError: no such run label or length.
        """
        for r in self.rows:
            if r.run == run and r.length == length:
                return r
        raise KeyError(f"no result for run {run!r} at length {length}")

    @property
    def has_errors(self) -> bool:
        """True when some run failed at some length."""
        return any(r.status == "error" for r in self.rows)

    def to_markdown(self) -> str:
        """Runs x lengths table of "loss (perplexity)" cells, n/a where not applicable."""
        from tisa.reports.markdown import markdown_table

        lengths = self.config.lengths
        rows = [
            [
                info.label,
                "?" if info.train_seq_len is None else info.train_seq_len,
                *(self.row(info.label, n).cell() for n in lengths),
            ]
            for info in self.runs
        ]
        table = markdown_table(
            ["run", "train length", *map(str, lengths)], rows, align="lr" + "r" * len(lengths)
        )
        text = "Masked-LM loss in nats (perplexity) by evaluation length.\n\n" + table
        notes = [r for r in self.rows if r.reason]
        if notes:
            text += "\n" + "".join(
                f"- {r.run} @ {r.length}: {r.status}, {r.reason}\n" for r in notes
            )
        return text

    def to_csv(self) -> str:
        """One line per run and length."""
        fields = [f.name for f in dataclasses.fields(ExtrapolationRow)]
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=["path", *fields])
        writer.writeheader()
        paths = {info.label: info.path for info in self.runs}
        for r in self.rows:
            values = {k: ("" if v is None else v) for k, v in dataclasses.asdict(r).items()}
            writer.writerow({"path": paths[r.run], **values})
        return buf.getvalue()

    def to_dict(self) -> dict[str, Any]:
        """Plain data: settings, runs and rows."""
        return {
            "config": dataclasses.asdict(self.config),
            "runs": [dataclasses.asdict(info) for info in self.runs],
            "rows": [dataclasses.asdict(r) for r in self.rows],
        }


# ----------------------------------------------------------------------------- runs


def resolve_run(path: str | os.PathLike[str], label: str | None = None) -> RunInfo:
    """Finds the model folder and training settings of a run or model folder.

    Raises:
        ValueError: not a folder, or no model in it.
    """
    from tisa.checkpoints import latest_checkpoint

    folder = Path(path)
    if not folder.is_dir():
        raise ValueError(f"runs: no such folder: {str(path)!r}")
    if (folder / "model" / "config.json").is_file():
        model_dir, run_dir = folder / "model", folder
    elif (folder / "config.json").is_file():
        model_dir, run_dir = folder, folder.parent
    else:
        model_dir, run_dir = latest_checkpoint(folder), folder
        if model_dir is None:
            raise ValueError(
                f"runs: {str(path)!r} holds no model (no config.json, model/ or checkpoint-*)"
            )
    settings: dict[str, Any] = {}
    saved = run_dir / "pretrain_config.json"
    if saved.is_file():
        try:
            settings = json.loads(saved.read_text()).get("config", {})
        except json.JSONDecodeError:
            settings = {}
    return RunInfo(
        label=label or folder.resolve().name,
        path=str(path),
        model_dir=str(model_dir),
        train_seq_len=settings.get("seq_len"),
        block_format=settings.get("block_format", "cls_sep"),
        position=settings.get("position"),
    )


def _labels(paths: Sequence[str]) -> list[str]:
    """Unique short labels: folder names, widened with parents where they clash."""
    from tisa.checkpoints import checkpoint_step

    parts = [Path(p).resolve().parts for p in paths]

    def generic(name: str) -> bool:  # says nothing without its run folder
        return name == "model" or checkpoint_step(name) is not None

    depth = 1
    while True:
        labels = ["/".join(p[-(depth + generic(p[-1])) :]) for p in parts]
        if len(set(labels)) == len(labels) or depth >= max(len(p) for p in parts):
            break
        depth += 1
    seen: dict[str, int] = {}
    out = []
    for label in labels:  # the same folder given twice
        seen[label] = seen.get(label, 0) + 1
        out.append(label if seen[label] == 1 else f"{label}#{seen[label]}")
    return out


def _tokenizer_key(tokenizer) -> str:
    data = json.dumps(sorted(tokenizer.get_vocab().items())).encode()
    return hashlib.sha1(data).hexdigest()


# ----------------------------------------------------------------------------- evaluation


def _evaluate_length(model, blocks, tokenizer, config: ExtrapolateConfig, device) -> tuple:
    """(loss, blocks, masked tokens) of ``model`` on (N, L) ``blocks``."""
    import torch
    from tqdm.auto import tqdm

    from tisa.data.mlm import mask_blocks
    from tisa.train.masked_lm import masked_lm_forward

    inputs, labels = mask_blocks(
        blocks, tokenizer, seed=config.mask_seed, mlm_probability=config.mlm_probability
    )
    length = inputs.shape[1]
    batch = max(1, config.batch_tokens // length)
    total, count = 0.0, 0
    with torch.inference_mode():
        for start in tqdm(
            range(0, inputs.shape[0], batch),
            desc=f"L={length}",
            disable=not config.progress,
            leave=False,
        ):
            x = inputs[start : start + batch].to(device)
            y = labels[start : start + batch].to(device)
            n = int((y != -100).sum())
            if n == 0:
                continue
            out = masked_lm_forward(
                model, labels=y, input_ids=x, token_type_ids=torch.zeros_like(x)
            )
            total += float(out.loss) * n
            count += n
    return (total / count if count else None), int(inputs.shape[0]), count


def extrapolate(
    runs: Sequence[str | os.PathLike[str]],
    lengths: Sequence[int] = DEFAULT_LENGTHS,
    *,
    eval_file: str | os.PathLike[str] | None = None,
    max_tokens: int = 65536,
    mask_seed: int = 0,
    mlm_probability: float = 0.15,
    batch_tokens: int = 16384,
    output_dir: str | os.PathLike[str] | None = "runs/extrapolate",
    device: str | None = None,
    progress: bool = True,
) -> ExtrapolationResults:
    """Masked-LM loss and perplexity of each run at each length.

    Args:
        runs: run folders from ``tisa pretrain`` or saved masked-LM folders.
        lengths: evaluation lengths.
        eval_file: plain text file; default Penn Treebank test.
        max_tokens: text tokens scored per run and length.
        mask_seed: seed of the evaluation masks (shared by all runs and lengths).
        mlm_probability: share of positions masked.
        batch_tokens: tokens per forward pass.
        output_dir: where the table (md/csv/json) and plot go; None writes nothing.
        device: torch device; default CUDA when available, else CPU.
        progress: show progress bars.

    Returns:
        :class:`ExtrapolationResults` (``n/a`` rows for lengths beyond an absolute
        position table).

    Raises:
        ValueError: bad settings, a missing run or eval file.
    """
    config = ExtrapolateConfig(
        runs=tuple(str(r) for r in runs),
        lengths=tuple(lengths),
        eval_file=None if eval_file is None else str(eval_file),
        max_tokens=max_tokens,
        mask_seed=mask_seed,
        mlm_probability=mlm_probability,
        batch_tokens=batch_tokens,
        output_dir=None if output_dir is None else str(output_dir),
        device=device,
        progress=progress,
    )
    return extrapolate_config(config)


def extrapolate_config(config: ExtrapolateConfig) -> ExtrapolationResults:
    """:func:`extrapolate` driven by an :class:`ExtrapolateConfig`."""
    import torch

    from tisa.analysis.extract import has_absolute_positions, num_positions
    from tisa.data.corpus import load_texts
    from tisa.data.mlm import block_content_length, build_blocks, token_stream
    from tisa.data.tokenizer import load_tokenizer
    from tisa.train.masked_lm import load_masked_lm

    infos = [resolve_run(p, label) for p, label in zip(config.runs, _labels(config.runs))]
    texts = load_texts(config.eval_file)
    device = torch.device(config.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    streams: dict[str, Any] = {}
    keys = set()
    rows: list[ExtrapolationRow] = []
    for info in infos:
        tokenizer = load_tokenizer(info.model_dir)
        key = _tokenizer_key(tokenizer)
        keys.add(key)
        if key not in streams:
            longest = max(block_content_length(n, "plain") for n in config.lengths)
            streams[key] = token_stream(
                texts, tokenizer, max_tokens=max(config.max_tokens, longest), progress=False
            )
        stream = streams[key]
        model = load_masked_lm(info.model_dir, device=device)
        table = num_positions(model) if has_absolute_positions(model) else None
        for length in config.lengths:
            if table is not None and length > table:
                rows.append(
                    ExtrapolationRow(
                        info.label,
                        length,
                        "n/a",
                        reason=f"absolute position table has {table} positions",
                    )
                )
                continue
            content = block_content_length(length, info.block_format)
            available = len(stream) // content
            if available == 0:
                rows.append(
                    ExtrapolationRow(
                        info.label, length, "n/a", reason=f"text shorter than {content} tokens"
                    )
                )
                continue
            wanted = max(1, config.max_tokens // content)
            blocks = build_blocks(
                stream,
                tokenizer,
                seq_len=length,
                block_format=info.block_format,
                max_blocks=min(wanted, available),
            )
            try:
                loss, n_blocks, n_masked = _evaluate_length(
                    model, blocks, tokenizer, config, device
                )
            except (RuntimeError, IndexError) as err:
                message = str(err).strip().splitlines()[0][:300] if str(err).strip() else ""
                logger.warning("%s failed at length %d: %s", info.label, length, message)
                rows.append(ExtrapolationRow(info.label, length, "error", reason=message))
                continue
            if loss is None:
                rows.append(
                    ExtrapolationRow(info.label, length, "n/a", reason="no position was masked")
                )
                continue
            rows.append(
                ExtrapolationRow(
                    info.label,
                    length,
                    "ok",
                    loss=loss,
                    perplexity=math.exp(loss) if loss < 700 else math.inf,
                    blocks=n_blocks,
                    masked_tokens=n_masked,
                )
            )
        del model
    if len(keys) > 1:
        logger.warning(
            "the runs use different tokenizers: their losses are over different tokens and "
            "not directly comparable"
        )
    results = ExtrapolationResults(config=config, runs=tuple(infos), rows=tuple(rows))
    if config.output_dir is not None:
        write_outputs(results, config.output_dir)
    return results


def write_outputs(results: ExtrapolationResults, output_dir: str | os.PathLike[str]) -> Path:
    """Writes extrapolation.{md,csv,json,png} into ``output_dir``; returns the folder."""
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    from tisa.reports.charts import extrapolation_curves
    from tisa.reports.figures import save_figure

    write_atomic(out / "extrapolation.md", results.to_markdown())
    write_atomic(out / "extrapolation.csv", results.to_csv())
    write_json(out / "extrapolation.json", results.to_dict())
    curves = {
        info.label: [
            (r.length, r.loss)
            for r in results.rows
            if r.run == info.label and r.status == "ok" and r.loss is not None
        ]
        for info in results.runs
    }
    train_lengths = {info.label: info.train_seq_len for info in results.runs}
    figure = extrapolation_curves(curves, results.config.lengths, train_lengths)
    save_figure(figure, out / "extrapolation.png", dpi=120)
    return out
