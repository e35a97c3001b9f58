"""The ``tisa`` command line: one entry point, one module per subcommand.

Each subcommand lives in its own module exposing::

    HELP: str                                   # one line for ``tisa --help``
    def add_arguments(parser) -> None           # fills an argparse sub-parser
    def run(args: argparse.Namespace) -> int    # does the work, returns an exit code

Modules are imported lazily so that ``tisa --help`` stays fast and a subcommand's heavy
imports (transformers, matplotlib) are paid only when it runs.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# subcommand name -> module path
SUBCOMMANDS: dict[str, str] = {
    "demo": "tisa.demo",
    "bench": "tisa.bench",
    "analyze": "tisa.analysis.cli",
    "pretrain": "tisa.train.pretrain",
    "extrapolate": "tisa.train.extrapolate",
    "glue": "tisa.train.glue",
}


def _available() -> dict[str, object]:
    modules = {}
    for name, path in SUBCOMMANDS.items():
        try:
            modules[name] = importlib.import_module(path)
        except ModuleNotFoundError as err:
            # Only hide subcommands whose own module is absent; a missing dependency
            # inside an existing module is a real error and must surface.
            if err.name is None or not path.startswith(err.name):
                raise
    return modules


def build_parser() -> argparse.ArgumentParser:
    from tisa import __version__

    parser = argparse.ArgumentParser(
        prog="tisa",
        description="Translation-invariant self-attention: measure, train and show "
        "positional scoring functions in transformer language models.",
    )
    parser.add_argument("--version", action="version", version=f"tisa {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module in _available().items():
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    return int(args._run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
