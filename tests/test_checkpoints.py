"""Run folders: checkpoint names, completeness, the newest checkpoint, reuse/resume/start."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from tisa import checkpoints as ck


def _checkpoint(run: Path, step: int, *, state: bool = True, weights: bool = True) -> Path:
    path = run / f"checkpoint-{step}"
    path.mkdir(parents=True)
    if state:
        (path / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    if weights:
        (path / "model.safetensors").write_bytes(b"\0")
    return path


def test_names_and_steps():
    assert ck.checkpoint_name(12) == "checkpoint-12"
    assert ck.checkpoint_step("checkpoint-12") == 12
    assert ck.checkpoint_step(Path("run") / "checkpoint-007") == 7
    for name in ("checkpoint-", "checkpoint-1a", "xcheckpoint-3", "checkpoint-3.tmp", "model"):
        assert ck.checkpoint_step(name) is None


def test_list_in_step_order_and_only_folders(tmp_path):
    for step in (100, 9, 10):
        _checkpoint(tmp_path, step)
    (tmp_path / "checkpoint-11").write_text("a file, not a checkpoint")
    (tmp_path / "runs").mkdir()
    assert [p.name for p in ck.list_checkpoints(tmp_path)] == [
        "checkpoint-9",
        "checkpoint-10",
        "checkpoint-100",
    ]
    assert ck.list_checkpoints(tmp_path / "missing") == []


def test_incomplete_checkpoints_are_skipped_with_a_warning(tmp_path, caplog):
    _checkpoint(tmp_path, 2)
    _checkpoint(tmp_path, 4, weights=False)
    _checkpoint(tmp_path, 6, state=False)
    assert ck.checkpoint_problems(tmp_path / "checkpoint-2") == []
    assert ck.checkpoint_problems(tmp_path / "checkpoint-4") == [
        "no model weights (model.safetensors or pytorch_model.bin)"
    ]
    assert ck.checkpoint_problems(tmp_path / "checkpoint-6") == ["no trainer_state.json"]
    with caplog.at_level(logging.WARNING, logger="tisa.checkpoints"):
        assert ck.latest_checkpoint(tmp_path) == tmp_path / "checkpoint-2"
    assert "checkpoint-6" in caplog.text and "checkpoint-4" in caplog.text
    assert ck.latest_checkpoint(tmp_path, complete=False) == tmp_path / "checkpoint-6"
    assert ck.trainer_step(tmp_path / "checkpoint-2") == 2


def test_prune_keeps_the_newest(tmp_path):
    for step in (1, 2, 10, 20):
        _checkpoint(tmp_path, step)
    ck.prune_checkpoints(tmp_path, 2)
    assert [p.name for p in ck.list_checkpoints(tmp_path)] == ["checkpoint-10", "checkpoint-20"]
    ck.prune_checkpoints(tmp_path, None)
    assert len(ck.list_checkpoints(tmp_path)) == 2


def test_clear_run_removes_only_the_run(tmp_path):
    _checkpoint(tmp_path, 3)
    (tmp_path / ".staging" / "checkpoint-6").mkdir(parents=True)
    (tmp_path / "model").mkdir()
    (tmp_path / "results.json").write_text("{}")
    (tmp_path / "notes.txt").write_text("mine")
    ck.clear_run(tmp_path, ("model", "results.json", "not-there"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


@pytest.mark.parametrize(
    ("layout", "action"),
    [("nothing", "start"), ("empty", "start"), ("checkpoint", "resume"), ("finished", "reuse")],
)
def test_run_status(tmp_path, layout, action):
    run = tmp_path / "run"
    if layout != "nothing":
        run.mkdir()
    if layout in ("checkpoint", "finished"):
        _checkpoint(run / "checkpoints", 5)
    if layout == "finished":
        (run / "result.json").write_text("{}")
    status = ck.run_status(run, finished="result.json", checkpoints="checkpoints")
    assert status.action == action
    assert status.started == (layout != "nothing")
    assert (status.checkpoint is not None) == (layout in ("checkpoint", "finished"))
