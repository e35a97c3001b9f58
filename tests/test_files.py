"""Atomic writes of files and folders, JSON lines."""

from __future__ import annotations

import math

import numpy as np

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
