"""The thread count a command picks: the cores other work leaves free."""

import subprocess
import sys

import pytest

from tisa import cores


def _stat_files(tmp_path, before: tuple[int, int], after: tuple[int, int]):
    """A /proc/stat that reads (busy, idle) jiffies ``before`` and then ``after``."""
    path = tmp_path / "stat"
    reads = iter([before, after])

    def write(_seconds):
        busy, idle = next(reads)
        path.write_text(f"cpu  {busy} 0 0 {idle} 0 0 0 0 0 0\ncpu0 1 2 3 4\n")

    write(None)
    return path, write


@pytest.mark.parametrize(
    "busy_jiffies, idle_jiffies, free",
    # of 200 jiffies on 2 cores: a core is taken from half a core's worth of other work
    [(0, 200, 2), (40, 160, 2), (60, 140, 1), (100, 100, 1), (200, 0, 1)],
)
def test_free_cores_leaves_out_the_cores_other_work_keeps_busy(
    tmp_path, monkeypatch, busy_jiffies, idle_jiffies, free
):
    monkeypatch.setattr(cores.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(cores, "available_cores", lambda: 2)
    path, advance = _stat_files(tmp_path, (1000, 5000), (1000 + busy_jiffies, 5000 + idle_jiffies))
    monkeypatch.setattr(cores.time, "sleep", advance)
    assert cores.free_cores(stat_path=str(path)) == free


def test_unreadable_load_counts_every_core_as_free(tmp_path, monkeypatch):
    monkeypatch.setattr(cores, "available_cores", lambda: 3)
    assert cores.free_cores(0.0, stat_path=str(tmp_path / "missing")) == 3
    assert cores.busy_cores(0.0, stat_path=str(tmp_path / "missing")) is None


def test_choose_threads_takes_the_users_number_first(monkeypatch):
    monkeypatch.setattr(cores, "available_cores", lambda: 2)
    monkeypatch.setattr(cores, "free_cores", lambda: 1)
    assert cores.choose_threads(3) == (3, "3 threads (as asked)")
    threads, reason = cores.choose_threads(None)
    assert threads == 1 and reason.startswith("1 of 2 cores (1 busy with other work")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/stat")
def test_a_busy_process_is_seen_on_this_machine():
    """A real CPU-bound process beside the measurement adds about one core of work."""
    job = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        busy = cores.busy_cores(0.5)
    finally:
        job.kill()
        job.wait()
    assert busy is not None and busy >= 0.7
