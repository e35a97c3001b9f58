"""``tisa longeval``: the command line of :func:`tisa.longeval.run.longeval` (options:
:class:`tisa.longeval.config.LongEvalConfig`)."""

from __future__ import annotations

import argparse
import sys

from tisa.cli.args import add_config_arguments, config_from_args
from tisa.longeval.config import LongEvalConfig

#: What to do after Ctrl-C (printed by :func:`tisa.cli.main`).
INTERRUPTED = "rerun the same command to continue (finished cells are kept)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser, LongEvalConfig)


def run(args: argparse.Namespace) -> int:
    # the runner loads torch and transformers: only once the command runs, not for --help
    from tisa.longeval.run import longeval

    config = config_from_args(LongEvalConfig, args)
    result = longeval(config, command=["tisa", *getattr(args, "_argv", sys.argv[1:])])
    done = len(result.results["cells"])
    print(f"cells: {done} ({result.computed} computed, {done - result.computed} kept)")
    print(f"results: {result.results_file}\ncsv: {result.csv_file}\nreport: {result.report}")
    return 0
