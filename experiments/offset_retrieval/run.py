"""Offset retrieval: does a position scheme keep a precise offset beyond its training length?

    python experiments/offset_retrieval/run.py --seeds 0 1 2 --output-dir runs/offset-retrieval
    python experiments/offset_retrieval/run.py --positions alibi fire --steps 200 \\
        --size tiny --train-length 32 --eval-lengths 32 128 --output-dir runs/or-smoke

Each position scheme trains a causal LM (GPT-2 of ``--size``, ``tisa pretrain``'s
schemes) from scratch at every seed of ``--seeds`` on the task of
:mod:`tisa.data.offset_task` (:mod:`tisa.pretrain.offset_retrieval` has the training, the
scoring and the summary): after a marker naming an offset d (one of ``--offsets``), every
token must be predicted as the content token d positions back. Training uses sequences of
``--train-length`` tokens; evaluation scores fresh sequences of every ``--eval-lengths``
length (the same sequences for every scheme of a seed). Same seed, batches, steps and
optimiser for every scheme; the positional parameters at ``--tisa-learning-rate`` when
given. Absolute positions cannot represent the longer lengths: n/a.

With ``--positional-lr-sweep R ...`` every scheme with learned positional parameters first
trains at each rate R for its positional parameters (``--sweep-steps``, seed
``--sweep-seed``, which is not reported), is scored on fresh sequences of the training
length, and keeps the rate with the lowest loss there (ties to the smaller rate); the
schemes without positional parameters train at the backbone's rate alone. The same sweep
for every such scheme, chosen without a look at the longer lengths or the reported seeds.

Each finished run is written at once to ``OUTPUT/seed-S/POSITION.json`` (a sweep run to
``OUTPUT/sweep/POSITION-lrR.json``), with ``--save-models`` its weights to
``OUTPUT/seed-S/POSITION.pt``; a rerun with the same settings keeps those and trains
only what is missing. A run in progress writes its training state to
``OUTPUT/seed-S/POSITION.ckpt.pt`` every ``--checkpoint-every`` steps; a rerun goes on
from it, to the same result as a run never interrupted. Then ``results.json``
(provenance, settings, every run, and the summary: mean ± sd over seeds per scheme and
length, and every TISA family against every other scheme beyond the training length,
paired by seed with Holm's correction) and ``results.md``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

DEFAULT_POSITIONS = (
    "absolute", "tisa", "rbf_linear", "alibi", "alibi_learned", "kerple_log", "t5", "fire",
)


def _saved_run(path: Path, settings: dict[str, Any]) -> dict[str, Any] | None:
    """The run saved at ``path`` when its settings are ``settings``; None when absent."""
    import json

    if not path.is_file():
        return None
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        return None  # an unreadable file is trained again (writes are atomic)
    if saved.get("settings") != settings:
        raise SystemExit(
            f"--output-dir: {path} was trained with other settings ({saved.get('settings')}); "
            "use another --output-dir"
        )
    return saved["run"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--positions", nargs="+", default=list(DEFAULT_POSITIONS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--output-dir", type=Path, default=Path("runs/offset-retrieval"))
    parser.add_argument("--size", default="small")
    parser.add_argument("--train-length", type=int, default=128)
    parser.add_argument("--eval-lengths", type=int, nargs="+", default=[128, 256, 512, 1024])
    parser.add_argument("--offsets", type=int, nargs="+", default=[1, 3, 8, 32])
    parser.add_argument("--vocab-size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--tisa-learning-rate", type=float, default=None,
                        help="the positional parameters' rate (default: the backbone's)")
    parser.add_argument("--positional-lr-sweep", type=float, nargs="+", default=None,
                        metavar="RATE", help="choose each scheme's positional rate among these")
    parser.add_argument("--sweep-seed", type=int, default=100)
    parser.add_argument("--sweep-steps", type=int, default=None,
                        help="training steps of a sweep run (default: --steps)")
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--eval-sequences", type=int, default=64)
    parser.add_argument("--device", default=None)
    parser.add_argument("--checkpoint-every", type=int, default=250, metavar="N",
                        help="write each run's training state every N steps "
                             "(OUTPUT/.../POSITION.ckpt.pt), so an interrupted run goes on "
                             "from there (default 250)")
    parser.add_argument("--save-models", action="store_true",
                        help="also write each reported run's weights to seed-S/POSITION.pt")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    args = parser.parse_args(argv)

    import torch

    from tisa.files import write_atomic, write_json
    from tisa.pretrain import offset_retrieval as task
    from tisa.pretrain.schemes import POSITIONS, SIZES
    from tisa.provenance import run_metadata

    unknown = [p for p in args.positions if p not in POSITIONS]
    if unknown:
        raise SystemExit(f"--positions: unknown scheme(s) {unknown}; expected {POSITIONS}")
    if len(set(args.positions)) != len(args.positions):
        raise SystemExit(f"--positions: each scheme once, got {args.positions}")
    if len(set(args.seeds)) != len(args.seeds):
        raise SystemExit(f"--seeds: each seed once, got {args.seeds}")
    if args.size not in SIZES:
        raise SystemExit(f"--size: expected one of {tuple(SIZES)}, got {args.size!r}")
    if args.train_length < 3 or min(args.eval_lengths) < 3:
        raise SystemExit("--train-length and --eval-lengths: expected lengths of at least 3")
    for flag, value, least in (("--steps", args.steps, 1), ("--batch-size", args.batch_size, 1),
                               ("--vocab-size", args.vocab_size, 2), ("--warmup", args.warmup, 0),
                               ("--eval-sequences", args.eval_sequences, 1),
                               ("--checkpoint-every", args.checkpoint_every, 1),
                               ("--sweep-steps",
                                1 if args.sweep_steps is None else args.sweep_steps, 1)):
        if value < least:
            raise SystemExit(f"{flag}: expected an integer of at least {least}, got {value}")
    for flag, rate in (("--learning-rate", args.learning_rate),
                       ("--tisa-learning-rate", 1.0 if args.tisa_learning_rate is None
                        else args.tisa_learning_rate)):
        if not rate > 0:
            raise SystemExit(f"{flag}: expected a positive rate, got {rate}")
    if min(args.offsets) < 1 or len(set(args.offsets)) != len(args.offsets):
        raise SystemExit(f"--offsets: expected distinct offsets of at least 1, got {args.offsets}")
    if max(args.offsets) >= args.train_length - 1:
        raise SystemExit(f"--offsets must be < --train-length - 1 ({args.train_length - 1})")
    if args.positional_lr_sweep is not None:
        if args.tisa_learning_rate is not None:
            raise SystemExit("--tisa-learning-rate: not with --positional-lr-sweep, which sets it")
        if min(args.positional_lr_sweep) <= 0:
            raise SystemExit(f"--positional-lr-sweep: expected positive rates, "
                             f"got {args.positional_lr_sweep}")
        if args.sweep_seed in args.seeds:
            raise SystemExit(f"--sweep-seed: {args.sweep_seed} is a reported seed (--seeds)")
    if args.output_dir.is_file():
        raise SystemExit(f"--output-dir: {args.output_dir} is a file, expected a folder")
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    settings = {k: getattr(args, k) for k in task.RUN_SETTINGS}

    def run_once(position: str, seed: int, path: Path, run_settings: dict[str, Any],
                 save_model: bool = False) -> dict:
        run = _saved_run(path, run_settings)
        if run is None:
            checkpoint = path.with_suffix(".ckpt.pt")
            try:
                run = task.train_and_evaluate(
                    position, **run_settings, seed=seed, device=device,
                    progress=not args.no_progress,
                    save_model=path.with_suffix(".pt") if save_model else None,
                    checkpoint=checkpoint, checkpoint_every=args.checkpoint_every,
                )
            except ValueError as err:  # a checkpoint of other arguments, or damaged
                raise SystemExit(f"--output-dir: {err}") from None
            write_json(path, {"settings": run_settings, "run": run})
            checkpoint.unlink(missing_ok=True)
            print(f"{path.parent.name}, {path.stem}: trained, loss {run['final_train_loss']:.3f}",
                  flush=True)
        else:
            print(f"{path.parent.name}, {path.stem}: kept from {path}", flush=True)
        return run

    rates: dict[str, float | None] = {p: args.tisa_learning_rate for p in args.positions}
    sweep: dict[str, Any] = {}
    if args.positional_lr_sweep is not None:
        sweep_settings = settings | {
            "steps": args.sweep_steps or args.steps, "eval_lengths": [args.train_length],
        }
        for position in args.positions:
            if not task.has_positional_parameters(position):
                rates[position] = None
                continue
            losses = {}
            for rate in sorted(args.positional_lr_sweep):
                run = run_once(
                    position, args.sweep_seed,
                    args.output_dir / "sweep" / f"{position}-lr{rate:g}.json",
                    sweep_settings | {"tisa_learning_rate": rate},
                )
                losses[rate] = task.eval_cell(run, args.train_length)["loss"]
            rates[position] = task.choose_rate(losses)
            sweep[position] = {"losses": losses, "chosen": rates[position]}
            print(f"{position}: positional rate {rates[position]:g} (losses at "
                  f"{args.train_length}: {losses})", flush=True)
    runs: dict[int, dict[str, Any]] = {}
    for seed in args.seeds:
        runs[seed] = {}
        for position in args.positions:
            runs[seed][position] = run_once(
                position, seed, args.output_dir / f"seed-{seed}" / f"{position}.json",
                settings | {"tisa_learning_rate": rates[position]}, save_model=args.save_models,
            )
    summary = task.summarise(
        runs, train_length=args.train_length, eval_lengths=args.eval_lengths
    )
    results = {
        "provenance": run_metadata(
            None if argv is None else ["experiments/offset_retrieval/run.py", *argv]
        ),
        "settings": settings | {
            "seeds": args.seeds, "device": device, "positional_lr_sweep": args.positional_lr_sweep,
            "sweep_seed": args.sweep_seed if sweep else None,
            "sweep_steps": (args.sweep_steps or args.steps) if sweep else None,
            "positional_rates": rates,
        },
        "sweep": sweep,
        "runs": {str(seed): r for seed, r in runs.items()},
        "summary": summary,
    }
    write_json(args.output_dir / "results.json", results)
    md = task.markdown(summary, settings=results["settings"])
    write_atomic(args.output_dir / "results.md", md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
