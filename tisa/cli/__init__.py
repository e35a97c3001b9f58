"""The ``tisa`` command line: one entry point, one thin module per subcommand.

Each subcommand module (``tisa.cli.<name>``) exposes::

    def add_arguments(parser) -> None          # its options, derived from a config dataclass
    def run(args: argparse.Namespace) -> int   # builds the config, calls the library, prints
    INTERRUPTED: str                           # what to do after Ctrl-C (optional)

Options come from the fields of the library's config dataclasses (:mod:`tisa.cli.args`),
so each setting is declared once. Everything a user can get wrong ends in one place,
:func:`main`, without a traceback:

* the output folder (every command's ``--output-dir``) is checked before any work: a file
  there, or a folder that cannot be written, is an error at once, not after the run;
* user errors raised by the library (``ValueError``, ``FileNotFoundError``) become one
  line, ``tisa <command>: error: ...``, and exit code 2;
* Ctrl-C becomes one line saying how to continue (the command's ``INTERRUPTED``) and
  exit code 130, the shell's code for SIGINT.

The console is quiet (:mod:`tisa.console`): one progress bar per stage and one line when
it ends, no raw Trainer logs and no library warnings a user cannot act on;
``tisa --verbose <command>`` shows them all. Before a command that may load from the
Hugging Face hub runs, the hub is checked once (:func:`tisa.hub.use_offline_mode_if_unreachable`):
when it cannot be reached, offline mode is on for the whole run, so each load uses the
local caches or fails at once instead of retrying.

Modules are imported lazily so that ``tisa --help`` stays fast and a subcommand's heavy
imports (transformers, matplotlib) are paid only when it runs.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys

from tisa import __version__
from tisa._validate import check_output_dir
from tisa.console import configure, forget_caught_interrupt
from tisa.hub import use_offline_mode_if_unreachable

__all__ = ["SUBCOMMANDS", "build_parser", "is_main_process", "main"]

# subcommand name -> (module, one-line description). Only the module of the subcommand that
# runs is imported, so `tisa --help` stays fast.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "demo": (
        "tisa.cli.demo",
        "Run the main job on embedded defaults and write an HTML report.",
    ),
    "bench": (
        "tisa.cli.bench",
        "Run the attention benchmark (ratios against SDPA without positional bias).",
    ),
    "analyze": (
        "tisa.cli.analyze",
        "Measure translation invariance of position embeddings and attention (report.html).",
    ),
    "pretrain": (
        "tisa.cli.pretrain",
        "Pretrain a masked language model with a chosen position scheme (absolute, TISA, ...).",
    ),
    "extrapolate": (
        "tisa.cli.extrapolate",
        "Masked-LM loss of pretrained runs at sequence lengths beyond (or within) training.",
    ),
    "convert": (
        "tisa.cli.convert",
        "Convert a pretrained encoder's position table into TISA scoring functions (any length).",
    ),
    "glue": (
        "tisa.cli.glue",
        "Fine-tune on GLUE tasks (optionally with TISA) over several seeds; median results.",
    ),
    "longeval": (
        "tisa.cli.longeval",
        "Long-document retrieval (passkey, needle, passage) of sentence encoders, by length.",
    ),
}

#: The subcommands that may load models or data from the Hugging Face hub, and whose
#: console :func:`tisa.console.configure` sets up.
HUB_COMMANDS = frozenset(
    {"demo", "analyze", "pretrain", "extrapolate", "convert", "glue", "longeval"}
)

#: What the library raises for input it cannot use: reported as a message, not a traceback.
USER_ERRORS: tuple[type[Exception], ...] = (ValueError, FileNotFoundError)

#: Exit code after Ctrl-C: 128 + SIGINT, what shells report for a process it ended.
INTERRUPTED_EXIT = 130


def is_main_process() -> bool:
    """True on the process that prints (rank 0 under torchrun / accelerate launch)."""
    return int(os.environ.get("RANK", "0")) == 0


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``tisa`` parser; only ``command``'s module is imported to fill its options."""
    parser = argparse.ArgumentParser(
        prog="tisa",
        description="Translation-invariant self-attention: measure, train and show "
        "positional scoring functions in transformer language models.",
    )
    parser.add_argument("--version", action="version", version=f"tisa {__version__}")
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="show the libraries' full logs: the Trainer's log dictionaries, every "
        "warning, transformers' info messages",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (path, help_text) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if name == command:
            module = importlib.import_module(path)
            module.add_arguments(p)
            hint = getattr(module, "INTERRUPTED", "nothing was kept; rerun the command")
            p.set_defaults(_run=module.run, _interrupted=hint, _parser=p)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Runs ``tisa``; returns the exit code (2 for bad input and 130 after Ctrl-C, each
    with a one-line message)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    command = next((a for a in argv if not a.startswith("-")), None)
    if command in HUB_COMMANDS and not {"-h", "--help"} & set(argv):
        # before the command's module is imported: the hub libraries read HF_HUB_OFFLINE
        # when they are imported

        use_offline_mode_if_unreachable()
    parser = build_parser(command if command in SUBCOMMANDS else None)
    args = parser.parse_args(argv)
    args._argv = argv  # the command line, for commands that record it with their results
    if args.command is None:
        parser.print_help()
        return 2
    console = contextlib.nullcontext()
    if args.command in HUB_COMMANDS:
        console = configure(verbose=args.verbose)
    try:
        if getattr(args, "output_dir", None) is not None:
            check_output_dir(args.output_dir, "--output-dir")
        with console:
            return int(args._run(args) or 0)
    except USER_ERRORS as err:
        print(f"tisa {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        forget_caught_interrupt()
        print(f"\ntisa {args.command}: interrupted; {args._interrupted}", file=sys.stderr)
        return INTERRUPTED_EXIT
