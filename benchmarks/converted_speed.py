"""How much slower is a converted model than its original, inside the original's positions?

    python benchmarks/converted_speed.py runs/convert --lengths 128 512 --batch 8 --rounds 15

Loads the original named in a `tisa convert` run's metrics.json (with its stock SDPA
attention) and the converted model of that run (``model/``), and times a forward pass of
``--batch`` random token sequences of each length under ``torch.inference_mode``, the two
models alternating within each round. A ratio is the median over rounds of converted
over original in the same round; the range over rounds is printed with it. Pause other
work on the machine while it runs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path


def load(convert_dir: Path):
    """(name of the original, original model, converted model) of a `tisa convert` folder."""
    from transformers import AutoModel

    import tisa.hf  # noqa: F401  (registers the TISA architectures for Auto classes)
    from tisa.convert.convert import finished_conversion
    from tisa.hub import model_source

    source, model_dir = finished_conversion(convert_dir)
    original = AutoModel.from_pretrained(model_source(source), attn_implementation="sdpa")
    return source, original.eval(), AutoModel.from_pretrained(model_dir).eval()


def measure(convert_dir: Path, *, lengths, batch: int, rounds: int, seed: int = 0) -> dict:
    import torch

    source, original, converted = load(convert_dir)
    limit = original.config.max_position_embeddings
    if max(lengths) > limit:
        raise ValueError(f"--lengths: the original has {limit} positions, got {max(lengths)}")
    vocab = original.config.vocab_size
    gen = torch.Generator().manual_seed(seed)
    rows = []
    for length in lengths:
        ids = torch.randint(vocab // 10, vocab, (batch, length), generator=gen)
        mask = torch.ones_like(ids)
        times: dict[str, list[float]] = {"original": [], "converted": []}
        with torch.inference_mode():
            for model in (original, converted):  # warm-up
                model(input_ids=ids, attention_mask=mask)
            for _ in range(rounds):
                for name, model in (("original", original), ("converted", converted)):
                    start = time.perf_counter()
                    model(input_ids=ids, attention_mask=mask)
                    times[name].append(time.perf_counter() - start)
        ratios = [c / o for c, o in zip(times["converted"], times["original"])]
        rows.append(
            {
                "length": length,
                "original_s": statistics.median(times["original"]),
                "converted_s": statistics.median(times["converted"]),
                "ratio": statistics.median(ratios),
                "ratio_low": min(ratios),
                "ratio_high": max(ratios),
            }
        )
    return {
        "model": source,
        "batch": batch,
        "rounds": rounds,
        "threads": torch.get_num_threads(),
        "rows": rows,
    }


def markdown(result: dict) -> str:
    text = (
        f"{result['model']} against its conversion: forward, batch {result['batch']}, "
        f"{result['rounds']} rounds, {result['threads']} threads\n\n"
        "| tokens | original | converted | converted / original | range over rounds |\n"
        "|---:|---:|---:|---:|---:|\n"
    )
    for r in result["rows"]:
        text += (
            f"| {r['length']} | {1e3 * r['original_s']:.1f} ms | {1e3 * r['converted_s']:.1f} ms "
            f"| {r['ratio']:.3f}x | {r['ratio_low']:.2f}-{r['ratio_high']:.2f} |\n"
        )
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("convert_dir", type=Path, help="--output-dir of a tisa convert run")
    parser.add_argument("--lengths", type=int, nargs="+", default=[128, 512])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args(argv)
    if min(args.lengths) < 2 or args.batch < 1 or args.rounds < 1:
        parser.error("--lengths must be >= 2, --batch and --rounds >= 1")
    try:
        result = measure(
            args.convert_dir, lengths=args.lengths, batch=args.batch, rounds=args.rounds
        )
    except (ValueError, FileNotFoundError) as err:
        print(f"converted_speed: error: {err}", file=sys.stderr)
        return 2
    print(markdown(result), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
