"""``tisa convert``: a pretrained encoder without its position table, with TISA instead.

    tisa convert sentence-transformers/all-MiniLM-L6-v2 --output-dir runs/convert

Pipeline (each step documented in its module):

1. load the original (BERT, RoBERTa, ALBERT, ELECTRA; :func:`tisa.analysis.load_model`);
2. build the student (:func:`tisa.convert.student.build_student`): position table removed,
   its mean row folded into the token-type embeddings, RBF scorers at zero;
3. fit the scorers layer by layer to what the table did to each layer's attention logits
   on Penn Treebank text (:func:`tisa.convert.student.fit_layers`), R^2 per head;
4. distil the student towards the original on blocks of mixed lengths up to the original's
   limit (:func:`tisa.convert.distill.distill`; resumable);
5. evaluate (:mod:`tisa.convert.evaluate`) before and after: fidelity of the embeddings on
   text not used for distillation, STS-B dev zero-shot Spearman, inputs of 1024-4096
   tokens (time, peak memory, agreement with the original on 512-token chunks),
   positional parameters;
6. save the converted model (reloads with the Auto classes after ``import tisa.hf``),
   ``metrics.json`` and ``report.html``.

Output folder::

    OUTPUT_DIR/
      model/            the converted model and its tokenizer (save_pretrained), plus the
                        sentence-transformers files (modules.json, sentence_bert_config.json,
                        1_Pooling/): ``SentenceTransformer(path)`` after ``import tisa.hf``
      fit.pt            the fitted student before distillation (reused on a rerun;
                        tensors and plain data, read without running any code)
      checkpoint/       the distillation checkpoint while it runs
      metrics.json      every figure below
      report.html       tables and figures
"""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import math
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

import tisa.hf  # noqa: F401  (registers TISA models with the Auto classes)
from tisa.checkpoints import load_plain
from tisa.console import format_seconds, stage_done
from tisa.convert.config import ConvertConfig, DistillSettings
from tisa.convert.distill import LengthSampler, distill
from tisa.convert.evaluate import fidelity, long_inputs, sts_spearman
from tisa.convert.profiles import AttentionProfiles
from tisa.convert.report import write_convert_report
from tisa.convert.student import LayerFit, build_student, fit_layers
from tisa.data.corpus import ptb_lines
from tisa.data.glue import find_glue_dir, load_glue
from tisa.data.text_blocks import text_blocks
from tisa.files import RunLock, write_atomic, write_json
from tisa.hf.architectures import has_absolute_positions, num_positions
from tisa.hf.loading import load_model
from tisa.hf.sentence_transformers import write_sentence_transformers_files
from tisa.hub import model_source
from tisa.provenance import cpu_model, run_metadata, sha256_file

__all__ = ["ConvertConfig", "ConvertResult", "convert", "finished_conversion"]

logger = logging.getLogger(__name__)


def finished_conversion(folder: str | Path, *, argument: str = "convert_dir") -> tuple[str, Path]:
    """The original's model name and the converted model's folder of a finished
    ``tisa convert`` run in ``folder`` (its ``--output-dir``).

    Raises:
        FileNotFoundError: ``folder`` lacks metrics.json or model/config.json; the message
            names ``argument``.
    """
    folder = Path(folder)
    metrics_file, model_dir = folder / "metrics.json", folder / "model"
    if not metrics_file.is_file() or not (model_dir / "config.json").is_file():
        raise FileNotFoundError(
            f"{argument}: {str(folder)!r} lacks metrics.json or model/config.json; pass the "
            "--output-dir of a finished `tisa convert`"
        )
    return json.loads(metrics_file.read_text())["model"], model_dir


@dataclass(frozen=True)
class ConvertResult:
    """What :func:`convert` returns: the metrics (as in metrics.json) and the files."""

    metrics: dict[str, Any]
    model_dir: Path
    report: Path


def _check_output(folder: Path, overwrite: bool) -> bool:
    """True when ``folder`` holds a finished conversion that is to be kept; raises when the
    folder cannot be written (checked before any work, created only later)."""
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"output_dir: {str(folder)!r} is a file; expected a folder")
    existing = next(p for p in (folder, *folder.parents) if p.exists())
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(
            f"output_dir: {str(folder)!r} is not writable (no write access to {str(existing)!r})"
        )
    done = (folder / "metrics.json").is_file() and (folder / "model").is_dir()
    if done and overwrite:
        for name in ("model", "fit.pt", "checkpoint", "metrics.json", "report.html"):
            target = folder / name
            shutil.rmtree(target) if target.is_dir() else target.unlink(missing_ok=True)
        return False
    return done


def _sts(glue_dir: str | None, limit: int | None):
    """(sentence1, sentence2, gold) of STS-B dev (the first ``limit`` pairs), or None
    without GLUE data."""
    where = glue_dir or find_glue_dir()
    if where is None:
        return None
    dev = load_glue("stsb", glue_dir=str(where), splits=("validation",))["validation"]
    n = len(dev) if limit is None else min(limit, len(dev))
    return (
        list(dev["sentence1"][:n]),
        list(dev["sentence2"][:n]),
        [float(x) for x in dev["label"][:n]],
    )


def _evaluate(original, model, tokenizer, sts, texts) -> dict[str, Any]:
    """STS-B Spearman of ``model`` (``None``: of the original) and its fidelity, on inputs
    cut at 128 tokens, or at the original's positions when it has fewer."""
    length = min(128, num_positions(original))
    out: dict[str, Any] = {}
    if model is not None:
        out["fidelity"] = fidelity(original, model, tokenizer, texts, max_length=length)
    if sts is not None:
        scored = original if model is None else model
        out["sts_spearman"] = sts_spearman(scored, tokenizer, *sts, max_length=length)
    return out


def _load_fit(path: Path, settings: dict[str, Any]):
    """The saved fit of an interrupted conversion with the same settings, else None (said
    in one line when there is a file that cannot be reused).

    The file is read as tensors and plain data only (:func:`tisa.checkpoints.load_plain`):
    one that holds other Python objects is refused unread, with a ``ValueError``.
    """
    if not path.is_file():
        return None
    try:
        saved = load_plain(path)
    except (RuntimeError, EOFError, OSError):
        logger.warning("convert: %s is damaged (cut short?); fitting again", path)
        return None
    if not isinstance(saved, dict) or saved.get("settings") != settings:
        logger.warning("convert: %s was fitted with other settings; fitting again", path)
        return None
    raw = saved["fit"]
    saved["fit"] = LayerFit(**{**raw, "original": AttentionProfiles(**raw["original"])})
    logger.warning("convert: reusing the fitted student of an interrupted run (%s)", path)
    return saved


def convert(config: ConvertConfig) -> ConvertResult:
    """Runs the conversion of the module docstring; returns its metrics and file paths.

    A rerun in a folder with a finished conversion returns it unchanged (``overwrite``
    redoes it); an interrupted one reuses the fitted student and resumes distillation.

    Raises:
        ValueError: bad settings, a model that cannot be converted (no absolute position
            table, an architecture tisa.hf does not support) or an unusable output folder.
        tisa.hf.loading.ModelLoadError: ``model`` is not a loadable model.
    """
    # two conversions into one folder would overwrite each other's fit and checkpoint
    with RunLock(config.output_dir) as lock:
        return _convert(config, lock)


def _convert(config: ConvertConfig, lock: RunLock) -> ConvertResult:
    """:func:`convert` holding ``lock`` (:class:`tisa.files.RunLock`), taken at once when
    the folder exists, else where it is created (after every check)."""
    out = Path(config.output_dir)
    if _check_output(out, config.overwrite):
        metrics = json.loads((out / "metrics.json").read_text())
        return ConvertResult(metrics=metrics, model_dir=out / "model", report=out / "report.html")
    torch.manual_seed(config.distill.seed)
    try:
        # fused attention for distillation and evaluation; the profiles switch to eager
        original, tokenizer = load_model(config.model, eager=False)
    except ValueError as err:  # ModelLoadError, UnsupportedModelError
        raise ValueError(f"model: {err}") from None
    if tisa.hf.is_tisa(original):
        raise ValueError(f"model: {config.model!r} already has TISA; convert a stock model")
    if not has_absolute_positions(original):
        raise ValueError(f"model: {config.model!r} has no absolute position table to convert")
    if getattr(original.config, "model_type", "") not in ("bert", "roberta", "albert", "electra"):
        raise ValueError(
            f"model: {config.model!r} is a {original.config.model_type!r} model; tisa convert "
            "supports BERT, RoBERTa, ALBERT and ELECTRA"
        )
    if tokenizer is None:
        raise ValueError(f"model: {config.model!r} has no tokenizer")
    limit = num_positions(original)
    settings = config.distill
    if settings.max_length > limit:
        settings = dataclasses.replace(settings, max_length=limit)
    if config.fit_length > limit:
        raise ValueError(f"fit_length: {config.fit_length} exceeds the model's {limit} positions")
    sts = _sts(config.glue_dir, config.max_sts_pairs)
    lock.acquire()  # creates the folder
    train = (
        ptb_lines("train") if config.train_file is None else _lines(config.train_file, "train_file")
    )
    test = ptb_lines("test") if config.eval_file is None else _lines(config.eval_file, "eval_file")
    eval_texts = [t for t in test if len(t.split()) >= 5][: config.eval_texts]
    timings: dict[str, float] = {}

    began = time.perf_counter()
    # log-n scaling (off by default): no effect on inputs of up to N tokens, so on
    # neither the fit nor the distillation
    student = build_student(
        original,
        fold_positions=config.fold_positions,
        length_scale=settings.max_length if config.length_scale == "auto" else config.length_scale,
        num_kernels=config.num_kernels,
        near_offsets=config.near_offsets,
        content_offsets=config.content_offsets,
        content_beyond=config.content_beyond,
    )
    fit_path = out / "fit.pt"
    fit_settings = {
        k: getattr(config, k)
        for k in ("model", "num_kernels", "fit_layers", "fold_positions", "fit_length")
    } | {"fit_blocks": config.fit_blocks}
    if config.near_offsets is not None:  # absent by default: older fit.pt files stay reusable
        fit_settings["near_offsets"] = config.near_offsets
    if config.content_offsets is not None:  # the saved student holds its (zero) vectors
        fit_settings["content_offsets"] = config.content_offsets
    saved = _load_fit(fit_path, fit_settings)
    if saved is None:
        blocks = text_blocks(tokenizer, train, length=config.fit_length, count=config.fit_blocks)
        fit = fit_layers(original, student, blocks, layers=config.fit_layers)
        before = {
            "original": _evaluate(original, None, tokenizer, sts, eval_texts),
            "fitted": _evaluate(original, student, tokenizer, sts, eval_texts),
        }
        timings["fit_s"] = time.perf_counter() - began
        # tensors and plain data only (read back with weights_only=True), written
        # atomically: a run killed while saving leaves no half file
        buffer = io.BytesIO()
        torch.save(
            {
                "settings": fit_settings,
                "student": student.state_dict(),
                "fit": dataclasses.asdict(fit),
                "before": before,
                "timings": dict(timings),
            },
            buffer,
        )
        write_atomic(fit_path, buffer.getvalue())
    else:
        student.load_state_dict(saved["student"])
        fit, before, timings = saved["fit"], saved["before"], saved["timings"]
    if config.progress:
        how = "reused from fit.pt" if saved is not None else "fitted and evaluated"
        stage_done(
            "convert fit",
            f"{len(fit.fitted_layers)} layers {how} in {format_seconds(timings['fit_s'])}",
        )

    stream = _token_stream(tokenizer, train)
    first, last = tokenizer.cls_token_id, tokenizer.sep_token_id
    curve: list[dict] = []
    if settings.steps > 0:
        sampler = LengthSampler(stream, first=first, last=last, settings=settings)
        curve = distill(
            original,
            student,
            sampler,
            settings,
            checkpoint_dir=out / "checkpoint",
            progress=config.progress,
        )
    timings["distill_s"] = sum(c["seconds"] for c in curve)  # over every resume
    if config.progress and curve:
        stage_done(
            "convert distil",
            f"{settings.steps} steps in {format_seconds(timings['distill_s'])}",
        )
    after = _evaluate(original, student, tokenizer, sts, eval_texts)

    test_stream = _token_stream(tokenizer, test)
    lengths = sorted({min(128, limit), limit, *config.lengths})
    points = long_inputs(
        original, student, test_stream, lengths, first=first, last=last, chunk=limit
    )

    staging = out / "model.staging"
    shutil.rmtree(staging, ignore_errors=True)
    student.save_pretrained(staging)
    # The converted model has no length limit, so neither has its tokenizer: otherwise it
    # warns of indexing errors past the original's table (transformers' "no limit" value).
    from transformers.tokenization_utils_base import VERY_LARGE_INTEGER

    saved_limit = tokenizer.model_max_length
    tokenizer.model_max_length = VERY_LARGE_INTEGER
    try:
        tokenizer.save_pretrained(staging)
    finally:
        tokenizer.model_max_length = saved_limit
    _sentence_transformers_files(staging, config.model, original.config.hidden_size)
    if (out / "model").exists():
        shutil.rmtree(out / "model")
    staging.rename(out / "model")

    metrics = {
        "model": config.model,
        "settings": _plain(config, settings),
        "positional_parameters": {
            "original": tisa.hf.positional_parameters(original),
            "converted": tisa.hf.positional_parameters(student),
        },
        "fit": {
            "r2": fit.r2.tolist(),
            "r2_median": float(fit.r2.nanmedian()),
            "profile_ti": fit.original.ti.tolist(),
            "fitted_layers": list(fit.fitted_layers),
        },
        "original": before["original"],
        "fitted": before["fitted"],
        "converted": after,
        "sts_relative": None,
        "lengths": [dataclasses.asdict(p) for p in points],
        "distillation": curve,
        "timings": dict(timings),
        "texts": {
            "distillation": config.train_file or "Penn Treebank train",
            "evaluation": config.eval_file or "Penn Treebank test",
        },
        "positions": limit,
        # the weights repeat bit for bit only with the same torch build, threads and CPU
        "environment": {
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "cpu": cpu_model(),
        },
        # the weights stay out of a results folder; their digest says which ones these are
        "weights_sha256": sha256_file(out / "model" / "model.safetensors"),
    }
    if sts is not None:
        metrics["sts_relative"] = after["sts_spearman"] / before["original"]["sts_spearman"]
    metrics["timings"]["total_s"] = timings["fit_s"] + timings["distill_s"]
    metrics["provenance"] = run_metadata()
    write_json(out / "metrics.json", metrics)
    report = write_convert_report(out / "report.html", metrics, fit)
    shutil.rmtree(out / "checkpoint", ignore_errors=True)
    return ConvertResult(metrics=metrics, model_dir=out / "model", report=report)


#: where sentence-transformers cuts the converted model's inputs (it needs a number; the
#: model has no limit of its own: raise it with ``model.max_seq_length = N``)
SENTENCE_TRANSFORMERS_LENGTH = 8192


def _sentence_transformers_files(folder: Path, model: str, hidden_size: int) -> None:
    """The files that make the converted folder a sentence-transformers model, with the
    original's pooling when it was a sentence-transformers folder (mean pooling else)."""
    source = Path(model_source(model)).expanduser()
    write_sentence_transformers_files(
        folder,
        hidden_size=hidden_size,
        max_seq_length=SENTENCE_TRANSFORMERS_LENGTH,
        original=source if source.is_dir() else None,
    )


def _lines(path: str, argument: str) -> list[str]:
    """Non-empty lines of a UTF-8 text file; a clear error for anything else."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"{argument}: {path!r} is not a file")
    try:
        lines = [line.strip() for line in p.read_text(encoding="utf-8").splitlines()]
    except UnicodeDecodeError:
        raise ValueError(f"{argument}: {path!r} is not UTF-8 text") from None
    lines = [line for line in lines if line]
    if not lines:
        raise ValueError(f"{argument}: {path!r} has no text")
    return lines


def _token_stream(tokenizer, lines: list[str]) -> torch.Tensor:
    """All ``lines`` tokenized (no special tokens) and concatenated: (N,) long."""
    ids: list[int] = []
    for s in range(0, len(lines), 4096):
        for row in tokenizer(lines[s : s + 4096], add_special_tokens=False)["input_ids"]:
            ids.extend(row)
    return torch.tensor(ids, dtype=torch.long)


def _plain(config: ConvertConfig, settings: DistillSettings) -> dict[str, Any]:
    data = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    data["distill"] = dataclasses.asdict(settings)
    data["lengths"] = list(config.lengths)
    return {k: v for k, v in data.items() if not (isinstance(v, float) and math.isnan(v))}
