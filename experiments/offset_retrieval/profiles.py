"""The positional bias each scheme learned on offset retrieval: one figure from saved runs.

    python experiments/offset_retrieval/profiles.py runs/offset-retrieval
    python experiments/offset_retrieval/profiles.py runs/offset-retrieval --seed 1 --length 512

Reads a folder written by ``experiments/offset_retrieval/run.py --save-models``: for every
scheme of ``results.json`` it loads the weights of one seed (``seed-S/POSITION.pt``; by
default the first seed) and evaluates the bias each layer adds for the last query of an
input of ``--length`` tokens (default: the longest evaluation length), so every offset k
from -(L - 1) to 0 appears once (:func:`tisa.pretrain.offset_retrieval.last_query_bias`).
It writes ``profiles.json`` (provenance, and the bias of every scheme, layer and head at
the offsets 0 to -64 and then about 32 per octave to -(L - 1)) and ``profiles.png`` from
that file: one panel per scheme and layer, one line per head, the training length and the
task's offsets marked. Schemes without a positional bias (absolute, RoPE) are listed as
such.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

NEAR = 64  # every offset up to this distance is kept
PER_OCTAVE = 32  # beyond it, about this many offsets per doubling of the distance


def kept_distances(length: int) -> list[int]:
    """The distances 0 .. NEAR, then about PER_OCTAVE per octave up to length - 1."""
    kept = set(range(min(NEAR, length - 1) + 1))
    d = float(NEAR)
    while d < length - 1:
        d *= 2 ** (1 / PER_OCTAVE)
        kept.add(min(length - 1, round(d)))
    return sorted(kept)


def draw(profiles: dict[str, Any]):
    """The figure of a ``profiles.json``: one panel per scheme with a bias and layer."""
    import torch

    from tisa.reports.charts import scoring_curves

    st = profiles["settings"]
    offsets = torch.tensor([-d for d in profiles["distances"]])
    panels, titles = [], []
    for position, layers in profiles["schemes"].items():
        for layer, heads in enumerate(layers):
            panels.append(torch.tensor(heads))
            titles.append(f"{position}, layer {layer + 1}")
    if not panels:
        raise SystemExit("profiles: no scheme of the run adds a positional bias")
    layers = max(len(v) for v in profiles["schemes"].values())
    return scoring_curves(
        offsets, torch.stack(panels), titles=titles, ncols=layers, symlog=True,
        marks=[-st["train_length"], *(-d for d in st["offsets"])],
        suptitle=(f"Offset retrieval: bias of the last query at {profiles['length']:,} tokens, "
                  f"seed {profiles['seed']} (dashed: the training length {st['train_length']} "
                  f"and the task's offsets {st['offsets']})"),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path, help="an --output-dir of run.py --save-models")
    parser.add_argument("--seed", type=int, default=None, help="default: the run's first seed")
    parser.add_argument("--length", type=int, default=None,
                        help="tokens of the input (default: the longest evaluation length)")
    args = parser.parse_args(argv)

    from tisa.pretrain.offset_retrieval import last_query_bias, load_saved_models, read_results

    try:
        results = read_results(args.run_dir)
    except ValueError as err:
        raise SystemExit(f"run_dir: {err}") from None
    st = results["settings"]
    seeds = [int(s) for s in st["seeds"]]
    positions = list(results["summary"]["schemes"])
    seed = seeds[0] if args.seed is None else args.seed
    if seed not in seeds:
        raise SystemExit(f"--seed: expected one of the run's seeds {seeds}, got {seed}")
    length = max(st["eval_lengths"]) if args.length is None else args.length
    if length < 2:
        raise SystemExit(f"--length: expected at least 2 tokens, got {length}")
    try:
        models = load_saved_models(args.run_dir, st, [(seed, p) for p in positions])
    except ValueError as err:
        raise SystemExit(f"run_dir: {err}") from None

    from tisa.files import write_json
    from tisa.provenance import run_metadata
    from tisa.reports.figures import save_figure

    distances = kept_distances(length)
    schemes: dict[str, Any] = {}
    no_bias = []
    for (_, position), model in models.items():
        offsets, values = last_query_bias(model, length)  # (L,), (layers, H, L)
        if values.numel() == 0:
            no_bias.append(position)
            continue
        columns = [length - 1 - d for d in distances]  # offset -d sits at column L - 1 - d
        schemes[position] = [[[round(float(v), 5) for v in head[columns]] for head in layer]
                             for layer in values]
    profiles = {
        "provenance": run_metadata(
            None if argv is None else ["experiments/offset_retrieval/profiles.py", *argv]
        ),
        "run": {"settings": st, "commit": results["provenance"].get("commit")},
        "settings": {k: st[k] for k in ("size", "train_length", "offsets", "vocab_size")},
        "seed": seed,
        "length": length,
        "distances": distances,
        "schemes": schemes,
        "without_bias": no_bias,
    }
    write_json(args.run_dir / "profiles.json", profiles)
    save_figure(draw(profiles), args.run_dir / "profiles.png")
    print(f"wrote {args.run_dir / 'profiles.json'} and profiles.png "
          f"({len(schemes)} schemes; without a bias: {no_bias or 'none'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
