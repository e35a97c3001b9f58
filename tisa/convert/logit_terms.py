"""What part of a position table's effect on attention can a function of j - i carry?

    python experiments/logit_terms.py runs/convert --output benchmarks/results/convert/minilm
    python experiments/logit_terms.py runs/convert runs/convert-k10   # several conversions

For every layer and head, on ``--blocks`` blocks of Penn Treebank test text of
``--length`` tokens, the row-centred attention logits of frozen models (as
:mod:`tisa.convert.profiles` recovers them; [CLS] and [SEP] left out): the original named
in the ``tisa convert`` runs (all of the same original), each run's converted model, and
the original without positions (its table removed, the mean of its first 128 rows folded
into the token-type embeddings: the converter's student before fitting). The
differences, block by block:

- **the position effect**, original minus no positions: what the table changes;
- **missed by RUN**, original minus the converted model of each run (named by its
  folder).

Each difference D (blocks x queries x keys) is split into three orthogonal parts, and
each part's share of the sum of squares of D is reported:

- **offset**: the block average of D projected onto Toeplitz matrices, a function of
  j - i alone: what a TISA f_h(j - i) can represent;
- **absolute**: the rest of the block average, the same for every text but not a
  function of j - i alone (positions counted from the start);
- **content**: D minus its block average, what changes with the text (a query's content
  choosing its offsets, or the layers below having computed something else).

A large content share of the position effect is a part of it that no function of
j - i, however well fitted, can represent. Median over heads per layer, the root mean
square of D in logits, and the mean KL divergence from the original's attention to the
other model's (:func:`kl`): the root mean square weighs every key alike, the divergence
weighs them by the original's attention, so a miss on keys the original hardly attends
to shows in the first and not in the second. Writes logit_terms.{json,md}.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import Tensor

from tisa.convert.convert import finished_conversion
from tisa.convert.distill import row_kl
from tisa.convert.profiles import row_centred_batches
from tisa.convert.word_order import load_models
from tisa.data.corpus import ptb_lines
from tisa.data.text_blocks import text_blocks
from tisa.metrics import toeplitz_projection
from tisa.provenance import save_result
from tisa.reports.markdown import markdown_table

__all__ = ["kl", "main", "markdown", "measure", "row_centred_logits", "split"]


@torch.no_grad()
def row_centred_logits(model, blocks: Tensor, *, batch_size: int = 4) -> list[Tensor]:
    """Per layer, the row-centred logits of every block: (B, H, L-2, L-2) float64
    (:func:`tisa.convert.profiles.row_centred_batches`, the batches joined)."""
    batches = list(row_centred_batches(model, blocks, batch_size=batch_size))
    return [torch.cat(layer) for layer in zip(*batches)]


def split(difference: Tensor) -> dict[str, Tensor]:
    """Shares of the sum of squares of ``difference`` (B, H, N, N) per head: ``offset``,
    ``absolute`` and ``content`` (the module docstring), and ``rms`` (H,)."""
    mean = difference.mean(0)  # (H, N, N)
    offset = toeplitz_projection(mean)
    blocks = difference.shape[0]
    parts = {
        "offset": blocks * offset.square().sum((-2, -1)),
        "absolute": blocks * (mean - offset).square().sum((-2, -1)),
        "content": (difference - mean).square().sum((0, -2, -1)),
    }
    total = difference.square().sum((0, -2, -1)).clamp_min(1e-30)
    out = {name: value / total for name, value in parts.items()}
    out["rms"] = (total / difference[0, 0].numel() / blocks).sqrt()
    return out


def kl(first: Tensor, second: Tensor) -> Tensor:
    """Mean over blocks and queries of KL(p || q) per head (H,), in nats, where p and q
    are the softmax of the row-centred logits ``first`` and ``second`` (B, H, N, N): the
    two models' attention over the block's tokens, renormalised without [CLS] and [SEP]."""
    return row_kl(first.log_softmax(-1), second.log_softmax(-1)).mean((0, 2))


def measure(
    convert_dirs: Sequence[Path], *, blocks: int = 32, length: int = 128, progress: bool = True
) -> dict:
    from tqdm.auto import tqdm
    from transformers import AutoModel

    if not convert_dirs:
        raise ValueError("convert_dirs: expected at least one tisa convert folder")
    names = [Path(d).name for d in convert_dirs]
    if len(set(names)) < len(names):
        raise ValueError(f"convert_dirs: expected folders of different names, got {names}")
    source, models, tokenizer = load_models(convert_dirs[0])
    converted = {names[0]: models.pop("converted")}
    for folder, name in zip(convert_dirs[1:], names[1:]):
        other, model_dir = finished_conversion(folder, argument="convert_dirs")
        if other != source:
            raise ValueError(
                f"convert_dirs: expected conversions of one original, got {source} and {other}"
            )
        converted[name] = AutoModel.from_pretrained(model_dir)
    ids = text_blocks(tokenizer, ptb_lines("test"), length=length, count=blocks)
    every = {**models, **{f"converted {n}": m for n, m in converted.items()}}
    logits = {
        name: row_centred_logits(model, ids)
        for name, model in tqdm(every.items(), desc="logits", disable=not progress)
    }
    differences = [("position effect", "no positions")]
    differences += [(f"missed by {n}", f"converted {n}") for n in converted]
    result: dict = {"model": source, "blocks": blocks, "length": length, "differences": {}}
    for name, second in differences:
        layers = []
        for layer, (a, b) in enumerate(zip(logits["original"], logits[second])):
            shares = split(a - b) | {"kl": kl(a, b)}
            layers.append({"layer": layer + 1, **{k: v.tolist() for k, v in shares.items()}})
        result["differences"][name] = layers
    return result


def markdown(result: dict) -> str:
    rows = []
    for name, layers in result["differences"].items():
        for row in layers:
            median = {k: float(torch.tensor(row[k]).median()) for k in
                      ("offset", "absolute", "content", "rms")}
            # results written before the divergence was measured have none
            divergence = f"{float(torch.tensor(row['kl']).mean()):.3f}" if "kl" in row else "-"
            rows.append([
                name if row["layer"] == 1 else "", row["layer"], f"{median['rms']:.3f}",
                divergence, f"{median['offset']:.2f}", f"{median['absolute']:.2f}",
                f"{median['content']:.2f}",
            ])
    table = markdown_table(
        ["difference", "layer", "RMS (logits)", "KL (nats, mean over heads)",
         "offset: f(j - i)", "absolute", "content"],
        rows,
        align="lrrrrrr",
    )
    return (
        f"{result['model']}: shares of each difference's sum of squares, median over "
        f"heads; {result['blocks']} Penn Treebank test blocks of {result['length']} "
        f"tokens, logits centred per query row\n\n{table}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "convert_dirs", type=Path, nargs="+", help="--output-dir of tisa convert runs"
    )
    parser.add_argument("--blocks", type=int, default=32, help="text blocks, >= 2")
    parser.add_argument("--length", type=int, default=128, help="tokens per block, >= 8")
    parser.add_argument("--output", type=Path, default=None, help="writes logit_terms.*")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    if args.blocks < 2:
        parser.error("--blocks must be >= 2")
    if args.length < 8:
        parser.error("--length must be >= 8")
    if args.output is not None and args.output.is_file():
        parser.error(f"--output: {args.output} is a file")
    try:
        result = measure(
            args.convert_dirs, blocks=args.blocks, length=args.length,
            progress=not args.no_progress,
        )
    except (ValueError, FileNotFoundError) as err:
        print(f"logit_terms: error: {err}", file=sys.stderr)
        return 2
    text = markdown(result)
    print(text, end="")
    if args.output is not None:
        save_result(args.output, "logit_terms", text, result)
    return 0
