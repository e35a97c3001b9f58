"""Scores and tables of a ``tisa longeval`` run.

* :func:`retrieval_scores`: Acc@1 and MRR of one cell from the query and document
  embeddings (cosine similarity; ties shared, see the function);
* :func:`summarise`: the cells averaged over depths and seeds, per (model, strategy,
  task, length), and per depth;
* :func:`write_csv`: one row per cell.
"""

from __future__ import annotations

import csv
import io
import os
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from torch import Tensor, nn

from tisa.files import write_atomic

__all__ = ["CSV_COLUMNS", "retrieval_scores", "summarise", "write_csv"]


def retrieval_scores(queries: Tensor, documents: Tensor) -> dict[str, Any]:
    """Acc@1 and MRR of queries (N, D) against documents (N, D); query i's answer is
    document i.

    Similarity is the cosine. A tie with the right document is shared: a query whose
    document ties with k others for the top counts 1 / (k + 1) towards Acc@1 (its
    expected score when ties are broken at random), and its rank is the middle of the
    tied ranks, so that identical embeddings (documents a strategy cut to the same text)
    score chance, not the luck of the order.

    Returns:
        ``acc1``, ``mrr`` and ``ranks`` (each query's rank, 1 = first).
    """
    if queries.shape != documents.shape or queries.dim() != 2:
        raise ValueError(
            f"queries, documents: expected equal (N, D) shapes, got {tuple(queries.shape)} "
            f"and {tuple(documents.shape)}"
        )
    q = nn.functional.normalize(queries.double(), dim=-1)
    d = nn.functional.normalize(documents.double(), dim=-1)
    sims = q @ d.T  # (N, N)
    own = sims.diagonal()[:, None]
    better = (sims > own).sum(1).double()
    ties = (sims == own).sum(1).double() - 1  # other documents as similar as the answer
    hit = (better == 0).double() / (ties + 1)
    ranks = 1 + better + ties / 2
    return {
        "acc1": float(hit.mean()),
        "mrr": float((1 / ranks).mean()),
        "ranks": [float(r) for r in ranks],
    }


#: the columns of results.csv
CSV_COLUMNS = (
    "model",
    "strategy",
    "task",
    "length",
    "depth",
    "seed",
    "acc1",
    "mrr",
    "documents",
    "tokens_mean",
    "tokens_max",
    "seconds_per_document",
    "peak_memory_mb",
)


def write_csv(path: str | os.PathLike[str], cells: Sequence[dict[str, Any]]) -> Path:
    """One row per cell (:data:`CSV_COLUMNS`), written atomically."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(CSV_COLUMNS), extrasaction="ignore")
    writer.writeheader()
    for cell in cells:
        writer.writerow({k: "" if cell.get(k) is None else cell[k] for k in CSV_COLUMNS})
    return write_atomic(path, buf.getvalue())


def _mean(values: Sequence[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None


def summarise(cells: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (model, strategy, task, length): Acc@1 and MRR averaged over depths and seeds
    (every cell the same weight), Acc@1 per depth (over seeds), and the mean time and
    peak memory per document."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for c in cells:
        groups[(c["model"], c["strategy"], c["task"], c["length"])].append(c)
    out = []
    for (model, strategy, task, length), group in groups.items():
        depths: dict[float, list[float]] = defaultdict(list)
        for c in group:
            depths[c["depth"]].append(c["acc1"])
        out.append(
            {
                "model": model,
                "strategy": strategy,
                "task": task,
                "length": length,
                "acc1": _mean([c["acc1"] for c in group]),
                "mrr": _mean([c["mrr"] for c in group]),
                "acc1_by_depth": {str(d): _mean(v) for d, v in sorted(depths.items())},
                "cells": len(group),
                "seconds_per_document": _mean([c["seconds_per_document"] for c in group]),
                "peak_memory_mb": _mean([c["peak_memory_mb"] for c in group]),
            }
        )
    return out


