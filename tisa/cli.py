"""The ``tisa`` command line: one entry point, one module per subcommand.

Each subcommand lives in its own module exposing::

    HELP: str                                   # one line (repeated in SUBCOMMANDS)
    def add_arguments(parser) -> None           # fills an argparse sub-parser
    def run(args: argparse.Namespace) -> int    # does the work, returns an exit code

Modules are imported lazily so that ``tisa --help`` stays fast and a subcommand's heavy
imports (transformers, matplotlib) are paid only when it runs.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# subcommand name -> (module path, the module's HELP line). Only the module of the
# subcommand that runs is imported, so `tisa --help` stays fast.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "demo": (
        "tisa.demo",
        "Run the main job on embedded defaults and write an HTML report.",
    ),
    "bench": (
        "tisa.bench",
        "Run the attention benchmark (ratios against SDPA without positional bias).",
    ),
    "analyze": (
        "tisa.analysis.cli",
        "Measure translation invariance of position embeddings and attention (report.html).",
    ),
    "pretrain": (
        "tisa.train.pretrain",
        "Pretrain a masked language model with a chosen position scheme (absolute, TISA, ...).",
    ),
    "extrapolate": (
        "tisa.train.extrapolate",
        "Masked-LM loss of pretrained runs at sequence lengths beyond (or within) training.",
    ),
    "convert": (
        "tisa.convert.cli",
        "Convert a pretrained encoder's position table into TISA scoring functions (any length).",
    ),
    "glue": (
        "tisa.train.glue",
        "Fine-tune on GLUE tasks (optionally with TISA) over several seeds; median results.",
    ),
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``tisa`` parser; only ``command``'s module is imported to fill its options."""
    from tisa import __version__

    parser = argparse.ArgumentParser(
        prog="tisa",
        description="Translation-invariant self-attention: measure, train and show "
        "positional scoring functions in transformer language models.",
    )
    parser.add_argument("--version", action="version", version=f"tisa {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (path, help_text) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if name == command:
            module = importlib.import_module(path)
            module.add_arguments(p)
            p.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    command = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(command if command in SUBCOMMANDS else None)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    return int(args._run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
