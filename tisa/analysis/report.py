"""The report of ``tisa analyze``: every figure and table, drawn from an AnalysisResult.

:func:`write_analysis_report` writes each figure as a PNG next to ``report.html`` (the same
figures embedded). Every number comes from the :class:`~tisa.analysis.results.AnalysisResult`;
what is done here is only display (scaling curves to ±1, blanking the unused triangle of
causal models).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from tisa.analysis.figures import (
    causal_nan,
    layer1_ti_figure,
    position_embeddings_figure,
    probe_ti_figure,
    unit_scaled,
)
from tisa.analysis.null_tables import draws_text, model_nulls, null_table
from tisa.analysis.report_text import NULL_TEXT, READING, SUMMARY_COLUMNS, summary_row, ti_means
from tisa.analysis.training_report import format_z, ti_over_training_section
from tisa.reports import charts, heatmaps
from tisa.reports.figures import save_figure
from tisa.reports.html import Image, Section, Table, write_report

if TYPE_CHECKING:

    from tisa.analysis.results import AnalysisResult, ModelAnalysis

__all__ = ["write_analysis_report"]

def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-").lower() or "model"


class _Report:
    """Collects figures (written as PNG files and embedded) and sections."""

    def __init__(self, out_dir: Path) -> None:
        self.out_dir = out_dir
        self.written: list[Path] = []

    def image(self, fig: Any, filename: str, caption: str, *, wide: bool = True) -> Image:
        path = save_figure(fig, self.out_dir / filename)
        self.written.append(path)
        return Image(path.read_bytes(), caption=caption, wide=wide)

    # -- sections ----------------------------------------------------------------------

    def comparison(self, models: tuple[ModelAnalysis, ...]) -> Section:
        groups = [m.name for m in models]
        means = [ti_means(m) for m in models]
        labels = list(dict.fromkeys(k for row in means for k in row))
        values = {k: [row.get(k) for row in means] for k in labels}
        values = {k: v for k, v in values.items() if any(x is not None for x in v)}
        fig = charts.comparison_bars(groups, values, title="Translation invariance by model")
        per_layer = [
            [] if m.probes is None else m.probes["sentences"].ti.mean(-1).tolist() for m in models
        ]
        tables = []
        depth = max(len(p) for p in per_layer)
        if depth:
            rows = [
                [f"layer {i + 1}", *[p[i] if i < len(p) else None for p in per_layer]]
                for i in range(depth)
            ]
            tables.append(
                Table(
                    ["", *groups],
                    rows,
                    caption="Probe TI on real sentences per layer (mean over heads)",
                    shade=list(range(1, len(groups) + 1)),
                )
            )
        return Section(
            "Comparison",
            paragraphs=["The summary table at the top lists the models side by side."],
            tables=tables,
            figures=[self.image(fig, "comparison.png", "Mean TI of each matrix, per model.")],
        )

    def model(self, m: ModelAnalysis) -> Section:
        slug = _slug(m.name)
        facts = [
            f"Source: `{m.source}` ({m.info['class']}, {m.info['num_parameters']:,} parameters, "
            f"{m.info.get('num_layers')} layers, {m.info.get('num_heads')} heads per layer)."
        ]
        if m.causal:
            facts.append("Causal model: TI is measured on the j ≤ i triangle only.")
        if m.position_embeddings is not None and m.position_embeddings.first_row:
            facts.append(
                f"Positions start at row {m.position_embeddings.first_row} of the position "
                "table (RoBERTa numbers positions from padding_idx + 1)."
            )
        facts += [f"Note: {n}." for n in m.notes]
        subs = []
        if m.position_embeddings is not None and m.layer1 is not None:
            subs += [self._positions(m, slug), self._layer1(m, slug)]
        if m.probes is not None:
            subs.append(self._probe(m, slug))
        if m.tisa is not None:
            subs.append(self._tisa(m, slug))
        return Section(m.name, paragraphs=facts, subsections=subs, anchor=f"model-{slug}")

    def _positions(self, m: ModelAnalysis, slug: str) -> Section:
        pe = m.position_embeddings
        prof = pe.cosine_profile
        heat = position_embeddings_figure(m)
        curve = charts.offset_profiles(
            [("cos(p_i, p_j) by offset", prof.offsets, {"mean ± std": (prof.mean, prof.std)})],
            ylabel="cosine similarity",
        )
        tables = []
        paragraphs = [
            f"TI(P Pᵀ) = {pe.ti_gram:.3f}: {100 * pe.ti_gram:.0f}% of the variance of the "
            "Gram matrix is explained by the offset j - i alone. Its diagonal holds the "
            "squared norms of the positions, which any table with even norms gets right, "
            f"so the figure to read is the off-diagonal TI: {pe.ti_gram_offdiag:.3f} for "
            f"P Pᵀ and {pe.ti_cosine_offdiag:.3f} for the cosine similarities "
            f"({pe.ti_cosine:.3f} with their diagonal of ones). Bands parallel to the "
            "diagonal are translation invariance; the offset profile shows the mean along "
            "each diagonal and how much the diagonal varies (± one standard deviation).",
        ]
        if pe.nulls is not None:
            on, off = pe.nulls["ti_gram"], pe.nulls["ti_gram_offdiag"]
            paragraphs.append(
                f"A table of random directions with the same norms scores {on.random.mean:.3f} "
                f"with the diagonal (against {on.observed:.3f}) but {off.random.mean:.3f} "
                f"without it (against {off.observed:.3f}); with the rows shuffled, "
                f"{on.shuffled.mean:.3f} and {off.shuffled.mean:.3f}. " + NULL_TEXT
            )
            tables.append(
                null_table(
                    model_nulls(m)["positions"],
                    caption=f"{pe.length} positions, {draws_text(on)}",
                )
            )
        else:
            paragraphs.append("Null baselines were not computed (null_draws = 0).")
        return Section(
            "Position embeddings",
            paragraphs=paragraphs,
            tables=tables,
            figures=[
                self.image(heat, f"{slug}-position-embeddings.png", "Gram and cosine of P."),
                self.image(
                    curve,
                    f"{slug}-offsets-position.png",
                    "Cosine similarity of two positions against their offset.",
                    wide=False,
                ),
            ],
        )

    def _layer1(self, m: ModelAnalysis, slug: str) -> Section:
        l1 = m.layer1
        raw, ln, fp_prof = l1.raw, l1.ln, l1.ln_profile
        heads = ln.head_nulls
        rows = [
            [
                f"head {h + 1}",
                float(raw.ti[h]),
                float(ln.ti[h]),
                float(ln.ti_offdiag[h]),
                None if heads is None else max(heads[h].random.mean, heads[h].shuffled.mean),
                None if heads is None else format_z(min(heads[h].random.z, heads[h].shuffled.z)),
                float(ln.transpose_symmetry[h]),
                float(ln.softmax_locality[h]),
                float(ln.softmax_symmetry[h]),
            ]
            for h in range(l1.num_heads)
        ]
        ti_fig = layer1_ti_figure(m)
        seen = fp_prof.offsets <= (0 if l1.causal else fp_prof.offsets.max())
        scaled = unit_scaled(fp_prof.mean[:, seen])
        curves = {f"h{h + 1}": (c, None) for h, c in enumerate(scaled)}
        off_fig = charts.offset_profiles(
            [("layer-1 F_P (LN) by offset, per head", fp_prof.offsets[seen], curves)],
            ylabel="logit / max |logit| of the head",
        )
        figures = [
            self.image(
                ti_fig, f"{slug}-fp-ti.png", "TI of F_P for every layer-1 head.", wide=False
            ),
            self.image(
                off_fig,
                f"{slug}-offsets-fp.png",
                "Mean of F_P (through LN) along each diagonal, each head scaled to ±1.",
                wide=False,
            ),
        ]
        for variant, terms in (("raw", raw), ("ln", ln)):
            label = "raw P" if variant == "raw" else "P through the embedding LayerNorm"
            grid = heatmaps.matrices_grid(
                causal_nan(terms.logits, l1.causal),
                titles=[f"head {h + 1} · TI {t:.2f}" for h, t in enumerate(terms.ti.tolist())],
                suptitle=f"{m.name}: layer-1 F_P from {label}",
                ncols=6,
                mode="signed",
            )
            figures.append(
                self.image(
                    grid,
                    f"{slug}-fp-{variant}.png",
                    f"Position-to-position logits of every layer-1 head from {label} (red "
                    "positive, blue negative, each panel on its own scale).",
                )
            )
        paragraphs = [
            f"Mean TI over heads: {raw.ti_mean:.3f} from raw P, {ln.ti_mean:.3f} through "
            f"LayerNorm; without the diagonal {raw.ti_offdiag_mean:.3f} and "
            f"{ln.ti_offdiag_mean:.3f}. Unlike P Pᵀ, F_P has no special diagonal: F_P[i, i] "
            "= p_i W_Q W_Kᵀ p_i is a quadratic form of rank at most the head size with "
            "mixed signs, not a squared norm, so TI with and without it agree and TI "
            "(with the diagonal, the paper's measure) is the figure here. Transpose "
            "symmetry compares F_P with its transpose (1 = f(k) = f(-k)); locality and "
            "symmetry are those of softmax(F_P), the attention this term alone would "
            "produce.",
        ]
        tables = []
        if "layer1" in (groups := model_nulls(m)):
            paragraphs.append(
                "F_P of each null table is computed with the model's own LayerNorm, "
                "projection and query/key weights. Per head, 'null' is the higher of the "
                "two null means and z the lower of the two z-scores."
            )
            tables.append(
                null_table(
                    groups["layer1"], caption=f"Layer-1 F_P, {draws_text(ln.nulls['ti_mean'])}"
                )
            )
        tables.append(
            Table(
                [
                    "",
                    "TI raw",
                    "TI LN",
                    "TI LN off-diag.",
                    "null TI LN",
                    "z (LN)",
                    "transpose symmetry (LN)",
                    "locality of softmax (LN)",
                    "symmetry of softmax (LN)",
                ],
                rows,
                shade=[1, 2, 3, 4, 6, 7, 8],
            )
        )
        return Section(
            "Layer-1 positional attention F_P",
            paragraphs=paragraphs,
            tables=tables,
            figures=figures,
        )

    def _probe(self, m: ModelAnalysis, slug: str) -> Section:
        rep, sen = m.probes["repeated"], m.probes["sentences"]
        n_layers = rep.ti.shape[0]

        def layer_null(probe: Any, i: int) -> float | None:
            if probe.nulls is None:
                return None
            b = probe.nulls.per_layer["ti_offdiag"][i]
            return max(b.random.mean, b.shuffled.mean)

        rows = [
            [
                f"layer {i + 1}",
                float(rep.ti_offdiag[i].mean()),
                layer_null(rep, i),
                float(sen.ti_offdiag[i].mean()),
                layer_null(sen, i),
                float(rep.ti[i].mean()),
                float(sen.ti[i].mean()),
                float(rep.locality[i].mean()),
                float(sen.locality[i].mean()),
                float(rep.symmetry[i].mean()),
                float(sen.symmetry[i].mean()),
            ]
            for i in range(n_layers)
        ]
        paragraphs = [
            f"Repeated token: {rep.description}; mean off-diagonal TI "
            f"{float(rep.ti_offdiag.mean()):.3f} ({float(rep.ti.mean()):.3f} with the "
            f"diagonal). Real text: {sen.description}; mean off-diagonal TI "
            f"{float(sen.ti_offdiag.mean()):.3f} ({float(sen.ti.mean()):.3f}). Here the "
            "diagonal is special: a token's attention to itself can stand out whatever the "
            "order of the position table (query and key come from the same input vector), "
            "and that diagonal counts towards TI for any table (compare the nulls of TI with "
            "and without it below); the off-diagonal TI is the figure of translation "
            "invariance. Attention that piles onto a few columns (often the "
            "first token) is not a function of the offset and lowers TI. Locality keeps "
            "its published definition, which weighs A[i, i] most by design; symmetry never "
            "looks at the diagonal.",
        ]
        tables = []
        if rep.nulls is not None and sen.nulls is not None:
            labels = {
                "ti_offdiag": "TI off-diagonal",
                "ti": "TI",
                "locality": "locality",
                "symmetry": "symmetry",
            }
            null_rows = [
                (f"{label}, {probe_label}", probe.nulls.mean[key])
                for probe, probe_label in ((rep, "repeated token"), (sen, "sentences"))
                for key, label in labels.items()
            ]
            paragraphs.append(
                "The nulls run the same probe inputs through the model with the rows of "
                "positions 0..L-1 replaced by each null table; per layer, 'null' is the "
                "higher of the two null means of the off-diagonal TI."
            )
            tables.append(
                null_table(
                    null_rows,
                    caption=f"Means over layers and heads, {draws_text(rep.nulls.mean['ti'])}",
                )
            )
        tables.append(
            Table(
                [
                    "",
                    "TI off-diag. repeated",
                    "null",
                    "TI off-diag. sentences",
                    "null",
                    "TI repeated",
                    "TI sentences",
                    "locality repeated",
                    "locality sentences",
                    "symmetry repeated",
                    "symmetry sentences",
                ],
                rows,
                caption="Means over heads",
                shade=[1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
            )
        )
        ti_fig = probe_ti_figure(m)
        maps = torch.cat([rep.attention.mean(1), sen.attention.mean(1)])  # (2N, L, L)
        map_fig = heatmaps.matrices_grid(
            causal_nan(maps, m.causal),
            titles=[f"layer {i + 1}" for i in range(n_layers)] * 2,
            row_labels=["repeated token", "sentences"],
            suptitle=f"{m.name}: mean attention (averaged over heads)",
            ncols=n_layers,
            mode="attention",
        )
        prof = sen.profile  # per layer, averaged over heads
        near = prof.offsets.abs() <= 16
        curves = {f"layer {i + 1}": (prof.mean[i][near], None) for i in range(n_layers)}
        off_fig = charts.offset_profiles(
            [("attention (sentences) by offset, per layer", prof.offsets[near], curves)],
            ylabel="mean attention weight",
        )
        return Section(
            "Attention probes",
            paragraphs=paragraphs,
            tables=tables,
            figures=[
                self.image(
                    ti_fig, f"{slug}-probe-ti.png", "Off-diagonal TI per layer (rows) and head."
                ),
                self.image(
                    off_fig,
                    f"{slug}-offsets-probe.png",
                    "Mean attention (sentences, averaged over heads) against the offset.",
                    wide=False,
                ),
                self.image(
                    map_fig,
                    f"{slug}-probe-attention.png",
                    "Mean attention of every layer, averaged over heads (square-root colour "
                    "scale, clipped at the 99th percentile).",
                ),
            ],
        )

    def _tisa(self, m: ModelAnalysis, slug: str) -> Section:
        tisa = m.tisa
        prof = tisa.profiles
        curves = charts.scoring_curves(
            prof.offsets,
            prof.values,
            layers=prof.layers,
            suptitle=f"{m.name}: learned positional scoring functions f_h(k)",
        )
        rows = [
            [
                f"layer {layer + 1}",
                family,
                float(prof.ti[i].min()),
                float(prof.values[i].min()),
                float(prof.values[i].max()),
            ]
            for i, (layer, family) in enumerate(zip(prof.layers, prof.families, strict=True))
        ]
        return Section(
            "TISA scoring functions",
            paragraphs=[
                f"{len(prof.layers)} layers with a scoring function, "
                f"{tisa.num_positional_parameters:,} positional parameters. The TI of every "
                "head's bias matrix is computed on the dense bias, not assumed (minimum "
                f"{tisa.ti_min:.6f}).",
            ],
            tables=[
                Table(
                    ["", "family", "TI of bias (min over heads)", "min f_h(k)", "max f_h(k)"],
                    rows,
                    digits=4,
                )
            ],
            figures=[self.image(curves, f"{slug}-tisa-scoring.png", "f_h(k) per layer and head.")],
        )

    @staticmethod
    def settings(result: AnalysisResult) -> Section:
        s = result.settings
        rows = [
            ["positions analysed", s["max_positions"] or "full table"],
            ["probe length", s["probe_length"]],
            ["real-text sequences", s["num_sequences"]],
            ["LayerNorm input for F_P (LN)", s["ln_input"]],
            ["query/key biases in F_P", s["include_bias"]],
            ["TISA offsets plotted", f"-{s['max_offset']} .. {s['max_offset']}"],
            ["null draws per null (P Pᵀ, cos(P), F_P)", s.get("null_draws")],
            ["null draws per null (attention probes)", s.get("probe_null_draws")],
            ["seed of the null tables", s.get("null_seed")],
            ["analysis time (s), figures not included", result.elapsed_s],
        ]
        return Section(
            "Settings",
            paragraphs=[
                "LayerNorm is not linear, so 'P through LN' approximates the positional part "
                "of the real layer-1 input (word + token type + position): 'position+type' "
                "normalises P plus the mean token-type embedding, 'position' normalises P "
                "alone. For causal models (GPT-2) TI is measured on the j ≤ i triangle only.",
            ],
            tables=[Table(["setting", "value"], rows, digits=1)],
        )


def write_analysis_report(result: AnalysisResult, out_dir: str | Path) -> list[Path]:
    """Writes every figure as PNG into ``out_dir`` and ``report.html`` with them embedded.

    Returns:
        The written files, ``report.html`` last.
    """
    out_dir = Path(out_dir)
    rep = _Report(out_dir)
    models = result.models
    sections = [Section("How to read this report", paragraphs=READING)]
    if len(models) > 1:
        sections.append(rep.comparison(models))
    sections += [rep.model(m) for m in models]
    if result.training is not None:
        png = out_dir / "ti-over-training.png"
        sections.append(ti_over_training_section(result.training, png=png))
        rep.written.append(png)
    sections.append(rep.settings(result))
    summaries = [Table(SUMMARY_COLUMNS, [summary_row(m) for m in models], shade=range(3, 13))]
    null_rows = [
        (label if len(models) == 1 else f"{m.name}: {label}", b)
        for m in models
        for group in model_nulls(m).values()
        for label, b in group
    ]
    if null_rows:
        summaries.append(null_table(null_rows, caption="Each TI figure next to its nulls"))
    html_path = write_report(
        out_dir / "report.html",
        "Translation invariance of positional attention",
        sections,
        subtitle="Models: " + ", ".join(m.name for m in models),
        summary=summaries,
        summary_paragraphs=[
            "TI: 1 = a function of the offset j - i alone, ≈0 = no offset structure. "
            "Off-diag.: over the entries j ≠ i only (the figure to read for P Pᵀ, cos(P) and "
            "the probes). F_P columns: mean over layer-1 heads. Probe columns: mean over "
            "all layers and heads of the averaged attention. – = not applicable.",
            NULL_TEXT,
        ],
        footer="Written by tisa analyze. Definitions and choices: docs/analysis.md.",
    )
    return [*rep.written, html_path]
