"""Tables of attention speed: `tisa bench attention`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tisa.doc_tables.base import RESULTS, read_json, table
from tisa.reports.markdown import markdown_table

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


@table("attention-speed", *ATTENTION)
def attention_speed(root: Path) -> str:
    """The sdpa path with the RBF bias against SDPA without bias, both layouts."""
    body = []
    for path in ATTENTION:
        data = read_json(root, path)
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


@table("attention-settings", *ATTENTION)
def attention_settings(root: Path) -> str:
    """How the attention figures were measured."""
    rows = []
    for path in ATTENTION:
        data = read_json(root, path)
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


ATTENTION_WINDOW = f"{RESULTS}/bench/attention-window.json"


@table("attention-window-speed", ATTENTION_WINDOW)
def attention_window_speed(root: Path) -> str:
    """TISA with a ±255 attention window against full TISA and SDPA, by pass and length."""
    data = read_json(root, ATTENTION_WINDOW)
    rows = {(r["pass"], r["length"], r["variant"]): r for r in data["rows"]}
    body = []
    for pass_, length in sorted({(p, n) for p, n, _ in rows}, key=lambda x: (x[0] == "fwd", x[1])):
        base = rows[(pass_, length, "sdpa, no bias (baseline)")]
        full = rows[(pass_, length, "sdpa + rbf")]
        window = rows[(pass_, length, "sdpa + rbf, window ±255")]
        body.append([
            pass_, f"{length:,}", f"{1000 * base['seconds']:.0f} ms",
            *(f"{r['time_ratio']:.2f}x ({r['time_ratio_low']:.2f}-{r['time_ratio_high']:.2f})"
              for r in (full, window)),
            *(f"{r['peak_bytes'] / 2**20:.1f} MiB" for r in (base, full, window)),
        ])
    columns = ["pass", "L", "SDPA, no bias", "sdpa + rbf / SDPA", "window ±255 / SDPA",
               "peak: SDPA", "sdpa + rbf", "window ±255"]
    return markdown_table(columns, body, align="lrrrrrrr") + _run_note(data)


def _run_note(data: dict[str, Any], shapes_note: str = "", runs_note: str = "") -> str:
    """How a `tisa bench attention --json` run measured: shapes, runs, machine, command."""
    c, m = data["config"], data["provenance"]
    return (f"\n\nB={c['batch']}, H={c['heads']}, D={c['head_dim']}{shapes_note}; median of "
            f"{c['runs']} runs of {c['repeats']} rounds (range over runs){runs_note}; "
            f"{c['clock']} clock, {m.get('threads')} threads on {m.get('cpu')} "
            f"({m.get('cpu_count')} cores), torch {m.get('torch')}, commit "
            f"`{(m.get('commit') or '')[:12]}`; `{m.get('command')}`\n")


ATTENTION_CONTENT = f"{RESULTS}/bench/attention-content.json"
CONTENT_VARIANTS = {"band": "sdpa + rbf + content ±16, band",
                    "zero": "sdpa + rbf + content ±16 (zero beyond), band",
                    "dense": "sdpa + rbf + content ±16, dense"}


@table("attention-content-speed", ATTENTION_CONTENT)
def attention_content_speed(root: Path) -> str:
    """TISA with a relative content term over ±16 offsets, from its band (inference) and as
    a dense term (training), against TISA alone and SDPA, by pass and length."""
    data = read_json(root, ATTENTION_CONTENT)
    rows = {(r["pass"], r["length"], r["variant"]): r for r in data["rows"]}

    def ratio(pass_, length, variant):
        r = rows.get((pass_, length, variant))
        if r is None:
            return "-"
        return f"{r['time_ratio']:.2f}x ({r['time_ratio_low']:.2f}-{r['time_ratio_high']:.2f})"

    def peak(pass_, length, variant):
        r = rows.get((pass_, length, variant))
        return "-" if r is None or r["peak_bytes"] is None else f"{r['peak_bytes'] / 2**20:.1f} MiB"

    body = []
    for pass_, length in sorted({(p, n) for p, n, _ in rows}, key=lambda x: (x[0] == "fwd", x[1])):
        base = rows[(pass_, length, "sdpa, no bias (baseline)")]
        names = ("sdpa + rbf", CONTENT_VARIANTS["band"], CONTENT_VARIANTS["zero"],
                 CONTENT_VARIANTS["dense"])
        body.append([pass_, f"{length:,}", f"{1000 * base['seconds']:.0f} ms",
                     *(ratio(pass_, length, n) for n in names),
                     *(peak(pass_, length, n) for n in ("sdpa + rbf", CONTENT_VARIANTS["band"],
                                                        CONTENT_VARIANTS["dense"]))])
    columns = ["pass", "L", "SDPA, no bias", "sdpa + rbf / SDPA", "+ clipped term, band",
               "+ zero-beyond term, band", "+ clipped term, dense", "peak: sdpa + rbf",
               "clipped, band", "clipped, dense"]
    note = _run_note(data, "; each ratio against SDPA without a bias",
                     "; - where a variant was not run (dense beyond 4,096; band in training)")
    return markdown_table(columns, body, align="lrrrrrrrrr") + note
