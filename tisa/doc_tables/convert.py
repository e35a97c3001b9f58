"""Tables of `tisa convert` of all-MiniLM-L6-v2: quality, long inputs, the run, word order
and the frozen probe."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from tisa.convert.logit_terms import markdown as logit_terms_markdown
from tisa.convert.selection import markdown as selection_markdown
from tisa.convert.selection import settings_text
from tisa.doc_tables.base import RESULTS, grouped, read_json, table, x100
from tisa.reports.markdown import markdown_table

CONVERT = f"{RESULTS}/convert/minilm/metrics.json"
#: the second encoder, paraphrase-MiniLM-L3-v2
CONVERT_L3 = f"{RESULTS}/convert/l3/metrics.json"


@table("convert-quality", CONVERT)
def convert_quality(root: Path, path: str = CONVERT) -> str:
    """Zero-shot figures of the original, the fitted and the converted model."""
    m = read_json(root, path)
    pp = m["positional_parameters"]
    pairs = m["settings"].get("max_sts_pairs") or "all"

    def cell(d: dict[str, Any], key: str) -> str:
        v = d.get(key)
        if isinstance(v, dict):  # fidelity: mean over the texts, with the 5th percentile
            return f"{v['mean']:.4f} (5th percentile {v['p05']:.3f})"
        return "n/a" if v is None else f"{v:.4f}"

    rows = [
        ["original (512-row position table)", cell(m["original"], "sts_spearman"), "1",
         grouped(pp["original"]["total"])],
        ["fitted scorers, before distillation", cell(m["fitted"], "sts_spearman"),
         cell(m["fitted"], "fidelity"), grouped(pp["converted"]["total"])],
        [f"converted ({m['settings']['distill']['steps']} distillation steps)",
         cell(m["converted"], "sts_spearman"), cell(m["converted"], "fidelity"),
         grouped(pp["converted"]["total"])],
    ]
    columns = ["model", f"STS-B dev Spearman, zero-shot ({pairs} pairs)",
               "fidelity: cosine to the original", "positional parameters"]
    return markdown_table(columns, rows, align="lrrr")


@table("convert-lengths", CONVERT)
def convert_lengths(root: Path) -> str:
    """The converted model on inputs longer than the original's table."""
    m = read_json(root, CONVERT)
    rows = [[grouped(p["length"]), f"{p['agreement']:.3f}", f"{1000 * p['seconds']:.0f} ms",
             "n/a" if p["peak_memory_mb"] is None else f"{p['peak_memory_mb']:.0f} MiB",
             "yes" if p["finite"] else "no"] for p in m["lengths"]]
    columns = ["tokens", "agreement with the original's 512-token chunks",
               "time per input (median)", "peak memory", "finite"]
    return markdown_table(columns, rows, align="rrrrl")


@table("convert-run", CONVERT)
def convert_run(root: Path, path: str = CONVERT) -> str:
    """What the conversion run was: its fit, its time and its provenance."""
    m = read_json(root, path)
    prov, t = m.get("provenance") or {}, m["timings"]
    rows = [
        ["fit: median R² over heads", f"{m['fit']['r2_median']:.2f}"],
        ["fit and distillation time", f"{t['fit_s'] / 60:.1f} + {t['distill_s'] / 60:.1f} min"],
        ["threads, CPU", f"{m['environment']['threads']}, {prov.get('cpu')} "
                         f"({prov.get('cpu_count')} cores)"],
        ["weights (SHA-256)", f"`{m.get('weights_sha256', 'not recorded')[:16]}...`"],
        ["command", f"`{prov.get('command')}`"],
        ["commit", f"`{(prov.get('commit') or '')[:12]}`"],
    ]
    return markdown_table(["", "value"], rows)


# the same tables for the second encoder
for _name, _render in (("quality", convert_quality), ("run", convert_run)):
    table(f"convert-l3-{_name}", CONVERT_L3)(functools.partial(_render, path=CONVERT_L3))


def word_order_table(data: dict[str, Any]) -> str:
    """Word-order sensitivity of the frozen models of ``experiments/word_order.py`` and
    their CoLA probe at the original's best layer and the last, with the paired
    differences."""
    models = data["models"]
    layers = [r["layer"] for r in models["original"]["probe"]]
    best = max(models["original"]["probe"], key=lambda r: r["mcc"])["layer"]

    def spread(s: dict[str, float]) -> str:
        return f"{s['median']:.4f} [{s['q25']:.4f}, {s['q75']:.4f}]"

    def probe(name: str, layer: int) -> float:
        return next(r["mcc"] for r in models[name]["probe"] if r["layer"] == layer)

    def paired(rows: list[dict[str, Any]], layer: int) -> str:
        r = next(r for r in rows if r["layer"] == layer)
        lo, hi = r["interval95"]
        return f"{100 * r['difference']:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]"

    body = []
    for name, m in models.items():
        body.append([name, spread(m["order"]["swap"]), spread(m["order"]["shuffle"]),
                     x100(probe(name, best), 1), x100(probe(name, layers[-1]), 1)])
    for name, rows in (data.get("paired") or {}).items():
        body.append([f"{name} (paired, 95% bootstrap)", "", "", paired(rows, best),
                     paired(rows, layers[-1])])
    columns = ["frozen model", "1 - cos, two adjacent words swapped (median [quartiles])",
               "all words shuffled", f"CoLA probe MCC, layer {best}",
               f"layer {layers[-1]}"]
    return markdown_table(columns, body, align="lrrrr")


CONVERT_WORD_ORDER = f"{RESULTS}/convert/minilm/word_order.json"


@table("convert-word-order", CONVERT_WORD_ORDER)
def convert_word_order(root: Path) -> str:
    """The default conversion's word order and frozen CoLA probe against the original's."""
    data = read_json(root, CONVERT_WORD_ORDER)
    prov = data.get("provenance") or {}
    note = (f"\n\n{data['train_sentences']} CoLA train sentences, {data['dev_sentences']} dev; "
            f"seed {data['seed']}; commit `{(prov.get('commit') or '')[:12]}`, "
            f"`{prov.get('command')}`\n")
    return word_order_table(data) + note


CONVERT_SELECTION = f"{RESULTS}/convert/minilm/selection/selection.json"


@table("convert-selection", CONVERT_SELECTION)
def convert_selection(root: Path) -> str:
    """Conversion settings against the original on held-out STS-B and CoLA train data."""
    data = read_json(root, CONVERT_SELECTION)
    prov = data.get("provenance") or {}
    return (selection_markdown(data) + f"\ncommit `{(prov.get('commit') or '')[:12]}`, "
            f"`{prov.get('command')}`\n")


CONVERT_SELECTION_RERUN = f"{RESULTS}/convert/minilm/selection-rerun/selection.json"


@table("convert-selection-rerun", CONVERT_SELECTION_RERUN)
def convert_selection_rerun(root: Path) -> str:
    """The default conversion made again on another CPU model, scored the same way."""
    data = read_json(root, CONVERT_SELECTION_RERUN)
    prov = data.get("provenance") or {}
    sha = data["runs"][0].get("weights_sha256") or "not recorded"
    return (selection_markdown(data) + f"\nweights `{sha[:12]}...`; commit "
            f"`{(prov.get('commit') or '')[:12]}` on {prov.get('cpu')}, "
            f"`{prov.get('command')}`\n")


CONVERT_VARIANTS = tuple(
    f"{RESULTS}/convert/minilm/{name}/metrics.json"
    for name in ("order-1", "order-10", "k10", "attention-1", "min-length-6")
)


@table("convert-variant-runs", CONVERT, *CONVERT_VARIANTS)
def convert_variant_runs(root: Path) -> str:
    """The default conversion and its variants: the fit, the word-order and attention-map
    terms along the distillation, and the fidelity."""
    rows = []
    for path in (CONVERT, *CONVERT_VARIANTS):
        m = read_json(root, path)
        curve = m["distillation"]

        def mean(key: str, part: slice, curve=curve) -> str:
            values = [c[key] for c in curve[part] if key in c]
            return f"{sum(values) / len(values):.3f}" if values else "-"

        settings = settings_text(
            m["settings"]["distill"],
            num_kernels=m["settings"]["num_kernels"],
            near_offsets=m["settings"].get("near_offsets"),
            content_offsets=m["settings"].get("content_offsets"),
            content_beyond=m["settings"].get("content_beyond", "clip"),
        )
        rows.append([
            settings, grouped(m["positional_parameters"]["converted"]["total"]),
            f"{m['fit']['r2_median']:.2f}", mean("order", slice(0, 50)),
            mean("order", slice(-50, None)), mean("attention", slice(0, 50)),
            mean("attention", slice(-50, None)), mean("hidden", slice(-50, None)),
            f"{m['converted']['fidelity']['mean']:.4f}", f"`{m['weights_sha256'][:12]}`",
        ])
    return markdown_table(
        ["conversion", "positional parameters", "fit: median R²",
         "order term, steps 1-50 (mean)", "steps 251-300",
         "attention KL (nats), steps 1-50 (mean)", "steps 251-300",
         "hidden-state term, steps 251-300",
         "fidelity: cosine to the original", "weights (SHA-256)"],
        rows,
        align="lr" + "r" * 7 + "l",
    )


CONVERT_LOGIT_TERMS = f"{RESULTS}/convert/minilm/logit_terms.json"


@table("convert-logit-terms", CONVERT_LOGIT_TERMS)
def convert_logit_terms(root: Path) -> str:
    """The position effect on attention logits and what the conversion misses, split into
    a function of j - i, an absolute part and a part that changes with the text."""
    data = read_json(root, CONVERT_LOGIT_TERMS)
    prov = data.get("provenance") or {}
    return (logit_terms_markdown(data) + f"\ncommit `{(prov.get('commit') or '')[:12]}`, "
            f"`{prov.get('command')}`\n")


CONVERT_SELECTION_NEAR = f"{RESULTS}/convert/minilm/near-32/selection.json"
CONVERT_SELECTION_NEAR_SEED_1 = f"{RESULTS}/convert/minilm/near-32/seed-1/selection.json"


def _selection_with_weights(root: Path, path: str) -> str:
    """A selection table (:mod:`tisa.convert.selection`) with every run's weights and where
    the selection ran."""
    data = read_json(root, path)
    prov = data.get("provenance") or {}
    weights = ", ".join(
        f"{r['run']} `{(r.get('weights_sha256') or 'not recorded')[:12]}...`"
        for r in data["runs"]
    )
    return (
        selection_markdown(data)
        + f"\nweights: {weights}; commit `{(prov.get('commit') or '')[:12]}` on "
        f"{prov.get('cpu')}, `{prov.get('command')}`\n"
    )


@table("convert-selection-near", CONVERT_SELECTION_NEAR)
def convert_selection_near(root: Path) -> str:
    """The default conversion and one with a free table over short offsets
    (``--near-offsets``), made on one CPU and scored on the held-out data."""
    return _selection_with_weights(root, CONVERT_SELECTION_NEAR)


@table("convert-selection-near-seed-1", CONVERT_SELECTION_NEAR_SEED_1)
def convert_selection_near_seed_1(root: Path) -> str:
    """The same two conversions with distillation seed 1, scored the same way."""
    return _selection_with_weights(root, CONVERT_SELECTION_NEAR_SEED_1)


@table("convert-near-seeds", CONVERT_SELECTION_NEAR, CONVERT_SELECTION_NEAR_SEED_1)
def convert_near_seeds(root: Path) -> str:
    """The free table over short offsets minus the default, seed by seed, on the held-out
    data: STS-B (share of the original's), the CoLA probe and word-order sensitivity."""
    rows = []
    for path in (CONVERT_SELECTION_NEAR, CONVERT_SELECTION_NEAR_SEED_1):
        data = read_json(root, path)
        if len(data["runs"]) != 2:
            raise ValueError(f"{path}: expected two runs, the default and near_offsets")
        default, near = data["runs"]
        if default.get("near_offsets") is not None or near.get("near_offsets") is None:
            raise ValueError(f"{path}: expected the default first, then near_offsets")
        seed = near["distill"].get("seed")
        if default["distill"].get("seed") != seed:
            raise ValueError(f"{path}: the two runs have other distillation seeds")
        rows.append(
            [
                f"{seed}",
                f"{default['sts_relative']:.3f} / {near['sts_relative']:.3f}",
                f"{near['sts_relative'] - default['sts_relative']:+.3f}",
                f"{100 * default['cola_mcc']:.1f} / {100 * near['cola_mcc']:.1f}",
                f"{100 * (near['cola_mcc'] - default['cola_mcc']):+.1f}",
                f"{default['order_ratio']['swap']:.2f} / {near['order_ratio']['swap']:.2f}",
                f"{default['order_ratio']['shuffle']:.2f} / {near['order_ratio']['shuffle']:.2f}",
            ]
        )
    return markdown_table(
        [
            "distillation seed",
            "held-out STS-B, of the original's: default / near",
            "near - default",
            "CoLA probe MCC x100: default / near",
            "near - default",
            "swap sensitivity / original's",
            "shuffle / original's",
        ],
        rows,
        align="lrrrrrr",
    )


CONVERT_LOGIT_TERMS_NEAR = f"{RESULTS}/convert/minilm/near-32/logit_terms.json"


@table("convert-logit-terms-near", CONVERT_LOGIT_TERMS_NEAR)
def convert_logit_terms_near(root: Path) -> str:
    """What the default conversion and one with a free table over short offsets miss in
    the attention logits, both made on one CPU."""
    data = read_json(root, CONVERT_LOGIT_TERMS_NEAR)
    prov = data.get("provenance") or {}
    return (
        logit_terms_markdown(data)
        + f"\ncommit `{(prov.get('commit') or '')[:12]}` on {prov.get('cpu')}, "
        f"`{prov.get('command')}`\n"
    )


#: conversions made on one CPU model to compare the free table over short offsets with
#: the default: (label, metrics.json)
CONVERT_NEAR_RUNS = (
    ("defaults", f"{RESULTS}/convert/minilm/rerun/metrics.json"),
    ("near_offsets=32", f"{RESULTS}/convert/minilm/near-32/metrics.json"),
    ("defaults", f"{RESULTS}/convert/minilm/near-32/seed-1/defaults/metrics.json"),
    ("near_offsets=32", f"{RESULTS}/convert/minilm/near-32/seed-1/near-32/metrics.json"),
)


@table("convert-near-runs", *(path for _, path in CONVERT_NEAR_RUNS))
def convert_near_runs(root: Path) -> str:
    """The default conversion and one with a free table over short offsets, made on one
    CPU: the fit, STS-B dev (read once, after the choice), the fidelity and the agreement
    with the original's 512-token chunks on longer inputs."""
    return _runs_table(root, CONVERT_NEAR_RUNS)


#: conversions made on one CPU model to compare the relative content term with the
#: default: (label, metrics.json)
CONVERT_CONTENT_RUNS = (
    ("defaults", f"{RESULTS}/convert/minilm/rerun/metrics.json"),
    ("content_offsets=16", f"{RESULTS}/convert/minilm/content-16/metrics.json"),
    ("content_offsets=16, content_beyond=zero",
     f"{RESULTS}/convert/minilm/content-16-zero/metrics.json"),
    ("content_offsets=16, content_beyond=zero, long_weight=1, long_every=3",
     f"{RESULTS}/convert/minilm/content-16-zero-long-e3/metrics.json"),
    ("content_offsets=16, long_weight=1, long_every=3",
     f"{RESULTS}/convert/minilm/content-16-long-e3/metrics.json"),
    ("content_offsets=16", f"{RESULTS}/convert/minilm/content-16-s1/metrics.json"),
    ("content_offsets=16", f"{RESULTS}/convert/minilm/content-16-s2/metrics.json"),
)
CONVERT_SELECTION_CONTENT = f"{RESULTS}/convert/minilm/content-16/selection.json"


@table("convert-content-runs", *(path for _, path in CONVERT_CONTENT_RUNS))
def convert_content_runs(root: Path) -> str:
    """The default conversion and one with a relative content term (``--content-offsets``),
    made on one CPU: the fit, STS-B dev, the fidelity, the agreement with the original's
    chunks and the time."""
    return _runs_table(root, CONVERT_CONTENT_RUNS, times=True)


@table("convert-selection-content", CONVERT_SELECTION_CONTENT)
def convert_selection_content(root: Path) -> str:
    """The default conversion and one with a relative content term, scored on the
    held-out data of the selection."""
    return _selection_with_weights(root, CONVERT_SELECTION_CONTENT)


#: the conversions with the content and the long-input terms together, held out
CONVERT_SELECTION_CONTENT_LONG = f"{RESULTS}/convert/minilm/content-long/selection.json"


@table("convert-selection-content-long", CONVERT_SELECTION_CONTENT_LONG)
def convert_selection_content_long(root: Path) -> str:
    """The default conversion and the two with a content term and the long-input term on
    every third step, scored on the held-out data of the selection."""
    return _selection_with_weights(root, CONVERT_SELECTION_CONTENT_LONG)


#: fine-tuning step time of the original and its conversions (benchmarks/converted_speed.py)
CONVERT_STEP_COST = f"{RESULTS}/convert/minilm/step-cost.json"


@table("convert-step-cost", CONVERT_STEP_COST)
def convert_step_cost(root: Path) -> str:
    """What a fine-tuning step of each conversion costs against the original's, by length."""
    data = read_json(root, CONVERT_STEP_COST)
    body = []
    for r in data["rows"]:
        for name, ratio in r["ratio"].items():
            body.append([
                f"{r['length']:,}", name, f"{1e3 * r['seconds']['original']:.0f} ms",
                f"{1e3 * r['seconds'][name]:.0f} ms",
                f"{ratio:.2f}x ({r['ratio_low'][name]:.2f}-{r['ratio_high'][name]:.2f})",
            ])
    m = data["provenance"]
    what = "forward + backward, dropout on" if data["mode"] == "train" else "forward"
    note = (f"\n\nBatch {data['batch']}, {what}; medians of {data['rounds']} rounds, the models "
            f"taking turns; {m.get('threads')} threads on {m.get('cpu')}, torch "
            f"{m.get('torch')}, commit `{(m.get('commit') or '')[:12]}`; `{m.get('command')}`\n")
    columns = ["tokens", "conversion", "original", "converted",
               "converted / original: median of rounds (range)"]
    return markdown_table(columns, body, align="rlrrr") + note


def _runs_table(root: Path, runs, *, times: bool = False) -> str:
    """One row per conversion (label, metrics.json): seed, CPU, positional parameters, fit,
    STS-B dev, fidelity, agreement by length, (fit and distillation time,) weights."""
    rows, lengths = [], None
    for label, path in runs:
        m = read_json(root, path)
        points = {p["length"]: p["agreement"] for p in m["lengths"] if p["length"] > 512}
        if lengths is not None and sorted(points) != lengths:
            raise ValueError(f"{path}: other input lengths than the table's first run")
        lengths = sorted(points)
        prov = m.get("provenance") or {}
        rows.append(
            [
                label,
                f"{m['settings']['distill']['seed']}",
                f"{prov.get('cpu')}, {m['environment']['threads']} threads",
                grouped(m["positional_parameters"]["converted"]["total"]),
                f"{m['fit']['r2_median']:.2f}",
                f"{m['converted']['sts_spearman']:.4f} ({100 * m['sts_relative']:.1f}%)",
                f"{m['converted']['fidelity']['mean']:.4f}",
                *(f"{points[n]:.3f}" for n in lengths),
                *([_late_hidden(m), f"{m['timings']['fit_s'] / 60:.1f} + "
                   f"{m['timings']['distill_s'] / 60:.1f} min"] if times else []),
                f"`{m['weights_sha256'][:12]}`",
            ]
        )
    return markdown_table(
        [
            "conversion",
            "seed",
            "CPU",
            "positional parameters",
            "fit: median R²",
            "STS-B dev Spearman (of the original's)",
            "fidelity: cosine to the original",
            *(f"agreement at {grouped(n)} tokens" for n in lengths or []),
            *(["hidden-state term, last 50 steps", "fit + distillation"] if times else []),
            "weights (SHA-256)",
        ],
        rows,
        align="lrlrrrr" + "r" * (len(lengths or []) + 2 * times) + "l",
    )


def _late_hidden(metrics: dict) -> str:
    """The distillation's hidden-state term, mean over its last 50 steps (the same blocks
    for every conversion of one seed)."""
    late = metrics["distillation"][-50:]
    return f"{sum(c['hidden'] for c in late) / len(late):.3f}"


#: the default conversion made again on AMD EPYC, and the same with the long-input term
CONVERT_RERUN = f"{RESULTS}/convert/minilm/rerun/metrics.json"
CONVERT_LONG = (f"{RESULTS}/convert/minilm/long-1/metrics.json",
                f"{RESULTS}/convert/minilm/long-1-every-3/metrics.json")


@table("convert-long-runs", CONVERT_RERUN, *CONVERT_LONG)
def convert_long_runs(root: Path) -> str:
    """The default conversion and those with the long-input term, made on the same CPU:
    short-input figures, agreement with the original's chunks by length, the long block's
    own terms along the distillation, and the time."""
    rows, lengths, spans = [], None, set()
    paths = (CONVERT_RERUN, *CONVERT_LONG)
    runs = [read_json(root, path) for path in paths]
    made = {(m["provenance"]["cpu"], m["provenance"]["threads"], m["provenance"]["torch"])
            for m in runs}
    if len(made) > 1:
        raise ValueError(f"{', '.join(paths)}: made on different machines {made}")
    for m in runs:
        curve = m["distillation"]
        late = [c for c in curve[-50:] if "long" in c]
        spans.add(f"{curve[-50]['step']}-{curve[-1]['step']}")
        settings = settings_text(m["settings"]["distill"], num_kernels=m["settings"]["num_kernels"],
                                 near_offsets=m["settings"].get("near_offsets"),
                                 content_offsets=m["settings"].get("content_offsets"),
                                 content_beyond=m["settings"].get("content_beyond", "clip"))
        agreement = {p["length"]: p["agreement"] for p in m["lengths"] if p["length"] > 512}
        lengths = lengths or sorted(agreement)
        t = m["timings"]
        rows.append([
            settings, f"{m['converted']['sts_spearman']:.4f}",
            f"{m['converted']['fidelity']['mean']:.4f}",
            *(f"{agreement[n]:.3f}" for n in lengths),
            f"{sum(c['long'] for c in late) / len(late):.3f}" if late else "-",
            f"{sum(c['long_pooled_cosine'] for c in late) / len(late):.4f}" if late else "-",
            f"{t['fit_s'] / 60:.1f} + {t['distill_s'] / 60:.1f} min",
            f"`{m['weights_sha256'][:12]}`",
        ])
    if len(spans) > 1:
        raise ValueError(f"{', '.join(paths)}: distillations of other lengths")
    prov = runs[-1]["provenance"]
    columns = ["conversion", "STS-B dev Spearman", "fidelity (short sentences)",
               *(f"agreement with the chunked original, {grouped(n)}" for n in lengths),
               f"long block: hidden-state term, steps {spans.pop()}", "its pooled cosine",
               "fit + distillation", "weights (SHA-256)"]
    note = (f"\n\n{prov['threads']} threads on {prov['cpu']}, torch {prov['torch']}; "
            f"the original's STS-B dev Spearman "
            f"{runs[-1]['original']['sts_spearman']:.4f}\n")
    return markdown_table(columns, rows, align="l" + "r" * (len(columns) - 2) + "l") + note
