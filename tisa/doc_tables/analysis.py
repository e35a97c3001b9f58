"""Tables of `tisa analyze` of all-MiniLM-L6-v2: the TI figures with their nulls."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tisa.doc_tables.base import RESULTS, read_json, table
from tisa.reports.markdown import markdown_table

ANALYSIS = f"{RESULTS}/analysis/minilm/metrics.json"


def _null_row(label: str, null: dict[str, Any], digits: int = 4) -> list[str]:
    r, s = null["random"], null["shuffled"]
    z = min(r["z"], s["z"])
    return [label, f"{null['observed']:.3f}", f"{r['mean']:.{digits}f} ± {r['std']:.{digits}f}",
            f"{s['mean']:.{digits}f} ± {s['std']:.{digits}f}", f"{z:,.0f}"]


def _analysis_rows(root: Path, *, full: bool) -> list[list[str]]:
    model = read_json(root, ANALYSIS)["models"][0]
    pe, l1 = model["position_embeddings"]["nulls"], model["layer1"]
    rows = [
        ("P Pᵀ (Gram matrix of the position table), with the diagonal", pe["ti_gram"]),
        ("P Pᵀ, off-diagonal", pe["ti_gram_offdiag"]),
        ("cos(P), with the diagonal", pe["ti_cosine"]) if full else None,
        ("cos(P), off-diagonal", pe["ti_cosine_offdiag"]),
        ("layer-1 positional attention F_P, raw P, mean over heads", l1["raw"]["nulls"]["ti_mean"]),
        ("layer-1 F_P raw, off-diagonal", l1["raw"]["nulls"]["ti_offdiag_mean"]) if full else None,
        ("layer-1 F_P through LayerNorm, mean over heads", l1["ln"]["nulls"]["ti_mean"]),
        ("layer-1 F_P through LN, off-diagonal", l1["ln"]["nulls"]["ti_offdiag_mean"])
        if full else None,
    ]
    out = [_null_row(label, null) for label, null in filter(None, rows)]
    probes = {"repeated": "one repeated token", "sentences": "real sentences (PTB)"}
    keys = (("ti", "TI"), ("ti_offdiag", "off-diagonal TI"), ("locality", "locality"),
            ("symmetry", "symmetry")) if full else (("ti_offdiag", "off-diagonal TI"),)
    for probe, name in probes.items():
        nulls = model["probe"][probe]["nulls"]["mean"]
        for key, what in keys:
            if key in nulls:
                out.append(_null_row(f"attention probe, {name}, {what}", nulls[key], 3))
    return out


@table("analysis-headline", ANALYSIS)
def analysis_headline(root: Path) -> str:
    """The headline TI figures of all-MiniLM-L6-v2 with their two nulls."""
    columns = ["matrix", "TI", "random null", "shuffled null", "z (lower)"]
    return markdown_table(columns, _analysis_rows(root, full=False), align="lrrrr")


@table("analysis-minilm", ANALYSIS)
def analysis_minilm(root: Path) -> str:
    """Every TI figure of all-MiniLM-L6-v2 with its two nulls."""
    columns = ["figure", "TI", "random null", "shuffled null", "z (lower)"]
    return markdown_table(columns, _analysis_rows(root, full=True), align="lrrrr")


@table("analysis-per-head", ANALYSIS)
def analysis_per_head(root: Path) -> str:
    """Layer-1 F_P per head, and the probes' off-diagonal TI per layer."""
    model = read_json(root, ANALYSIS)["models"][0]
    ln = model["layer1"]["ln"]
    body = [
        ["layer-1 F_P through LN, per head", " ".join(f"{v:.2f}" for v in ln["ti"])],
        ["same, off-diagonal", " ".join(f"{v:.2f}" for v in ln["ti_offdiag"])],
    ]
    for probe, name in (("repeated", "one repeated token"), ("sentences", "real sentences")):
        per = model["probe"][probe]["ti_offdiag_per_layer"]
        body.append([f"probe, {name}: off-diagonal TI per layer",
                     " ".join(f"{v:.2f}" for v in per)])
    return markdown_table(["figure", "values"], body)
