"""``tisa pretrain``: the command line of :func:`tisa.pretrain.run.pretrain` (options:
:class:`tisa.pretrain.config.PretrainConfig`)."""

from __future__ import annotations

import argparse

from tisa.cli import is_main_process
from tisa.cli.args import add_config_arguments, config_from_args
from tisa.pretrain.config import PretrainConfig

#: What to do after Ctrl-C (printed by :func:`tisa.cli.main`).
INTERRUPTED = "checkpoints are kept; continue with the same command and --resume"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser, PretrainConfig)


def run(args: argparse.Namespace) -> int:
    # the runner loads torch and transformers: only once the command runs, not for --help
    from tisa.analysis.positional_ti import position_table_ti
    from tisa.pretrain.run import pretrain

    out = pretrain(config_from_args(PretrainConfig, args), ti_measure=position_table_ti)
    if is_main_process():
        print(f"run folder: {out}")
    return 0
