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

    from scipy.stats import spearmanr

    from tisa.checkpoints import run_status
    from tisa.files import read_jsonl, write_atomic, write_json
    from tisa.train.extrapolate import extrapolate
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
    if ti_path.is_file():
        ti = [r for r in read_jsonl(ti_path) if r.get("eval_loss") is not None]
        losses = [r["eval_loss"] for r in ti]
        curve = {
            "steps": [r["step"] for r in ti],
            "eval_loss": losses,
            "ti_gram": [r["ti_gram"] for r in ti],
            "ti_fp_raw": [r["ti_fp_raw"] for r in ti],
        }
        if len(ti) >= 3:
            for key in ("ti_gram", "ti_fp_raw"):
                rho = spearmanr(curve[key], losses)
                curve[f"spearman_{key}_vs_eval_loss"] = float(rho.statistic)
                curve[f"spearman_{key}_vs_eval_loss_p"] = float(rho.pvalue)
        summary["ti_over_training"] = curve

    write_json(args.output_dir / "summary.json", summary)
    md = _markdown(summary, args.lengths)
    write_atomic(args.output_dir / "summary.md", md)
    report = _report(summary, runs, args)
    print(md)
    print(f"report: {report}")
    return 0


def _report(summary: dict, runs: dict[str, Path], args: argparse.Namespace) -> Path:
    """report.html: the summary table, loss curves, extrapolation, TI over training and
    the learned f_h of the TISA run."""
    from tisa import plots
    from tisa.analysis.extract import load_model, scoring_profiles, tisa_scorers
    from tisa.report import Image, Section, Table, write_report

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
        Section(
            "Training",
            paragraphs=[
                f"Small ALBERT, length {args.seq_len}, batch {args.batch_size}, "
                f"{args.max_steps} steps, seed {args.seed}, Penn Treebank; the same data "
                "and masks for every scheme."
            ],
            figures=[
                Image(
                    plots.figure_png(plots.loss_curves(curves, title="Validation MLM loss")),
                    "Validation loss at length 128 during training.",
                )
            ],
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
    curve = summary.get("ti_over_training")
    if curve:
        fig = plots.training_curves(
            curve["steps"],
            {"TI(P Pᵀ)": curve["ti_gram"], "TI(layer-1 F_P)": curve["ti_fp_raw"]},
            eval_loss=curve["eval_loss"],
        )
        rho = curve.get("spearman_ti_fp_raw_vs_eval_loss")
        sections.append(
            Section(
                "Translation invariance of the absolute run over training",
                paragraphs=[]
                if rho is None
                else [f"Spearman correlation of TI(layer-1 F_P) with validation loss: {rho:.2f}."],
                figures=[Image(plots.figure_png(fig), "Measured at every checkpoint.")],
            )
        )
    if "tisa" in runs:
        model, _ = load_model(runs["tisa"] / "model", tokenizer=False)
        prof = scoring_profiles(tisa_scorers(model), max_offset=32)
        fig = plots.scoring_curves(prof.offsets, prof.values, layers=prof.layers)
        sections.append(
            Section(
                "Learned scoring functions of the TISA run",
                figures=[Image(plots.figure_png(fig), "f_h(k) of every layer and head.")],
            )
        )
    return write_report(
        args.output_dir / "report.html",
        "Position schemes on Penn Treebank",
        sections,
        summary=table,
    )


def _markdown(summary: dict, lengths: list[int]) -> str:
    runs = summary["runs"]
    base_speed = (runs.get("absolute") or {}).get("tokens_per_s")
    head = "| position | val. loss (128) | " + " | ".join(f"test loss @{n}" for n in lengths)
    head += " | tokens/s vs absolute | positional params |\n"
    head += "|---|---:|" + "---:|" * len(lengths) + "---:|---:|\n"
    lines = []
    for name, r in runs.items():
        losses = " | ".join(
            "n/a" if r["test_loss"][n] is None else f"{r['test_loss'][n]:.3f}" for n in lengths
        )
        speed = f"{r['tokens_per_s'] / base_speed:.2f}x" if base_speed and r["tokens_per_s"] else ""
        p = r["positional_parameters"]
        params = p.get("total", p) if isinstance(p, dict) else p
        val = "" if r["final_validation_loss"] is None else f"{r['final_validation_loss']:.3f}"
        lines.append(f"| {name} | {val} | {losses} | {speed} | {params:,} |")
    out = head + "\n".join(lines) + "\n"
    curve = summary.get("ti_over_training")
    if curve:
        out += "\nTranslation invariance of the absolute run over training:\n\n"
        out += "| step | val. loss | TI(P Pᵀ) | TI(layer-1 F_P) |\n|---:|---:|---:|---:|\n"
        for s, loss, g, f in zip(
            curve["steps"], curve["eval_loss"], curve["ti_gram"], curve["ti_fp_raw"]
        ):
            out += f"| {s} | {loss:.3f} | {g:.3f} | {f:.3f} |\n"
        for key in ("ti_gram", "ti_fp_raw"):
            if f"spearman_{key}_vs_eval_loss" in curve:
                out += (
                    f"\nSpearman ρ({key}, val. loss) = {curve[f'spearman_{key}_vs_eval_loss']:.3f}"
                    f" (p = {curve[f'spearman_{key}_vs_eval_loss_p']:.3g})"
                )
        out += "\n"
    return out


if __name__ == "__main__":
    sys.exit(main())
