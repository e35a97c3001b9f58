"""The tables of the README and the docs, written from the committed result files.

Every table that quotes a measured figure sits between two markers and is generated,
never typed::

    <!-- table: glue-scores -->
    | variant | ... |
    <!-- /table -->

``python -m tisa.doc_tables`` rewrites the text between each pair of markers from the
files the table is declared over (:data:`TABLES`); ``--check`` changes nothing and exits 1
when a table differs from what its files give. A default-tier test runs the check and
also fails when a committed result file is claimed by no table, or a table by no page.

A table is a function of the repository root that returns Markdown, registered with the
glob patterns (relative to the root) of the files it reads. Renderers read JSON only: this
module composes the results of every feature and imports none of them.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tisa.reports.markdown import markdown_table

__all__ = [
    "PAGES",
    "RESULT_PATTERNS",
    "TABLES",
    "DocTable",
    "check",
    "claimed_files",
    "render",
    "result_files",
    "unclaimed_files",
    "update",
]

ROOT = Path(__file__).resolve().parent.parent
RESULTS = "benchmarks/results"
# the pages that hold generated tables
PAGES = ("README.md", "docs/*.md")
# the raw files every one of which some table must read
RESULT_PATTERNS = (f"{RESULTS}/**/*.json", f"{RESULTS}/**/*.csv", f"{RESULTS}/**/*.jsonl")

MARKER = re.compile(
    r"(?P<open><!-- table: (?P<name>[a-z0-9-]+) -->\n)(?P<body>.*?)(?P<close><!-- /table -->)",
    re.DOTALL,
)


@dataclass(frozen=True)
class DocTable:
    """One generated table: its name in the markers, the files it reads, its renderer."""

    name: str
    sources: tuple[str, ...]
    render: Callable[[Path], str]


TABLES: dict[str, DocTable] = {}


def _table(name: str, *sources: str) -> Callable[[Callable[[Path], str]], Callable[[Path], str]]:
    def register(fn: Callable[[Path], str]) -> Callable[[Path], str]:
        if name in TABLES:
            raise ValueError(f"table {name!r} is registered twice")
        TABLES[name] = DocTable(name, tuple(sources), fn)
        return fn

    return register


def _json(root: Path, path: str) -> Any:
    file = root / path
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: the result file of a table is missing") from None
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not valid JSON ({err})") from None


def _x100(v: float | None, digits: int = 2) -> str:
    return "n/a" if v is None else f"{100 * v:.{digits}f}"


def _signed(v: float, digits: int = 2) -> str:
    return f"{v:+.{digits}f}"


def _int(n: int) -> str:
    return f"{n:,}"


# ---------------------------------------------------------------- GLUE (all-MiniLM-L6-v2)

GLUE_SUMMARY = f"{RESULTS}/glue/summary/results.json"
GLUE_TASKS = (("cola", "CoLA"), ("sst2", "SST-2"), ("mrpc", "MRPC"), ("stsb", "STS-B"),
              ("rte", "RTE"))
GLUE_VARIANTS = (
    ("none", "`none`: the model as it is"),
    ("keep", "`keep`: TISA added next to its table"),
    ("converted", "converted: its table replaced by TISA (`tisa convert`)"),
)


def _summary_rows(root: Path) -> dict[tuple[str, str], dict[str, Any]]:
    return {(r["task"], r["variant"]): r for r in _json(root, GLUE_SUMMARY)["summary"]}


@_table(
    "glue-scores",
    GLUE_SUMMARY,
    f"{RESULTS}/glue/protocol/**/*.json",
    f"{RESULTS}/glue/protocol/**/*.csv",
    f"{RESULTS}/glue/converted/**/*.json",
    f"{RESULTS}/glue/converted/**/*.csv",
    f"{RESULTS}/glue/summary/results.csv",
)
def glue_scores(root: Path) -> str:
    """Median dev score over seeds of each variant on each task, and the 5-task average."""
    rows = _summary_rows(root)
    body = []
    for variant, label in GLUE_VARIANTS:
        glue = rows.get(("glue", variant))
        if glue is None:
            continue
        p = glue["positional_parameters"]
        body.append(
            [f"{label} ({len(glue['seeds'])} seeds)", f"{_int(p['absolute'])} / {_int(p['tisa'])}"]
            + [_x100(rows[(t, variant)]["score"]) if (t, variant) in rows else "n/a"
               for t, _ in GLUE_TASKS]
            + [_x100(glue["score"])]
        )
    columns = ["variant", "positional params (absolute / TISA)", *(n for _, n in GLUE_TASKS),
               "5-task average"]
    return markdown_table(columns, body, align="lr" + "r" * (len(GLUE_TASKS) + 1))


@_table("glue-paired", GLUE_SUMMARY)
def glue_paired(root: Path) -> str:
    """Each variant minus `none`, paired by seed: mean difference with its t interval."""
    rows = _summary_rows(root)
    body = []
    for variant, _ in GLUE_VARIANTS[1:]:
        for task, name in (*GLUE_TASKS, ("glue", "5-task average")):
            r = rows.get((task, variant))
            if r is None or not r.get("paired"):
                continue
            q = r["paired"]
            lo, hi = q["ci95"]
            body.append([
                variant, name, q["n"],
                f"{_signed(100 * q['mean_diff'])} [{_signed(100 * lo)}, {_signed(100 * hi)}]",
                f"{q['wins']} / {q['losses']} / {q['ties']}",
                f"{q['sign_test_p']:.3g}",
                f"{100 * q['median_rer']:+.1f}%",
            ])
    columns = ["variant", "task", "pairs", "mean diff x 100 [t 95%]", "wins / losses / ties",
               "sign test p", "median rel. error reduction"]
    return markdown_table(columns, body, align="llrlrrr")


@_table("glue-parity", GLUE_SUMMARY, f"{RESULTS}/glue/stock/**/*.json")
def glue_parity(root: Path) -> str:
    """`none` against the stock Trainer: seed noise, and seed by seed."""
    data = _json(root, GLUE_SUMMARY)
    body = []
    for r in data["parity"]:
        ref_sd = "" if r["reference_sd"] is None else f" ± {100 * r['reference_sd']:.1f}"
        body.append([
            r["task"], r["metric"],
            f"{100 * r['mean']:.1f} ± {100 * r['sd']:.1f} ({r['seeds']})",
            f"{100 * r['reference_mean']:.1f}{ref_sd} ({r['reference_seeds']})",
            f"{100 * r['diff']:+.1f}", f"{100 * r['noise']:.1f}",
            "yes" if r["within_noise"] else "no",
        ])
    seedwise = data.get("parity_seedwise") or []
    same = sum(r["identical"] for r in seedwise)
    largest = max((abs(r["diff"]) for r in seedwise), default=0.0)
    body.append([
        "seed by seed", f"{len(seedwise)} scores", "", "",
        f"largest {largest:.1e}", "", f"{same} of {len(seedwise)} identical",
    ])
    columns = ["task", "metric", "tisa `none`: mean ± sd (seeds)",
               "stock Trainer: mean ± sd (seeds)", "difference x 100", "2 s.e.",
               "within seed noise"]
    return markdown_table(columns, body, align="llllrrl")


@_table("glue-sweep", f"{RESULTS}/glue/sweep/*/results.json", f"{RESULTS}/glue/sweep/**/*.csv",
        f"{RESULTS}/glue/sweep/*/settings.json", f"{RESULTS}/glue/sweep/*/runs/**/*.json")
def glue_sweep(root: Path) -> str:
    """TISA candidates on held-out training data: mean over seeds per task."""
    folders = sorted((root / RESULTS / "glue/sweep").glob("*/results.json"))
    order = {"none": 0}
    body = []
    base = None
    for path in sorted(folders, key=lambda p: (order.get(p.parent.name, 1), p.parent.name)):
        data = _json(root, path.relative_to(root).as_posix())
        scores: dict[str, list[float]] = {}
        moved = []
        for run in data["runs"]:
            scores.setdefault(run["task"], []).append(run["score"])
            if "amplitude" in (run.get("tisa_movement") or {}):
                moved.append(run["tisa_movement"]["amplitude"])
        tasks = sorted(scores)
        means = [statistics.fmean(scores[t]) for t in tasks]
        mean = statistics.fmean(means)
        base = mean if base is None else base
        amplitude = "-" if not moved else "{:.3f} -> {:.3f} ({:.3f}-{:.3f})".format(
            statistics.fmean(m["mean_abs_start"] for m in moved),
            statistics.fmean(m["mean_abs_now"] for m in moved),
            min(m["mean_abs_now"] for m in moved), max(m["mean_abs_now"] for m in moved),
        )
        body.append([path.parent.name, *(_x100(m) for m in means), _x100(mean),
                     _signed(100 * (mean - base)), amplitude])
    columns = ["candidate", *tasks, "mean", "vs none",
               "mean abs. amplitude: start -> end (range over runs)"]
    return markdown_table(columns, body, align="l" + "r" * (len(columns) - 1))


@_table("glue-scale", f"{RESULTS}/glue/scale/scale.json")
def glue_scale(root: Path) -> str:
    """MiniLM's own relative-position logit term against the one `keep` adds."""
    data = _json(root, f"{RESULTS}/glue/scale/scale.json")
    body = [
        [r["layer"], f"{r['model_std']:.3f}", f"{r['model_range']:.2f}", f"{r['model_ti']:.2f}",
         f"{r['tisa_std']:.3f}", f"{r['tisa_range']:.2f}", f"{r['ratio_std']:.1f}x"]
        for r in data["layers"]
    ]
    columns = ["layer", "MiniLM's term: std", "range", "TI", "`keep`'s TISA term: std",
               "range", "ratio of std"]
    return markdown_table(columns, body, align="r" * 7)


@_table("glue-word-order", f"{RESULTS}/glue/word_order/word_order.json")
def glue_word_order(root: Path) -> str:
    """Word-order sensitivity of the frozen models and the CoLA probe by layer."""
    data = _json(root, f"{RESULTS}/glue/word_order/word_order.json")
    models = data["models"]
    layers = [r["layer"] for r in models["original"]["probe"]]
    best = max(models["original"]["probe"], key=lambda r: r["mcc"])["layer"]

    def spread(s: dict[str, float]) -> str:
        return f"{s['median']:.4f} [{s['q25']:.4f}, {s['q75']:.4f}]"

    def probe(name: str, layer: int) -> float:
        return next(r["mcc"] for r in models[name]["probe"] if r["layer"] == layer)

    body = []
    for name, m in models.items():
        body.append([name, spread(m["order"]["swap"]), spread(m["order"]["shuffle"]),
                     _x100(probe(name, best), 1), _x100(probe(name, layers[-1]), 1)])
    for name, rows in (data.get("paired") or {}).items():
        r = next(r for r in rows if r["layer"] == best)
        lo, hi = r["interval95"]
        body.append([f"{name} (paired, 95% bootstrap)", "", "",
                     f"{100 * r['difference']:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]", ""])
    columns = ["frozen model", "1 - cos, two adjacent words swapped (median [quartiles])",
               "all words shuffled", f"CoLA probe MCC, layer {best}",
               f"layer {layers[-1]}"]
    return markdown_table(columns, body, align="lrrrr")


# ---------------------------------------------------------------- tisa analyze

ANALYSIS = f"{RESULTS}/analysis/minilm/metrics.json"


def _null_row(label: str, null: dict[str, Any], digits: int = 4) -> list[str]:
    r, s = null["random"], null["shuffled"]
    z = min(r["z"], s["z"])
    return [label, f"{null['observed']:.3f}", f"{r['mean']:.{digits}f} ± {r['std']:.{digits}f}",
            f"{s['mean']:.{digits}f} ± {s['std']:.{digits}f}", f"{z:,.0f}"]


def _analysis_rows(root: Path, *, full: bool) -> list[list[str]]:
    model = _json(root, ANALYSIS)["models"][0]
    pe, l1 = model["position_embeddings"]["nulls"], model["layer1"]
    rows = [
        ("P Pᵀ (Gram matrix of the position table), with the diagonal", pe["ti_gram"]),
        ("P Pᵀ, off-diagonal", pe["ti_gram_offdiag"]),
        ("cos(P), with the diagonal", pe["ti_cosine"]) if full else None,
        ("cos(P), off-diagonal", pe["ti_cosine_offdiag"]),
        ("layer-1 positional attention F_P, raw P, mean over heads", l1["raw"]["nulls"]["ti_mean"]),
        ("layer-1 F_P raw, off-diagonal", l1["raw"]["nulls"]["ti_offdiag_mean"]) if full else None,
        ("layer-1 F_P through LayerNorm, mean over heads", l1["ln"]["nulls"]["ti_mean"]),
        ("layer-1 F_P through LN, off-diagonal", l1["ln"]["nulls"]["ti_offdiag_mean"])
        if full else None,
    ]
    out = [_null_row(label, null) for label, null in filter(None, rows)]
    probes = {"repeated": "one repeated token", "sentences": "real sentences (PTB)"}
    keys = (("ti", "TI"), ("ti_offdiag", "off-diagonal TI"), ("locality", "locality"),
            ("symmetry", "symmetry")) if full else (("ti_offdiag", "off-diagonal TI"),)
    for probe, name in probes.items():
        nulls = model["probe"][probe]["nulls"]["mean"]
        for key, what in keys:
            if key in nulls:
                out.append(_null_row(f"attention probe, {name}, {what}", nulls[key], 3))
    return out


@_table("analysis-headline", ANALYSIS)
def analysis_headline(root: Path) -> str:
    """The headline TI figures of all-MiniLM-L6-v2 with their two nulls."""
    columns = ["matrix", "TI", "random null", "shuffled null", "z (lower)"]
    return markdown_table(columns, _analysis_rows(root, full=False), align="lrrrr")


@_table("analysis-minilm", ANALYSIS)
def analysis_minilm(root: Path) -> str:
    """Every TI figure of all-MiniLM-L6-v2 with its two nulls."""
    columns = ["figure", "TI", "random null", "shuffled null", "z (lower)"]
    return markdown_table(columns, _analysis_rows(root, full=True), align="lrrrr")


@_table("analysis-per-head", ANALYSIS)
def analysis_per_head(root: Path) -> str:
    """Layer-1 F_P per head, and the probes' off-diagonal TI per layer."""
    model = _json(root, ANALYSIS)["models"][0]
    ln = model["layer1"]["ln"]
    body = [
        ["layer-1 F_P through LN, per head", " ".join(f"{v:.2f}" for v in ln["ti"])],
        ["same, off-diagonal", " ".join(f"{v:.2f}" for v in ln["ti_offdiag"])],
    ]
    for probe, name in (("repeated", "one repeated token"), ("sentences", "real sentences")):
        per = model["probe"][probe]["ti_offdiag_per_layer"]
        body.append([f"probe, {name}: off-diagonal TI per layer",
                     " ".join(f"{v:.2f}" for v in per)])
    return markdown_table(["figure", "values"], body)


# ---------------------------------------------------------------- pretraining

@_table("pretrain-scoring-rate-sweep", f"{RESULTS}/pretrain/tisa-lr-sweep/*/results.json",
        f"{RESULTS}/pretrain/tisa-lr-sweep/*/metrics.csv")
def pretrain_rate_sweep(root: Path) -> str:
    """`tisa` at 1,000 steps with each learning rate of its scoring parameters."""
    rows = []
    for path in (root / RESULTS / "pretrain/tisa-lr-sweep").glob("*/results.json"):
        data = _json(root, path.relative_to(root).as_posix())
        name = path.parent.name
        rate = name.split("-lr", 1)[1] if "-lr" in name else "backbone (5e-4)"
        moved = data.get("scoring_movement") or {}
        rows.append((float(rate) if "-lr" in name else 5e-4, [
            rate, data["step"], f"{data['eval_loss']:.3f}",
            *(f"{moved[k]['mean_abs_change']:.3f}" if k in moved else "n/a"
              for k in ("amplitude", "offset", "sharpness")),
        ]))
    rows.sort(key=lambda r: r[0])
    columns = ["scoring learning rate", "steps", "val. loss", "amplitudes moved",
               "centres moved", "sharpness moved"]
    return markdown_table(columns, [r for _, r in rows], align="lrrrrr")


@_table("pretrain-own-rate", f"{RESULTS}/pretrain/position-schemes-tisa-lr/**/*.json",
        f"{RESULTS}/pretrain/position-schemes-tisa-lr/**/*.csv")
def pretrain_own_rate(root: Path) -> str:
    """The 2,500-step runs whose scoring parameters had their own learning rate."""
    data = _json(root, f"{RESULTS}/pretrain/position-schemes-tisa-lr/summary.json")
    lengths = [int(n) for n in data["settings"]["lengths"]]
    train = int(data["settings"]["seq_len"])
    body = []
    for name, run in data["runs"].items():
        test = {int(k): v for k, v in run["test_loss"].items()}

        def rise(factor: int) -> str:
            far, near = test.get(train * factor), test.get(train)
            return "n/a" if far is None or near is None else f"{100 * (far / near - 1):+.1f}%"

        body.append([
            run["position"], f"{run['tisa_learning_rate']:g}",
            f"{run['final_validation_loss']:.3f}",
            *("n/a" if test.get(n) is None else f"{test[n]:.3f}" for n in lengths),
            f"{rise(8)} / {rise(16)}", _int(run["positional_parameters"]["total"]),
        ])
    columns = ["position", "scoring rate", f"val. loss ({train})",
               *(f"test @{n}" for n in lengths), "rise 8x / 16x", "positional params"]
    return markdown_table(columns, body, align="ll" + "r" * (len(columns) - 2))


# ---------------------------------------------------------------- attention speed

#: the two runs of `tisa bench attention --json`: B=8 at 512 and 2,048, B=4 at 128 and 256
ATTENTION = (f"{RESULTS}/bench/attention.json", f"{RESULTS}/bench/attention-short.json")
LIMIT = "sdpa + constant mask (limit)"
#: the targets of the sdpa path against SDPA without bias: (pass, length) -> time ratio
ATTENTION_TARGETS = {("fwd+bwd", 128): 1.2, ("fwd+bwd", 256): 1.2, ("fwd+bwd", 512): 1.15,
                     ("fwd+bwd", 2048): 1.3, ("fwd", 512): 1.1, ("fwd", 2048): 1.1}
FORWARD_MEMORY_TARGET = 1.5


def _attention_target(pass_: str, length: int, limit: dict[str, Any] | None) -> float | None:
    target = ATTENTION_TARGETS.get((pass_, length))
    if target is not None and pass_ == "fwd" and limit and limit["time_ratio"] > target:
        target = limit["time_ratio"] + 0.05  # within 0.05 of a limit above the target
    return target


@_table("attention-speed", *ATTENTION)
def attention_speed(root: Path) -> str:
    """The sdpa path with the RBF bias against SDPA without bias, both layouts."""
    body = []
    for path in ATTENTION:
        data = _json(root, path)
        batch = data["config"]["batch"]
        rows = {(r.get("layout", "bhld"), r["pass"], r["length"], r["variant"]): r
                for r in data["rows"]}
        for (layout, pass_, length, variant), r in sorted(
                rows.items(), key=lambda kv: (kv[0][1] != "fwd+bwd", kv[0][2], kv[0][0])):
            if variant != "sdpa + rbf":
                continue
            limit = rows.get((layout, pass_, length, LIMIT))
            target = _attention_target(pass_, length, limit)
            ratio = r["time_ratio"]
            if target is None:
                verdict = ""
            elif ratio <= target:
                verdict = f"<= {target:.2f}x: met"
            else:
                verdict = f"<= {target:.2f}x: missed by {ratio - target:.2f}x"
            memory = r.get("memory_ratio")
            mem = "" if memory is None else f"{memory:.2f}x"
            if memory is not None and pass_ == "fwd":
                met = "met" if memory <= FORWARD_MEMORY_TARGET else "missed"
                mem += f" (<= {FORWARD_MEMORY_TARGET}x: {met})"
            body.append([
                pass_, length, batch, layout,
                f"{ratio:.2f}x ({r['time_ratio_low']:.2f}-{r['time_ratio_high']:.2f})",
                "" if limit is None else f"{limit['time_ratio']:.2f}x",
                verdict, mem,
            ])
    columns = ["pass", "L", "B", "layout", "sdpa + rbf / SDPA: median of runs (range)",
               "limit: constant mask", "target", "peak memory / SDPA"]
    return markdown_table(columns, body, align="lrrlrrll")


@_table("attention-settings", *ATTENTION)
def attention_settings(root: Path) -> str:
    """How the attention figures were measured."""
    rows = []
    for path in ATTENTION:
        data = _json(root, path)
        c, m = data["config"], data.get("provenance") or {}
        rows.append([
            f"`{Path(path).name}`",
            f"B={c['batch']}, H={c['heads']}, D={c['head_dim']}",
            f"{c['repeats']} x {c['runs']}",
            f"{c['clock']}, {m.get('threads')}",
            f"{m.get('cpu')} ({m.get('cpu_count')} cores), torch {m.get('torch')}",
            f"`{(m.get('commit') or '')[:12]}`",
        ])
    columns = ["file", "shapes", "rounds x runs", "clock, threads", "machine", "commit"]
    return markdown_table(columns, rows)


# ---------------------------------------------------------------- tisa convert

CONVERT = f"{RESULTS}/convert/minilm/metrics.json"


@_table("convert-quality", CONVERT)
def convert_quality(root: Path) -> str:
    """Zero-shot figures of the original, the fitted and the converted model."""
    m = _json(root, CONVERT)
    pp = m["positional_parameters"]
    pairs = m["settings"].get("max_sts_pairs") or "all"

    def cell(d: dict[str, Any], key: str) -> str:
        v = d.get(key)
        if isinstance(v, dict):  # fidelity: mean over the texts, with the 5th percentile
            return f"{v['mean']:.4f} (5th percentile {v['p05']:.3f})"
        return "n/a" if v is None else f"{v:.4f}"

    rows = [
        ["original (512-row position table)", cell(m["original"], "sts_spearman"), "1",
         _int(pp["original"]["total"])],
        ["fitted scorers, before distillation", cell(m["fitted"], "sts_spearman"),
         cell(m["fitted"], "fidelity"), _int(pp["converted"]["total"])],
        [f"converted ({m['settings']['distill']['steps']} distillation steps)",
         cell(m["converted"], "sts_spearman"), cell(m["converted"], "fidelity"),
         _int(pp["converted"]["total"])],
    ]
    columns = ["model", f"STS-B dev Spearman, zero-shot ({pairs} pairs)",
               "fidelity: cosine to the original", "positional parameters"]
    return markdown_table(columns, rows, align="lrrr")


@_table("convert-lengths", CONVERT)
def convert_lengths(root: Path) -> str:
    """The converted model on inputs longer than the original's table."""
    m = _json(root, CONVERT)
    rows = [[_int(p["length"]), f"{p['agreement']:.3f}", f"{1000 * p['seconds']:.0f} ms",
             "n/a" if p["peak_memory_mb"] is None else f"{p['peak_memory_mb']:.0f} MiB",
             "yes" if p["finite"] else "no"] for p in m["lengths"]]
    columns = ["tokens", "agreement with the original's 512-token chunks",
               "time per input (median)", "peak memory", "finite"]
    return markdown_table(columns, rows, align="rrrrl")


@_table("convert-run", CONVERT)
def convert_run(root: Path) -> str:
    """What the conversion run was: its fit, its time and its provenance."""
    m = _json(root, CONVERT)
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


# ---------------------------------------------------------------- tisa demo

DEMO_TIMING = f"{RESULTS}/demo/timing.json"
DEMO_TIMING_BUSY = f"{RESULTS}/demo/timing-busy.json"
DEMO = f"{RESULTS}/demo/demo.json"


def _mmss(s: float) -> str:
    return f"{int(s // 60)} min {int(round(s % 60)):02d} s"


@_table("demo-time", DEMO_TIMING, DEMO_TIMING_BUSY)
def demo_time(root: Path) -> str:
    """The wall clock of fresh `tisa demo` runs, idle and beside other jobs: median, range."""
    body = []
    idle = None
    for name, label in ((DEMO_TIMING, "to itself"), (DEMO_TIMING_BUSY, None)):
        if name == DEMO_TIMING_BUSY and not (root / name).is_file():
            continue
        data = _json(root, name)
        runs = data["runs"]
        m = data.get("provenance") or {}
        busy = data.get("busy_processes") or 0
        if label is None:
            label = f"beside {busy} one-thread CPU-bound job{'s' if busy != 1 else ''}"
        loads = [r["load_before"] for r in runs if r.get("load_before") is not None]
        if idle is None:
            idle = data["median_s"]
            ratio = "1.00x"
        else:
            ratio = f"{data['median_s'] / idle:.2f}x"
        body.append([
            label, len(runs), _mmss(data["median_s"]),
            f"{_mmss(data['min_s'])} - {_mmss(data['max_s'])}", ratio,
            f"{max(loads):.2f}" if loads else "n/a", f"{m.get('cpu_count')} cores, {m.get('cpu')}",
        ])
    columns = ["machine shared", "fresh runs", "median", "range", "of the idle median",
               "highest load before a run", "machine"]
    return markdown_table(columns, body, align="lrrrrrl")


@_table("demo-ti-over-training", DEMO)
def demo_ti_over_training(root: Path) -> str:
    """TI of the demo's tiny absolute run at each checkpoint, with its null."""
    t = _json(root, DEMO)["ti_over_training"]
    nulls = (t.get("nulls") or {}).get("ti_gram_offdiag") or []
    columns = ["step", *(str(s) for s in t["steps"])]
    rows = [
        ["validation loss", *("n/a" if v is None else f"{v:.2f}" for v in t["eval_loss"])],
        ["TI P Pᵀ", *(f"{v:.3f}" for v in t["ti_gram"])],
    ]
    if t.get("ti_gram_offdiag"):
        rows.append(["TI P Pᵀ, off-diagonal", *(f"{v:.3f}" for v in t["ti_gram_offdiag"])])
    if nulls:
        rows.append(["its higher null mean", *(
            f"{max(n['random']['mean'], n['shuffled']['mean']):.3f}" for n in nulls)])
        rows.append(["its z (lower of the two)", *(
            f"{min(n['random']['z'], n['shuffled']['z']):.1f}" for n in nulls)])
    rows += [["TI F_P raw (mean)", *(f"{v:.3f}" for v in t["ti_fp_raw"])],
             ["TI F_P through LN (mean)", *(f"{v:.3f}" for v in t["ti_fp_ln"])]]
    return markdown_table(columns, rows, align="l" + "r" * len(t["steps"]))


# ---------------------------------------------------------------- the package itself

#: a module longer than this is named with its size in docs/design.md
LONG_MODULE = 500


@_table("design-modules", "tisa/**/*.py")
def design_modules(root: Path) -> str:
    """Every module of the package with the first sentence of its docstring."""
    import ast

    body = []
    for path in sorted((root / "tisa").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        text = path.read_text(encoding="utf-8")
        doc = ast.get_docstring(ast.parse(text)) or ""
        first = " ".join(doc.strip().split("\n\n")[0].split())
        end = first.find(". ")
        sentence = first if end < 0 else first[: end + 1]
        lines = len(text.splitlines())  # only whether it is long: sizes change every edit
        body.append([f"`{rel}`", sentence.replace("|", "\\|"),
                     "yes" if lines > LONG_MODULE else ""])
    return markdown_table(["module", "what it holds", f"over {LONG_MODULE} lines"], body,
                          align="lll")


# ---------------------------------------------------------------- the machinery

def _pages(root: Path) -> list[Path]:
    pages: list[Path] = []
    for pattern in PAGES:
        pages.extend(sorted(root.glob(pattern)))
    return pages


def _glob(root: Path, patterns: Iterable[str]) -> set[Path]:
    return {p for pattern in patterns for p in root.glob(pattern) if p.is_file()}


def result_files(root: Path = ROOT) -> set[Path]:
    """Every raw result file (JSON, CSV, JSON lines) under ``benchmarks/results``."""
    return _glob(root, RESULT_PATTERNS)


def claimed_files(root: Path = ROOT) -> set[Path]:
    """The files that the registered tables declare they read."""
    return _glob(root, (s for t in TABLES.values() for s in t.sources))


def unclaimed_files(root: Path = ROOT) -> list[str]:
    """Result files that no table reads (each one a figure nobody can see), sorted."""
    return sorted(p.relative_to(root).as_posix() for p in result_files(root) - claimed_files(root))


def render(name: str, root: Path = ROOT) -> str:
    """The Markdown of one registered table."""
    if name not in TABLES:
        raise ValueError(f"table {name!r} is not registered; known: {', '.join(sorted(TABLES))}")
    return TABLES[name].render(root)


def update(root: Path = ROOT, *, write: bool = True) -> list[str]:
    """Rewrites every marked table of the pages; returns the problems found.

    A problem is a table whose text differs from what its files give (rewritten when
    ``write``), a marker naming no registered table, or a registered table on no page.
    """
    problems: list[str] = []
    placed: set[str] = set()
    cache: dict[str, str] = {}
    for page in _pages(root):
        text = page.read_text(encoding="utf-8")
        rel = page.relative_to(root).as_posix()

        def fill(match: re.Match[str], rel: str = rel) -> str:
            name = match["name"]
            if name not in TABLES:
                problems.append(f"{rel}: marker names no registered table: {name!r}")
                return match[0]
            placed.add(name)
            if name not in cache:
                cache[name] = render(name, root)
            if match["body"] != cache[name]:
                problems.append(f"{rel}: table {name!r} differs from its result files")
            return match["open"] + cache[name] + match["close"]

        new = MARKER.sub(fill, text)
        if write and new != text:
            page.write_text(new, encoding="utf-8")
    problems += [f"table {n!r} is on no page" for n in sorted(set(TABLES) - placed)]
    return problems


def check(root: Path = ROOT) -> list[str]:
    """The problems :func:`update` would fix or report, changing nothing."""
    return update(root, write=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tisa.doc_tables",
        description="Write the README's and the docs' tables from the committed result files.",
    )
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 when a table differs from its files")
    parser.add_argument("--root", type=Path, default=ROOT,
                        help="the repository (default: this one)")
    args = parser.parse_args(argv)
    try:
        problems = check(args.root) if args.check else update(args.root)
    except (FileNotFoundError, ValueError) as err:
        print(f"doc_tables: error: {err}", file=sys.stderr)
        return 2
    unclaimed = unclaimed_files(args.root)
    for p in problems:
        print(p)
    for f in unclaimed:
        print(f"{f}: no table reads this result file")
    if args.check:
        return 1 if problems or unclaimed else 0
    stale = [p for p in problems if "differs" not in p]
    print(f"{len(TABLES)} tables written" + (f"; {len(stale)} problems" if stale else ""))
    return 1 if stale or unclaimed else 0


if __name__ == "__main__":
    raise SystemExit(main())
