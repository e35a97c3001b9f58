"""``tisa demo``: the command line of :func:`tisa.demo.run.run_demo` (options:
:class:`tisa.demo.config.DemoConfig`, none needed)."""

from __future__ import annotations

import argparse

from tisa.cli.args import add_config_arguments, config_from_args
from tisa.demo.config import DemoConfig

#: What to do after Ctrl-C (printed by :func:`tisa.cli.main`).
INTERRUPTED = "finished parts are kept; rerun the same command to continue"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser, DemoConfig)


def run(args: argparse.Namespace) -> int:
    from tisa.demo.run import run_demo  # the runner imports every feature

    print(f"report: {run_demo(config_from_args(DemoConfig, args))}")
    return 0
