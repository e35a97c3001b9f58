"""Length extrapolation of masked and causal LMs: ``tisa extrapolate``.

    tisa extrapolate runs/absolute runs/tisa --lengths 128 256 512 1024 2048
    tisa extrapolate runs/tisa --scoring-options far_offset=127     # the far-field ramp
    tisa extrapolate runs/gpt2-alibi --eval-file notes.txt          # any text file
    tisa extrapolate runs/gpt2-alibi --stride 64                    # sliding windows
    tisa extrapolate runs/tisa --context-curve 64 128 256 512 1024  # loss against context

For every run and evaluation length L the held-out text (Penn Treebank test by default,
or ``--eval-file``, any plain text file with one example per line) is tokenized with the
run's own tokenizer into one token stream and cut into blocks of L tokens in the run's
block format (:mod:`tisa.data.mlm`). Each length uses the first ``max_tokens`` tokens of
the text, so all lengths score the same text.

Masked LMs: the masks are decided per token of the stream, by the mask seed and the
token's index in the stream (:func:`tisa.data.mlm.mask_stream`), so every length masks
exactly the same tokens (and every run with the same tokenizer too); only the tokens that
the blocks of every length cover are scored (the others stay as context), so every length
scores the same targets. The loss is the mean cross-entropy over them.

Causal LMs (GPT-2, ``tisa pretrain --arch gpt2``): by default the mean next-token
cross-entropy over the L - 1 predictions of every non-overlapping block (as in ALiBi's
evaluation: the early tokens of each block see little context). ``--stride S`` slides
windows of L tokens by S instead (the Hugging Face perplexity guide): each token is scored
once, with up to L - 1 tokens of context before it (at least L - S), so the loss measures
the use of a long context rather than the early-token effect; ``--stride L`` gives the
non-overlapping blocks. Both losses are token-weighted, not averaged per batch;
perplexity is their exponential.

``--context-curve C1 C2 ...``: the loss on a fixed set of target spans
(``--context-spans`` spans of ``--context-span`` tokens) seen through windows of c tokens
for each c: at the end of the window for a causal LM, in its middle for a masked LM (with
the per-token masks of the whole window, scoring the span's masked tokens). The targets
are the same at every c, so the curve shows how much a model gains (or loses) from more
context, and its slope against log2(c) from the training length on (nats per doubling)
sums up extrapolation in one number per run (:mod:`tisa.data.windows`).

``--scoring-options KEY=VALUE ...`` changes options of every TISA scoring function before
scoring (e.g. ``far_offset=127`` switches on the far-field ramp of the kernel families,
:func:`tisa.scoring.far_ramp`): an evaluation-time change, the learned parameters stay.

Lengths a model cannot represent, namely longer than its absolute position table, are
reported as not applicable (``n/a``). A run whose forward pass fails at some length is
reported as ``error`` for that length (the command then exits with 1) and the others go on.

Outputs in ``--output-dir``: ``extrapolation.md`` (a table: runs x lengths, "loss (ppl)",
and the context curve's table with its slopes), ``extrapolation.csv`` and
``extrapolation.json`` (one row per run and length; the JSON also holds the context rows
and slopes) and ``extrapolation.png`` (loss against length, one line per run, its training
length marked); with a context curve also ``context.csv`` and ``context.png``.

A RUN is a folder written by ``tisa pretrain`` (its ``model/`` is used, or its newest
checkpoint when training has not finished) or any saved ALBERT/BERT masked-LM or GPT-2
causal-LM folder with its tokenizer. The results are :mod:`tisa.pretrain.extrapolation_results`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tisa.checkpoints import checkpoint_step, latest_checkpoint
from tisa.data.corpus import load_texts
from tisa.data.mlm import (
    block_content_length,
    build_blocks,
    mask_stream,
    masked_stream_blocks,
    token_stream,
)
from tisa.data.tokenizer import load_tokenizer
from tisa.data.windows import context_span_starts, context_windows, sliding_windows
from tisa.files import RunLock, write_atomic, write_json
from tisa.hf.architectures import has_absolute_positions, num_positions
from tisa.hf.install import with_scoring_options
from tisa.pretrain.causal_lm import is_causal_model_dir, load_causal_lm
from tisa.pretrain.config import DEFAULT_LENGTHS, ExtrapolateConfig, parse_options
from tisa.pretrain.extrapolation_results import (
    ContextRow,
    ExtrapolationResults,
    ExtrapolationRow,
    RunInfo,
)
from tisa.pretrain.losses import (
    causal_blocks_loss,
    causal_windows_loss,
    masked_blocks_loss,
    masked_windows_loss,
)
from tisa.pretrain.masked_lm import load_masked_lm
from tisa.provenance import run_metadata
from tisa.reports.charts import extrapolation_curves
from tisa.reports.figures import save_figure

__all__ = [
    "ContextRow",
    "ExtrapolateConfig",
    "ExtrapolationResults",
    "ExtrapolationRow",
    "RunInfo",
    "extrapolate",
    "extrapolate_config",
    "resolve_run",
]

logger = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- runs


def resolve_run(path: str | os.PathLike[str], label: str | None = None) -> RunInfo:
    """Finds the model folder and training settings of a run or model folder.

    Raises:
        ValueError: not a folder, or no model in it.
    """
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


def extrapolate(
    runs: Sequence[str | os.PathLike[str]],
    lengths: Sequence[int] = DEFAULT_LENGTHS,
    *,
    eval_file: str | os.PathLike[str] | None = None,
    max_tokens: int = 65536,
    mask_seed: int = 0,
    mlm_probability: float = 0.15,
    stride: int | None = None,
    context_curve: Sequence[int] = (),
    context_span: int = 32,
    context_spans: int = 128,
    scoring_options: Sequence[str] = (),
    length_scale: int | None = None,
    clip_distance: int | None = None,
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
        stride: causal LMs: sliding-window stride (None: non-overlapping blocks).
        context_curve: window lengths of the context curve (empty: none).
        context_span: tokens per target span of the context curve.
        context_spans: number of target spans of the context curve.
        scoring_options: KEY=VALUE options of the TISA scoring functions changed before
            scoring (:func:`with_scoring_options`).
        length_scale: log-n scaling past N keys for every run with TISA attention
            (``tisa.hf.TisaSettings.length_scale``); None: as saved.
        clip_distance: offsets beyond +-K read as +-K for every run with TISA attention
            (``tisa.hf.TisaSettings.clip_distance``); None: as saved.
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
        stride=stride,
        context_curve=tuple(context_curve),
        context_span=context_span,
        context_spans=context_spans,
        scoring_options=tuple(scoring_options),
        length_scale=length_scale,
        clip_distance=clip_distance,
        batch_tokens=batch_tokens,
        output_dir=None if output_dir is None else str(output_dir),
        device=device,
        progress=progress,
    )
    return extrapolate_config(config)


def extrapolate_config(config: ExtrapolateConfig) -> ExtrapolationResults:
    """:func:`extrapolate` driven by an :class:`ExtrapolateConfig`."""
    import torch

    overrides = parse_options(config.scoring_options, "scoring_options")
    infos = [resolve_run(p, label) for p, label in zip(config.runs, _labels(config.runs))]
    texts = load_texts(config.eval_file)
    device = torch.device(config.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    streams: dict[str, Any] = {}
    masked_streams: dict[str, Any] = {}
    keys = set()
    rows: list[ExtrapolationRow] = []
    context_rows: list[ContextRow] = []
    if config.stride is not None and any(info.objective == "masked" for info in infos):
        logger.warning("stride applies to causal LMs; masked LMs are scored on their blocks")
    longest = max(block_content_length(n, "plain") for n in config.lengths)
    if config.context_curve:
        longest = max(longest, 2 * max(config.context_curve) + 2 + _context_tokens(config))
    for info in infos:
        tokenizer = load_tokenizer(info.model_dir)
        key = _tokenizer_key(tokenizer)
        keys.add(key)
        if key not in streams:
            streams[key] = token_stream(
                texts, tokenizer, max_tokens=max(config.max_tokens, longest), progress=False
            )
        stream = streams[key]
        causal = info.objective == "causal"
        if not causal and key not in masked_streams:
            masked_streams[key] = mask_stream(
                stream, tokenizer, seed=config.mask_seed, mlm_probability=config.mlm_probability
            )
        masked = None if causal else masked_streams[key]
        model = (load_causal_lm if causal else load_masked_lm)(info.model_dir, device=device)
        with_scoring_options(model, overrides, label=info.label)
        _set_inference(model, config, info.label)
        table = num_positions(model) if has_absolute_positions(model) else None
        limit = None if causal else _score_limit(stream, config, info.block_format)
        for length in config.lengths:
            if table is not None and length > table:
                reason = f"absolute position table has {table} positions"
                rows.append(ExtrapolationRow(info.label, length, "n/a", reason=reason))
                continue
            try:
                row = _evaluate_length(
                    model, stream, masked, tokenizer, info, length, limit, config, device
                )
            except (RuntimeError, IndexError) as err:
                message = str(err).strip().splitlines()[0][:300] if str(err).strip() else ""
                logger.warning("%s failed at length %d: %s", info.label, length, message)
                row = ExtrapolationRow(info.label, length, "error", reason=message)
            rows.append(row)
        if config.context_curve:
            context_rows.extend(
                _context_curve(model, stream, masked, tokenizer, info, table, config, device)
            )
        del model
    if len(keys) > 1:
        logger.warning(
            "the runs use different tokenizers: their losses are over different tokens and "
            "not directly comparable"
        )
    results = ExtrapolationResults(
        config=config, runs=tuple(infos), rows=tuple(rows), context_rows=tuple(context_rows)
    )
    if config.output_dir is not None:
        write_outputs(results, config.output_dir)
    return results


def _set_inference(model: Any, config: ExtrapolateConfig, label: str) -> None:
    """Sets ``config``'s log-n scaling and offset clipping on a model with TISA attention;
    a model without it (an absolute table) is scored as it is, which is said."""
    changes = {name: getattr(config, name) for name in ("length_scale", "clip_distance")
               if getattr(config, name) is not None}
    if not changes:
        return
    if getattr(model.config, "tisa", None) is None:
        logger.warning("%s has no TISA attention: %s do not apply, it is scored as it is",
                       label, ", ".join(changes))
        return
    model.config.tisa = dict(model.config.tisa, **changes)


def _context_tokens(config: ExtrapolateConfig) -> int:
    return config.context_span * config.context_spans


def _score_limit(stream, config: ExtrapolateConfig, block_format: str) -> int | None:
    """Stream tokens scored at every length (masked LMs): the shortest coverage of the blocks.

    At each length the blocks cover a whole number of blocks of text; scoring only the
    tokens before the shortest such coverage makes every length score the same tokens.
    """
    covered = []
    for length in config.lengths:
        content = block_content_length(length, block_format)
        blocks = min(max(1, config.max_tokens // content), len(stream) // content)
        if blocks > 0:
            covered.append(blocks * content)
    return min(covered) if covered else None


def _ok_row(label: str, length: int, total: float, count: int, blocks: int) -> ExtrapolationRow:
    if count == 0:
        return ExtrapolationRow(label, length, "n/a", reason="no token was scored")
    loss = total / count
    return ExtrapolationRow(
        label,
        length,
        "ok",
        loss=loss,
        perplexity=math.exp(loss) if loss < 700 else math.inf,
        blocks=blocks,
        masked_tokens=count,
    )


def _evaluate_length(
    model, stream, masked, tokenizer, info: RunInfo, length: int, limit, config, device
) -> ExtrapolationRow:
    """One run at one length: masked blocks, non-overlapping or sliding causal windows."""
    content = block_content_length(length, info.block_format)
    if config.stride is not None and info.objective == "causal":
        tokens = min(len(stream), config.max_tokens)
        if tokens < length:
            reason = f"text shorter than {length} tokens"
            return ExtrapolationRow(info.label, length, "n/a", reason=reason)
        windows = sliding_windows(tokens, length=length, stride=config.stride)
        total, count = causal_windows_loss(
            model,
            stream,
            windows,
            batch_tokens=config.batch_tokens,
            device=device,
            progress=config.progress,
        )
        return _ok_row(info.label, length, total, count, len(windows))
    available = len(stream) // content
    if available == 0:
        reason = f"text shorter than {content} tokens"
        return ExtrapolationRow(info.label, length, "n/a", reason=reason)
    wanted = min(max(1, config.max_tokens // content), available)
    if info.objective == "causal":
        blocks = build_blocks(
            stream, tokenizer, seq_len=length, block_format=info.block_format, max_blocks=wanted
        )
        total, count = causal_blocks_loss(model, blocks, config, device)
        return _ok_row(info.label, length, total, count, len(blocks))
    inputs, labels, _ = masked_stream_blocks(
        *masked,
        tokenizer,
        seq_len=length,
        block_format=info.block_format,
        max_blocks=wanted,
        score_limit=limit,
    )
    total, count = masked_blocks_loss(model, inputs, labels, config, device, f"L={length}")
    return _ok_row(info.label, length, total, count, inputs.shape[0])


def _context_curve(
    model, stream, masked, tokenizer, info: RunInfo, table, config, device
) -> list[ContextRow]:
    """The run's loss on the same target spans at each context of ``config.context_curve``."""
    causal = info.objective == "causal"
    text = {c: block_content_length(c, info.block_format) for c in config.context_curve}
    try:
        starts = context_span_starts(
            len(stream),
            max_context=max(text.values()),
            span=config.context_span,
            spans=config.context_spans,
            causal=causal,
        )
    except ValueError as err:
        return [ContextRow(info.label, c, "n/a", reason=str(err)) for c in config.context_curve]
    out = []
    for c in config.context_curve:
        if table is not None and c > table:
            reason = f"absolute position table has {table} positions"
            out.append(ContextRow(info.label, c, "n/a", reason=reason))
            continue
        windows = context_windows(starts, context=text[c], span=config.context_span, causal=causal)
        common = dict(batch_tokens=config.batch_tokens, device=device, progress=config.progress)
        try:
            if causal:
                total, count = causal_windows_loss(model, stream, windows, **common)
            else:
                total, count = masked_windows_loss(
                    model, *masked, windows, tokenizer, block_format=info.block_format, **common
                )
        except (RuntimeError, IndexError) as err:
            message = str(err).strip().splitlines()[0][:300] if str(err).strip() else ""
            logger.warning("%s failed at context %d: %s", info.label, c, message)
            out.append(ContextRow(info.label, c, "error", reason=message))
            continue
        if count == 0:
            out.append(ContextRow(info.label, c, "n/a", reason="no token was scored"))
            continue
        out.append(ContextRow(info.label, c, "ok", loss=total / count, tokens=count))
    return out


def write_outputs(results: ExtrapolationResults, output_dir: str | os.PathLike[str]) -> Path:
    """Writes extrapolation.{md,csv,json,png} into ``output_dir`` (and, with a context
    curve, context.{csv,png}); returns the folder."""
    with RunLock(output_dir) as lock:  # one writer at a time
        lock.acquire()
        return _write_outputs(results, Path(output_dir))


def _write_outputs(results: ExtrapolationResults, out: Path) -> Path:
    """:func:`write_outputs` into ``out``, held by the caller."""
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
    if results.context_rows:
        write_atomic(out / "context.csv", results.context_csv())
        points = {info.label: results.context_points(info.label) for info in results.runs}
        figure = extrapolation_curves(
            points,
            results.config.context_curve,
            train_lengths,
            xlabel="context: window length c (tokens)",
            ylabel="loss on the fixed target spans (nats)",
            title="Loss against context (dotted: training length)",
        )
        save_figure(figure, out / "context.png", dpi=120)
    return out
