"""``tisa bench attention``: the command line of :func:`tisa.bench.run_attention_benchmark`
(options: :class:`tisa.bench.AttentionBenchConfig`)."""

from __future__ import annotations

import argparse

from tisa.bench import AttentionBenchConfig, format_table, run_attention_benchmark
from tisa.cli.args import add_config_arguments, config_from_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("which", choices=["attention"], help="benchmark to run")
    add_config_arguments(parser, AttentionBenchConfig)
    parser.add_argument("--output", default=None, help="also write the Markdown table here")


def run(args: argparse.Namespace) -> int:
    import torch

    from tisa._validate import check_output_file
    from tisa.files import write_atomic

    cfg = config_from_args(AttentionBenchConfig, args)
    if args.output:
        check_output_file(args.output, "--output")  # before the run, not after it
    rows = run_attention_benchmark(cfg)
    table = format_table(rows)
    print(
        f"B={cfg.batch}, H={cfg.heads}, D={cfg.head_dim}, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads; ratios against SDPA without bias, same process"
    )
    print(table)
    if args.output:
        write_atomic(args.output, table)
    if rows and not rows[0].get("memory_exact", False):
        print("note: not glibc; peak memory may be under-reported (freed memory is reused)")
    return 0
