"""How much slower is a converted model than its original, inside the original's positions?

    python benchmarks/converted_speed.py runs/convert --lengths 128 512 --batch 8 --rounds 15
    python benchmarks/converted_speed.py runs/convert runs/convert-content-16 --train \
        --lengths 64 128 512 --output benchmarks/results/convert/minilm/step-cost.json

Loads the original named in a `tisa convert` run's metrics.json (with its stock SDPA
attention) and the converted model of each run given (``model/``; every run must have
converted the same original), and times ``--batch`` random token sequences of each length:
a forward pass under ``torch.inference_mode``, or with ``--train`` a fine-tuning step in
training mode (dropout as configured, forward, the mean square of the last hidden states
as a stand-in loss, backward; no optimizer step, which costs the same for every model).
The models take turns within each round, in an order that rotates from round to round. A
ratio is the median over rounds of a converted model's time over the original's in the
same round; the range over rounds is given with it. Pause other work on the machine
while it runs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path


def load(convert_dirs):
    """(name of the original, {name: model}): the original first, then each run's
    converted model under its folder's name."""
    from transformers import AutoModel

    import tisa.hf  # noqa: F401  (registers the TISA architectures for Auto classes)
    from tisa.convert.convert import finished_conversion
    from tisa.hub import model_source

    found = [finished_conversion(folder) for folder in convert_dirs]
    sources = {source for source, _ in found}
    if len(sources) > 1:
        raise ValueError(
            f"convert_dir: the runs converted different originals ({', '.join(sorted(sources))}); "
            "give runs of one original"
        )
    names = [Path(folder).resolve().name for folder in convert_dirs]
    if len(set(names)) < len(names) or "original" in names:
        raise ValueError(
            f"convert_dir: the folders' names must differ and not be 'original', got {names}"
        )
    source = found[0][0]
    original = AutoModel.from_pretrained(model_source(source), attn_implementation="sdpa")
    models = {"original": original}
    for name, (_, model_dir) in zip(names, found):
        models[name] = AutoModel.from_pretrained(model_dir)
    return source, models


def _time_forward(model, ids, mask) -> float:
    import torch

    with torch.inference_mode():
        start = time.perf_counter()
        model(input_ids=ids, attention_mask=mask)
        return time.perf_counter() - start


def _time_step(model, ids, mask) -> float:
    start = time.perf_counter()
    model.zero_grad(set_to_none=True)
    states = model(input_ids=ids, attention_mask=mask).last_hidden_state
    states.float().pow(2).mean().backward()
    return time.perf_counter() - start


def measure(convert_dirs, *, lengths, batch: int, rounds: int, seed: int = 0,
            train: bool = False, progress: bool = False) -> dict:
    import torch
    from tqdm import tqdm

    if isinstance(convert_dirs, (str, Path)):
        convert_dirs = [convert_dirs]
    source, models = load(convert_dirs)
    original = models["original"]
    limit = original.config.max_position_embeddings
    if max(lengths) > limit:
        raise ValueError(f"--lengths: the original has {limit} positions, got {max(lengths)}")
    for model in models.values():
        model.train(train)
    timer = _time_step if train else _time_forward
    vocab = original.config.vocab_size
    gen = torch.Generator().manual_seed(seed)
    names = list(models)
    rows = []
    bar = tqdm(total=len(lengths) * rounds, desc="rounds", unit="round", disable=not progress)
    for length in lengths:
        bar.set_postfix(tokens=length)
        ids = torch.randint(vocab // 10, vocab, (batch, length), generator=gen)
        mask = torch.ones_like(ids)
        times: dict[str, list[float]] = {name: [] for name in names}
        torch.manual_seed(seed)  # the dropout masks
        for model in models.values():  # warm-up
            timer(model, ids, mask)
        for turn in range(rounds):
            for name in names[turn % len(names):] + names[: turn % len(names)]:
                times[name].append(timer(models[name], ids, mask))
            bar.update()
        row = {"length": length, "seconds": {n: statistics.median(t) for n, t in times.items()},
               "ratio": {}, "ratio_low": {}, "ratio_high": {}}
        for name in names[1:]:
            ratios = [c / o for c, o in zip(times[name], times["original"])]
            row["ratio"][name] = statistics.median(ratios)
            row["ratio_low"][name], row["ratio_high"][name] = min(ratios), max(ratios)
        rows.append(row)
    bar.close()
    return {
        "model": source,
        "mode": "train" if train else "forward",
        "batch": batch,
        "rounds": rounds,
        "threads": torch.get_num_threads(),
        "rows": rows,
    }


def markdown(result: dict) -> str:
    """The timings as a Markdown table: one row per length and converted model."""
    what = "fine-tuning step (forward + backward)" if result["mode"] == "train" else "forward"
    text = (
        f"{result['model']} against its conversions: {what}, batch {result['batch']}, "
        f"{result['rounds']} rounds, {result['threads']} threads\n\n"
        "| tokens | model | original | converted | converted / original | range over rounds |\n"
        "|---:|---|---:|---:|---:|---:|\n"
    )
    for r in result["rows"]:
        for name, ratio in r["ratio"].items():
            text += (
                f"| {r['length']} | {name} | {1e3 * r['seconds']['original']:.1f} ms "
                f"| {1e3 * r['seconds'][name]:.1f} ms | {ratio:.3f}x "
                f"| {r['ratio_low'][name]:.2f}-{r['ratio_high'][name]:.2f} |\n"
            )
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("convert_dir", type=Path, nargs="+",
                        help="--output-dir of a tisa convert run (several: one original)")
    parser.add_argument("--lengths", type=int, nargs="+", default=[128, 512])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--train", action="store_true",
                        help="time a fine-tuning step (forward + backward, dropout on)")
    parser.add_argument("--threads", type=int, default=0, help="CPU threads (0: torch default)")
    parser.add_argument("--no-progress", dest="progress", action="store_false")
    parser.add_argument("--output", type=Path, default=None,
                        help="also write the timings and their provenance to this JSON file")
    args = parser.parse_args(argv)
    if min(args.lengths) < 2 or args.batch < 1 or args.rounds < 1 or args.threads < 0:
        parser.error("--lengths must be >= 2, --batch and --rounds >= 1, --threads >= 0")
    if args.output is not None and args.output.is_dir():
        parser.error(f"--output: {str(args.output)!r} is a folder; give a JSON file's path")
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        result = measure(args.convert_dir, lengths=args.lengths, batch=args.batch,
                         rounds=args.rounds, train=args.train, progress=args.progress)
    except (ValueError, FileNotFoundError) as err:
        print(f"converted_speed: error: {err}", file=sys.stderr)
        return 2
    print(markdown(result), end="")
    if args.output is not None:
        from tisa.files import write_json
        from tisa.provenance import run_metadata

        write_json(args.output, {**result, "provenance": run_metadata()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
