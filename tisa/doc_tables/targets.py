"""Tables of targets: what `tisa convert` set out to reach, next to what was measured.

Each row restates one target, gives the figures that decide it (from the same result files
as the detailed tables of docs/convert.md, docs/longeval.md and docs/glue.md) and says
whether it is met; nothing here is typed by hand.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tisa.doc_tables.base import grouped, read_json, table
from tisa.doc_tables.convert import (
    CONVERT,
    CONVERT_SELECTION,
    CONVERT_SELECTION_RERUN,
    CONVERT_WORD_ORDER,
)
from tisa.doc_tables.glue import GLUE_PER_MODEL_RATES, GLUE_SUMMARY, GLUE_TASKS, per_model_scores
from tisa.doc_tables.longeval import (
    LONGEVAL,
    LONGEVAL_8192,
    LONGEVAL_WINDOWS,
    LONGEVAL_WINDOWS_8192,
    comparisons,
    reading,
)
from tisa.glue.results import paired_comparison
from tisa.reports.markdown import markdown_table

#: the lengths from which the converted model is to be ahead of every alternative
LONG = 2048
#: passkey Acc@1 to reach at every depth and length
PASSKEY = 0.95
#: the runs with the converted model read in windows too
WINDOWED = (LONGEVAL_WINDOWS, LONGEVAL_WINDOWS_8192)


def _interval(mean: float, low: float, high: float, digits: int = 1) -> str:
    return f"{100 * mean:+.{digits}f} [{100 * low:+.{digits}f}, {100 * high:+.{digits}f}]"


def _converted(models: list[dict[str, Any]]) -> set[str]:
    return {m["name"] for m in models if m.get("tisa")}


def _long_inputs(root: Path) -> list[str]:
    """Against the best alternative at each task and length from LONG tokens on."""
    best = []
    for path in (LONGEVAL, LONGEVAL_8192):
        r = read_json(root, path)
        best += [c for c in comparisons(r) if c["best"] and c["length"] >= LONG]
    ahead = [c for c in best if c["p_holm"] < 0.05 and c["mean"] > 0]
    behind = [c for c in best if c["p_holm"] < 0.05 and c["mean"] < 0]
    said = "; ".join(
        f"{c['task']} {grouped(c['length'])} vs {c['against_strategy']}: "
        f"{_interval(c['mean'], c['low'], c['high'])}" for c in behind)
    measured = (f"ahead of the best alternative on {len(ahead)} of {len(best)} task-lengths, "
                f"no difference shown on {len(best) - len(ahead) - len(behind)}, behind on "
                f"{len(behind)}"
                + (f" ({said})" if said else ""))
    measured += _windows(root)
    return [f"long inputs: from {grouped(LONG)} tokens on, ahead of every alternative on "
            "every task (Holm)", measured, "yes" if len(ahead) == len(best) else "no"]


def _windowed(root: Path) -> list[tuple[dict[str, Any], set[str]]]:
    """The runs that read the converted model in windows (``chunk-W``, chosen on held-out
    draws), each with the names of its converted models."""
    runs = []
    for path in WINDOWED:
        r = read_json(root, path)
        runs.append((r, _converted(r["models"])))
    return runs


def _windows(root: Path) -> str:
    """The converted model read in windows against the best alternative of the original."""
    found = [c for r, mine in _windowed(root) for c in comparisons(r)
             if c["strategy"] != "native" and c["best"] and c["against"] not in mine
             and c["length"] >= LONG]
    said = "; ".join(
        f"{c['task']} {grouped(c['length'])} vs {c['against_strategy']}: "
        f"{_interval(c['mean'], c['low'], c['high'])}, {reading(c)}" for c in found)
    strategies = sorted({c["strategy"] for c in found})
    return f"; read as {', '.join(strategies)}: {said}" if found else ""


def _passkey(root: Path) -> list[str]:
    """The lowest depth's passkey Acc@1 of the converted model at each length."""
    lowest: dict[int, float] = {}
    for path in (LONGEVAL, LONGEVAL_8192):
        r = read_json(root, path)
        mine = _converted(r["models"])
        for s in r["summary"]:
            if s["task"] == "passkey" and s["model"] in mine:
                lowest[s["length"]] = min(s["acc1_by_depth"].values())
    short = {n: v for n, v in sorted(lowest.items()) if v < PASSKEY}
    measured = "lowest depth: " + ", ".join(
        f"{100 * v:.1f} at {grouped(n)}" for n, v in sorted(lowest.items()))
    windows = [s for r, mine in _windowed(root) for s in r["summary"]
               if s["task"] == "passkey" and s["model"] in mine and s["strategy"] != "native"]
    if windows:
        measured += "; read as " + ", ".join(
            f"{s['strategy']}: {100 * min(s['acc1_by_depth'].values()):.1f} at "
            f"{grouped(s['length'])}" for s in windows)
    return [f"passkey Acc@1 at least {100 * PASSKEY:.0f}% at every depth up to "
            f"{grouped(max(lowest))} tokens", measured, "no" if short else "yes"]


def _below(task_intervals: list[tuple[str, float, float, float]]) -> list[str]:
    return [f"{label} {_interval(m, lo, hi, 2)}" for label, m, lo, hi in task_intervals
            if hi < 0]


def _glue_protocol(root: Path) -> list[str]:
    """Converted - original on each task of the protocol (5e-5 for both)."""
    rows = {(r["task"], r["variant"]): r for r in read_json(root, GLUE_SUMMARY)["summary"]}
    found = []
    for task, label in GLUE_TASKS:
        q = rows[(task, "converted")]["paired"]
        found.append((label, q["mean_diff"], *q["ci95"]))
    below = _below(found)
    return ["GLUE (5 seeds, paired, the protocol's rate 5e-5 for both): no task's converted - "
            "original interval wholly below 0",
            f"wholly below 0 on {len(below)} of {len(found)} tasks"
            + (f": {'; '.join(below)}" if below else ""), "no" if below else "yes"]


def _glue_per_model(root: Path) -> list[str]:
    """The same at the rate each model's held-out sweep chose, over the tasks both have."""
    found, missing = [], []
    for task, label in GLUE_TASKS:
        a, b = per_model_scores(root, task)
        if len(set(a) & set(b)) < 5:
            missing.append(label)
            continue
        cmp = paired_comparison(a, b)
        found.append((label, cmp["mean_diff"], *cmp["ci95"]))
    below = _below(found)
    measured = (f"wholly below 0 on {len(below)} of the {len(found)} tasks finished by both"
                + (f": {'; '.join(below)}" if below else "")
                + (f"; not finished: {', '.join(missing)}" if missing else ""))
    verdict = "no" if below else ("yes" if not missing else "not yet known")
    return ["GLUE at the rate each model's held-out sweep chose (1e-4 for both): the same",
            measured, verdict]


def _probe(root: Path) -> list[str]:
    """The frozen CoLA probe on the last layer's mean-pooled states: dev, and the split held
    out of train."""
    paired = read_json(root, CONVERT_WORD_ORDER)["paired"]["converted - original"]
    last = max(paired, key=lambda r: r["layer"])
    dev = (last["difference"], *last["interval95"])
    held = []
    for path in (CONVERT_SELECTION, CONVERT_SELECTION_RERUN):
        run = read_json(root, path)["runs"][0]  # the default conversion
        held.append((run["cola_difference"], *run["cola_interval95"]))
    measured = (f"train -> dev: {_interval(*dev)} MCC; held-out part of train, the default "
                "conversion made twice: " + ", ".join(_interval(*h) for h in held))
    within = [abs(d[0]) <= 0.01 for d in (dev, *held)]
    verdict = "yes" if all(within) else ("on dev only" if within[0] else "no")
    return ["frozen embeddings: a logistic-regression probe on mean-pooled embeddings (CoLA) "
            "within 1 point of the original's", measured, verdict]


def _sts(root: Path) -> list[str]:
    """Zero-shot STS-B Spearman of the default conversion as a share of the original's, on
    the pairs held out of train that chose nothing of the defaults."""
    ratios = [read_json(root, p)["runs"][0]["sts_relative"]
              for p in (CONVERT_SELECTION, CONVERT_SELECTION_RERUN)]
    dev = read_json(root, CONVERT)
    dev_ratio = dev["converted"]["sts_spearman"] / dev["original"]["sts_spearman"]
    measured = ("held-out STS-B train pairs, the default conversion made twice: "
                + ", ".join(f"{100 * r:.1f}%" for r in ratios)
                + f" (dev, where the defaults were chosen: {100 * dev_ratio:.1f}%)")
    return ["zero-shot STS-B Spearman at least 99% of the original's on data that chose no "
            "setting", measured, "yes" if min(ratios) >= 0.99 else "no"]


def _time(root: Path) -> list[str]:
    m = read_json(root, CONVERT)
    minutes = (m["timings"]["fit_s"] + m["timings"]["distill_s"]) / 60
    cpu = (m.get("provenance") or {}).get("cpu")
    return ["the default conversion within 30 minutes on a 2-core CPU",
            f"{minutes:.1f} min ({m['environment']['threads']} threads, {cpu})",
            "yes" if minutes <= 30 else "no"]


@table(
    "convert-targets",
    LONGEVAL,
    LONGEVAL_8192,
    *WINDOWED,
    GLUE_SUMMARY,
    *(f"{folder}/runs/*/none/seed-*/result.json" for folder in GLUE_PER_MODEL_RATES.values()),
    CONVERT,
    CONVERT_WORD_ORDER,
    CONVERT_SELECTION,
    CONVERT_SELECTION_RERUN,
)
def convert_targets(root: Path) -> str:
    """The targets of the conversion of all-MiniLM-L6-v2, each with the figures that
    decide it and whether it is met."""
    rows = [_long_inputs(root), _passkey(root), _glue_protocol(root), _glue_per_model(root),
            _probe(root), _sts(root), _time(root)]
    return markdown_table(["target", "measured", "met"], rows, align="lll")
