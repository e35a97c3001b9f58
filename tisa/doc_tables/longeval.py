"""Tables of `tisa longeval`: accuracy, paired comparisons and cost against length."""

from __future__ import annotations

import functools
import statistics
from pathlib import Path
from typing import Any

from tisa.doc_tables.base import RESULTS, grouped, read_json, table, x100
from tisa.longeval.results import compare, paired_units
from tisa.reports.markdown import markdown_table
from tisa.stats import holm, paired_difference

LONGEVAL = f"{RESULTS}/longeval/results.json"
#: the second encoder (paraphrase-MiniLM-L3-v2) and its conversion
LONGEVAL_L3 = f"{RESULTS}/longeval/l3/results.json"
#: all-MiniLM-L6-v2 and its conversion at 8,192 tokens (truncate and chunk)
LONGEVAL_8192 = f"{RESULTS}/longeval/8192/results.json"
#: all-MiniLM-L6-v2 chunked and its conversion whole and in windows of 2,048 tokens
LONGEVAL_WINDOWS = f"{RESULTS}/longeval/windows/results.json"
#: ... and the same at 8,192 tokens (passkey)
LONGEVAL_WINDOWS_8192 = f"{RESULTS}/longeval/windows-8192/results.json"


def comparisons(r: dict[str, Any]) -> list[dict[str, Any]]:
    """The paired comparisons of a results.json, computed again from its cells by
    :func:`tisa.longeval.results.compare` (paired by seed, or by cell for a run that drew
    every cell on its own), so that files written before the comparisons were paired by
    seed are read the same way as newer ones."""
    return compare(r["cells"], r["models"], unit=r["settings"].get("draw", "seed"))


def reading(c: dict[str, Any]) -> str:
    """What a comparison row of :func:`tisa.longeval.results.compare` shows after Holm's
    correction: the converted model ahead, behind, or no difference shown."""
    if c["p_holm"] >= 0.05:
        return "no difference shown"
    return "converted ahead" if c["mean"] > 0 else "converted behind"


def who(model: str, strategy: str, models: list[dict[str, Any]]) -> str:
    """A row label: the strategy of the original, or "converted (TISA)"."""
    facts = next((m for m in models if m["name"] == model), {})
    if not facts.get("tisa"):
        return f"original, {strategy}"
    if strategy != "native":  # chunk-W: windows of W tokens, averaged
        return f"converted (TISA), {strategy}"
    window = facts.get("attention_window")
    return "converted (TISA), " + (f"window ±{window}" if window else "whole document")


@table("longeval-accuracy", LONGEVAL)
def longeval_accuracy(root: Path, path: str = LONGEVAL) -> str:
    """Acc@1 per task, model / strategy and length, over depths and seeds."""
    r = read_json(root, path)
    lengths = r["settings"]["lengths"]
    acc = {(s["task"], s["model"], s["strategy"], s["length"]): s["acc1"] for s in r["summary"]}
    rows = []
    for task in r["settings"]["tasks"]:
        pairs = dict.fromkeys((m, st) for (t, m, st, _) in acc if t == task)
        for model, strategy in pairs:
            rows.append([task, who(model, strategy, r["models"]),
                         *[x100(acc.get((task, model, strategy, n)), 1) for n in lengths]])
    columns = ["task", "model, strategy", *[f"{n:,}" for n in lengths]]
    return markdown_table(columns, rows, align="ll" + "r" * len(lengths))


@table("longeval-comparisons", LONGEVAL)
def longeval_comparisons(root: Path, path: str = LONGEVAL) -> str:
    """The converted model minus each alternative per task and length, the best one
    marked; alternatives with the same scores on every cell (every strategy within the
    table) share one row."""
    r = read_json(root, path)
    tasks = r["settings"]["tasks"]
    # a converted model read in windows too (chunk-W): a column says how it was read
    found = comparisons(r)
    own = sorted({c["strategy"] for c in found}) != ["native"]
    rows_by: dict[tuple, list[dict[str, Any]]] = {}
    for c in found:
        same = (tasks.index(c["task"]), c["length"], c["strategy"] if own else "",
                -c["against_acc1"], c["mean"], c["low"])
        rows_by.setdefault(same, []).append(c)
    rows = []
    for key in sorted(rows_by):
        group = rows_by[key]
        c = group[0]
        names = " = ".join(sorted(
            who(x["against"], x["against_strategy"], r["models"]) if own
            else x["against_strategy"] for x in group))
        rows.append([
            c["task"], grouped(c["length"]),
            *([who(c["model"], c["strategy"], r["models"])] if own else []),
            names + (" (best)" if any(x["best"] for x in group) else ""),
            x100(c["acc1"], 1), x100(c["against_acc1"], 1),
            f"{100 * c['mean']:+.1f} [{100 * c['low']:+.1f}, {100 * c['high']:+.1f}]",
            f"{c['p_holm']:.2g}", reading(c),
        ])
    columns = ["task", "length", *(["converted, read as"] if own else []), "alternative",
               "converted Acc@1", "its Acc@1", "difference, 95% interval", "p (Holm)",
               "reading"]
    return markdown_table(columns, rows, align="lr" + ("l" if own else "") + "lrrrrl")


@table("longeval-best", LONGEVAL)
def longeval_best(root: Path, path: str = LONGEVAL) -> str:
    """Past the original's table only: the converted model against the best alternative
    at each task and length (the comparisons marked best), with the corrected reading."""
    r = read_json(root, path)
    tasks = r["settings"]["tasks"]
    found = comparisons(r)
    best = [c for c in found if c["best"] and c["length"] > min(
        m["positions"] or 10**9 for m in r["models"])]
    rows = []
    for c in sorted(best, key=lambda c: (tasks.index(c["task"]), c["length"])):
        rows.append([
            c["task"], grouped(c["length"]), c["against_strategy"], x100(c["against_acc1"], 1),
            x100(c["acc1"], 1),
            f"{100 * c['mean']:+.1f} [{100 * c['low']:+.1f}, {100 * c['high']:+.1f}]",
            f"{c['p_holm']:.2g}", reading(c),
        ])
    columns = ["task", "length", "best alternative", "its Acc@1", "converted Acc@1",
               "difference, 95% interval", "p (Holm)", "reading"]
    strategies = sorted({c["against_strategy"] for c in found})
    note = (f"\n\nAlternatives: the original with {', '.join(strategies)}; Holm over all "
            f"{len(found)} comparisons of the converted model; each paired by "
            f"{r['settings'].get('draw', 'seed')}.\n")
    return markdown_table(columns, rows, align="lrlrrrrl") + note


@table("longeval-cost", LONGEVAL)
def longeval_cost(root: Path, path: str = LONGEVAL) -> str:
    """Seconds and peak memory per document, per strategy and length, and the run."""
    r = read_json(root, path)
    lengths = r["settings"]["lengths"]
    cost: dict[tuple, list[dict[str, Any]]] = {}  # one summary row per task
    for s in r["summary"]:
        cost.setdefault((s["model"], s["strategy"], s["length"]), []).append(s)
    rows = []
    for model, strategy in dict.fromkeys((m, st) for (m, st, _) in cost):
        cells = []
        for n in lengths:
            got = cost.get((model, strategy, n), [])
            secs = [g["seconds_per_document"] for g in got]
            mem = [g["peak_memory_mb"] for g in got if g["peak_memory_mb"] is not None]
            cells.append("n/a" if not secs else
                         f"{1000 * statistics.mean(secs):.0f} ms"
                         + (f", {statistics.mean(mem):.0f} MiB" if mem else ""))
        rows.append([who(model, strategy, r["models"]), *cells])
    prov, st = r["provenance"], r["settings"]
    columns = ["model, strategy", *[f"{n:,}" for n in lengths]]
    note = (f"\n\n{st['candidates']} documents a cell, depths "
            f"{', '.join(f'{d:g}' for d in st['depths'])}, seeds "
            f"{', '.join(map(str, st['seeds']))}; {prov.get('threads')} threads on "
            f"{prov.get('cpu')} ({prov.get('cpu_count')} cores), torch {prov.get('torch')}, "
            f"commit `{(prov.get('commit') or '')[:12]}`; `{prov.get('command')}`\n")
    return markdown_table(columns, rows, align="l" + "r" * len(lengths)) + note


def longeval_depths(root: Path, path: str) -> str:
    """Acc@1 per task, model / strategy and length at each depth (over seeds), and the
    mean over depths."""
    r = read_json(root, path)
    depths = [f"{float(d)}" for d in r["settings"]["depths"]]
    tasks = r["settings"]["tasks"]
    rows = []
    for s in sorted(r["summary"], key=lambda s: (tasks.index(s["task"]), s["length"])):
        by_depth = s["acc1_by_depth"]
        rows.append([s["task"], who(s["model"], s["strategy"], r["models"]),
                     grouped(s["length"]), *[x100(by_depth.get(d), 1) for d in depths],
                     x100(s["acc1"], 1)])
    columns = ["task", "model, strategy", "length", *[f"depth {float(d):g}" for d in depths],
               "mean"]
    return markdown_table(columns, rows, align="llr" + "r" * (len(depths) + 1))


# the same tables for the second encoder
for _name, _render in (("accuracy", longeval_accuracy), ("comparisons", longeval_comparisons),
                       ("best", longeval_best), ("cost", longeval_cost)):
    table(f"longeval-l3-{_name}", LONGEVAL_L3)(functools.partial(_render, path=LONGEVAL_L3))
# ... and for the first at 8,192 tokens
for _name, _render in (("depths", longeval_depths), ("comparisons", longeval_comparisons),
                       ("cost", longeval_cost)):
    table(f"longeval-8192-{_name}", LONGEVAL_8192)(
        functools.partial(_render, path=LONGEVAL_8192))
# ... and read in windows of 2,048 tokens (chunk-2048)
for _name, _render in (("depths", longeval_depths), ("comparisons", longeval_comparisons),
                       ("cost", longeval_cost)):
    table(f"longeval-windows-{_name}", LONGEVAL_WINDOWS)(
        functools.partial(_render, path=LONGEVAL_WINDOWS))
    table(f"longeval-windows-8192-{_name}", LONGEVAL_WINDOWS_8192)(
        functools.partial(_render, path=LONGEVAL_WINDOWS_8192))


LENGTH_SCALE = f"{RESULTS}/longeval/length-scale/selection.json"


def _pairing(rows: list[dict[str, Any]]) -> str:
    """How a file's comparisons were paired: by seed (rows with ``cells``), or, in files
    written before, over depth x seed cells, whose intervals are too narrow."""
    if all("cells" in c for c in rows):
        return f"paired by {rows[0].get('unit', 'seed')}" if rows else "no comparisons"
    n = max(c["n"] for c in rows)
    return (f"paired over {n} depth x seed cells (written before comparisons were paired "
            "by seed; the depths of a seed read the same drawn text, so these intervals are "
            "narrower than pairing by seed gives)")


def _variants_table(s: dict) -> str:
    """The variants of a ``tisa.longeval.variants`` selection minus the model as
    converted: per task and length, and over every held-out cell. (Its first result,
    the length-scale one, names the baseline ``unscaled`` and its rows
    ``against_unscaled``.)"""
    baseline = s.get("baseline", "unscaled")
    against = s["against_baseline"] if "against_baseline" in s else s["against_unscaled"]
    rows = []
    for c in sorted(against, key=lambda c: (c["model"], c["task"], c["length"])):
        rows.append([
            c["model"], c["task"], grouped(c["length"]), x100(c["acc1"], 1),
            x100(c["against_acc1"], 1),
            f"{100 * c['mean']:+.1f} [{100 * c['low']:+.1f}, {100 * c['high']:+.1f}]",
            f"{c['p_holm']:.2g}",
        ])
    for name, means in s["mean_acc1"].items():
        if name != baseline:
            rows.append([name, "every cell", "", x100(means["all"], 1),
                         x100(s["mean_acc1"][baseline]["all"], 1), "", ""])
    columns = ["setting", "task", "length", "its Acc@1", f"{baseline} Acc@1",
               "difference, 95% interval", "p (Holm)"]
    st, prov = s["settings"], s["provenance"]
    note = (f"\n\nHeld-out seeds {', '.join(map(str, st['seeds']))}, depths "
            f"{', '.join(f'{d:g}' for d in st['depths'])}, {st['candidates']} documents a "
            f"cell; Holm over the {len(against)} comparisons; {_pairing(against)}; chosen: "
            f"`{s['chosen']}`; {prov.get('cpu')}, commit `{(prov.get('commit') or '')[:12]}`, "
            f"`{prov.get('command')}`\n")
    return markdown_table(columns, rows, align="lllrrrr") + note


@table("longeval-length-scale", LENGTH_SCALE)
def longeval_length_scale(root: Path) -> str:
    """The converted model with each log-n scaling setting minus the unscaled one, on the
    held-out seeds of ``experiments/length_scale.py``, and the setting it chose."""
    return _variants_table(read_json(root, LENGTH_SCALE))


FAR_WINDOW = f"{RESULTS}/longeval/far-window/selection.json"


@table("longeval-far-window", FAR_WINDOW)
def longeval_far_window(root: Path) -> str:
    """The converted model with an attention window minus the model as converted, on the
    held-out seeds of ``experiments/far_window.py``, and the setting it chose."""
    return _variants_table(read_json(root, FAR_WINDOW))


ATTENTION_WINDOW = f"{RESULTS}/longeval/attention-window/selection.json"


@table("longeval-attention-window", ATTENTION_WINDOW)
def longeval_attention_window(root: Path) -> str:
    """The converted model with a hard attention window minus the model as converted, on
    the held-out seeds of ``experiments/attention_window.py``, and the setting it chose."""
    return _variants_table(read_json(root, ATTENTION_WINDOW))


#: the conversion with the long-input term against the default, held out
#: (``experiments/long_distill.py``)
LONG_DISTILL = f"{RESULTS}/longeval/long-distill/selection.json"


@table("longeval-long-distill", LONG_DISTILL)
def longeval_long_distill(root: Path) -> str:
    """The conversion distilled on long blocks too minus the default conversion, on the
    held-out seeds of ``experiments/long_distill.py``, and the choice."""
    return _variants_table(read_json(root, LONG_DISTILL))


#: the long-input term on every third step only against the default, held out
#: (``experiments/long_distill.py`` with ``--variants le3=@... default``)
LONG_EVERY = f"{RESULTS}/longeval/long-every/selection.json"


@table("longeval-long-every", LONG_EVERY)
def longeval_long_every(root: Path) -> str:
    """The conversion distilled on long blocks on every third step (``--long-weight 1
    --long-every 3``) minus the default conversion, on the held-out seeds of
    ``experiments/long_distill.py``."""
    return _variants_table(read_json(root, LONG_EVERY))


#: the converted model read in windows of W tokens against the whole document, held out
#: (``experiments/chunk_windows.py``)
CHUNK_WINDOWS = f"{RESULTS}/longeval/chunk-windows/selection.json"


@table("longeval-chunk-windows", CHUNK_WINDOWS)
def longeval_chunk_windows(root: Path) -> str:
    """The converted model read in windows of W tokens (``chunk-W``) minus the whole
    document, on the held-out seeds of ``experiments/chunk_windows.py``, and the choice."""
    return _variants_table(read_json(root, CHUNK_WINDOWS))


#: the conversion chosen on held-out long documents (--content-offsets 16 --long-weight 1
#: --long-every 3), its whole document against chunking the original on the reported seeds
LONGEVAL_CLIP_COMB = f"{RESULTS}/longeval/clip-comb/results.json"

table("longeval-clip-comb-depths", LONGEVAL_CLIP_COMB)(
    functools.partial(longeval_depths, path=LONGEVAL_CLIP_COMB))


def _cells(r: dict[str, Any], *, tisa: bool,
           strategy: str) -> dict[tuple[str, int], dict[tuple[float, int], float]]:
    """Acc@1 per (task, length), by (depth, seed), of the converted model (``tisa``) or
    the original read with ``strategy``."""
    mine = {m["name"] for m in r["models"] if bool(m.get("tisa")) == tisa}
    out: dict[tuple[str, int], dict[tuple[float, int], float]] = {}
    for c in r["cells"]:
        if c["model"] in mine and c["strategy"] == strategy:
            out.setdefault((c["task"], c["length"]), {})[(c["depth"], c["seed"])] = c["acc1"]
    return out


def conversion_against(root: Path, variant_path: str,
                       others: list[tuple[str, str, bool, str]]) -> str:
    """A conversion read whole (the converted model of ``variant_path``) against readings
    in other results files of the same cells (the same tasks, lengths, depths and seeds,
    so the same documents): each ``(label, path, tisa, strategy)`` on the tasks and
    lengths both have, the conversion minus it, paired by seed (each seed's depths
    averaged), Holm over every row."""
    variant = _cells(read_json(root, variant_path), tisa=True, strategy="native")
    rows = []
    for label, path, tisa, strategy in others:
        other = _cells(read_json(root, path), tisa=tisa, strategy=strategy)
        for key in sorted(set(variant) & set(other), key=lambda k: (k[1], k[0])):
            a, b, _ = paired_units(variant[key], other[key], "seed")
            rows.append((label, key, a, b, paired_difference(a, b)))
    adjusted = holm([d.p for *_, d in rows])
    out = []
    for (label, (task, length), a, b, d), p in zip(rows, adjusted, strict=True):
        mean = 0.0 if abs(d.mean) < 5e-4 else d.mean  # no "-0.0" for a rounding residue
        out.append([task, grouped(length), label, x100(statistics.fmean(a), 1),
                    x100(statistics.fmean(b), 1),
                    f"{100 * mean:+.1f} [{100 * d.low:+.1f}, {100 * d.high:+.1f}]",
                    f"{p:.2g}", str(d.n)])
    columns = ["task", "length", "against", "chosen conversion, whole", "its Acc@1",
               "difference, 95% interval", "p (Holm)", "seeds"]
    return markdown_table(columns, out, align="lrlrrrrr")


@table("longeval-clip-comb-against", LONGEVAL_CLIP_COMB, LONGEVAL, LONGEVAL_WINDOWS)
def longeval_clip_comb_against(root: Path) -> str:
    """The chosen conversion read whole against chunking the original (the main run's
    cells) and against the default conversion read whole (its AMD weights, the windows
    run's cells, 4,096 tokens), on the reported seeds."""
    return conversion_against(root, LONGEVAL_CLIP_COMB, [
        ("original, chunk", LONGEVAL, False, "chunk"),
        ("default conversion, whole", LONGEVAL_WINDOWS, True, "native"),
    ])
