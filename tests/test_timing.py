"""The timing files of the timing benchmarks: median and range, options, pytest's output."""

from __future__ import annotations

import json

import pytest

from tisa.timing import check_timing_options, parse_pytest_output, read_runs, write_timing

OUTPUT = """\
============================= slowest 20 durations =============================
13.56s setup    tests/cli/test_console.py::test_quiet
6.43s call     tests/glue/test_run.py::test_kill
0.01s teardown tests/test_x.py::test_y
=========== 1011 passed, 2 skipped, 30 warnings in 81.06s (0:01:21) ============
"""


def test_pytest_output_gives_counts_and_slowest_phases():
    got = parse_pytest_output(OUTPUT)
    assert got["counts"] == {"passed": 1011, "skipped": 2, "warnings": 30}
    assert got["slowest"][0] == {
        "seconds": 13.56, "phase": "setup", "test": "tests/cli/test_console.py::test_quiet"
    }
    assert [s["phase"] for s in got["slowest"]] == ["setup", "call", "teardown"]
    failed = parse_pytest_output("==== 1 failed, 3 passed in 2.00s ====")
    assert failed["counts"] == {"failed": 1, "passed": 3} and failed["slowest"] == []
    with pytest.raises(ValueError, match="no summary"):
        parse_pytest_output("interrupted")


def test_timing_file_keeps_every_run_with_median_and_range(tmp_path):
    path = tmp_path / "timing.json"
    assert read_runs(path) == []
    write_timing(path, [{"wall_s": 3.0}, {"wall_s": 1.0}, {"wall_s": 10.0}], command="x")
    data = json.loads(path.read_text())
    assert (data["median_s"], data["min_s"], data["max_s"]) == (3.0, 1.0, 10.0)
    assert data["command"] == "x" and "commit" in data["provenance"]
    assert len(read_runs(path)) == 3


def test_bad_options_are_one_line(tmp_path):
    assert check_timing_options("t", 3, tmp_path) is None
    assert check_timing_options("t", 0, tmp_path) == "t: error: --runs must be at least 1, got 0"
    file = tmp_path / "f"
    file.write_text("")
    assert "is a file, not a folder" in check_timing_options("t", 1, file)
