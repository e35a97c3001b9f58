"""Offset retrieval scored again with log-n scaling of attention: does dilution explain the fall?

    python experiments/offset_retrieval/rescore.py runs/offset-retrieval --length-scale 128

A query that sees n keys spreads its attention over more of them as n grows past the
training length, and the key it needs gets a smaller share. Log-n scaling
(``tisa.hf.TisaSettings.length_scale``: the content logits of a query that sees n > N keys
are multiplied by log n / log N; the positional bias is left as it is) counters that
without training. This script loads every run of a folder written by
``experiments/offset_retrieval/run.py --save-models`` (every seed and scheme of its
``results.json``; schemes with stock attention, such as absolute, are listed as not
scaled), switches the scaling on with N = ``--length-scale`` (default: the
training length) and scores it again on the same sequences
(:func:`tisa.pretrain.offset_retrieval.evaluate`). Up to N tokens nothing changes, which
the script checks against the run's own scores.

Writes ``length-scale-N.json`` (provenance, the scores of every run, their summary, and
every scheme scaled minus unscaled on the positions beyond the training length at every
longer length, paired by seed, with Holm's correction over those comparisons) and
``length-scale-N.md`` into the run's folder. An inference-time variant of the same trained
models, reported for every scheme and seed: nothing is chosen on these numbers.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path, help="an --output-dir of run.py --save-models")
    parser.add_argument("--length-scale", type=int, default=None, metavar="N",
                        help="scale the logits of queries that see more than N keys "
                             "(default: the training length)")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)

    from tisa.pretrain import offset_retrieval as task

    try:
        results = task.read_results(args.run_dir)
    except ValueError as err:
        raise SystemExit(f"run_dir: {err}") from None
    st, runs = results["settings"], results["runs"]
    seeds = [int(s) for s in st["seeds"]]
    positions = list(results["summary"]["schemes"])
    train = int(st["train_length"])
    scale = train if args.length_scale is None else args.length_scale
    if scale < 2:
        raise SystemExit(f"--length-scale: expected at least 2 tokens, got {scale}")
    try:
        models = task.load_saved_models(
            args.run_dir, st, [(s, p) for s in seeds for p in positions])
    except ValueError as err:
        raise SystemExit(f"run_dir: {err}") from None

    from tqdm.auto import tqdm

    from tisa.files import write_atomic, write_json
    from tisa.provenance import run_metadata
    from tisa.stats import holm, paired_difference

    lengths = [int(n) for n in st["eval_lengths"]]
    scaled: dict[int, dict[str, Any]] = {}
    unscalable: set[str] = set()
    for (seed, position), model in tqdm(models.items(), desc="rescore", dynamic_ncols=True):
        if getattr(model.config, "tisa", None) is None:  # stock attention: nothing to scale
            unscalable.add(position)
            continue
        model.config.tisa = dict(model.config.tisa, length_scale=scale)
        cells = task.evaluate(
            model.to(args.device), position, train_length=train, eval_lengths=lengths,
            offsets=st["offsets"], vocab_size=st["vocab_size"],
            eval_sequences=st["eval_sequences"], seed=seed, device=args.device,
        )
        original = runs[str(seed)][position]
        for n in lengths:
            before = task.eval_cell(original, n)
            if n <= scale and before["status"] == "ok" and (
                abs(cells[n]["accuracy"] - before["accuracy"]) > 1e-9
            ):
                raise SystemExit(
                    f"run_dir: seed {seed}, {position} at {n} tokens scores "
                    f"{cells[n]['accuracy']:.6f} here and {before['accuracy']:.6f} in the run; "
                    "up to --length-scale both must agree (other code or weights?)")
        scaled.setdefault(seed, {})[position] = {"position": position, "seed": seed,
                                                 "eval": cells}
    positions = [p for p in positions if p not in unscalable]
    if not positions:
        raise SystemExit("run_dir: no scheme of the run has TISA attention to scale")
    summary = task.summarise(scaled, train_length=train, eval_lengths=lengths)
    against: list[dict[str, Any]] = []
    for position in positions:
        for n in lengths:
            if n <= train or task.eval_cell(runs[str(seeds[0])][position], n)["status"] != "ok":
                continue
            after = [scaled[s][position]["eval"][n]["accuracy_beyond_train"] for s in seeds]
            before = [task.eval_cell(runs[str(s)][position], n)["accuracy_beyond_train"]
                      for s in seeds]
            row = {"position": position, "length": n, "scaled_mean": sum(after) / len(after),
                   "unscaled_mean": sum(before) / len(before)}
            if len(seeds) >= 2:
                d = paired_difference(after, before)
                row |= {"mean": d.mean, "low": d.low, "high": d.high, "p": d.p}
            against.append(row)
    if len(seeds) >= 2 and against:
        for row, p in zip(against, holm([r["p"] for r in against]), strict=True):
            row["p_holm"] = p
    out = {
        "provenance": run_metadata(
            None if argv is None else ["experiments/offset_retrieval/rescore.py", *argv]
        ),
        "run": {"settings": st, "commit": results["provenance"].get("commit")},
        "length_scale": scale,
        "not_scaled": sorted(unscalable),
        "runs": {str(s): r for s, r in scaled.items()},
        "summary": summary,
        "against_unscaled": against,
        "correction": f"Holm over {len(against)} comparisons" if len(seeds) >= 2 else None,
    }
    name = f"length-scale-{scale}"
    write_json(args.run_dir / f"{name}.json", out)
    md = _markdown(out, seeds)
    write_atomic(args.run_dir / f"{name}.md", md)
    print(md)
    return 0


def _markdown(out: dict[str, Any], seeds: list[int]) -> str:
    from tisa.pretrain.offset_retrieval import markdown

    lines = [f"Log-n scaling past {out['length_scale']} keys, the same trained models.", "",
             markdown(out["summary"], settings=out["run"]["settings"]).rstrip(), ""]
    if out["against_unscaled"] and "mean" in out["against_unscaled"][0]:
        lines += [f"Scaled minus unscaled, accuracy x 100 beyond the training length, paired "
                  f"by seed ({out['correction']}):", "",
                  "| length | position | scaled | unscaled | difference, 95% interval | "
                  "p (Holm) |", "|---:|---|---:|---:|---:|---:|"]
        for r in out["against_unscaled"]:
            lines.append(
                f"| {r['length']} | {r['position']} | {100 * r['scaled_mean']:.1f} | "
                f"{100 * r['unscaled_mean']:.1f} | {100 * r['mean']:+.1f} "
                f"[{100 * r['low']:+.1f}, {100 * r['high']:+.1f}] | {r['p_holm']:.2g} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
