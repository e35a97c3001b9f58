"""Atomic writes of files and folders, JSON lines."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tisa import files


def test_json_ready_and_write_json(tmp_path):
    data = {1: np.float32(0.5), "nan": math.nan, "n": np.int64(3), "t": (1, 2)}
    assert files.json_ready(data) == {"1": 0.5, "nan": None, "n": 3, "t": [1, 2]}
    path = files.write_json(tmp_path / "sub" / "x.json", data)
    assert path.read_text().startswith("{\n") and not (tmp_path / "sub" / "x.json.tmp").exists()


def test_jsonl_round_trip_skips_a_line_cut_short(tmp_path):
    path = tmp_path / "log.jsonl"
    assert files.read_jsonl(path) == []
    files.append_jsonl(path, {"step": 1})
    files.append_jsonl(path, {"step": 2})
    with open(path, "a") as fh:
        fh.write('{"step": 3, "lo')  # a killed writer
    assert files.read_jsonl(path) == [{"step": 1}, {"step": 2}]


def test_replace_folder_moves_a_whole_folder(tmp_path):
    staged = tmp_path / ".staging" / "checkpoint-4"
    staged.mkdir(parents=True)
    (staged / "a.bin").write_bytes(b"new")
    final = tmp_path / "checkpoint-4"
    final.mkdir()
    (final / "old.bin").write_bytes(b"old")  # the same step saved before
    assert files.replace_folder(staged, final) == final
    assert [p.name for p in final.iterdir()] == ["a.bin"] and not staged.exists()


def test_concurrent_writers_of_one_file_never_collide(tmp_path):
    """Processes sharing an output folder rewrite the same tables: each write is whole."""
    import multiprocessing as mp

    target = tmp_path / "table.md"
    ctx = mp.get_context("spawn")
    with ctx.Pool(2) as pool:
        pool.starmap(_write_many, [(str(target), "a"), (str(target), "b")])
    assert target.read_text() in ("a" * 1000, "b" * 1000)
    assert [p.name for p in tmp_path.iterdir()] == ["table.md"]  # no temporary file left


def _write_many(path: str, letter: str) -> None:
    from tisa.files import write_atomic

    for _ in range(50):
        write_atomic(path, letter * 1000)


# ------------------------------------------------------------------------ run folder lock

_HOLDER = """
import sys, time
from tisa.files import RunLock
RunLock(sys.argv[1], shared=sys.argv[2] == "shared").acquire()
print("held", flush=True)
time.sleep(120)
"""


def _holder(folder: Path, mode: str = "exclusive") -> subprocess.Popen:
    """Another process that holds ``folder``'s lock (``mode``: exclusive or shared)."""
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(folder), mode],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout.readline().strip() == "held"
    return proc


@pytest.fixture
def held_folder(tmp_path):
    """A run folder whose lock another (live) process holds: (folder, process)."""
    folder = tmp_path / "run"
    proc = _holder(folder)
    try:
        yield folder, proc
    finally:
        proc.kill()
        proc.wait()


def test_shared_holds_admit_each_other_and_refuse_an_exclusive_one(tmp_path):
    folder = tmp_path / "run"
    proc = _holder(folder, "shared")
    try:
        with pytest.raises(ValueError, match="in use by another run"):
            files.RunLock(folder).acquire()  # exclusive: refused while shared holds last
        lock = files.RunLock(folder, shared=True)
        assert lock.acquire() and lock.held  # a second shared hold is fine
        lock.release()
        assert folder.is_dir()  # a shared hold never removes the folder
    finally:
        proc.kill()
        proc.wait()
    lock = files.RunLock(folder)
    assert lock.acquire()  # the shared holder is gone
    lock.release()


def test_a_shared_hold_is_refused_while_an_exclusive_one_holds(held_folder):
    folder, holder = held_folder
    with pytest.raises(ValueError, match=rf"in use by another run \(process {holder.pid}\)"):
        files.RunLock(folder, shared=True).acquire()


def test_a_second_run_is_refused_and_a_dead_runs_lock_is_taken_over(held_folder):
    folder, holder = held_folder
    with pytest.raises(
        ValueError, match=rf"output_dir: .* is in use by another run \(process {holder.pid}\)"
    ):
        files.RunLock(folder).acquire()
    with pytest.raises(ValueError, match="in use by another run"):
        with files.RunLock(folder):  # the folder exists: taken (and refused) at once
            pass
    holder.send_signal(signal.SIGKILL)  # dies holding it: the kernel lets the lock go
    holder.wait()
    lock = files.RunLock(folder)
    assert lock.acquire() and lock.held
    assert (folder / files.LOCK_FILE).read_text().strip() == str(os.getpid())
    again = files.RunLock(folder)  # re-entrant within one process
    assert again.acquire()
    again.release()
    assert files._HELD  # still held by the first
    lock.release()
    assert not files._HELD


def test_a_lock_on_a_missing_folder_waits_for_its_creation(tmp_path):
    folder = tmp_path / "new" / "run"
    with files.RunLock(folder) as lock:
        assert not lock.held and not folder.exists()  # nothing created by a check that fails
        assert lock.acquire() and folder.is_dir()
    assert not lock.held and not files._HELD
    assert not folder.exists()  # created for a run that wrote nothing: removed again
    with files.RunLock(folder) as lock:
        lock.acquire()
        (folder / "metrics.json").write_text("{}")
    assert (folder / "metrics.json").is_file()  # a folder with results stays
    with files.RunLock(folder) as lock:
        assert lock.held  # existed: taken at once
    assert (folder / files.LOCK_FILE).is_file()


@pytest.mark.parametrize(
    "argv",
    [
        ["pretrain"],
        ["glue", "--model", "some/model", "--task", "rte"],
        ["convert", "some/model"],
    ],
)
def test_commands_refuse_a_folder_in_use_in_one_line(held_folder, argv, capsys):
    from tisa.cli import main

    folder, holder = held_folder
    assert main([*argv, "--output-dir", str(folder)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"tisa {argv[0]}: error: output_dir: ") and "\n" not in err
    assert f"in use by another run (process {holder.pid})" in err
