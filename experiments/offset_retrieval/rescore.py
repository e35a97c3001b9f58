"""Offset retrieval scored again at inference with log-n scaling and clipped offsets.

    python experiments/offset_retrieval/rescore.py runs/offset-retrieval
    python experiments/offset_retrieval/rescore.py runs/offset-retrieval --clip-distance 127
    python experiments/offset_retrieval/rescore.py runs/offset-retrieval --length-scale none \
        --clip-distance 127

Two ways a trained model may fall beyond its training length, and one inference-time
remedy for each, switched on for the same trained models without training:

* dilution: a query that sees n keys spreads its attention over more of them as n grows,
  and the key it needs gets a smaller share. Log-n scaling
  (``tisa.hf.TisaSettings.length_scale`` N: the content logits of a query that sees
  n > N keys are multiplied by log n / log N; the positional bias is left as it is)
  counters that. ``--length-scale N`` (default: the training length; ``none``: off).
* unseen offsets: a key further away than any the model was trained on gets a bias the
  model never produced (a linear tail keeps falling; an MLP reads inputs it never saw).
  Clipped offsets (``tisa.hf.TisaSettings.clip_distance`` K: every offset beyond +-K is
  read as +-K) give it the bias of the furthest trained offset. ``--clip-distance K``
  (default ``none``: off; the training length minus 1 is the furthest trained offset).

This script loads every run of a folder written by
``experiments/offset_retrieval/run.py --save-models`` (every seed and scheme of its
``results.json``; schemes with stock attention, such as absolute, are listed as not
changed), switches the chosen remedies on and scores it again on the same sequences
(:func:`tisa.pretrain.offset_retrieval.evaluate`). Up to N keys and K + 1 tokens nothing
changes, which the script checks against the run's own scores.

``--eval-lengths`` scores other lengths than the run's (default: the run's own), for
example far past them; at a length the run did not score, the models as trained are
scored here too, so each remedy is still compared with the same models without it.

Writes ``NAME.json`` (provenance, the scores of every run with the remedy and as trained,
their summaries with every TISA family against every other scheme, and every scheme with
the remedy minus as trained on the positions beyond the training length at every longer
length, paired by seed, with Holm's correction over those comparisons) and ``NAME.md``
into the run's folder; NAME is ``length-scale-N``, ``clip-K`` or
``length-scale-N-clip-K``, followed by ``-toL`` when ``--eval-lengths`` differs from the
run's (L the longest).
Inference-time variants of the same trained models, reported for every scheme and seed:
nothing is chosen on these numbers.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def _tokens(text: str, name: str, least: int) -> int | None:
    """A number of tokens of at least ``least``, or None for ``none``.

    Raises:
        SystemExit: anything else, naming the argument.
    """
    if text.lower() == "none":
        return None
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < least:
        raise SystemExit(f"{name}: expected a number of tokens >= {least} or 'none', got {text!r}")
    return value


def variant_name(length_scale: int | None, clip_distance: int | None) -> str:
    """The file name (without suffix) of a variant: ``length-scale-N``, ``clip-K`` or both."""
    parts = [f"length-scale-{length_scale}"] if length_scale is not None else []
    parts += [f"clip-{clip_distance}"] if clip_distance is not None else []
    return "-".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path, help="an --output-dir of run.py --save-models")
    parser.add_argument("--length-scale", default=None, metavar="N|none",
                        help="scale the logits of queries that see more than N keys "
                             "(default: the training length)")
    parser.add_argument("--clip-distance", default="none", metavar="K|none",
                        help="read every offset beyond +-K as +-K (default: none)")
    parser.add_argument("--eval-lengths", type=int, nargs="+", default=None, metavar="L",
                        help="lengths to score (default: the run's)")
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
    scale = train if args.length_scale is None else _tokens(args.length_scale, "--length-scale", 2)
    clip = _tokens(args.clip_distance, "--clip-distance", 1)
    if scale is None and clip is None:
        raise SystemExit("--length-scale, --clip-distance: both are none; switch one on")
    # the longest input that neither remedy changes
    unchanged = min(scale if scale is not None else 10**9, clip + 1 if clip is not None else 10**9)
    scored = [int(n) for n in st["eval_lengths"]]
    lengths = scored if args.eval_lengths is None else sorted(set(args.eval_lengths))
    if min(lengths) < 2:  # checked before any model is loaded
        raise SystemExit(f"--eval-lengths: expected lengths of at least 2 tokens, got {lengths}")
    try:
        models = task.load_saved_models(
            args.run_dir, st, [(s, p) for s in seeds for p in positions])
    except ValueError as err:
        raise SystemExit(f"run_dir: {err}") from None

    from tqdm.auto import tqdm

    from tisa.files import write_atomic, write_json
    from tisa.provenance import run_metadata
    from tisa.stats import holm, paired_difference

    extra = [n for n in lengths if n not in scored]  # the run has no scores there
    changed: dict[int, dict[str, Any]] = {}
    trained: dict[int, dict[str, Any]] = {}
    unchangeable: set[str] = set()
    for (seed, position), model in tqdm(models.items(), desc="rescore", dynamic_ncols=True):
        if getattr(model.config, "tisa", None) is None:  # stock attention: nothing to change
            unchangeable.add(position)
            continue
        score = dict(
            train_length=train, offsets=st["offsets"], vocab_size=st["vocab_size"],
            eval_sequences=st["eval_sequences"], seed=seed, device=args.device,
        )
        model = model.to(args.device)
        original = {n: task.eval_cell(runs[str(seed)][position], n) for n in lengths
                    if n in scored}
        if extra:  # as trained, where the run did not score it
            original |= task.evaluate(model, position, eval_lengths=extra, **score)
        model.config.tisa = dict(model.config.tisa, length_scale=scale, clip_distance=clip)
        cells = task.evaluate(model, position, eval_lengths=lengths, **score)
        for n in lengths:
            before = original[n]
            if n <= unchanged and before["status"] == "ok" and (
                abs(cells[n]["accuracy"] - before["accuracy"]) > 1e-9
            ):
                raise SystemExit(
                    f"run_dir: seed {seed}, {position} at {n} tokens scores "
                    f"{cells[n]['accuracy']:.6f} here and {before['accuracy']:.6f} in the run; "
                    f"up to {unchanged} tokens both must agree (other code or weights?)")
        changed.setdefault(seed, {})[position] = {"position": position, "seed": seed,
                                                 "eval": cells}
        trained.setdefault(seed, {})[position] = {"position": position, "seed": seed,
                                                 "eval": original}
    positions = [p for p in positions if p not in unchangeable]
    if not positions:
        raise SystemExit("run_dir: no scheme of the run has TISA attention to change")
    summary = task.summarise(changed, train_length=train, eval_lengths=lengths)
    trained_summary = task.summarise(trained, train_length=train, eval_lengths=lengths)
    against: list[dict[str, Any]] = []
    for position in positions:
        for n in lengths:
            if n <= train or trained[seeds[0]][position]["eval"][n]["status"] != "ok":
                continue
            after = [changed[s][position]["eval"][n]["accuracy_beyond_train"] for s in seeds]
            before = [trained[s][position]["eval"][n]["accuracy_beyond_train"] for s in seeds]
            row = {"position": position, "length": n, "variant_mean": sum(after) / len(after),
                   "trained_mean": sum(before) / len(before)}
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
        "clip_distance": clip,
        "not_changed": sorted(unchangeable),
        "eval_lengths": lengths,
        "runs": {str(s): r for s, r in changed.items()},
        "summary": summary,
        "trained_runs": {str(s): r for s, r in trained.items()},
        "trained_summary": trained_summary,
        "against_trained": against,
        "correction": f"Holm over {len(against)} comparisons" if len(seeds) >= 2 else None,
    }
    name = variant_name(scale, clip) + ("" if lengths == scored else f"-to{max(lengths)}")
    write_json(args.run_dir / f"{name}.json", out)
    md = _markdown(out, seeds)
    write_atomic(args.run_dir / f"{name}.md", md)
    print(md)
    return 0


def _markdown(out: dict[str, Any], seeds: list[int]) -> str:
    from tisa.pretrain.offset_retrieval import markdown
    from tisa.pretrain.schemes import describe_variant

    variant = describe_variant(out["length_scale"], out["clip_distance"])
    lines = [f"The same trained models with {variant}.", "",
             markdown(out["summary"], settings={**out["run"]["settings"],
                                                "eval_lengths": out["eval_lengths"]}).rstrip(),
             ""]
    if out["against_trained"] and "mean" in out["against_trained"][0]:
        lines += [f"With {variant} minus as trained, accuracy x 100 beyond the training "
                  f"length, paired by seed ({out['correction']}):", "",
                  "| length | position | with | as trained | difference, 95% interval | "
                  "p (Holm) |", "|---:|---|---:|---:|---:|---:|"]
        for r in out["against_trained"]:
            lines.append(
                f"| {r['length']} | {r['position']} | {100 * r['variant_mean']:.1f} | "
                f"{100 * r['trained_mean']:.1f} | {100 * r['mean']:+.1f} "
                f"[{100 * r['low']:+.1f}, {100 * r['high']:+.1f}] | {r['p_holm']:.2g} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
