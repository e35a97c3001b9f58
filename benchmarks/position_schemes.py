"""Pretraining experiment: every position scheme on Penn Treebank, same budget, then
length extrapolation and translation invariance over training.

    python benchmarks/position_schemes.py                       # the default comparison
    python benchmarks/position_schemes.py --max-steps 4000 --output-dir runs/ps-4000
    python benchmarks/position_schemes.py --arch gpt2 --max-steps 1000 \\
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
(``tisa-far127=tisa:far_offset=127``: the far-field ramp, no retraining).

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

    python benchmarks/position_schemes.py --output-dir runs/plr-sweep --max-steps 1000 \
        --positional-lr-sweep 5e-4 3e-3 1e-2 3e-2 1e-1 --positions tisa t5 kerple_log fire

With ``--train-only`` it trains and stops (several can share the work); without it, it
also writes the selection (a sweep never runs the test-set evaluation).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import typing
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tisa.analysis.training import TrainingTI

DEFAULT_POSITIONS = (
    "absolute",
    "none",
    "tisa",
    "absolute+tisa",
    "alibi",
    "t5",
    "kerple_log",
    "rbf_log",
    "rbf_linear",
    "rbf_linear-fixed=rbf_linear:learn_tail=false",
    "rbf_logdist",
)
DEFAULT_VARIANTS = ("tisa-far127=tisa:far_offset=127",)
#: TI series of the absolute run over training (ti.jsonl keys).
TI_SERIES = ("ti_gram", "ti_fp_raw", "ti_gram_offdiag", "ti_cos_offdiag", "ti_fp_raw_offdiag")
#: Settings a finished run must share with the request to be reused.
MUST_MATCH = (
    "position",
    "arch",
    "max_steps",
    "seq_len",
    "batch_size",
    "seed",
    "bf16",
    "tisa_learning_rate",
    "scoring_options",
    "num_kernels",
    "mixed_lengths",
    "mixed_share",
    "size",
)


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """One run of the comparison: its label (folder name), scheme, settings, options."""

    label: str
    position: str
    settings: dict[str, Any]
    scoring_options: tuple[str, ...]


def parse_spec(text: str) -> RunSpec:
    """``LABEL=SCHEME:KEY=VALUE:...`` (or a bare scheme) -> :class:`RunSpec`.

    Raises:
        ValueError: an empty label or scheme, or a malformed KEY=VALUE.
    """
    from tisa.pretrain.config import PretrainConfig, parse_options

    head, *items = text.split(":")
    label, sep, position = head.partition("=")
    if not sep:
        label = position = head
    if not label or not position or "/" in label:
        raise ValueError(f"--positions: expected LABEL=SCHEME[:KEY=VALUE...], got {text!r}")
    hints = typing.get_type_hints(PretrainConfig)
    fields = {f.name for f in dataclasses.fields(PretrainConfig)}
    settings: dict[str, Any] = {}
    scoring: list[str] = []
    for key, value in parse_options(items, f"--positions {label}").items():
        if key in fields:
            if typing.get_origin(hints[key]) is tuple or "tuple" in str(hints[key]):
                parts = str(value).split(",")
                value = tuple(int(p) if p.strip().isdigit() else p for p in parts)
            settings[key] = value
        else:
            raw = next(i for i in items if i.partition("=")[0].strip() == key)
            scoring.append(raw)
    return RunSpec(label, position, settings, tuple(scoring))


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
    parser.add_argument("--size", default="small", help="model size (tiny: smoke runs)")
    parser.add_argument(
        "--max-tokens", type=int, default=65536, help="test tokens scored per run and length"
    )
    parser.add_argument("--tisa-learning-rate", type=float, default=None)
    parser.add_argument(
        "--bf16",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="bfloat16 autocast (default: where the machine computes it natively)",
    )
    parser.add_argument("--train-only", action="store_true")
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

    from tisa.analysis.positional_ti import position_table_ti
    from tisa.checkpoints import run_status
    from tisa.pretrain.run import PretrainConfig, pretrain_or_reuse

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
    if args.train_only:
        return 0

    from tisa.files import write_atomic, write_json

    if args.positional_lr_sweep is not None:
        selection = select_rates(runs, sweep, specs)
        selection["settings"] = vars(args) | {"output_dir": _shown(args.output_dir)}
        write_json(args.output_dir / "lr_sweep.json", selection)
        md = _sweep_markdown(selection)
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


# ------------------------------------------------------------------ positional lr sweep


def has_positional_parameters(spec: RunSpec) -> bool:
    """Whether the run's scheme has learned positional scoring parameters.

    Raises:
        ValueError: an unknown scheme or a scoring option its family does not take.
    """
    from tisa.hf.settings import takes_num_kernels
    from tisa.pretrain.config import parse_options
    from tisa.pretrain.schemes import scoring_family
    from tisa.scoring import build

    family = scoring_family(spec.position)
    if family is None:
        return False
    options = parse_options(spec.scoring_options, f"--positions {spec.label}")
    if takes_num_kernels(family):
        options.setdefault("num_kernels", spec.settings.get("num_kernels", 5))
    return build(family, num_heads=2, **options).num_positional_parameters() > 0


def sweep_specs(
    specs: list[RunSpec], rates: list[float], tisa_learning_rate: float | None
) -> tuple[list[RunSpec], dict[str, dict[float, str]]]:
    """The runs of a positional learning-rate sweep.

    Returns:
        (runs to train, {sweep label: {rate: run label}}): a run with learned positional
        parameters becomes one run per rate (``LABEL-plrRATE``, ``tisa_learning_rate`` set);
        the others stay as they are.

    Raises:
        ValueError: no rates, a rate that is not positive or given twice, a global
            ``--tisa-learning-rate``, or a run that fixes its own ``tisa_learning_rate``.
    """
    if not rates or any(not r > 0 for r in rates) or len(set(rates)) != len(rates):
        raise ValueError(f"--positional-lr-sweep: distinct rates > 0 expected, got {rates}")
    if tisa_learning_rate is not None:
        raise ValueError("--positional-lr-sweep chooses the rate: leave out --tisa-learning-rate")
    out: list[RunSpec] = []
    plan: dict[str, dict[float, str]] = {}
    for spec in specs:
        if not has_positional_parameters(spec):
            out.append(spec)
            continue
        if "tisa_learning_rate" in spec.settings:
            raise ValueError(
                f"--positions {spec.label}: its tisa_learning_rate is what the sweep chooses"
            )
        plan[spec.label] = {}
        for rate in rates:
            label = f"{spec.label}-plr{rate:g}"
            settings = dict(spec.settings, tisa_learning_rate=rate)
            out.append(RunSpec(label, spec.position, settings, spec.scoring_options))
            plan[spec.label][rate] = label
    return out, plan


def _spec_text(spec: RunSpec, rate: float) -> str:
    items = [
        f"{k}={_setting_text(v)}" for k, v in spec.settings.items() if k != "tisa_learning_rate"
    ]
    items += list(spec.scoring_options) + [f"tisa_learning_rate={rate:g}"]
    return ":".join([f"{spec.label}={spec.position}", *items])


def _setting_text(value: Any) -> str:
    return ",".join(map(str, value)) if isinstance(value, tuple) else str(value)


def select_rates(
    runs: dict[str, Path], plan: dict[str, dict[float, str]], specs: list[RunSpec]
) -> dict[str, Any]:
    """The positional rate of each swept run: the lowest final validation loss.

    Validation is at the training length (``eval_loss`` in each run's results.json);
    ties go to the smaller rate.

    Returns:
        ``{"rates": [...], "runs": {label: {"position", "candidates": {rate: loss},
        "chosen", "chosen_run", "spec"}}, "fixed": {label: loss}}`` (``fixed``: the runs
        without positional parameters, trained once).
    """
    by_label = {s.label: s for s in specs}
    swept = {label for rates in plan.values() for label in rates.values()}

    def loss(label: str) -> float | None:
        done = json.loads((runs[label] / "results.json").read_text())
        value = done.get("eval_loss")
        return None if value is None else float(value)

    out: dict[str, Any] = {"rates": sorted({r for v in plan.values() for r in v}), "runs": {}}
    for base, rates in plan.items():
        candidates = {rate: loss(label) for rate, label in sorted(rates.items())}
        scored = [(v, r) for r, v in candidates.items() if v is not None]
        chosen = min(scored)[1] if scored else None
        spec = by_label[rates[chosen]] if chosen is not None else None
        out["runs"][base] = {
            "position": by_label[next(iter(rates.values()))].position,
            "candidates": {f"{r:g}": v for r, v in candidates.items()},
            "chosen": chosen,
            "chosen_run": None if chosen is None else rates[chosen],
            "spec": None
            if spec is None
            else _spec_text(dataclasses.replace(spec, label=base), chosen),
        }
    out["fixed"] = {label: loss(label) for label in runs if label not in swept}
    return out


def _sweep_markdown(selection: dict[str, Any]) -> str:
    rates = [f"{r:g}" for r in selection["rates"]]
    lines = [
        "Positional learning rate per run: validation loss at the training length "
        "(end of training) at each rate; the lowest is chosen.",
        "",
        "| run | position | " + " | ".join(rates) + " | chosen |",
        "|---|---|" + "---:|" * len(rates) + "---:|",
    ]
    for label, r in selection["runs"].items():
        cells = [_fmt(r["candidates"].get(rate)) for rate in rates]
        chosen = "" if r["chosen"] is None else f"{r['chosen']:g}"
        lines.append(f"| {label} | {r['position']} | " + " | ".join(cells) + f" | {chosen} |")
    if selection["fixed"]:
        lines += ["", "Without positional parameters (trained once):", ""]
        lines += [f"- {label}: {_fmt(v)}" for label, v in selection["fixed"].items()]
    specs = [r["spec"] for r in selection["runs"].values() if r["spec"]]
    if specs:
        lines += ["", "The chosen runs, as `--positions` specs:", "", "    " + " ".join(specs)]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- summary


def _summarise(runs: dict[str, Path], args: argparse.Namespace) -> dict[str, Any]:
    """Extrapolation of every run and variant, and the facts of each run, as plain data."""
    from tisa.files import read_jsonl
    from tisa.pretrain.extrapolation import extrapolate

    results = extrapolate(
        list(runs.values()),
        args.lengths,
        max_tokens=args.max_tokens,
        output_dir=args.output_dir / "extrapolation",
    )
    test_loss = {label: _losses(results, label, args.lengths) for label in runs}
    variants: dict[str, dict[str, Any]] = {}
    for text in args.eval_variants:
        label, _, rest = text.partition("=")
        base, *options = rest.split(":")
        if base not in runs:
            print(f"== variant {label}: run {base!r} is not in --positions, skipped")
            continue
        out = extrapolate(
            [runs[base]],
            args.lengths,
            scoring_options=tuple(options),
            max_tokens=args.max_tokens,
            output_dir=args.output_dir / f"extrapolation-{label}",
        )
        variants[label] = {"run": base, "scoring_options": options}
        test_loss[label] = _losses(out, runs[base].name, args.lengths)

    summary: dict[str, Any] = {
        "settings": vars(args) | {"output_dir": _shown(args.output_dir)},
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
        }
    for label, variant in variants.items():
        base = summary["runs"][variant["run"]]
        summary["runs"][label] = dict(
            base, test_loss=test_loss[label], variant_of=variant["run"], validation_curve=None
        )
    summary["targets"] = _targets(summary["runs"], args.lengths)
    absolute = runs.get("absolute")
    if absolute is not None and (absolute / "ti.jsonl").is_file():
        summary["ti_over_training"] = _ti_curve(absolute / "ti.jsonl")
    return summary


def _shown(path: Path) -> str:
    """``path`` as a summary records it: relative to the working folder when inside it (a
    summary committed with its results names no machine's folders), else as given."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _losses(results, label: str, lengths: list[int]) -> dict[int, float | None]:
    rows = {n: results.row(label, n) for n in lengths}
    return {n: r.loss if r.status == "ok" else None for n, r in rows.items()}


def _targets(runs: dict[str, dict], lengths: list[int]) -> dict[str, dict[str, Any]]:
    """The extrapolation targets per run: within 3% of its own training-length loss at 8x and 5%
    at 16x, at or below ALiBi at every length, at or below the RBF scorer (``tisa``) at the
    training length, under 1% of the absolute table's positional parameters."""
    first = lengths[0]
    alibi = (runs.get("alibi") or {}).get("test_loss", {})
    rbf = (runs.get("tisa") or {}).get("test_loss", {}).get(first)
    table = ((runs.get("absolute") or {}).get("positional_parameters") or {}).get("total")
    out = {}
    for label, r in runs.items():
        loss = r["test_loss"]
        if loss.get(first) is None:
            continue

        def rise(n: int) -> float | None:
            return None if loss.get(n) is None else loss[n] / loss[first] - 1.0

        checks: dict[str, Any] = {
            "rise_8x": rise(first * 8),
            "rise_16x": rise(first * 16),
        }
        checks["within_3pct_8x"] = checks["rise_8x"] is not None and checks["rise_8x"] <= 0.03
        checks["within_5pct_16x"] = checks["rise_16x"] is not None and checks["rise_16x"] <= 0.05
        checks["at_or_below_alibi"] = bool(alibi) and all(
            loss.get(n) is not None and alibi.get(n) is not None and loss[n] <= alibi[n]
            for n in lengths
        )
        checks["at_or_below_rbf_at_train_length"] = rbf is not None and loss[first] <= rbf
        params = r["positional_parameters"]["total"]
        checks["under_1pct_of_table"] = table is not None and params < 0.01 * table
        checks["all"] = all(v for k, v in checks.items() if not k.startswith("rise"))
        out[label] = checks
    return out


def _ti_curve(path: Path) -> dict[str, Any]:
    """TI of the absolute run at every checkpoint, with nulls and Spearman's rho."""
    from tisa.analysis.training import spearman
    from tisa.files import read_jsonl

    rows = [r for r in read_jsonl(path) if r.get("eval_loss") is not None]
    curve: dict[str, Any] = {
        "steps": [r["step"] for r in rows],
        "eval_loss": [r["eval_loss"] for r in rows],
    }
    for key in TI_SERIES:
        curve[key] = [r.get(key) for r in rows]
        rho = spearman(curve[key], curve["eval_loss"])  # None with < 3 known values
        curve[f"spearman_{key}_vs_eval_loss"] = None if rho is None else rho.rho
        curve[f"spearman_{key}_vs_eval_loss_p"] = None if rho is None else rho.pvalue
    curve["nulls"] = [r.get("nulls") for r in rows]
    return curve


# ----------------------------------------------------------------------------- outputs


def _fmt(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _markdown(summary: dict, lengths: list[int]) -> str:
    from tisa.reports.markdown import markdown_table

    runs = summary["runs"]
    base_speed = (runs.get("absolute") or {}).get("tokens_per_s")
    first = lengths[0]
    rows = []
    for name, r in runs.items():
        loss = r["test_loss"]
        cells = [_fmt(loss[n]) for n in lengths]
        rises = [
            "n/a" if loss[n] is None or loss[first] is None else f"{loss[n] / loss[first] - 1:+.1%}"
            for n in lengths[-2:]
        ]
        speed = ""
        if base_speed and r["tokens_per_s"] and not r.get("variant_of"):
            speed = f"{r['tokens_per_s'] / base_speed:.2f}x"
        val = "" if r.get("variant_of") else _fmt(r["final_validation_loss"])
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
            row = [step, _fmt(curve["eval_loss"][i]), _fmt(curve["ti_gram"][i])]
            row += [_fmt(curve["ti_fp_raw"][i])]
            for key in ("gram_offdiag", "fp_raw_offdiag"):
                series = f"ti_{key}"
                n = nulls.get(key) or {}
                rnd, shf = n.get("random") or {}, n.get("shuffled") or {}
                row.append(_fmt(curve[series][i]))
                row.append(f"{_fmt(rnd.get('mean'))} / {_fmt(shf.get('mean'))}")
                row.append(f"{_fmt(rnd.get('z'), 1)} / {_fmt(shf.get('z'), 1)}")
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
        for key in TI_SERIES:
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
