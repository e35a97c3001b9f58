"""Pretraining experiment: every position scheme on Penn Treebank, same budget, then
length extrapolation and translation invariance over training.

    python benchmarks/position_schemes.py                       # the default budget
    python benchmarks/position_schemes.py --max-steps 4000 --output-dir runs/ps-4000

For each ``--positions`` scheme this trains the small ALBERT (hidden 256, 4 layers) at
length 128 with the same seed, steps and batch (``tisa pretrain``; a finished run is
reused, an interrupted one resumed), then scores every run at ``--lengths`` on the Penn
Treebank test set with the same masks (``tisa extrapolate``), and writes ``summary.md`` /
``summary.json``: validation loss at 128, loss at each length, tokens/s against the
absolute run, positional parameter counts, and the translation invariance of the
absolute run's P Pᵀ and layer-1 F_P at every checkpoint with its Spearman correlation to
the validation loss; and ``report.html`` with that table, the validation-loss curves, the
extrapolation plot, TI over training and the learned f_h of the TISA run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tisa.analysis.training import TrainingTI

DEFAULT_POSITIONS = ("absolute", "tisa", "absolute+tisa", "alibi", "t5", "none")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--positions", nargs="+", default=list(DEFAULT_POSITIONS))
    parser.add_argument("--output-dir", type=Path, default=Path("runs/position-schemes"))
    parser.add_argument("--max-steps", type=int, default=2500)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--save-steps", type=int, default=250)
    parser.add_argument("--lengths", type=int, nargs="+", default=[128, 256, 512, 1024])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bf16", action=argparse.BooleanOptionalAction, default=True)
    args = parser.parse_args(argv)

    from tisa.analysis.training import read_ti_log
    from tisa.checkpoints import run_status
    from tisa.evaluation.extrapolation import extrapolate
    from tisa.files import read_jsonl, write_atomic, write_json
    from tisa.train.pretrain import PretrainConfig, pretrain_or_reuse

    runs: dict[str, Path] = {}
    for position in args.positions:
        config = PretrainConfig(
            output_dir=str(args.output_dir / position),
            position=position,
            size="small",
            seq_len=args.seq_len,
            max_steps=args.max_steps,
            batch_size=args.batch_size,
            save_steps=args.save_steps,
            eval_steps=args.save_steps,
            seed=args.seed,
            bf16=args.bf16,
            progress=False,
        )
        action = run_status(config.output_dir, finished="model").action
        print(f"== pretraining {position}: {action}", flush=True)
        try:  # a finished run is reused (if trained with this budget), a broken one resumed
            runs[position] = pretrain_or_reuse(config, must_match=("max_steps", "seq_len"))
        except ValueError as err:
            raise SystemExit(str(err)) from err

    results = extrapolate(
        list(runs.values()), args.lengths, output_dir=args.output_dir / "extrapolation"
    )

    summary = {"settings": vars(args) | {"output_dir": str(args.output_dir)}, "runs": {}}
    for position, run_dir in runs.items():
        facts = json.loads((run_dir / "pretrain_config.json").read_text())
        metrics = read_jsonl(run_dir / "metrics.jsonl")
        evals = [r["eval_loss"] for r in metrics if r.get("eval_loss") is not None]
        speeds = [r["tokens_per_s"] for r in metrics if r.get("tokens_per_s")]
        summary["runs"][position] = {
            "final_validation_loss": evals[-1] if evals else None,
            "validation_curve": {
                "steps": [r["step"] for r in metrics if r.get("eval_loss") is not None],
                "eval_loss": evals,
            },
            "tokens_per_s": statistics.median(speeds) if speeds else None,
            "positional_parameters": facts["positional_parameters"],
            "num_parameters": facts["num_parameters"],
            "test_loss": {
                n: results.row(run_dir.name, n).loss
                if results.row(run_dir.name, n).status == "ok"
                else None
                for n in args.lengths
            },
        }
    ti_path = runs.get("absolute", Path("-")) / "ti.jsonl"
    training = None
    if ti_path.is_file():
        training = read_ti_log(ti_path, evaluated_only=True)
        curve = {
            "steps": list(training.steps),
            "eval_loss": list(training.eval_loss),
            "ti_gram": list(training.ti_gram),
            "ti_fp_raw": list(training.ti_fp_raw),
        }
        if len(training.steps) >= 3:
            for key in ("ti_gram", "ti_fp_raw"):
                rho = training.spearman[f"{key}_vs_eval_loss"]  # None: a constant series
                curve[f"spearman_{key}_vs_eval_loss"] = None if rho is None else rho.rho
                curve[f"spearman_{key}_vs_eval_loss_p"] = None if rho is None else rho.pvalue
        summary["ti_over_training"] = curve

    write_json(args.output_dir / "summary.json", summary)
    md = _markdown(summary, args.lengths)
    write_atomic(args.output_dir / "summary.md", md)
    report = _report(summary, runs, training, args)
    print(md)
    print(f"report: {report}")
    return 0


def _report(
    summary: dict, runs: dict[str, Path], training: TrainingTI | None, args: argparse.Namespace
) -> Path:
    """report.html: the summary table, loss curves, extrapolation, TI over training and
    the learned f_h of the TISA run."""
    from tisa.analysis.extract import scoring_profiles, tisa_scorers
    from tisa.analysis.loading import load_model
    from tisa.reports.charts import scoring_curves
    from tisa.reports.figures import figure_png
    from tisa.reports.html import Image, Section, Table, write_report
    from tisa.reports.training import loss_curves_section, ti_over_training_section

    lengths = args.lengths
    rows = []
    for name, r in summary["runs"].items():
        p = r["positional_parameters"]
        rows.append(
            [name, r["final_validation_loss"], *(r["test_loss"][n] for n in lengths)]
            + [p.get("total", p) if isinstance(p, dict) else p]
        )
    table = Table(
        ["position", "val. loss (128)", *(f"test loss @{n}" for n in lengths), "positional params"],
        rows,
        caption="Masked-LM loss in nats per masked token (lower is better); empty: the "
        "absolute table cannot represent that length.",
    )
    curves = {
        name: (r["validation_curve"]["steps"], r["validation_curve"]["eval_loss"])
        for name, r in summary["runs"].items()
    }
    sections = [
        loss_curves_section(
            "Training",
            curves,
            paragraphs=[
                f"Small ALBERT, length {args.seq_len}, batch {args.batch_size}, "
                f"{args.max_steps} steps, seed {args.seed}, Penn Treebank; the same data "
                "and masks for every scheme."
            ],
            caption="Validation loss at length 128 during training.",
        ),
        Section(
            "Length extrapolation",
            figures=[
                Image(
                    args.output_dir / "extrapolation" / "extrapolation.png",
                    "Test loss at each evaluation length, same masks for every run.",
                )
            ],
        ),
    ]
    if training is not None:
        sections.append(
            ti_over_training_section(
                training, heading="Translation invariance of the absolute run over training"
            )
        )
    if "tisa" in runs:
        model, _ = load_model(runs["tisa"] / "model", tokenizer=False)
        prof = scoring_profiles(tisa_scorers(model), max_offset=32)
        fig = scoring_curves(prof.offsets, prof.values, layers=prof.layers)
        sections.append(
            Section(
                "Learned scoring functions of the TISA run",
                figures=[Image(figure_png(fig), "f_h(k) of every layer and head.")],
            )
        )
    return write_report(
        args.output_dir / "report.html",
        "Position schemes on Penn Treebank",
        sections,
        summary=table,
    )


def _markdown(summary: dict, lengths: list[int]) -> str:
    from tisa.reports.markdown import markdown_table

    runs = summary["runs"]
    base_speed = (runs.get("absolute") or {}).get("tokens_per_s")
    rows = []
    for name, r in runs.items():
        losses = [
            "n/a" if r["test_loss"][n] is None else f"{r['test_loss'][n]:.3f}" for n in lengths
        ]
        speed = f"{r['tokens_per_s'] / base_speed:.2f}x" if base_speed and r["tokens_per_s"] else ""
        p = r["positional_parameters"]
        params = p.get("total", p) if isinstance(p, dict) else p
        val = "" if r["final_validation_loss"] is None else f"{r['final_validation_loss']:.3f}"
        rows.append([name, val, *losses, speed, f"{params:,}"])
    columns = ["position", "val. loss (128)", *(f"test loss @{n}" for n in lengths)]
    columns += ["tokens/s vs absolute", "positional params"]
    out = markdown_table(columns, rows, align="l" + "r" * (len(columns) - 1))
    curve = summary.get("ti_over_training")
    if curve:
        out += "\nTranslation invariance of the absolute run over training:\n\n"
        rows = [
            [s, f"{loss:.3f}", f"{g:.3f}", f"{f:.3f}"]
            for s, loss, g, f in zip(
                curve["steps"], curve["eval_loss"], curve["ti_gram"], curve["ti_fp_raw"]
            )
        ]
        out += markdown_table(
            ["step", "val. loss", "TI(P Pᵀ)", "TI(layer-1 F_P)"], rows, align="rrrr"
        )
        for key in ("ti_gram", "ti_fp_raw"):
            if curve.get(f"spearman_{key}_vs_eval_loss") is not None:
                out += (
                    f"\nSpearman ρ({key}, val. loss) = {curve[f'spearman_{key}_vs_eval_loss']:.3f}"
                    f" (p = {curve[f'spearman_{key}_vs_eval_loss_p']:.3g})"
                )
        out += "\n"
    return out


if __name__ == "__main__":
    sys.exit(main())
