"""How long GLUE examples are in a model's tokens, and how many fit within K + 1 tokens.

A relative content term with offsets clipped at +-K (``tisa convert --content-offsets K``)
treats keys beyond +-K by ``content_beyond``: the vectors of +-K (``"clip"``) or no term
(``"zero"``). On an input of at most K + 1 tokens (the special tokens included) every
query-key offset j - i is within +-K, so the two modes compute the same function of the same
vectors there; what separates two such conversions on those inputs is what their
distillations learned, not how they treat distant keys. This counts, per task and split,
the examples as the GLUE runs tokenize them (one text, or a pair)::

    python experiments/glue_lengths.py --glue-dir ../shared/data/glue \\
        --output benchmarks/results/glue/lengths
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from tisa.data.glue import get_task, load_glue
from tisa.hub import model_source
from tisa.provenance import save_result
from tisa.reports.markdown import markdown_table

__all__ = ["count", "main", "markdown"]

#: the five tasks of the GLUE protocol (docs/glue.md)
PROTOCOL_TASKS = ("cola", "sst2", "mrpc", "stsb", "rte")


def count(glue_dir: str | Path, tokenizer, tasks=PROTOCOL_TASKS, offsets: int = 16) -> dict:
    """Per task and split: examples, median, mean and largest length in tokens (special
    tokens included, not truncated; the GLUE runs cut at ``max_length``, 128), and the
    share of examples of at most ``offsets`` + 1 tokens (every offset within
    +-``offsets``)."""
    rows = []
    for name in tasks:
        task = get_task(name)
        data = load_glue(task, glue_dir=glue_dir)
        for split, ds in data.items():
            texts = [list(ds[c]) for c in task.text_columns]
            ids = tokenizer(*texts, truncation=False)["input_ids"]
            lengths = [len(x) for x in ids]
            rows.append({
                "task": name, "split": split, "examples": len(lengths),
                "median": statistics.median(lengths), "mean": statistics.fmean(lengths),
                "max": max(lengths),
                "within": sum(n <= offsets + 1 for n in lengths) / len(lengths),
            })
    return {"offsets": offsets, "rows": rows}


def markdown(result: dict) -> str:
    """The table of :func:`count`'s result with its ``"model"``."""
    k = result["offsets"]
    rows = [[r["task"], r["split"], f"{r['examples']:,}", f"{r['median']:g}",
             f"{r['mean']:.1f}", r["max"], f"{100 * r['within']:.1f}%"]
            for r in result["rows"]]
    return (f"{result['model']}: tokens per example, special tokens included\n\n" + markdown_table(
        ["task", "split", "examples", "median", "mean", "max",
         f"at most {k + 1} tokens (every offset within ±{k})"],
        rows, align="llrrrrr"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--glue-dir", type=Path, required=True,
                        help="a classic glue_data folder (CoLA/train.tsv, ...)")
    parser.add_argument("--model", default="sentence-transformers/all-MiniLM-L6-v2",
                        help="whose tokenizer counts the tokens")
    parser.add_argument("--tasks", nargs="+", default=list(PROTOCOL_TASKS), metavar="TASK")
    parser.add_argument("--offsets", type=int, default=16, help="K of the content term")
    parser.add_argument("--output", type=Path, default=None, help="writes lengths.{md,json}")
    args = parser.parse_args(argv)
    if args.offsets < 1:
        parser.error("--offsets must be >= 1")
    if not args.glue_dir.is_dir():
        parser.error(f"--glue-dir: no folder {args.glue_dir}")
    try:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(model_source(args.model))
        result = count(args.glue_dir, tokenizer, tuple(args.tasks), args.offsets)
    except (ValueError, FileNotFoundError, OSError) as err:
        print(f"glue_lengths: error: {err}", file=sys.stderr)
        return 2
    result = {"model": args.model, **result}
    text = markdown(result)
    print(text, end="")
    if args.output is not None:
        save_result(args.output, "lengths", text, result)
    return 0
