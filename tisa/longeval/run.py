"""``tisa longeval``: long-document retrieval of sentence-embedding encoders.

    tisa longeval sentence-transformers/all-MiniLM-L6-v2 runs/convert/model \\
        --lengths 256 512 1024 2048 4096 8192 --output-dir runs/longeval

For every model, strategy (:mod:`tisa.longeval.strategies`; a model without a position
table runs ``native`` and any ``chunk-W``), task (:mod:`tisa.longeval.tasks`), length,
depth and seed, one *cell*: the documents and queries are built, embedded and scored (Acc@1, MRR:
:func:`tisa.longeval.results.retrieval_scores`), with the time and peak memory of
embedding the documents. Each finished cell is written at once (atomically) to
``cells/``, so a rerun of the same command skips it; a cell built with other settings is
computed again.

Output folder::

    OUTPUT_DIR/
      cells/<model>/<strategy>/<task>/L<length>-d<depth>-s<seed>.json   one per cell
      results.json    provenance, settings, models, every cell, the summary and the
                      paired comparisons of each TISA model against the others
      results.csv     one row per cell
      report.html     Acc@1 against length, depth x length heatmaps, cost per document
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import hashlib
import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

import tisa.hf  # noqa: F401  (registers TISA models with the Auto classes)
from tisa._validate import check_output_dir
from tisa.data.corpus import ptb_lines
from tisa.files import write_json
from tisa.hf.architectures import architecture_of
from tisa.hf.loading import load_model
from tisa.hf.sentence_transformers import read_pooling
from tisa.hub import model_source
from tisa.longeval.config import LongEvalConfig, chunk_window
from tisa.longeval.report import write_longeval_report
from tisa.longeval.results import compare, retrieval_scores, summarise, write_csv
from tisa.longeval.strategies import Encoder, make_strategy
from tisa.longeval.tasks import VERSION, TextSource, build_cell
from tisa.memory import peak_memory
from tisa.provenance import run_metadata, sha256_file, weights_sha256

__all__ = ["LongEvalResult", "cell_path", "load_encoder", "longeval"]


@dataclass(frozen=True)
class LongEvalResult:
    """What :func:`longeval` returns: results.json's content and the files written."""

    results: dict[str, Any]
    results_file: Path
    csv_file: Path
    report: Path
    computed: int  # cells computed in this run (the others were read back)


def model_key(name: str) -> str:
    """A folder name for a model: readable, and distinct for distinct names."""
    slug = re.sub(r"[^A-Za-z0-9.]+", "-", name).strip("-.")[-48:] or "model"
    return f"{slug}-{hashlib.sha1(name.encode()).hexdigest()[:6]}"


def cell_path(
    out: Path, model: str, strategy: str, task: str, length: int, depth: float, seed: int
) -> Path:
    return (
        out / "cells" / model_key(model) / strategy / task / f"L{length}-d{depth:.3f}-s{seed}.json"
    )


def load_encoder(name: str, *, batch_size: int = 1):
    """(encoder, model facts) of a model id or folder, ready for the strategies.

    Raises:
        ValueError: not a loadable model, a decoder, or a model that has neither an
            absolute position table nor TISA (the strategies cannot handle it).
    """
    from transformers.tokenization_utils_base import VERY_LARGE_INTEGER

    try:
        model, tokenizer = load_model(name, eager=False)
    except ValueError as err:  # ModelLoadError, UnsupportedModelError
        raise ValueError(f"models: {err}") from None
    base = getattr(model, "base_model", model)
    arch = architecture_of(base)
    if arch is None or arch.causal or getattr(model.config, "is_decoder", False):
        raise ValueError(
            f"models: {name!r} is not an encoder tisa longeval can run "
            f"(model_type {model.config.model_type!r})"
        )
    table = arch.position_table(base)
    tisa_model = tisa.hf.is_tisa(model)
    if table is None and not tisa_model:
        raise ValueError(
            f"models: {name!r} has neither an absolute position table nor TISA; the "
            "strategies cannot handle it"
        )
    if tokenizer is None:
        raise ValueError(f"models: {name!r} has no tokenizer")
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(f"models: {name!r} has no fast tokenizer (tokenizer.json)")

    tokenizer.model_max_length = VERY_LARGE_INTEGER  # the strategies cut inputs themselves
    first = arch.first_position(base) if table is not None else 0
    positions = None if table is None else table.num_embeddings - first
    source = Path(model_source(name)).expanduser()
    folder = str(source) if source.is_dir() else None
    pooling = read_pooling(folder)
    encoder = Encoder(
        model=base.eval(),
        tokenizer=tokenizer,
        pooling=pooling.mode,
        positions=positions,
        first=first,
        source=folder,
        batch_size=batch_size,
    )
    facts = {
        "name": name,
        "model_type": model.config.model_type,
        "tisa": tisa_model,
        "positions": positions,
        # a converted model's hard attention window (TisaSettings.attention_window)
        "attention_window": (getattr(model.config, "tisa", None) or {}).get("attention_window"),
        "pooling": pooling.mode,
        "pooling_source": pooling.source,
        "parameters": sum(p.numel() for p in model.parameters()),
        "fingerprint": fingerprint(model),
        # the weights file read, when a folder holds one: the digest tisa convert records
        "weights_sha256": weights_sha256(folder),
    }
    return encoder, facts


def fingerprint(model: torch.nn.Module) -> str:
    """A digest of a model's config and weights: a cell computed with other weights or
    another config (a folder converted again, a changed ``length_scale``) is not reused."""
    digest = hashlib.sha256(model.config.to_json_string(use_diff=False).encode())
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy())
    return digest.hexdigest()


def _text(config: LongEvalConfig):
    if config.text_file is None:
        # held-out text: tisa convert distils on the training set
        return TextSource(ptb_lines("test", unk=None) + ptb_lines("validation", unk=None))
    path = Path(config.text_file).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"text_file: no such file: {config.text_file!r}")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        raise ValueError(f"text_file: {config.text_file!r} is not UTF-8 text") from None
    return TextSource([line for line in lines if line.strip()])


def _settings(config: LongEvalConfig) -> dict[str, Any]:
    data = dataclasses.asdict(config)
    return {k: list(v) if isinstance(v, tuple) else v for k, v in data.items()}


@functools.lru_cache(maxsize=8)
def _text_sha256(path: str) -> str:
    return sha256_file(Path(path))


def _cell_key(config: LongEvalConfig, facts: dict[str, Any], strategy_version: int = 1,
              **where: Any) -> dict[str, Any]:
    """What a cell's result depends on: a saved cell with another key is recomputed.

    ``facts`` are the model's (:func:`load_encoder`): its weights and config (their
    :func:`fingerprint`) and pooling are part of the key, so a folder whose model changed
    is evaluated again; so are a revised strategy (its ``version``, recorded from 2 on)
    and the content of ``--text-file`` (its SHA-256), not only its path.
    """
    text = config.text_file
    return where | {
        "model_fingerprint": facts["fingerprint"],
        "pooling": facts["pooling"],
        "tasks_version": VERSION,
        **({"draw": config.draw} if config.draw != "seed" else {}),
        **({"strategy_version": strategy_version} if strategy_version > 1 else {}),
        "candidates": config.candidates,
        "passage_tokens": config.passage_tokens,
        "text_file": text,
        **({"text_sha256": _text_sha256(text)} if text is not None else {}),
        "batch_size": config.batch_size,
    }


def _read_cell(path: Path, key: dict[str, Any]) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        saved = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None  # cut short: compute again
    return saved if saved.get("key") == key else None


def _run_cell(strategy, encoder, cell) -> dict[str, Any]:
    held: dict[str, Any] = {}
    strategy.prepare(cell.length)

    def documents() -> None:
        start = time.perf_counter()
        held["docs"] = strategy.embed(cell.documents, cell.length)
        held["seconds"] = time.perf_counter() - start

    peak = peak_memory(documents)
    queries = strategy.embed(cell.queries, cell.length)
    scores = retrieval_scores(queries, held["docs"])
    n = len(cell.documents)
    return scores | {
        "documents": n,
        "tokens_mean": sum(cell.tokens) / n,
        "tokens_max": max(cell.tokens),
        "seconds_per_document": held["seconds"] / n,
        "peak_memory_mb": None if peak is None else peak / 2**20,
    }


@contextlib.contextmanager
def _loading_bars(show: bool) -> Iterator[None]:
    """transformers' weight-loading bars, off when progress bars are."""
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled()
    if not show:
        hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was:
            hf_logging.enable_progress_bar()


def strategies_for(positions: int | None, strategies: tuple[str, ...]) -> tuple[str, ...]:
    """The strategies a model runs: for a model without a position table (TISA),
    ``native`` and every ``chunk-W``; for a table of n rows, every strategy asked for but
    a ``chunk-W`` with W > n, which it cannot read (results.json lists each model's)."""
    if positions is None:
        return ("native", *(s for s in strategies if chunk_window(s) is not None))
    return tuple(s for s in strategies if (chunk_window(s) or 0) <= positions)


def longeval(config: LongEvalConfig, *, command: list[str] | None = None) -> LongEvalResult:
    """Runs every cell of ``config`` (finished ones are read back) and writes results.json,
    results.csv and report.html.

    Args:
        config: the settings.
        command: the command line recorded in the provenance (default ``sys.argv``).

    Raises:
        ValueError: an unusable output folder, model, strategy or text.
    """
    from tqdm.auto import tqdm

    out = check_output_dir(config.output_dir, "output_dir")
    threads = torch.get_num_threads()
    if config.threads is not None:
        torch.set_num_threads(config.threads)
    try:
        # every model and strategy is checked before the first cell runs
        text = _text(config) if {"needle", "passage"} & set(config.tasks) else None
        plans = []
        for name in config.models:
            with _loading_bars(config.progress):
                encoder, facts = load_encoder(name, batch_size=config.batch_size)
            names = strategies_for(facts["positions"], config.strategies)
            if not names:
                raise ValueError(
                    f"strategies: {name} reads at most {facts['positions']} tokens and can run "
                    f"none of {', '.join(config.strategies)}"
                )
            facts["strategies"] = list(names)
            # a length too short for a task, or a text too short for the longest, fails
            # now, not hours later
            ends = sorted({min(config.lengths), max(config.lengths)})
            for task, length in ((t, n) for t in config.tasks for n in ends):
                build_cell(
                    task,
                    encoder.tokenizer,
                    length=length,
                    depth=config.depths[0],
                    seed=config.seeds[0],
                    candidates=config.candidates,
                    text=text,
                    passage_tokens=config.passage_tokens,
                    draw=config.draw,
                )
            plans.append((name, encoder, facts, [make_strategy(s, encoder) for s in names]))
        out.mkdir(parents=True, exist_ok=True)
        meta = run_metadata(command)
        # the memory reading collects garbage before each cell: keep what is loaded now
        # (models, libraries) out of those collections, or each would take a second
        gc.collect()
        gc.freeze()
        cells: list[dict[str, Any]] = []
        computed = 0
        grid = [
            (length, task, depth, seed)
            for length in config.lengths
            for task in config.tasks
            for depth in config.depths
            for seed in config.seeds
        ]
        for name, encoder, facts, strategies in plans:
            encoder.run([encoder.frame(encoder.content(["warm up"])[0])])  # first-call costs
            for strategy in strategies:
                bar = tqdm(grid, desc=f"{name} / {strategy.name}", disable=not config.progress)
                for length, task, depth, seed in bar:
                    where = dict(
                        model=name,
                        strategy=strategy.name,
                        task=task,
                        length=length,
                        depth=depth,
                        seed=seed,
                    )
                    key = _cell_key(config, facts, strategy.version, **where)
                    path = cell_path(out, name, strategy.name, task, length, depth, seed)
                    saved = _read_cell(path, key)
                    if saved is None:
                        cell = build_cell(
                            task,
                            encoder.tokenizer,
                            length=length,
                            depth=depth,
                            seed=seed,
                            candidates=config.candidates,
                            text=text,
                            passage_tokens=config.passage_tokens,
                            draw=config.draw,
                        )
                        saved = {"key": key, **where, **_run_cell(strategy, encoder, cell)}
                        write_json(path, saved)
                        computed += 1
                    cells.append({k: v for k, v in saved.items() if k != "key"})
                bar.close()
        results = {
            "provenance": meta,
            "settings": _settings(config),
            "models": [facts for _, _, facts, _ in plans],
            "summary": summarise(cells),
            "comparisons": compare(cells, [facts for _, _, facts, _ in plans],
                                   unit=config.draw),
            "cells": cells,
        }
        results_file = write_json(out / "results.json", results)
        csv_file = write_csv(out / "results.csv", cells)
        report = write_longeval_report(out / "report.html", results)
    finally:
        gc.unfreeze()
        torch.set_num_threads(threads)
    return LongEvalResult(results, results_file, csv_file, report, computed)
