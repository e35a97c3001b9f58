"""Pretraining experiment: every position scheme on Penn Treebank, same budget, then
length extrapolation and translation invariance over training.

    python experiments/position_schemes.py                       # the default comparison
    python experiments/position_schemes.py --max-steps 4000 --output-dir runs/ps-4000
    python experiments/position_schemes.py --arch gpt2 --max-steps 1000 \\
        --output-dir runs/ps-causal                             # causal LM (next-token loss)

Each ``--positions`` entry is one run: a position scheme (``tisa``), or
``LABEL=SCHEME:KEY=VALUE:...`` where each KEY is a ``tisa pretrain`` setting
(``tisa_learning_rate``, ``num_kernels``, ``mixed_lengths``, ...; tuples comma-separated)
or an option of the scheme's scoring family (``learn_tail=false``)::

    --positions absolute tisa rbf_linear rbf_linear-fixed=rbf_linear:learn_tail=false

Every run trains the small model (hidden 256, 4 layers) at ``--seq-len`` with the same
seed, steps, batch, tokenizer, data order and masks (``tisa pretrain``; a finished run is
reused, an interrupted one resumed), then is scored at ``--lengths`` on the Penn Treebank
test set with the same masks (``tisa extrapolate``). ``--eval-variants
LABEL=RUN:KEY=VALUE:...`` adds evaluations of a trained run with changed scoring options
(``tisa-far127=tisa:far_offset=127``: the far-field ramp, no retraining). ``--stride S``
(causal LMs: sliding windows) and ``--context-curve C ...`` score as ``tisa extrapolate``
does; each run's context curve and its slope past the training length (nats per doubling)
go in its summary entry (``context_curve``, ``context_slope``).

Outputs: ``summary.md`` / ``summary.json`` (validation loss, test loss at each length and
its rise over the training length, tokens/s against the absolute run, positional
parameters, how far the scoring parameters moved, issue targets, and the translation
invariance of the absolute run at every checkpoint: TI over all entries and off the
diagonal, each with matched nulls, and Spearman's rho against the validation loss) and
``report.html`` (the table, validation curves, the extrapolation plot, TI over training
and the learned f_h of every scoring run drawn out to the longest length).

``--train-only`` trains the runs it is given and stops: start two of these on disjoint
runs (one thread each), then one run without it for the evaluation and the summary.

Equal tuning, ``--positional-lr-sweep RATE ...``: every run of ``--positions`` whose scheme
has learned positional parameters (TISA kernels, tails, T5 buckets, KERPLE, FIRE's MLP,
learned ALiBi slopes, ...) is trained once per rate, with ``tisa_learning_rate`` set to it
(folders ``LABEL-plrRATE``); schemes without positional parameters are trained once. The
rate of each run is chosen on its validation loss at the training length (the end of
training), and ``lr_sweep.json`` / ``lr_sweep.md`` record every candidate, the choice and
the ``--positions`` spec that trains it::

    python experiments/position_schemes.py --output-dir runs/plr-sweep --max-steps 1000 \
        --positional-lr-sweep 5e-4 3e-3 1e-2 3e-2 1e-1 --positions tisa t5 kerple_log fire

With ``--train-only`` it trains and stops (several can share the work); without it, it
also writes the selection (a sweep never runs the test-set evaluation).

Seeds, ``--seeds S ...``: every run at each seed (folders ``seed-S/LABEL``), each seed
summarised as above (``seed-S/summary.json``), then ``seeds.json`` / ``seeds.md``: mean ± sd
over the seeds, and every run against the best baseline at each length (``--baselines``,
default the runs of the baseline schemes), paired by seed, with Holm's correction::

    python experiments/position_schemes.py --output-dir runs/ps-protocol --seeds 0 1 2 \
        --positions alibi fire kerple_log rbf_linear=rbf_linear:tisa_learning_rate=1e-1

Work in units, ``--units-dir DIR`` (with ``--seeds``): each run at each seed is finished on
its own, trained and then scored alone on the test set (the masks are per token, so a run
scores the same alone as beside others), and its summary entry is written to
``DIR/seed-S/LABEL.json`` with the settings that produced it. A unit file that is there
is read instead of training again, so a protocol longer than one sitting can be carried
on from its unit files alone (no model folders): commit them, and the same command later
does only the units still missing; ``seeds.json`` / ``seeds.md`` are written once every
unit is there. A unit file made with other settings stops the run with one line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tisa.analysis.training import TI_LOG_SERIES, ti_loss_curve
from tisa.pretrain.compare import (
    BASELINE_SCHEMES,
    DEFAULT_POSITIONS,
    DEFAULT_VARIANTS,
    MUST_MATCH,
    fmt,
    losses,
    parse_spec,
    seed_comparison,
    seed_markdown,
    select_rates,
    shown,
    sweep_markdown,
    sweep_specs,
    targets,
)

if TYPE_CHECKING:
    from tisa.analysis.training import TrainingTI


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--positions", nargs="+", default=list(DEFAULT_POSITIONS))
    parser.add_argument("--eval-variants", nargs="*", default=list(DEFAULT_VARIANTS))
    parser.add_argument("--output-dir", type=Path, default=Path("runs/position-schemes"))
    parser.add_argument("--arch", choices=("albert", "gpt2"), default="albert")
    parser.add_argument("--max-steps", type=int, default=2500)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--save-steps", type=int, default=250)
    parser.add_argument("--lengths", type=int, nargs="+", default=[128, 256, 512, 1024, 2048])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--seeds",
        type=int,
        nargs="+",
        default=None,
        help="train every run at each seed (OUTPUT_DIR/seed-S/LABEL) and compare them over "
        "the seeds (seeds.json, seeds.md); replaces --seed",
    )
    parser.add_argument(
        "--baselines",
        nargs="+",
        default=None,
        metavar="LABEL",
        help="with --seeds: the runs every other run is compared with (default: the runs "
        "of absolute, none, alibi, alibi_learned, t5, kerple_log, rope and fire)",
    )
    parser.add_argument("--size", default="small", help="model size (tiny: smoke runs)")
    parser.add_argument(
        "--max-tokens", type=int, default=65536, help="test tokens scored per run and length"
    )
    parser.add_argument("--tisa-learning-rate", type=float, default=None)
    parser.add_argument(
        "--stride", type=int, default=None,
        help="causal LMs: sliding-window test scoring with this stride (tisa extrapolate "
        "--stride; default: non-overlapping blocks)")
    parser.add_argument(
        "--context-curve", type=int, nargs="+", default=[], metavar="C",
        help="also score the context curve at these window lengths (tisa extrapolate "
        "--context-curve): each run's losses and slope per doubling past its training length")
    parser.add_argument(
        "--bf16",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="bfloat16 autocast (default: where the machine computes it natively)",
    )
    parser.add_argument("--train-only", action="store_true")
    parser.add_argument(
        "--units-dir",
        type=Path,
        default=None,
        help="with --seeds: finish each run at each seed as a unit and keep its summary in "
        "DIR/seed-S/LABEL.json; units there are read, not trained again",
    )
    parser.add_argument(
        "--positional-lr-sweep",
        type=float,
        nargs="+",
        default=None,
        metavar="RATE",
        help="train each run with learned positional parameters at each of these "
        "positional learning rates and choose one on validation loss (lr_sweep.json)",
    )
    args = parser.parse_args(argv)

    try:
        specs = [parse_spec(s) for s in args.positions]
    except ValueError as err:
        raise SystemExit(str(err)) from err
    labels = [s.label for s in specs]
    if len(set(labels)) != len(labels):
        raise SystemExit(f"--positions: labels must be distinct, got {labels}")
    sweep: dict[str, dict[float, str]] = {}
    if args.positional_lr_sweep is not None:
        try:
            specs, sweep = sweep_specs(specs, args.positional_lr_sweep, args.tisa_learning_rate)
        except ValueError as err:
            raise SystemExit(str(err)) from err

    from tisa.pretrain.config import ExtrapolateConfig

    try:  # the scoring settings are checked now, not after hours of training
        ExtrapolateConfig(runs=("-",), lengths=tuple(args.lengths), max_tokens=args.max_tokens,
                          stride=args.stride, context_curve=tuple(args.context_curve))
    except ValueError as err:
        raise SystemExit(f"--lengths / --max-tokens / --stride / --context-curve: {err}") from err

    if args.seeds is not None:
        if len(set(args.seeds)) != len(args.seeds) or len(args.seeds) < 2:
            raise SystemExit(f"--seeds: at least two distinct seeds, got {args.seeds}")
        if args.positional_lr_sweep is not None:
            raise SystemExit("--seeds: choose the rates with one --seed first "
                             "(--positional-lr-sweep), then train the chosen specs with --seeds")
        return _over_seeds(specs, args)
    if args.units_dir is not None:
        raise SystemExit("--units-dir: only with --seeds")
    if args.baselines is not None:
        raise SystemExit("--baselines: only with --seeds")
    runs = _train(specs, args)
    if args.train_only:
        return 0

    from tisa.files import write_atomic, write_json

    if args.positional_lr_sweep is not None:
        selection = select_rates(runs, sweep, specs)
        selection["settings"] = vars(args) | {"output_dir": shown(args.output_dir)}
        write_json(args.output_dir / "lr_sweep.json", selection)
        md = sweep_markdown(selection)
        write_atomic(args.output_dir / "lr_sweep.md", md)
        print(md)
        return 0

    summary = _summarise(runs, args)
    from tisa.provenance import run_metadata

    write_json(args.output_dir / "summary.json", {**summary, "provenance": run_metadata()})
    md = _markdown(summary, args.lengths)
    write_atomic(args.output_dir / "summary.md", md)
    report = _report(summary, runs, args)
    print(md)
    print(f"report: {report}")
    return 0


def _train(specs: list, args: argparse.Namespace) -> dict[str, Path]:
    """Trains (or reuses, or resumes) every run of ``specs`` under ``args.output_dir``
    with ``args.seed``; returns the run folders by label."""
    from tisa.analysis.positional_ti import position_table_ti
    from tisa.checkpoints import run_status
    from tisa.pretrain.run import PretrainConfig, pretrain_or_reuse

    runs: dict[str, Path] = {}
    for spec in specs:
        settings = dict(
            output_dir=str(args.output_dir / spec.label),
            position=spec.position,
            arch=args.arch,
            size=args.size,
            seq_len=args.seq_len,
            max_steps=args.max_steps,
            batch_size=args.batch_size,
            save_steps=args.save_steps,
            eval_steps=args.save_steps,
            seed=args.seed,
            bf16=args.bf16,
            progress=False,
            scoring_options=spec.scoring_options,
        )
        if args.tisa_learning_rate is not None:
            settings["tisa_learning_rate"] = args.tisa_learning_rate
        if spec.position in ("absolute", "absolute+tisa"):  # TI at every checkpoint, kept
            settings["save_total_limit"] = args.max_steps // args.save_steps + 1
        settings.update(spec.settings)
        try:
            config = PretrainConfig(**settings)
        except (TypeError, ValueError) as err:
            raise SystemExit(f"--positions {spec.label}: {err}") from err
        action = run_status(config.output_dir, finished="results.json").action
        print(f"== pretraining {spec.label}: {action}", flush=True)
        try:  # a finished run is reused (if trained with these settings), a broken one resumed
            must = MUST_MATCH + tuple(k for k in spec.settings if k not in MUST_MATCH)
            runs[spec.label] = pretrain_or_reuse(
                config, must_match=must, ti_measure=position_table_ti
            )
        except ValueError as err:
            raise SystemExit(str(err)) from err
    return runs


def _over_seeds(specs: list, args: argparse.Namespace) -> int:
    """``--seeds``: every run at every seed (``OUTPUT_DIR/seed-S/LABEL``), each seed
    summarised as a one-seed comparison is, then ``seeds.json`` / ``seeds.md``: mean ± sd
    over seeds, and every run against the best baseline at each length, paired by seed,
    with Holm's correction (:func:`tisa.pretrain.compare.seed_comparison`)."""
    from tisa.files import write_atomic, write_json
    from tisa.provenance import run_metadata

    labels = [s.label for s in specs]
    baselines = args.baselines
    if baselines is None:
        baselines = [s.label for s in specs if s.position in BASELINE_SCHEMES]
    unknown = [b for b in baselines if b not in labels]
    if unknown:
        raise SystemExit(f"--baselines: {unknown} not among the --positions labels {labels}")
    per_seed: dict[int, dict[str, dict]] = {}
    root = args.output_dir
    if args.units_dir is not None:
        per_seed = _units(specs, args)
        if per_seed is None:  # --train-only, or units still to come
            return 0
    for seed in args.seeds if args.units_dir is None else ():
        sub = argparse.Namespace(**vars(args))
        sub.seed, sub.output_dir = seed, root / f"seed-{seed}"
        runs = _train(specs, sub)
        if args.train_only:
            continue
        summary = _summarise(runs, sub)
        write_json(sub.output_dir / "summary.json", {**summary, "provenance": run_metadata()})
        write_atomic(sub.output_dir / "summary.md", _markdown(summary, args.lengths))
        per_seed[seed] = {k: v for k, v in summary["runs"].items() if k in labels}
    if args.train_only:
        return 0
    result = seed_comparison(per_seed, args.lengths, baselines)
    settings = vars(args) | {"output_dir": shown(root)}
    if args.units_dir is not None:
        settings["units_dir"] = shown(args.units_dir)
    write_json(root / "seeds.json", {**result, "baselines": baselines, "settings": settings,
                                     "provenance": run_metadata()})
    md = seed_markdown(result, args.lengths)
    write_atomic(root / "seeds.md", md)
    print(md)
    return 0


def _unit_settings(spec, args: argparse.Namespace, seed: int) -> dict[str, Any]:
    """What a unit's result depends on: a unit file with other settings is not reused."""
    keys = ("arch", "size", "seq_len", "max_steps", "batch_size", "save_steps", "lengths",
            "max_tokens", "tisa_learning_rate", "bf16", "stride", "context_curve")
    return {"label": spec.label, "position": spec.position,
            "settings": {k: list(v) if isinstance(v, tuple) else v
                         for k, v in spec.settings.items()},
            "scoring_options": list(spec.scoring_options), "seed": seed,
            **{k: getattr(args, k) for k in keys}}


def _unit_run(unit: dict[str, Any]) -> dict[str, Any]:
    """A unit file's summary entry, its test losses and context curve keyed by length
    again (JSON keeps object keys as strings)."""
    run = dict(unit["run"])
    for key in ("test_loss", "context_curve"):
        if run.get(key) is not None:
            run[key] = {int(n): v for n, v in run[key].items()}
    return run


def _units(specs: list, args: argparse.Namespace) -> dict[int, dict[str, dict]] | None:
    """``--units-dir``: each (seed, run) trained and scored alone, its summary entry kept
    in ``DIR/seed-S/LABEL.json`` (variants of ``--eval-variants`` in their own files, from
    their run's unit); returns ``{seed: {label: entry}}`` once every unit is there, else
    None."""
    from tisa.files import write_json
    from tisa.provenance import run_metadata

    variants: dict[str, list[str]] = {}
    for text in args.eval_variants:
        label, base, _ = _variant(text)
        variants.setdefault(base, []).append(label)
    per_seed: dict[int, dict[str, dict]] = {}
    for seed in args.seeds:
        sub = argparse.Namespace(**vars(args))
        sub.seed, sub.output_dir = seed, args.output_dir / f"seed-{seed}"
        for spec in specs:
            want = _unit_settings(spec, args, seed)
            files = {label: args.units_dir / f"seed-{seed}" / f"{label}.json"
                     for label in (spec.label, *variants.get(spec.label, ()))}
            found = {}
            for label, path in files.items():
                if path.is_file():
                    unit = json.loads(path.read_text())
                    if unit.get("unit") != want:
                        raise SystemExit(f"--units-dir: {path} holds a unit made with other "
                                         "settings; use another folder for these")
                    found[label] = _unit_run(unit)
            if len(found) < len(files):
                print(f"== unit seed {seed} / {spec.label}: training and scoring", flush=True)
                runs = _train([spec], sub)
                if args.train_only:
                    continue
                one = argparse.Namespace(**vars(sub))
                one.output_dir = sub.output_dir / f"units-{spec.label}"
                one.eval_variants = [v for v in args.eval_variants
                                     if v.partition("=")[0] in files]
                summary = _summarise(runs, one)
                for label, path in files.items():
                    write_json(path, {"unit": want, "run": summary["runs"][label],
                                      "provenance": run_metadata()})
                    found[label] = _unit_run(json.loads(path.read_text()))  # as saved
            else:
                print(f"== unit seed {seed} / {spec.label}: read from {files[spec.label]}")
            per_seed.setdefault(seed, {})[spec.label] = found[spec.label]
    missing = [(seed, s.label) for seed in args.seeds for s in specs
               if s.label not in per_seed.get(seed, {})]
    return None if args.train_only or missing else per_seed


# ------------------------------------------------------------------ positional lr sweep


# ----------------------------------------------------------------------------- summary


def _variant(text: str) -> tuple[str, str, list[str]]:
    """``LABEL=RUN:KEY=VALUE:...`` of ``--eval-variants`` as (label, run, options)."""
    label, _, rest = text.partition("=")
    base, *options = rest.split(":")
    return label, base, options


def _context(results, label: str) -> dict[str, Any]:
    """A run's context curve (``{context: loss}``) and its slope past the training length,
    where the curve was scored."""
    if not results.context_rows:
        return {}
    return {"context_curve": dict(results.context_points(label)),
            "context_slope": results.context_slopes()[label]}


def _summarise(runs: dict[str, Path], args: argparse.Namespace) -> dict[str, Any]:
    """Extrapolation of every run and variant, and the facts of each run, as plain data."""
    from tisa.files import read_jsonl
    from tisa.pretrain.extrapolation import extrapolate

    scoring = dict(max_tokens=args.max_tokens, stride=args.stride,
                   context_curve=tuple(args.context_curve))
    results = extrapolate(
        list(runs.values()),
        args.lengths,
        output_dir=args.output_dir / "extrapolation",
        **scoring,
    )
    test_loss = {label: losses(results, label, args.lengths) for label in runs}
    context = {label: _context(results, label) for label in runs}
    variants: dict[str, dict[str, Any]] = {}
    for text in args.eval_variants:
        label, base, options = _variant(text)
        if base not in runs:
            print(f"== variant {label}: run {base!r} is not in --positions, skipped")
            continue
        out = extrapolate(
            [runs[base]],
            args.lengths,
            scoring_options=tuple(options),
            output_dir=args.output_dir / f"extrapolation-{label}",
            **scoring,
        )
        variants[label] = {"run": base, "scoring_options": options}
        test_loss[label] = losses(out, runs[base].name, args.lengths)
        context[label] = _context(out, runs[base].name)

    summary: dict[str, Any] = {
        "settings": vars(args) | {"output_dir": shown(args.output_dir)},
        "runs": {},
        "variants": variants,
    }
    for label, run_dir in runs.items():
        facts = json.loads((run_dir / "pretrain_config.json").read_text())
        done = json.loads((run_dir / "results.json").read_text())
        metrics = read_jsonl(run_dir / "metrics.jsonl")
        evals = [r for r in metrics if r.get("eval_loss") is not None]
        speeds = [r["tokens_per_s"] for r in metrics if r.get("tokens_per_s")]
        config = facts["config"]
        summary["runs"][label] = {
            "position": config["position"],
            "scoring_options": config.get("scoring_options", []),
            "tisa_learning_rate": config.get("tisa_learning_rate"),
            "mixed_lengths": config.get("mixed_lengths"),
            "final_validation_loss": evals[-1]["eval_loss"] if evals else None,
            "validation_curve": {
                "steps": [r["step"] for r in evals],
                "eval_loss": [r["eval_loss"] for r in evals],
            },
            "tokens_per_s": statistics.median(speeds) if speeds else None,
            "positional_parameters": facts["positional_parameters"],
            "num_parameters": facts["num_parameters"],
            "scoring_movement": done.get("scoring_movement"),
            "test_loss": test_loss[label],
            **context[label],
        }
    for label, variant in variants.items():
        base = summary["runs"][variant["run"]]
        summary["runs"][label] = dict(
            base, test_loss=test_loss[label], variant_of=variant["run"], validation_curve=None,
            **context[label],
        )
    summary["targets"] = targets(summary["runs"], args.lengths)
    absolute = runs.get("absolute")
    if absolute is not None and (absolute / "ti.jsonl").is_file():
        summary["ti_over_training"] = ti_loss_curve(absolute / "ti.jsonl")
    return summary


# ----------------------------------------------------------------------------- outputs


def _markdown(summary: dict, lengths: list[int]) -> str:
    from tisa.reports.markdown import markdown_table

    runs = summary["runs"]
    base_speed = (runs.get("absolute") or {}).get("tokens_per_s")
    first = lengths[0]
    rows = []
    for name, r in runs.items():
        loss = r["test_loss"]
        cells = [fmt(loss[n]) for n in lengths]
        rises = [
            "n/a" if loss[n] is None or loss[first] is None else f"{loss[n] / loss[first] - 1:+.1%}"
            for n in lengths[-2:]
        ]
        speed = ""
        if base_speed and r["tokens_per_s"] and not r.get("variant_of"):
            speed = f"{r['tokens_per_s'] / base_speed:.2f}x"
        val = "" if r.get("variant_of") else fmt(r["final_validation_loss"])
        rows.append([name, val, *cells, *rises, speed, f"{r['positional_parameters']['total']:,}"])
    columns = [
        "run",
        f"val. loss ({summary['settings']['seq_len']})",
        *(f"test @{n}" for n in lengths),
        *(f"rise @{n}" for n in lengths[-2:]),
        "tokens/s vs absolute",
        "positional params",
    ]
    out = markdown_table(columns, rows, align="l" + "r" * (len(columns) - 1))
    targets = summary.get("targets") or {}
    if targets:
        out += "\nExtrapolation targets met per run: "
        out += ", ".join(
            f"{k}: {'all' if t['all'] else ' '.join(n for n, v in t.items() if v is True) or '-'}"
            for k, t in targets.items()
        )
        out += "\n"
    curve = summary.get("ti_over_training")
    if curve:
        out += "\nTranslation invariance of the absolute run over training "
        out += "(off-diagonal TI with the random-direction and shuffled nulls: mean, z):\n\n"
        rows = []
        for i, step in enumerate(curve["steps"]):
            nulls = curve["nulls"][i] or {}
            row = [step, fmt(curve["eval_loss"][i]), fmt(curve["ti_gram"][i])]
            row += [fmt(curve["ti_fp_raw"][i])]
            for key in ("gram_offdiag", "fp_raw_offdiag"):
                series = f"ti_{key}"
                n = nulls.get(key) or {}
                rnd, shf = n.get("random") or {}, n.get("shuffled") or {}
                row.append(fmt(curve[series][i]))
                row.append(f"{fmt(rnd.get('mean'))} / {fmt(shf.get('mean'))}")
                row.append(f"{fmt(rnd.get('z'), 1)} / {fmt(shf.get('z'), 1)}")
            rows.append(row)
        out += markdown_table(
            [
                "step",
                "val. loss",
                "TI(P Pᵀ)",
                "TI(F_P)",
                "TI(P Pᵀ) off-diag.",
                "nulls: random / shuffled",
                "z",
                "TI(F_P) off-diag.",
                "nulls: random / shuffled",
                "z",
            ],
            rows,
            align="r" * 10,
        )
        for key in TI_LOG_SERIES:
            rho = curve.get(f"spearman_{key}_vs_eval_loss")
            if rho is not None:
                p = curve[f"spearman_{key}_vs_eval_loss_p"]
                out += f"\nSpearman ρ({key}, val. loss) = {rho:.3f} (p = {p:.3g})"
        out += "\n"
    return out


def _report(summary: dict, runs: dict[str, Path], args: argparse.Namespace) -> Path:
    """report.html: the summary table, loss curves, extrapolation, TI over training and
    the learned f_h of every run with scoring functions."""
    from tisa.analysis.training_report import loss_curves_section
    from tisa.reports.html import Image, Section, Table, write_report

    lengths = args.lengths
    rows = [
        [name, r["final_validation_loss"], *(r["test_loss"][n] for n in lengths)]
        + [r["positional_parameters"]["total"]]
        for name, r in summary["runs"].items()
    ]
    objective = "next-token" if args.arch == "gpt2" else "masked-LM"
    table = Table(
        ["run", "val. loss", *(f"test loss @{n}" for n in lengths), "positional params"],
        rows,
        caption=f"{objective} loss in nats per token (lower is better); empty: the absolute "
        "table cannot represent that length.",
    )
    curves = {
        name: (r["validation_curve"]["steps"], r["validation_curve"]["eval_loss"])
        for name, r in summary["runs"].items()
        if r.get("validation_curve")
    }
    model = "GPT-2 decoder" if args.arch == "gpt2" else "ALBERT"
    sections = [
        loss_curves_section(
            "Training",
            curves,
            paragraphs=[
                f"{args.size.capitalize()} {model}, length {args.seq_len}, "
                f"batch {args.batch_size}, {args.max_steps} steps, seed {args.seed}, "
                "Penn Treebank; the same data and masks for every scheme."
            ],
            caption=f"Validation loss at length {args.seq_len} during training.",
        ),
        Section(
            "Length extrapolation",
            figures=[
                Image(
                    args.output_dir / "extrapolation" / "extrapolation.png",
                    "Test loss at each evaluation length, same text for every run.",
                )
            ],
        ),
    ]
    training = _training_ti(runs)
    if training is not None:
        from tisa.analysis.training_report import ti_over_training_section

        sections.append(
            ti_over_training_section(
                training, heading="Translation invariance of the absolute run over training"
            )
        )
    sections.extend(_learned_functions(runs, max(lengths)))
    return write_report(
        args.output_dir / "report.html",
        "Position schemes on Penn Treebank",
        sections,
        summary=table,
    )


def _training_ti(runs: dict[str, Path]) -> TrainingTI | None:
    from tisa.analysis.training import read_ti_log

    path = runs.get("absolute", Path("-")) / "ti.jsonl"
    return read_ti_log(path, evaluated_only=True) if path.is_file() else None


def _learned_functions(runs: dict[str, Path], max_offset: int) -> list:
    """One section per run with scoring functions: f_h(k) of every layer for |k| up to
    ``max_offset`` (the longest evaluation length), and a close-up of |k| <= 32."""
    import torch

    from tisa.analysis.extract import tisa_scorers
    from tisa.hf.loading import load_model
    from tisa.reports.charts import scoring_curves
    from tisa.reports.figures import figure_png
    from tisa.reports.html import Image, Section

    sections = []
    for label, run_dir in runs.items():
        model, _ = load_model(run_dir / "model", tokenizer=False)
        scorers = tisa_scorers(model)
        if not scorers:
            continue
        figures = []
        for reach in (max_offset, 32):
            k = torch.arange(-reach, reach + 1)
            with torch.no_grad():
                values = torch.stack([s(k).float() for _, s in scorers])  # (layers, H, 2K+1)
            fig = scoring_curves(k, values, layers=[layer for layer, _ in scorers])
            caption = f"f_h(k) of every layer and head, |k| <= {reach}."
            figures.append(Image(figure_png(fig), caption))
        family = getattr(scorers[0][1], "family", "")
        sections.append(Section(f"Learned scoring functions: {label} ({family})", figures=figures))
    return sections


if __name__ == "__main__":
    sys.exit(main())
