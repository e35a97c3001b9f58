"""``tisa pretrain``: the command line of :func:`tisa.train.pretrain.pretrain` (options:
:class:`tisa.train.pretrain.PretrainConfig`)."""

from __future__ import annotations

import argparse

from tisa.cli import is_main_process
from tisa.cli.args import add_config_arguments, config_from_args
from tisa.train.pretrain import PretrainConfig, pretrain


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser, PretrainConfig)


def run(args: argparse.Namespace) -> int:
    out = pretrain(config_from_args(PretrainConfig, args))
    if is_main_process():
        print(f"run folder: {out}")
    return 0
