"""``tisa bench attention``: the command line of :func:`tisa.bench.run_attention_benchmark`
(options: :class:`tisa.bench.AttentionBenchConfig`)."""

from __future__ import annotations

import argparse
import json
import os

from tisa.bench import AttentionBenchConfig, format_table, run_attention_benchmark
from tisa.cli.args import add_config_arguments, config_from_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("which", choices=["attention"], help="benchmark to run")
    add_config_arguments(parser, AttentionBenchConfig)
    parser.add_argument("--output", default=None, help="also write the Markdown table here")
    parser.add_argument("--json", default=None, help="also write the rows as JSON here")


def _check_writable(flag: str, path: str | None) -> None:
    """Refuses an output path that cannot be written, before the (long) run."""
    if path is None:
        return
    if os.path.isdir(path):
        raise ValueError(f"{flag} {path} is a folder; give a file name")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
        raise ValueError(f"{flag} {path}: folder {folder} does not exist or is not writable")


def run(args: argparse.Namespace) -> int:
    import torch

    from tisa.files import write_atomic

    cfg = config_from_args(AttentionBenchConfig, args)
    for flag, path in (("--output", args.output), ("--json", args.json)):
        _check_writable(flag, path)
    rows = run_attention_benchmark(cfg)
    threads = torch.get_num_threads() if cfg.threads is None else cfg.threads
    table = format_table(rows)
    print(
        f"B={cfg.batch}, H={cfg.heads}, D={cfg.head_dim}, torch {torch.__version__}, "
        f"{threads} threads, {cfg.clock} clock; ratios against SDPA without bias, same process"
    )
    print(table)
    if args.output:
        write_atomic(args.output, table)
    if args.json:
        write_atomic(args.json, json.dumps(rows, indent=2))
    if rows and not rows[0].get("memory_exact", False):
        print("note: not glibc; peak memory may be under-reported (freed memory is reused)")
    return 0
