"""``tisa bench attention``: the command line of :func:`tisa.bench.run_attention_benchmark`
(options: :class:`tisa.bench.AttentionBenchConfig`)."""

from __future__ import annotations

import argparse
import os

from tisa.bench import AttentionBenchConfig, format_table, run_attention_benchmark
from tisa.cli.args import add_config_arguments, config_from_args
from tisa.files import write_atomic, write_json
from tisa.provenance import run_metadata


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("which", choices=["attention"], help="benchmark to run")
    add_config_arguments(parser, AttentionBenchConfig)
    parser.add_argument("--output", default=None, help="also write the Markdown table here")
    parser.add_argument(
        "--json",
        default=None,
        help="also write JSON here: every row with its raw timings, the settings and the "
        "run's provenance (commit, command, torch, CPU, threads, date)",
    )


def _check_writable(flag: str, path: str | None) -> None:
    """Refuses an output path that cannot be written, before the (long) run."""
    if path is None:
        return
    if os.path.isdir(path):
        raise ValueError(f"{flag} {path} is a folder; give a file name")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
        raise ValueError(f"{flag} {path}: folder {folder} does not exist or is not writable")


def _command_line() -> list[str]:
    """This process's command line, as ``tisa bench ...`` when it was a tisa command (the
    program itself may be a script or ``python -m tisa.cli``)."""
    import sys

    return ["tisa", *sys.argv[1:]] if sys.argv[1:2] == ["bench"] else list(sys.argv)


def run(args: argparse.Namespace) -> int:
    import dataclasses

    import torch

    cfg = config_from_args(AttentionBenchConfig, args)
    for flag, path in (("--output", args.output), ("--json", args.json)):
        _check_writable(flag, path)
    rows = run_attention_benchmark(cfg)
    threads = torch.get_num_threads() if cfg.threads is None else cfg.threads
    table = format_table(rows)
    print(
        f"B={cfg.batch}, H={cfg.heads}, D={cfg.head_dim}, torch {torch.__version__}, "
        f"{threads} threads, {cfg.clock} clock, {cfg.runs} runs of {cfg.repeats} rounds; "
        "ratios against SDPA without bias, same process (median over runs)"
    )
    print(table)
    if args.output:
        write_atomic(args.output, table)
    if args.json:
        metadata = run_metadata(_command_line())
        metadata["threads"] = threads
        config = dataclasses.asdict(cfg)
        write_json(args.json, {"provenance": metadata, "config": config, "rows": rows})
    if rows and not rows[0].get("memory_exact", False):
        print("note: not glibc; peak memory may be under-reported (freed memory is reused)")
    return 0
