"""Tables of `tisa convert` of all-MiniLM-L6-v2: quality, long inputs, the run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tisa.doc_tables.base import RESULTS, grouped, read_json, table
from tisa.reports.markdown import markdown_table

CONVERT = f"{RESULTS}/convert/minilm/metrics.json"


@table("convert-quality", CONVERT)
def convert_quality(root: Path) -> str:
    """Zero-shot figures of the original, the fitted and the converted model."""
    m = read_json(root, CONVERT)
    pp = m["positional_parameters"]
    pairs = m["settings"].get("max_sts_pairs") or "all"

    def cell(d: dict[str, Any], key: str) -> str:
        v = d.get(key)
        if isinstance(v, dict):  # fidelity: mean over the texts, with the 5th percentile
            return f"{v['mean']:.4f} (5th percentile {v['p05']:.3f})"
        return "n/a" if v is None else f"{v:.4f}"

    rows = [
        ["original (512-row position table)", cell(m["original"], "sts_spearman"), "1",
         grouped(pp["original"]["total"])],
        ["fitted scorers, before distillation", cell(m["fitted"], "sts_spearman"),
         cell(m["fitted"], "fidelity"), grouped(pp["converted"]["total"])],
        [f"converted ({m['settings']['distill']['steps']} distillation steps)",
         cell(m["converted"], "sts_spearman"), cell(m["converted"], "fidelity"),
         grouped(pp["converted"]["total"])],
    ]
    columns = ["model", f"STS-B dev Spearman, zero-shot ({pairs} pairs)",
               "fidelity: cosine to the original", "positional parameters"]
    return markdown_table(columns, rows, align="lrrr")


@table("convert-lengths", CONVERT)
def convert_lengths(root: Path) -> str:
    """The converted model on inputs longer than the original's table."""
    m = read_json(root, CONVERT)
    rows = [[grouped(p["length"]), f"{p['agreement']:.3f}", f"{1000 * p['seconds']:.0f} ms",
             "n/a" if p["peak_memory_mb"] is None else f"{p['peak_memory_mb']:.0f} MiB",
             "yes" if p["finite"] else "no"] for p in m["lengths"]]
    columns = ["tokens", "agreement with the original's 512-token chunks",
               "time per input (median)", "peak memory", "finite"]
    return markdown_table(columns, rows, align="rrrrl")


@table("convert-run", CONVERT)
def convert_run(root: Path) -> str:
    """What the conversion run was: its fit, its time and its provenance."""
    m = read_json(root, CONVERT)
    prov, t = m.get("provenance") or {}, m["timings"]
    rows = [
        ["fit: median R² over heads", f"{m['fit']['r2_median']:.2f}"],
        ["fit and distillation time", f"{t['fit_s'] / 60:.1f} + {t['distill_s'] / 60:.1f} min"],
        ["threads, CPU", f"{m['environment']['threads']}, {prov.get('cpu')} "
                         f"({prov.get('cpu_count')} cores)"],
        ["weights (SHA-256)", f"`{m.get('weights_sha256', 'not recorded')[:16]}...`"],
        ["command", f"`{prov.get('command')}`"],
        ["commit", f"`{(prov.get('commit') or '')[:12]}`"],
    ]
    return markdown_table(["", "value"], rows)
