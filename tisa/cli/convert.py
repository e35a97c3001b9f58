"""``tisa convert``: the command line of :func:`tisa.convert.convert.convert` (options:
:class:`tisa.convert.config.ConvertConfig`, distillation options:
:class:`tisa.convert.config.DistillSettings`)."""

from __future__ import annotations

import argparse

from tisa.cli.args import add_config_arguments, config_from_args
from tisa.convert.config import ConvertConfig, DistillSettings

#: What to do after Ctrl-C (printed by :func:`tisa.cli.main`).
INTERRUPTED = (
    "rerun the same command to continue (the fit is reused and distillation resumes "
    "from its last checkpoint)"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser, ConvertConfig)
    add_config_arguments(parser.add_argument_group("distillation"), DistillSettings)


def run(args: argparse.Namespace) -> int:
    # the runner loads torch and transformers: only once the command runs, not for --help
    from tisa.convert.convert import convert

    distill = config_from_args(DistillSettings, args, section="distill")
    config = config_from_args(ConvertConfig, args, distill=distill)
    result = convert(config)
    m = result.metrics
    conv, orig = m["converted"], m["original"]
    if "sts_spearman" in orig:
        print(
            f"STS-B dev Spearman: original {orig['sts_spearman']:.4f}, converted "
            f"{conv['sts_spearman']:.4f} ({100 * m['sts_relative']:.1f}%)"
        )
    print(f"fidelity (mean cosine of embeddings): {conv['fidelity']['mean']:.4f}")
    pos = m["positional_parameters"]
    print(
        f"positional parameters: {pos['original']['total']:,} -> {pos['converted']['total']:,} "
        f"({pos['converted']['absolute']} absolute)"
    )
    print(f"model: {result.model_dir}\nreport: {result.report}")
    return 0
