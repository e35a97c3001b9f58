"""How long the README's test command takes: the median of several runs.

    python benchmarks/test_time.py --runs 3 --output benchmarks/results/tests

Each run is ``python -m pytest --durations=20`` (the default tier, one worker per core,
as the README runs it) from the repository root. Wall clock, the outcome counts pytest
prints, the 1-minute load average before the run (a machine otherwise idle shows about
0) and the twenty slowest test phases of the run go to ``timing.json`` after every run, so
an interrupted measurement keeps its finished runs and a rerun adds the missing ones. A
run that fails stops the measurement: a failing suite has no time worth quoting.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from tisa.timing import (
    check_timing_options,
    load_average,
    parse_pytest_output,
    read_runs,
    write_timing,
)

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="test runs in all (default 3)")
    parser.add_argument("--output", type=Path, default=ROOT / "benchmarks/results/tests",
                        help="folder of timing.json")
    args = parser.parse_args(argv)
    problem = check_timing_options("test_time", args.runs, args.output)
    if problem:
        print(problem, file=sys.stderr)
        return 2

    path = args.output / "timing.json"
    runs = read_runs(path)
    while len(runs) < args.runs:
        load = load_average()
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--durations=20"],
            cwd=ROOT, capture_output=True, text=True,
        )
        wall = time.perf_counter() - start
        if done.returncode != 0:
            print(done.stdout[-3000:], file=sys.stderr)
            print(f"test_time: error: the tests failed (exit {done.returncode}); nothing "
                  "recorded for this run", file=sys.stderr)
            return 1
        outcome = parse_pytest_output(done.stdout)
        runs.append({"wall_s": round(wall, 1), "load_before": load, **outcome})
        write_timing(path, runs, command="python -m pytest")
        print(f"run {len(runs)}: {wall:.0f} s (load before {load})", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
