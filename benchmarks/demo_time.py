"""How long `tisa demo` takes, as a new user meets it: the median of several fresh runs.

    python benchmarks/demo_time.py --runs 3 --output benchmarks/results/demo

Each run is `tisa demo` in a new output folder with a new, empty cache (`TISA_CACHE_DIR`),
so nothing is reused between runs: the tokenizer is trained, the models are built and the
runs train from scratch, as on a fresh clone. Wall clock per run, the demo's own time per
stage, and the 1-minute load average before each run (a machine otherwise idle shows about
0) go to ``timing.json`` after every run, so an interrupted measurement keeps its finished
runs and a rerun adds the missing ones; ``demo.json`` of the last run (the demo's figures,
among them the TI over training) is kept beside it.

    python benchmarks/demo_time.py --runs 3 --busy 1 --output benchmarks/results/demo

measures the same while other CPU-bound work shares the machine: ``--busy N`` starts N
processes that multiply matrices on one thread each for the whole of every run, and
writes ``timing-busy.json``. On a 2-core machine ``--busy 1`` takes one of the cores, and
the demo, which counts the cores other work leaves free when it starts, runs torch on the
other one; each run's thread count is recorded.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from tisa.timing import check_timing_options, load_average, read_runs, write_timing

ROOT = Path(__file__).resolve().parent.parent

#: One competing job: square matrix products on one thread, until it is killed.
_BUSY_LOOP = (
    "import torch\n"
    "torch.set_num_threads(1)\n"
    "a = torch.randn(512, 512)\n"
    "while True:\n"
    "    a = torch.tanh(a @ a)\n"
)


@contextmanager
def _busy(processes: int):
    """``processes`` CPU-bound jobs running beside the block, stopped when it ends."""
    jobs = [
        subprocess.Popen([sys.executable, "-c", _BUSY_LOOP], stdout=subprocess.DEVNULL)
        for _ in range(processes)
    ]
    try:
        time.sleep(2 if jobs else 0)  # let them start before the clock does
        yield
    finally:
        for job in jobs:
            job.kill()
            job.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="fresh demo runs in all (default 3)")
    parser.add_argument("--output", type=Path, default=ROOT / "benchmarks/results/demo",
                        help="folder of timing.json and demo.json")
    parser.add_argument("--busy", type=int, default=0, metavar="N",
                        help="run N one-thread CPU-bound jobs beside every demo and write "
                             "timing-busy.json (default 0: the machine to itself)")
    args = parser.parse_args(argv)
    problem = check_timing_options("demo_time", args.runs, args.output)
    if problem is None and args.busy < 0:
        problem = f"demo_time: error: --busy must be 0 or more, got {args.busy}"
    if problem:
        print(problem, file=sys.stderr)
        return 2

    path = args.output / ("timing-busy.json" if args.busy else "timing.json")
    runs = read_runs(path)
    while len(runs) < args.runs:
        with tempfile.TemporaryDirectory(prefix="tisa-demo-time-") as tmp:
            env = {**os.environ, "TISA_CACHE_DIR": str(Path(tmp) / "cache")}
            load = load_average()
            with _busy(args.busy):
                start = time.perf_counter()
                subprocess.run(
                    [sys.executable, "-m", "tisa.cli", "demo",
                     "--output-dir", str(Path(tmp) / "demo")],
                    cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL,
                )
                wall = time.perf_counter() - start
            demo = json.loads((Path(tmp) / "demo" / "demo.json").read_text())
            if not args.busy:  # the figures of the last run, its temporary folder unnamed
                args.output.mkdir(parents=True, exist_ok=True)
                text = (Path(tmp) / "demo" / "demo.json").read_text()
                (args.output / "demo.json").write_text(text.replace(tmp, "$TMPDIR"))
        ti = demo.get("ti_over_training") or {}
        offdiag = ti.get("ti_gram_offdiag") or [None]
        nulls = ((ti.get("nulls") or {}).get("ti_gram_offdiag") or [None])[-1]
        runs.append({
            "wall_s": round(wall, 1),
            "load_before": load,
            "stages_s": demo["stages_s"],
            # the demo uses the cores other work leaves free (tisa.cores)
            "threads": (demo.get("provenance") or {}).get("threads"),
            # how far this run's TI over training rose (it varies from run to run)
            "ti_offdiag_first_last": [offdiag[0], offdiag[-1]],
            "ti_offdiag_last_null_z": None if nulls is None else min(
                nulls["random"]["z"], nulls["shuffled"]["z"]
            ),
        })
        write_timing(path, runs, busy_processes=args.busy)
        print(f"run {len(runs)}: {wall:.0f} s (load before {load})", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
