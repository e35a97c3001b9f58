"""Wall clock of whole commands, as the timing benchmarks record it
(``benchmarks/demo_time.py``, ``benchmarks/test_time.py``): the load average before a run
and a timing file with every run, the median and the range, rewritten after each run so
that an interrupted measurement keeps its finished runs.
"""

from __future__ import annotations

import json
import os
import re
import statistics
from pathlib import Path
from typing import Any

from tisa.files import write_json
from tisa.provenance import run_metadata

__all__ = [
    "check_timing_options",
    "load_average",
    "parse_pytest_output",
    "read_runs",
    "write_timing",
]


def load_average() -> float | None:
    """The 1-minute load average (about 0 on an idle machine); None where unknown."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def check_timing_options(prog: str, runs: int, output: Path) -> str | None:
    """The one-line error for a bad ``--runs`` or ``--output``, or None."""
    if runs < 1:
        return f"{prog}: error: --runs must be at least 1, got {runs}"
    if output.exists() and not output.is_dir():
        return f"{prog}: error: --output {output} is a file, not a folder"
    return None


def read_runs(path: Path) -> list[dict[str, Any]]:
    """The runs a timing file already holds (none when it does not exist)."""
    return json.loads(path.read_text())["runs"] if path.is_file() else []


def write_timing(path: Path, runs: list[dict[str, Any]], **fields: Any) -> Path:
    """Writes ``runs`` (each with ``wall_s``), ``fields``, the median, minimum and maximum
    wall clock and the provenance to ``path`` (its folder made if needed; atomically)."""
    walls = [r["wall_s"] for r in runs]
    return write_json(path, {
        **fields,
        "runs": runs,
        "median_s": statistics.median(walls),
        "min_s": min(walls),
        "max_s": max(walls),
        "provenance": run_metadata(),
    })


#: "812 passed, 25 skipped, 3 deselected in 160.52s (0:02:40)"
_SUMMARY = re.compile(r"=+ (?P<counts>\d+ \w+(?:, \d+ \w+)*) in [\d.]+s")
#: "25.51s call     tests/demo/test_console.py::test_quiet"
_DURATION = re.compile(r"^(?P<seconds>[\d.]+)s (?P<phase>setup|call|teardown)\s+(?P<test>\S+)")


def parse_pytest_output(output: str) -> dict[str, Any]:
    """Outcome counts (``{"passed": 812, ...}``) and the ``--durations`` rows (slowest
    first) of one pytest run's output.

    Raises:
        ValueError: no summary line (the run did not finish).
    """
    found = _SUMMARY.findall(output)
    if not found:
        raise ValueError("pytest printed no summary line")
    counts = {}
    for part in found[-1].split(", "):
        n, what = part.split(" ")
        counts[what] = int(n)
    slowest = [
        {"seconds": float(m["seconds"]), "phase": m["phase"], "test": m["test"]}
        for m in map(_DURATION.match, output.splitlines())
        if m
    ]
    return {"counts": counts, "slowest": slowest}
