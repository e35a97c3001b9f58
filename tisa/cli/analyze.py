"""``tisa analyze``: the command line of :func:`tisa.analysis.analyze` (options:
:class:`tisa.analysis.config.AnalysisConfig`)."""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

from tisa.analysis.config import AnalysisConfig
from tisa.cli.args import add_config_arguments, config_from_args

if TYPE_CHECKING:
    from tisa.analysis.results import AnalysisResult


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser, AnalysisConfig)


def run(args: argparse.Namespace) -> int:
    # the runner loads torch and transformers: only once the command runs, not for --help
    from tisa.analysis.pipeline import analyze_config

    start = time.perf_counter()
    config = config_from_args(AnalysisConfig, args)
    result = analyze_config(config)
    if config.progress:
        print_summary(result, total_s=time.perf_counter() - start)
    return 0


def print_summary(result: AnalysisResult, *, total_s: float) -> None:
    """The models' main TI values on the terminal, each next to its nulls, and the files
    written.

    One table per model, one row per figure (narrow enough for 80 columns): TI, the mean
    ± std of the random-directions and shuffled-rows nulls where they were computed, and
    the lower of the two z-scores. "off-diag.": TI over the entries j != i, the figure to
    read where the diagonal scores for any table (P P^T, cos(P), the probes).
    """
    from rich.console import Console
    from rich.table import Table

    from tisa.analysis.training_report import format_z  # with matplotlib: only when printing

    def null(c) -> str:
        return f"{c.mean:.3f} ± {c.std:.3f}"

    console = Console(stderr=False)
    for m in result.models:
        table = Table(title=f"{m.name}: translation invariance (TI, 1 = Toeplitz), nulls")
        table.add_column("figure", no_wrap=True)
        for col in ("TI", "random null", "shuffled null", "z"):
            table.add_column(col, justify="right", no_wrap=True)
        for figure, value, b in ((h.label, h.value, h.nulls) for h in m.headline()):
            cells = ["-", "-", "-"]
            if b is not None:
                cells = [null(b.random), null(b.shuffled), format_z(min(b.random.z, b.shuffled.z))]
            table.add_row(figure, f"{value:.3f}", *cells)
        console.print(table)
    for f in result.files:
        if f.suffix in (".html", ".json"):
            console.print(f"wrote {f}")
    console.print(f"done in {total_s:.1f} s (analysis {result.elapsed_s:.1f} s, rest: figures)")
