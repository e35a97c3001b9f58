"""``tisa extrapolate``: the command line of :func:`tisa.pretrain.extrapolation.extrapolate`
(options: :class:`~tisa.pretrain.config.ExtrapolateConfig`). Exit code 1 when a
run failed at some length."""

from __future__ import annotations

import argparse

from tisa.cli.args import add_config_arguments, config_from_args
from tisa.pretrain.config import ExtrapolateConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser, ExtrapolateConfig)


def run(args: argparse.Namespace) -> int:
    # the runner loads torch and transformers: only once the command runs, not for --help
    from tisa.pretrain.extrapolation import extrapolate_config

    config = config_from_args(ExtrapolateConfig, args)
    results = extrapolate_config(config)
    print(results.to_markdown())
    if config.output_dir is not None:
        print(f"written to {config.output_dir}/extrapolation.{{md,csv,json,png}}")
        if results.context_rows:
            print(f"context curve: {config.output_dir}/context.{{csv,png}}")
    return 1 if results.has_errors else 0
