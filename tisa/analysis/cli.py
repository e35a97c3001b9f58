"""``tisa analyze``: how translation invariant is a model's positional machinery?

The command line of :func:`tisa.analysis.analyze` (:mod:`tisa.analysis.pipeline`): writes
``metrics.json``, PNG figures and a self-contained ``report.html`` to ``--output-dir``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tisa.analysis.results import AnalysisResult

HELP = "Measure translation invariance of position embeddings and attention (report.html)."

DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"
DEFAULT_OUTPUT_DIR = Path("runs") / "analyze"

__all__ = ["HELP", "add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Fills the ``tisa analyze`` sub-parser."""
    parser.add_argument(
        "models",
        nargs="*",
        metavar="MODEL",
        help="Hugging Face Hub id or local model folder (several: side-by-side comparison). "
        f"Default: the offline {DEFAULT_MODEL_NAME} (unless only --checkpoints is given).",
    )
    parser.add_argument(
        "--output-dir",
        type=Path,
        default=DEFAULT_OUTPUT_DIR,
        help=f"folder for metrics.json, figures and report.html (default: {DEFAULT_OUTPUT_DIR})",
    )
    parser.add_argument(
        "--max-positions",
        type=int,
        default=None,
        metavar="N",
        help="analyse the first N positions of the position table (default: all, e.g. 512)",
    )
    parser.add_argument(
        "--probe-length",
        type=int,
        default=128,
        metavar="N",
        help="sequence length of the attention probes (default: 128)",
    )
    parser.add_argument(
        "--num-sequences",
        type=int,
        default=8,
        metavar="N",
        help="real-text sequences averaged by the sentence probe (default: 8)",
    )
    parser.add_argument(
        "--checkpoints",
        type=Path,
        default=None,
        metavar="DIR",
        help="a Trainer output folder with checkpoint-<step>/ subfolders: TI over training",
    )
    parser.add_argument(
        "--ln-input",
        choices=("position+type", "position"),
        default="position+type",
        help="what the embedding LayerNorm sees for the 'through LN' F_P: P plus the mean "
        "token-type embedding (default) or P alone",
    )
    parser.add_argument(
        "--include-bias",
        action="store_true",
        help="include the query/key biases in F_P (default: the pure P W_Q W_K^T P^T term)",
    )
    parser.add_argument(
        "--no-probe", action="store_true", help="skip the attention probes (no forward passes)"
    )
    parser.add_argument(
        "--max-offset",
        type=int,
        default=64,
        metavar="K",
        help="TISA models: plot f_h(k) for k = -K..K (default: 64)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bars or summary")


def run(args: argparse.Namespace) -> int:
    """Runs ``tisa analyze``; returns 0, or 2 with a message for bad input."""
    from tisa.analysis.pipeline import analyze

    start = time.perf_counter()
    try:
        result = analyze(
            list(args.models),
            args.output_dir,
            max_positions=args.max_positions,
            probe_length=args.probe_length,
            num_sequences=args.num_sequences,
            checkpoints=args.checkpoints,
            ln_input=args.ln_input,
            include_bias=args.include_bias,
            probe=not args.no_probe,
            max_offset=args.max_offset,
            progress=not args.quiet,
        )
    except ValueError as err:
        print(f"tisa analyze: error: {err}", file=sys.stderr)
        return 2
    if not args.quiet:
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
