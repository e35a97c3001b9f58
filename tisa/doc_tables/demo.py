"""Tables of the first hour: the demo's and the test command's time, the demo's TI over training."""

from __future__ import annotations

from pathlib import Path

from tisa.doc_tables.base import RESULTS, read_json, table
from tisa.reports.markdown import markdown_table

DEMO_TIMING = f"{RESULTS}/demo/timing.json"
DEMO_TIMING_BUSY = f"{RESULTS}/demo/timing-busy.json"
#: the same idle measurement on a CPU of another make (``--output`` of its own)
DEMO_TIMING_EPYC = f"{RESULTS}/demo/epyc/timing.json"
DEMO = f"{RESULTS}/demo/demo.json"


def _mmss(s: float) -> str:
    whole = int(round(s))
    return f"{whole // 60} min {whole % 60:02d} s"


@table("demo-time", DEMO_TIMING, DEMO_TIMING_BUSY, DEMO_TIMING_EPYC)
def demo_time(root: Path) -> str:
    """The wall clock of fresh `tisa demo` runs, idle and beside other jobs, on each CPU
    measured: median, range, and the ratio to the idle median of the same CPU."""
    body = []
    idle: dict[str, float] = {}
    for name in (DEMO_TIMING, DEMO_TIMING_BUSY, DEMO_TIMING_EPYC):
        if name != DEMO_TIMING and not (root / name).is_file():
            continue
        data = read_json(root, name)
        runs = data["runs"]
        m = data.get("provenance") or {}
        busy = data.get("busy_processes") or 0
        label = (f"beside {busy} one-thread CPU-bound job{'s' if busy != 1 else ''}"
                 if busy else "to itself")
        loads = [r["load_before"] for r in runs if r.get("load_before") is not None]
        threads = sorted({r["threads"] for r in runs if r.get("threads") is not None})
        machine = f"{m.get('cpu_count')} cores, {m.get('cpu')}"
        if not busy:
            idle.setdefault(machine, data["median_s"])
        ratio = (f"{data['median_s'] / idle[machine]:.2f}x" if machine in idle
                 else "no idle run")
        body.append([
            label, len(runs), _mmss(data["median_s"]),
            f"{_mmss(data['min_s'])} - {_mmss(data['max_s'])}", ratio,
            ", ".join(map(str, threads)) or "not recorded",
            f"{max(loads):.2f}" if loads else "n/a", machine,
        ])
    columns = ["machine shared", "fresh runs", "median", "range", "of the idle median",
               "torch threads", "highest load before a run", "machine"]
    return markdown_table(columns, body, align="lrrrrrrl")


TEST_TIMING = f"{RESULTS}/tests/timing.json"


@table("test-time", TEST_TIMING)
def test_time(root: Path) -> str:
    """The wall clock of the README's test command: median, range, counts, machine."""
    data = read_json(root, TEST_TIMING)
    runs, m = data["runs"], data.get("provenance") or {}
    counts = runs[-1]["counts"]
    loads = [r["load_before"] for r in runs if r.get("load_before") is not None]
    row = [
        f"`{data['command']}`", len(runs), _mmss(data["median_s"]),
        f"{_mmss(data['min_s'])} - {_mmss(data['max_s'])}",
        ", ".join(f"{n} {what}" for what, n in counts.items()),
        "n/a" if not loads else f"{max(loads):.2f}",
        f"{m.get('cpu_count')} cores, {m.get('cpu')}",
    ]
    columns = ["command", "runs", "median", "range", "outcome (last run)",
               "highest load before a run", "machine"]
    return markdown_table(columns, [row], align="lrrrlrl")


@table("demo-ti-over-training", DEMO)
def demo_ti_over_training(root: Path) -> str:
    """TI of the demo's tiny absolute run at each checkpoint, with its null."""
    t = read_json(root, DEMO)["ti_over_training"]
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
