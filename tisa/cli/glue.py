"""``tisa glue``: the command line of :func:`tisa.glue.run.run_glue` (options:
:class:`tisa.glue.config.GlueConfig`)."""

from __future__ import annotations

import argparse

from tisa.cli import is_main_process
from tisa.cli.args import add_config_arguments, config_from_args
from tisa.glue.config import GlueConfig

#: What to do after Ctrl-C (printed by :func:`tisa.cli.main`).
INTERRUPTED = (
    "finished runs are kept; rerun the same command to resume the interrupted run "
    "from its last checkpoint"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser, GlueConfig, exclusive=[("epochs", "max_steps")])


def run(args: argparse.Namespace) -> int:
    # the runner loads torch and transformers: only once the command runs, not for --help
    from tisa.glue.results import summary_markdown
    from tisa.glue.run import run_glue

    config = config_from_args(GlueConfig, args)
    results = run_glue(config)
    if is_main_process():
        if results.trained == 0:
            print(f"nothing to train: the {len(results.runs)} runs in {config.output_dir} are done")
        print(summary_markdown(results.summary), end="")
        for name, path in results.files.items():
            print(f"{name}: {path}")
    return 0
