"""Tables of GLUE with all-MiniLM-L6-v2: scores, paired differences, parity with the stock
Trainer, the settings sweep, positional scale, word order, learning rates; and the
protocol on the second encoder, paraphrase-MiniLM-L3-v2."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from tisa.doc_tables.base import RESULTS, grouped, read_json, signed, table, x100
from tisa.doc_tables.convert import word_order_table
from tisa.glue.lengths import markdown as lengths_markdown
from tisa.glue.results import paired_comparison
from tisa.reports.markdown import markdown_table
from tisa.stats import holm

GLUE_SUMMARY = f"{RESULTS}/glue/summary/results.json"
GLUE_TASKS = (("cola", "CoLA"), ("sst2", "SST-2"), ("mrpc", "MRPC"), ("stsb", "STS-B"),
              ("rte", "RTE"))
GLUE_VARIANTS = (
    ("none", "`none`: the model as it is"),
    ("keep", "`keep`: TISA added next to its table"),
    ("converted", "converted: its table replaced by TISA (`tisa convert`)"),
)


def _summary_rows(root: Path) -> dict[tuple[str, str], dict[str, Any]]:
    return {(r["task"], r["variant"]): r for r in read_json(root, GLUE_SUMMARY)["summary"]}


@table(
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
            [f"{label} ({len(glue['seeds'])} seeds)",
             f"{grouped(p['absolute'])} / {grouped(p['tisa'])}"]
            + [x100(rows[(t, variant)]["score"]) if (t, variant) in rows else "n/a"
               for t, _ in GLUE_TASKS]
            + [x100(glue["score"])]
        )
    columns = ["variant", "positional params (absolute / TISA)", *(n for _, n in GLUE_TASKS),
               "5-task average"]
    return markdown_table(columns, body, align="lr" + "r" * (len(GLUE_TASKS) + 1))


@table("glue-paired", GLUE_SUMMARY)
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
                f"{signed(100 * q['mean_diff'])} [{signed(100 * lo)}, {signed(100 * hi)}]",
                f"{q['wins']} / {q['losses']} / {q['ties']}",
                f"{q['sign_test_p']:.3g}",
                f"{100 * q['median_rer']:+.1f}%",
            ])
    columns = ["variant", "task", "pairs", "mean diff x 100 [t 95%]", "wins / losses / ties",
               "sign test p", "median rel. error reduction"]
    return markdown_table(columns, body, align="llrlrrr")


@table("glue-parity", GLUE_SUMMARY, f"{RESULTS}/glue/stock/**/*.json")
def glue_parity(root: Path) -> str:
    """`none` against the stock Trainer: seed noise, and seed by seed."""
    data = read_json(root, GLUE_SUMMARY)
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


@table("glue-sweep", f"{RESULTS}/glue/sweep/*/results.json", f"{RESULTS}/glue/sweep/**/*.csv",
        f"{RESULTS}/glue/sweep/*/settings.json", f"{RESULTS}/glue/sweep/*/runs/**/*.json")
def glue_sweep(root: Path) -> str:
    """TISA candidates on held-out training data: mean over seeds per task."""
    folders = sorted((root / RESULTS / "glue/sweep").glob("*/results.json"))
    order = {"none": 0}
    body = []
    base = None
    for path in sorted(folders, key=lambda p: (order.get(p.parent.name, 1), p.parent.name)):
        data = read_json(root, path.relative_to(root).as_posix())
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
        body.append([path.parent.name, *(x100(m) for m in means), x100(mean),
                     signed(100 * (mean - base)), amplitude])
    columns = ["candidate", *tasks, "mean", "vs none",
               "mean abs. amplitude: start -> end (range over runs)"]
    return markdown_table(columns, body, align="l" + "r" * (len(columns) - 1))


@table("glue-scale", f"{RESULTS}/glue/scale/scale.json")
def glue_scale(root: Path) -> str:
    """MiniLM's own relative-position logit term against the one `keep` adds."""
    data = read_json(root, f"{RESULTS}/glue/scale/scale.json")
    body = [
        [r["layer"], f"{r['model_std']:.3f}", f"{r['model_range']:.2f}", f"{r['model_ti']:.2f}",
         f"{r['tisa_std']:.3f}", f"{r['tisa_range']:.2f}", f"{r['ratio_std']:.1f}x"]
        for r in data["layers"]
    ]
    columns = ["layer", "MiniLM's term: std", "range", "TI", "`keep`'s TISA term: std",
               "range", "ratio of std"]
    return markdown_table(columns, body, align="r" * 7)


GLUE_LENGTHS = f"{RESULTS}/glue/lengths/lengths.json"


@table("glue-lengths", GLUE_LENGTHS, f"{RESULTS}/glue/lengths/lengths.md")
def glue_lengths(root: Path) -> str:
    """GLUE examples' token lengths and the share within K + 1 tokens."""
    data = read_json(root, GLUE_LENGTHS)
    prov = data.get("provenance") or {}
    return (lengths_markdown(data) + "\ncommit "
            f"`{(prov.get('commit') or '')[:12]}`, `{prov.get('command')}`\n")


@table("glue-word-order", f"{RESULTS}/glue/word_order/word_order.json")
def glue_word_order(root: Path) -> str:
    """Word-order sensitivity of the frozen models and the CoLA probe by layer."""
    return word_order_table(read_json(root, f"{RESULTS}/glue/word_order/word_order.json"))


GLUE_ORDER = f"{RESULTS}/glue/converted-order-1"
GLUE_ATTENTION = f"{RESULTS}/glue/converted-attention-1"
GLUE_MIN_LENGTH = f"{RESULTS}/glue/converted-min-length-6"


@table(
    "glue-cola-order",
    f"{GLUE_ORDER}/**/*.json",
    f"{GLUE_ORDER}/**/*.csv",
    f"{GLUE_ATTENTION}/**/*.json",
    f"{GLUE_ATTENTION}/**/*.csv",
    f"{GLUE_MIN_LENGTH}/**/*.json",
    f"{GLUE_MIN_LENGTH}/**/*.csv",
    f"{RESULTS}/glue/protocol/runs/cola/none/*/result.json",
    f"{RESULTS}/glue/converted/runs/cola/none/*/result.json",
)
def glue_cola_order(root: Path) -> str:
    """CoLA fine-tuned from the original, the default conversion and the conversions with
    the word-order and the attention-map terms and with short distillation blocks: each
    seed, and the paired differences (t interval, Holm)."""
    models = {
        "original": f"{RESULTS}/glue/protocol",
        "converted (default)": f"{RESULTS}/glue/converted",
        "converted, order weight 1": GLUE_ORDER,
        "converted, attention weight 1": GLUE_ATTENTION,
        "converted, blocks from 6 tokens": GLUE_MIN_LENGTH,
    }
    pairs = (
        ("converted (default)", "original"),
        ("converted, order weight 1", "original"),
        ("converted, attention weight 1", "original"),
        ("converted, blocks from 6 tokens", "original"),
        ("converted, order weight 1", "converted (default)"),
        ("converted, attention weight 1", "converted (default)"),
        ("converted, blocks from 6 tokens", "converted (default)"),
    )
    return _cola_comparison(root, models, pairs)


GLUE_CONTENT = f"{RESULTS}/glue/converted-content-16"
#: the content term with no term beyond +-K (``--content-beyond zero``)
GLUE_CONTENT_ZERO = f"{RESULTS}/glue/converted-content-16-zero"
#: the clipped content term with the long-input term every third step
GLUE_CONTENT_LONG = f"{RESULTS}/glue/converted-clip-comb"


@table(
    "glue-cola-content",
    *(f"{folder}/**/*.{ext}" for folder in (GLUE_CONTENT, GLUE_CONTENT_ZERO, GLUE_CONTENT_LONG)
      for ext in ("json", "csv")),
    f"{RESULTS}/glue/protocol/runs/cola/none/*/result.json",
    f"{RESULTS}/glue/converted/runs/cola/none/*/result.json",
)
def glue_cola_content(root: Path) -> str:
    """CoLA fine-tuned from the conversions with a relative content term (clipped beyond
    +-K, none beyond, and clipped with the long-input term), against the original and the
    default conversion: each seed, and the paired differences."""
    clip, zero = "converted, content term K=16", "converted, content term K=16, none beyond"
    long = "converted, content term K=16 + long-input term every 3rd step"
    models = {
        "original": f"{RESULTS}/glue/protocol",
        "converted (default)": f"{RESULTS}/glue/converted",
        clip: GLUE_CONTENT,
        zero: GLUE_CONTENT_ZERO,
        long: GLUE_CONTENT_LONG,
    }
    pairs = tuple((a, b) for a in (clip, zero, long)
                  for b in ("original", "converted (default)")) + ((long, clip),)
    return _cola_comparison(root, models, pairs)


#: two more conversions with the clipped content term's settings, conversion seeds 1 and 2
#: (``tisa convert --content-offsets 16 --seed N``; GLUE_CONTENT is seed 0)
GLUE_CONTENT_SEEDS = {0: GLUE_CONTENT, 1: f"{RESULTS}/glue/converted-content-16-s1",
                      2: f"{RESULTS}/glue/converted-content-16-s2"}


@table(
    "glue-cola-conversion-spread",
    *(f"{folder}/**/*.{ext}" for folder in GLUE_CONTENT_SEEDS.values() for ext in ("json", "csv")),
    f"{RESULTS}/glue/converted/runs/cola/none/*/result.json",
)
def glue_cola_conversion_spread(root: Path) -> str:
    """CoLA fine-tuned from three conversions with the same settings (the clipped content
    term, K = 16), conversion seeds 0, 1, 2: each conversion's seeds, the differences
    between conversions and against the default conversion, and the spread of the
    conversions' means against the fine-tuning seeds' spread within a conversion."""
    from scipy import stats

    names = {seed: f"content term K=16, conversion seed {seed}" for seed in GLUE_CONTENT_SEEDS}
    models = {"converted (default)": f"{RESULTS}/glue/converted",
              **{names[seed]: folder for seed, folder in GLUE_CONTENT_SEEDS.items()}}
    pairs = ((names[1], names[0]), (names[2], names[0]), (names[2], names[1]),
             *((names[seed], "converted (default)") for seed in GLUE_CONTENT_SEEDS))
    text = _cola_comparison(root, models, pairs)
    means, sds, settings, by_seed = [], [], [], []
    for seed, folder in GLUE_CONTENT_SEEDS.items():
        made = read_json(root, f"{folder}/model.json")["settings"]
        if made["distill"]["seed"] != seed:
            raise ValueError(f"{folder}: converted with seed {made['distill']['seed']}, not {seed}")
        # content_beyond came later than the seed-0 conversion, whose term clipped (the
        # only behaviour then, and the default since)
        settings.append({"content_beyond": "clip", **made,
                         "distill": {**made["distill"], "seed": None}})
        if settings[-1] != settings[0]:
            raise ValueError(f"{folder}: converted with other settings than the seed-0 conversion")
        by_seed.append({seed: float(r["score"]) for seed, r in _cola_runs(root, folder).items()})
        scores = list(by_seed[-1].values())
        means.append(statistics.fmean(scores))
        sds.append(statistics.stdev(scores))
    pooled = statistics.fmean(sd**2 for sd in sds) ** 0.5
    # the setting rather than one conversion of it: the conversions' mean per
    # fine-tuning seed against the default conversion's score at that seed
    default = {seed: float(r["score"])
               for seed, r in _cola_runs(root, f"{RESULTS}/glue/converted").items()}
    seeds = sorted(set(default).intersection(*by_seed))
    setting = {s: statistics.fmean(runs[s] for runs in by_seed) for s in seeds}
    cmp = paired_comparison(setting, default)
    p = float(stats.ttest_rel([setting[s] for s in seeds], [default[s] for s in seeds]).pvalue)
    return text + (
        f"\nAcross the {len(means)} conversions (settings alike but the seed): mean of their "
        f"means {100 * statistics.fmean(means):.2f}, sd of their means "
        f"{100 * statistics.stdev(means):.2f} (range {100 * min(means):.2f} to "
        f"{100 * max(means):.2f}); sd over fine-tuning seeds within a conversion (pooled) "
        f"{100 * pooled:.2f}, which alone would give a mean of {len(scores)} seeds an sd of "
        f"about {100 * pooled / len(scores)**0.5:.2f}. The setting, as the conversions' mean "
        f"at each fine-tuning seed, minus the default conversion: "
        f"{100 * cmp['mean_diff']:+.2f} [{100 * cmp['ci95'][0]:+.2f}, "
        f"{100 * cmp['ci95'][1]:+.2f}], {cmp['wins']} / {cmp['losses']}, paired t p {p:.2g} "
        "(one comparison, outside the Holm family above).\n")


GLUE_FROZEN_TABLE = f"{RESULTS}/glue/original-frozen-table"
GLUE_ORIGINAL_LR = f"{RESULTS}/glue/original-lr-1e-4"
GLUE_CONVERTED_LR = f"{RESULTS}/glue/converted-lr-1e-4"


@table(
    "glue-cola-fine-tuning",
    *(f"{folder}/**/*.json" for folder in (GLUE_FROZEN_TABLE, GLUE_ORIGINAL_LR, GLUE_CONVERTED_LR)),
    *(f"{folder}/**/*.csv" for folder in (GLUE_FROZEN_TABLE, GLUE_ORIGINAL_LR, GLUE_CONVERTED_LR)),
    f"{RESULTS}/glue/protocol/runs/cola/none/*/result.json",
    f"{RESULTS}/glue/converted/runs/cola/none/*/result.json",
)
def glue_cola_fine_tuning(root: Path) -> str:
    """CoLA fine-tuned from the original with its position table trained (the protocol) and
    frozen (``--position-learning-rate 0``), and the original and the default conversion
    each at the protocol's learning rate and at the one the held-out sweep chose."""
    models = {
        "original": f"{RESULTS}/glue/protocol",
        "original, position table frozen": GLUE_FROZEN_TABLE,
        "converted (default)": f"{RESULTS}/glue/converted",
        "original at 1e-4": GLUE_ORIGINAL_LR,
        "converted (default) at 1e-4": GLUE_CONVERTED_LR,
    }
    pairs = (
        ("original, position table frozen", "original"),
        ("original at 1e-4", "original"),
        ("converted (default) at 1e-4", "converted (default)"),
        ("converted (default) at 1e-4", "original at 1e-4"),
    )
    return _cola_comparison(root, models, pairs)


#: held-out learning-rate sweeps (``glue_protocol.py rate-sweep``): name -> folder
RATE_SWEEPS = {
    "original": f"{RESULTS}/glue/rate-sweep-original",
    "converted (default)": f"{RESULTS}/glue/rate-sweep-converted",
    "converted (default), scorers' rate": f"{RESULTS}/glue/rate-sweep-converted-positions",
    "converted (default) again, on another CPU model": f"{RESULTS}/glue/rate-sweep-converted-rerun",
}


#: the same sweeps on the three tasks of the TISA settings' sweep (CoLA, MRPC, STS-B)
RATE_SWEEPS_3_TASKS = {
    "original": f"{RESULTS}/glue/rate-sweep-original-3-tasks",
    "converted (default) again, on another CPU model":
        f"{RESULTS}/glue/rate-sweep-converted-3-tasks",
}


@table(
    "glue-rate-sweeps",
    *(f"{folder}/**/*.json" for folder in RATE_SWEEPS.values()),
    *(f"{folder}/**/*.csv" for folder in RATE_SWEEPS.values()),
)
def glue_rate_sweeps(root: Path) -> str:
    """The held-out rate sweeps on CoLA: each candidate's score per seed and mean, and the
    choice."""
    return _rate_sweeps(root, RATE_SWEEPS)


@table(
    "glue-rate-sweeps-3-tasks",
    *(f"{folder}/**/*.json" for folder in RATE_SWEEPS_3_TASKS.values()),
    *(f"{folder}/**/*.csv" for folder in RATE_SWEEPS_3_TASKS.values()),
)
def glue_rate_sweeps_3_tasks(root: Path) -> str:
    """The held-out rate sweeps on CoLA, MRPC and STS-B."""
    return _rate_sweeps(root, RATE_SWEEPS_3_TASKS)


def _rate_sweeps(root: Path, sweeps: dict[str, str]) -> str:
    """Held-out rate sweeps (name -> folder) of the same tasks and seeds: each candidate's
    score per seed and task, the mean, and the choice."""
    body: list[list[str]] = []
    tasks: list[str] = []
    seeds: list[int] = []
    for name, folder in sweeps.items():
        chosen = read_json(root, f"{folder}/selection.json")
        if body and (chosen["tasks"], chosen["seeds"]) != (tasks, seeds):
            raise ValueError(f"{folder}: swept other tasks or seeds than the table's first")
        tasks, seeds = chosen["tasks"], chosen["seeds"]
        for c in chosen["candidates"]:
            lr, plr = c["learning_rate"], c["position_learning_rate"]
            label = f"lr-{lr:g}" + ("" if plr is None else f"-position-{plr:g}")
            per_seed = []
            for seed in seeds:
                cells = []
                for task in tasks:
                    run = read_json(
                        root, f"{folder}/{label}/runs/{task}/none/seed-{seed}/result.json"
                    )
                    cells.append(x100(run["score"]))
                per_seed.append(" / ".join(cells))
            pick = {"learning_rate": lr, "position_learning_rate": plr} == chosen["selected"]
            body.append(
                [
                    name,
                    f"{lr:g}",
                    "with the backbone" if plr is None else f"{plr:g}",
                    ", ".join(per_seed),
                    x100(c["mean"]),
                    ("chosen" + (f" (tie of {chosen['tied']})" if chosen["tied"] > 1 else ""))
                    if pick
                    else "",
                ]
            )
            name = ""
    columns = [
        "model",
        "learning rate",
        "positional rate",
        "held-out " + " / ".join(tasks) + " x100, seeds " + ", ".join(map(str, seeds)),
        "mean",
        "",
    ]
    return markdown_table(columns, body, align="lrrrrl")


def _cola_runs(root: Path, folder: str) -> dict[int, dict]:
    """seed -> result of each CoLA run of a GLUE output folder."""
    found = sorted((root / folder).glob("runs/cola/none/seed-*/result.json"))
    read = [read_json(root, str(p.relative_to(root))) for p in found]
    return {int(r["seed"]): r for r in read}


def _cola_comparison(
    root: Path, folders: dict[str, str], pairs: tuple[tuple[str, str], ...]
) -> str:
    """CoLA dev MCC of each model (name -> a GLUE output folder): mean ± sd over seeds, then
    the paired differences ``pairs`` over the seeds all share (t interval; paired t
    p-values, Holm over the pairs)."""
    from scipy import stats

    every = {name: _cola_runs(root, folder) for name, folder in folders.items()}
    models = {name: {s: float(r["score"]) for s, r in rs.items()} for name, rs in every.items()}
    seeds = sorted(set.intersection(*(set(v) for v in models.values())))

    def mean_sd(values: list[float]) -> str:
        if len(values) < 2:
            return x100(values[0]) if values else "n/a"
        return f"{100 * statistics.fmean(values):.2f} ± {100 * statistics.stdev(values):.2f}"

    def mean_loss(rs: dict[int, dict], key) -> str:
        return f"{statistics.fmean(key(r) for r in rs.values()):.3f}"

    rows = [
        [name, len(s), mean_sd(list(s.values())),
         mean_loss(every[name], lambda r: r["train_loss"]),
         mean_loss(every[name], lambda r: r["eval_loss"]["validation"])]
        for name, s in models.items()
    ]
    text = markdown_table(
        ["model", "seeds", "CoLA dev MCC x100, mean ± sd", "training loss (mean)",
         "dev loss (mean)"],
        rows,
        align="lrrrr",
    )
    found, pvalues = [], []
    for a, b in pairs:
        first = {s: models[a][s] for s in seeds}
        second = {s: models[b][s] for s in seeds}
        cmp = paired_comparison(first, second)
        p = float(stats.ttest_rel(list(first.values()), list(second.values())).pvalue)
        found.append((a, b, cmp))
        pvalues.append(p)
    adjusted = holm(pvalues)
    body = [
        [f"{a} - {b}", cmp["n"], f"{100 * cmp['mean_diff']:+.2f}",
         f"[{100 * cmp['ci95'][0]:+.2f}, {100 * cmp['ci95'][1]:+.2f}]",
         f"{cmp['wins']} / {cmp['losses']}", f"{p:.2g}"]
        for (a, b, cmp), p in zip(found, adjusted)
    ]
    text += "\n" + markdown_table(
        ["difference (paired by seed)", "seeds", "mean", "t 95% interval", "wins / losses",
         f"p (paired t, Holm over {len(pairs)})"],
        body,
        align="lrrrrr",
    )
    return text


#: the five-task protocol with each model at the rate its held-out sweep chose (1e-4 for
#: both, ``glue-rate-sweeps-3-tasks``): the original and the re-made default conversion
GLUE_PER_MODEL_RATES = {
    "original": GLUE_ORIGINAL_LR,
    "converted": f"{RESULTS}/glue/converted-rerun-lr-1e-4",
}


def protocol_scores(root: Path, folder: str, task: str) -> dict[int, float]:
    """seed -> dev score of ``task`` from the runs of one protocol folder that have finished."""
    found = sorted((root / folder).glob(f"runs/{task}/none/seed-*/result.json"))
    read = [read_json(root, str(p.relative_to(root))) for p in found]
    return {int(r["seed"]): float(r["score"]) for r in read}


def per_model_scores(root: Path, task: str) -> tuple[dict[int, float], dict[int, float]]:
    """(converted, original): seed -> dev score of ``task`` at the per-model rates, from the
    runs each has finished."""
    return (protocol_scores(root, GLUE_PER_MODEL_RATES["converted"], task),
            protocol_scores(root, GLUE_PER_MODEL_RATES["original"], task))


def paired_protocol_table(root: Path, converted: str, original: str) -> str:
    """Converted - original on each task of the protocol: mean ± sd over the paired seeds,
    the difference with its t interval (and whether it lies wholly below 0), paired t
    p-values with Holm over the tasks shown; tasks not finished by both are named."""
    from scipy import stats

    rows, pvalues, missing = [], [], []
    for task, label in GLUE_TASKS:
        a = protocol_scores(root, converted, task)
        b = protocol_scores(root, original, task)
        if len(set(a) & set(b)) < 5:
            missing.append(f"{label} ({len(set(a) & set(b))} of 5 seeds)")
            continue
        cmp = paired_comparison(a, b)  # the seeds with a score on both sides
        seeds = cmp["seeds"]
        pvalues.append(float(stats.ttest_rel([a[s] for s in seeds], [b[s] for s in seeds]).pvalue))
        lo, hi = cmp["ci95"]
        rows.append([
            label, len(seeds),
            *(f"{100 * statistics.fmean(x[s] for s in seeds):.2f} ± "
              f"{100 * statistics.stdev(x[s] for s in seeds):.2f}" for x in (b, a)),
            f"{signed(100 * cmp['mean_diff'])} [{signed(100 * lo)}, {signed(100 * hi)}]",
            "yes" if hi < 0 else "no",
            f"{cmp['wins']} / {cmp['losses']}",
        ])
    if not rows:
        return f"No task finished by both yet: {', '.join(missing)}.\n"
    for row, p in zip(rows, holm(pvalues), strict=True):
        row.append(f"{p:.2g}")
    text = markdown_table(
        ["task", "seeds", "original x100, mean ± sd", "converted x100, mean ± sd",
         "converted - original, t 95% interval", "interval wholly below 0", "wins / losses",
         f"p (paired t, Holm over {len(rows)})"],
        rows, align="lrrrrlrr")
    if missing:
        text += f"\nNot finished by both: {', '.join(missing)}.\n"
    return text


@table(
    "glue-per-model-rates",
    *(f"{folder}/**/*.json" for folder in GLUE_PER_MODEL_RATES.values()),
    *(f"{folder}/**/*.csv" for folder in GLUE_PER_MODEL_RATES.values()),
)
def glue_per_model_rates(root: Path) -> str:
    """Converted - original on each task of the protocol, each at its chosen rate (see
    :func:`paired_protocol_table`)."""
    return paired_protocol_table(
        root, GLUE_PER_MODEL_RATES["converted"], GLUE_PER_MODEL_RATES["original"])


#: the five-task protocol (3 epochs at 5e-5, as for all-MiniLM-L6-v2) on the second
#: encoder, paraphrase-MiniLM-L3-v2, and on its default conversion
GLUE_L3 = {
    "original": f"{RESULTS}/glue/l3-original",
    "converted": f"{RESULTS}/glue/l3-converted",
}
#: the conversion the L3 protocol fine-tunes: its metrics.json (the file's SHA-256; the
#: protocol's model.json hashes the same folder's weight files with their names)
CONVERT_L3_RERUN = f"{RESULTS}/convert/l3/rerun/metrics.json"


@table(
    "glue-l3",
    *(f"{folder}/**/*.json" for folder in GLUE_L3.values()),
    *(f"{folder}/**/*.csv" for folder in GLUE_L3.values()),
    CONVERT_L3_RERUN,
)
def glue_l3(root: Path) -> str:
    """paraphrase-MiniLM-L3-v2 and its conversion on the five-task protocol (see
    :func:`paired_protocol_table`), with the conversion's own figures and weights."""
    text = paired_protocol_table(root, GLUE_L3["converted"], GLUE_L3["original"])
    made = read_json(root, CONVERT_L3_RERUN)
    prov = made["provenance"]
    return text + (
        f"\nThe conversion: zero-shot STS-B dev Spearman {made['converted']['sts_spearman']:.4f}"
        f" (original {made['original']['sts_spearman']:.4f}), fidelity "
        f"{made['converted']['fidelity']['mean']:.4f}, fit and distillation "
        f"{made['timings']['total_s'] / 60:.1f} min; weights `{made['weights_sha256'][:12]}`, "
        f"made on {prov['cpu']} with {prov['threads']} threads, torch {prov['torch']}, "
        f"commit `{prov['commit'][:12]}`, `{prov['command']}`.\n"
    )
