"""``tisa demo``: the command line of :func:`tisa.demo.run_demo` (options:
:class:`tisa.demo.DemoConfig`, none needed)."""

from __future__ import annotations

import argparse

from tisa.cli.args import add_config_arguments, config_from_args
from tisa.demo import DemoConfig, run_demo


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser, DemoConfig)


def run(args: argparse.Namespace) -> int:
    print(f"report: {run_demo(config_from_args(DemoConfig, args))}")
    return 0
