"""Length extrapolation of masked and causal LMs: ``tisa extrapolate``.

    tisa extrapolate runs/absolute runs/tisa --lengths 128 256 512 1024 2048
    tisa extrapolate runs/tisa --scoring-options far_offset=127     # the far-field ramp
    tisa extrapolate runs/gpt2-alibi --eval-file notes.txt          # any text file

For every run and evaluation length L the held-out text (Penn Treebank test by default,
or ``--eval-file``, any plain text file with one example per line) is tokenized with the
run's own tokenizer and cut into blocks of L tokens in the run's block format
(:mod:`tisa.data.mlm`). Masked LMs: the blocks are masked with one seed for all runs and
lengths (block i of a given text and length always gets the same mask) and the loss is
the mean cross-entropy over all masked tokens. Causal LMs (GPT-2, ``tisa pretrain --arch
gpt2``): the loss is the mean next-token cross-entropy over the L - 1 predictions of every
block (non-overlapping blocks, as in ALiBi's evaluation). Both are token-weighted, not
averaged per batch; perplexity is their exponential. Each length uses the first
``max_tokens`` tokens of the text, so all lengths score the same text.

``--scoring-options KEY=VALUE ...`` changes options of every TISA scoring function before
scoring (e.g. ``far_offset=127`` switches on the far-field ramp of the kernel families,
:func:`tisa.scoring.far_ramp`): an evaluation-time change, the learned parameters stay.

Lengths a model cannot represent, namely longer than its absolute position table, are
reported as not applicable (``n/a``). A run whose forward pass fails at some length is
reported as ``error`` for that length (the command then exits with 1) and the others go on.

Outputs in ``--output-dir``: ``extrapolation.md`` (a table: runs x lengths, "loss (ppl)"),
``extrapolation.csv`` and ``extrapolation.json`` (one row per run and length) and
``extrapolation.png`` (loss against length, one line per run, its training length marked).

A RUN is a folder written by ``tisa pretrain`` (its ``model/`` is used, or its newest
checkpoint when training has not finished) or any saved ALBERT/BERT masked-LM or GPT-2
causal-LM folder with its tokenizer. The results are :mod:`tisa.evaluation.extrapolation_results`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tisa._validate import check_int
from tisa.evaluation.extrapolation_results import ExtrapolationResults, ExtrapolationRow, RunInfo
from tisa.files import write_atomic, write_json
from tisa.provenance import run_metadata

__all__ = [
    "ExtrapolateConfig",
    "ExtrapolationResults",
    "ExtrapolationRow",
    "RunInfo",
    "extrapolate",
    "extrapolate_config",
    "resolve_run",
    "with_scoring_options",
]

logger = logging.getLogger(__name__)

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
        mlm_probability: share of positions masked (masked LMs).
        scoring_options: options of every TISA scoring function changed before scoring,
            as KEY=VALUE (e.g. far_offset=127); options that would change the learned
            parameters' shapes are refused.
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
    scoring_options: tuple[str, ...] = field(default=(), metadata={"cli": {"metavar": "KEY=VALUE"}})
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
        from tisa.train.pretrain_config import parse_options

        object.__setattr__(self, "scoring_options", tuple(self.scoring_options))
        parse_options(self.scoring_options, "scoring_options")


# ----------------------------------------------------------------------------- runs


def resolve_run(path: str | os.PathLike[str], label: str | None = None) -> RunInfo:
    """Finds the model folder and training settings of a run or model folder.

    Raises:
        ValueError: not a folder, or no model in it.
    """
    from tisa.checkpoints import latest_checkpoint
    from tisa.train.causal_lm import is_causal_model_dir

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
    causal = is_causal_model_dir(model_dir)
    return RunInfo(
        label=label or folder.resolve().name,
        path=str(path),
        model_dir=str(model_dir),
        train_seq_len=settings.get("seq_len"),
        block_format=settings.get("block_format") or ("plain" if causal else "cls_sep"),
        position=settings.get("position"),
        objective="causal" if causal else "masked",
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


def with_scoring_options(model, options: dict[str, Any], *, label: str = "model"):
    """Rebuilds every TISA scoring function of ``model`` with ``options`` changed, keeping
    its learned parameters (in place; returns the model).

    Raises:
        ValueError: a model without TISA scoring functions, an option its family does not
            take, or one that changes the parameters' shapes (e.g. ``num_kernels``).
    """
    from tisa.scoring import build

    scorers = getattr(getattr(model, "base_model", model), "tisa_scorers", None)
    if not options:
        return model
    if scorers is None or len(scorers) == 0:
        raise ValueError(f"scoring_options: {label} has no TISA scoring functions to change")
    for index, old in enumerate(scorers):
        config = {**old.config(), **options}
        new = build(**config)
        try:
            new.load_state_dict(old.state_dict())
        except RuntimeError as err:
            raise ValueError(
                f"scoring_options {sorted(options)} change the learned parameters of {label}: "
                f"{str(err).splitlines()[0]}"
            ) from err
        # where add_tisa put the scorers: the model's device and dtype
        reference = next(model.parameters())
        scorers[index] = new.to(device=reference.device, dtype=reference.dtype)
    if getattr(model.config, "tisa", None) and model.config.tisa.get("scoring"):
        model.config.tisa["scoring"] = scorers[0].config()
    return model


def _evaluate_length(model, blocks, tokenizer, config: ExtrapolateConfig, device, causal) -> tuple:
    """(loss, blocks, scored tokens) of ``model`` on (N, L) ``blocks``."""
    import torch
    from tqdm.auto import tqdm

    from tisa.data.mlm import mask_blocks
    from tisa.train.causal_lm import next_token_loss
    from tisa.train.masked_lm import masked_lm_forward

    if causal:
        inputs = torch.as_tensor(blocks, dtype=torch.long)
        labels = None
    else:
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
            if causal:
                loss, n = next_token_loss(model, x)
            else:
                y = labels[start : start + batch].to(device)
                n = int((y != -100).sum())
                if n == 0:
                    continue
                loss = masked_lm_forward(
                    model, labels=y, input_ids=x, token_type_ids=torch.zeros_like(x)
                ).loss
            total += float(loss) * n
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
    scoring_options: Sequence[str] = (),
    batch_tokens: int = 16384,
    output_dir: str | os.PathLike[str] | None = "runs/extrapolate",
    device: str | None = None,
    progress: bool = True,
) -> ExtrapolationResults:
    """Loss and perplexity of each run at each length (masked-LM or next-token loss).

    Args:
        runs: run folders from ``tisa pretrain`` or saved masked-LM folders.
        lengths: evaluation lengths.
        eval_file: plain text file; default Penn Treebank test.
        max_tokens: text tokens scored per run and length.
        mask_seed: seed of the evaluation masks (shared by all runs and lengths).
        mlm_probability: share of positions masked (masked LMs).
        scoring_options: KEY=VALUE options of the TISA scoring functions changed before
            scoring (:func:`with_scoring_options`).
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
        scoring_options=tuple(scoring_options),
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
    from tisa.train.causal_lm import load_causal_lm
    from tisa.train.masked_lm import load_masked_lm
    from tisa.train.pretrain_config import parse_options

    overrides = parse_options(config.scoring_options, "scoring_options")
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
        causal = info.objective == "causal"
        model = (load_causal_lm if causal else load_masked_lm)(info.model_dir, device=device)
        with_scoring_options(model, overrides, label=info.label)
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
                    model, blocks, tokenizer, config, device, causal
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
    from tisa.files import RunLock

    with RunLock(output_dir) as lock:  # one writer at a time
        lock.acquire()
        return _write_outputs(results, Path(output_dir))


def _write_outputs(results: ExtrapolationResults, out: Path) -> Path:
    """:func:`write_outputs` into ``out``, held by the caller."""
    from tisa.reports.charts import extrapolation_curves
    from tisa.reports.figures import save_figure

    write_atomic(out / "extrapolation.md", results.to_markdown())
    write_atomic(out / "extrapolation.csv", results.to_csv())
    write_json(out / "extrapolation.json", {**results.to_dict(), "provenance": run_metadata()})
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
