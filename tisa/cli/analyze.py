"""``tisa analyze``: the command line of :func:`tisa.analysis.analyze` (options:
:class:`tisa.analysis.pipeline.AnalysisConfig`)."""

from __future__ import annotations

import argparse
import time

from tisa.analysis.pipeline import AnalysisConfig, analyze_config
from tisa.analysis.results import AnalysisResult
from tisa.cli.args import add_config_arguments, config_from_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser, AnalysisConfig)


def run(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    config = config_from_args(AnalysisConfig, args)
    result = analyze_config(config)
    if config.progress:
        print_summary(result, total_s=time.perf_counter() - start)
    return 0


def print_summary(result: AnalysisResult, *, total_s: float) -> None:
    """The models' main TI values as a table on the terminal, and the files written."""
    from rich.console import Console
    from rich.table import Table

    def fmt(x: float | None) -> str:
        return "-" if x is None else f"{x:.3f}"

    def probe(m, name: str) -> float | None:
        return None if m.probes is None else float(m.probes[name].ti.mean())

    table = Table(title="translation invariance (TI, 1 = Toeplitz)")
    for col in ("model", "TI P P^T", "TI F_P raw", "TI F_P LN", "probe TI rep.", "probe TI sent."):
        if col == "model":
            table.add_column(col, overflow="fold", min_width=12)
        else:
            table.add_column(col, justify="right")
    for m in result.models:
        pe, l1 = m.position_embeddings, m.layer1
        table.add_row(
            m.name,
            fmt(pe and pe.ti_gram),
            fmt(l1 and l1.raw.ti_mean),
            fmt(l1 and l1.ln.ti_mean),
            fmt(probe(m, "repeated")),
            fmt(probe(m, "sentences")),
        )
    console = Console(stderr=False)
    console.print(table)
    for f in result.files:
        if f.suffix in (".html", ".json"):
            console.print(f"wrote {f}")
    console.print(f"done in {total_s:.1f} s (analysis {result.elapsed_s:.1f} s, rest: figures)")
