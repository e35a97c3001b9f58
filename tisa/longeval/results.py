"""Scores and tables of a ``tisa longeval`` run.

* :func:`retrieval_scores`: Acc@1 and MRR of one cell from the query and document
  embeddings (cosine similarity; ties shared, see the function);
* :func:`summarise`: the cells averaged over depths and seeds, per (model, strategy,
  task, length), and per depth;
* :func:`compare`: each TISA model against every other (model, strategy), paired over
  the cells they share, with Holm's correction;
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
from tisa.longeval.config import DRAWS

__all__ = ["CSV_COLUMNS", "compare", "merge_summaries", "retrieval_scores", "summarise",
           "write_csv"]


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


def merge_summaries(
    results: Sequence[dict[str, Any]], sources: Sequence[str]
) -> tuple[list[dict[str, Any]], list[str]]:
    """The summary rows of several results.json (``sources`` names them), one row per
    model, strategy, task and length: the first file's where two share one. Returns the
    rows and a line for each later row whose Acc@1 differs from the one kept."""
    rows: dict[tuple, dict[str, Any]] = {}
    notes = []
    for r, source in zip(results, sources, strict=True):
        for row in r["summary"]:
            key = (row["model"], row["strategy"], row["task"], row["length"])
            if key not in rows:
                rows[key] = {**row, "source": source}
            elif rows[key]["acc1"] != row["acc1"]:
                notes.append(f"{source}: {', '.join(map(str, key))}: Acc@1 {row['acc1']:.4f}; "
                             f"kept {rows[key]['acc1']:.4f} of {rows[key]['source']}")
    return list(rows.values()), notes


def _check_unit(unit: str) -> None:
    if unit not in DRAWS:
        raise ValueError(f"unit: expected {' or '.join(DRAWS)}, got {unit!r}")


def paired_units(
    own: dict[tuple, float], other: dict[tuple, float], unit: str = "seed"
) -> tuple[list[float], list[float], bool]:
    """The pairs of two readings of the same cells (Acc@1 by ``(depth, seed)``), over the
    cells both have: by seed, each side averaged over that seed's depths; by cell, one
    pair a cell (see :func:`compare`). Returns both sides' values, pair by pair, and
    whether the pairs hold different numbers of cells."""
    _check_unit(unit)
    pairs: dict[Any, list[tuple]] = defaultdict(list)
    for key in sorted(set(own) & set(other)):
        pairs[key[1] if unit == "seed" else key].append(key)
    a = [_mean([own[k] for k in keys]) for keys in pairs.values()]
    b = [_mean([other[k] for k in keys]) for keys in pairs.values()]
    return a, b, len({len(keys) for keys in pairs.values()}) > 1


def compare(
    cells: Sequence[dict[str, Any]], models: Sequence[dict[str, Any]], *, level: float = 0.95,
    unit: str = "seed",
) -> list[dict[str, Any]]:
    """Each model without a position table (TISA, run ``native`` and any ``chunk-W``)
    against every other (model, strategy), per task and length (a TISA model's own
    strategies once: its ``chunk-W`` against its ``native``, not the reverse): the
    paired difference of Acc@1 by seed, with a t interval and Holm's correction over
    every comparison returned.

    ``unit`` is what was drawn independently (``LongEvalConfig.draw``). ``"seed"``: each
    side's Acc@1 is averaged over the depths of that seed's cells both sides have (the
    same documents and queries), and the seeds are the pairs. The depths of one seed are
    then not independent samples: they read the same drawn text, names and keys with the
    evidence moved, so a test over depth x seed cells would count one draw several times
    and give intervals that are too narrow. ``"cell"``: every depth of every seed was
    drawn on its own, and the cells are the pairs.

    Returns one row per comparison: ``model``, ``strategy`` (its reading: ``native`` or
    ``chunk-W``), ``against`` and ``against_strategy``, ``task``, ``length``, ``acc1`` and
    ``against_acc1`` (means over the pairs, so that their difference is ``mean``), the
    difference's ``mean``, ``low``,
    ``high``, ``p``, ``p_holm``, ``n`` (pairs: seeds or cells), ``cells`` (cells in
    common), ``unit``, and ``best``:
    whether the alternative has the highest mean Acc@1 of the other models' alternatives
    at that task and length (never the model's own native reading). Comparisons with fewer
    than two pairs are left out.
    """
    from tisa.stats import holm, paired_difference

    _check_unit(unit)
    native = {m["name"] for m in models if m.get("positions") is None}
    by: dict[tuple, dict[tuple, float]] = defaultdict(dict)
    for c in cells:
        by[(c["model"], c["strategy"], c["task"], c["length"])][(c["depth"], c["seed"])] = c[
            "acc1"
        ]
    rows: list[dict[str, Any]] = []
    for (model, strategy, task, length), own in sorted(by.items(), key=str):
        if model not in native:
            continue
        others = [
            (om, os_, scores)
            for (om, os_, ot, ol), scores in sorted(by.items(), key=str)
            if ot == task and ol == length and (om, os_) != (model, strategy)
            and (om != model or os_ == "native")
        ]
        means = {(om, os_): sum(s.values()) / len(s) for om, os_, s in others if s}
        # the best alternative is another model's: a chunk-W row's own native is compared
        # but is not what a user would pick instead of the model
        best = max((v for (om, _), v in means.items() if om != model), default=None)
        for om, os_, scores in others:
            common = sorted(set(own) & set(scores))
            a, b, unbalanced = paired_units(own, scores, unit)
            if len(a) < 2:
                continue
            diff = paired_difference(a, b, level=level)
            rows.append(
                {
                    "model": model,
                    "strategy": strategy,
                    "against": om,
                    "against_strategy": os_,
                    "task": task,
                    "length": length,
                    # over the pairs, as the difference is: with the same number of cells
                    # in every pair that is the mean over the cells, computed as the
                    # summary computes it (so both tables round alike)
                    "acc1": _mean(a if unbalanced else [own[k] for k in common]),
                    "against_acc1": _mean(b if unbalanced else [scores[k] for k in common]),
                    **diff.to_dict(),
                    "cells": len(common),
                    "unit": unit,
                    "best": om != model and means[(om, os_)] == best,
                }
            )
    for row, adjusted in zip(rows, holm([r["p"] for r in rows]), strict=True):
        row["p_holm"] = adjusted
    return rows
