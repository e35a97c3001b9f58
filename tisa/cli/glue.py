"""``tisa glue``: the command line of :func:`tisa.train.glue.run_glue` (options:
:class:`tisa.train.glue.GlueConfig`)."""

from __future__ import annotations

import argparse

from tisa.cli import is_main_process
from tisa.cli.args import add_config_arguments, config_from_args
from tisa.train.glue import GlueConfig, run_glue
from tisa.train.glue_results import summary_markdown


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser, GlueConfig, exclusive=[("epochs", "max_steps")])


def run(args: argparse.Namespace) -> int:
    results = run_glue(config_from_args(GlueConfig, args))
    if is_main_process():
        print(summary_markdown(results.summary), end="")
        for name, path in results.files.items():
            print(f"{name}: {path}")
    return 0
