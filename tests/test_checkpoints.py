"""Run folders: checkpoint names, completeness, the newest checkpoint, reuse/resume/start."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from tisa import checkpoints as ck


def _checkpoint(run: Path, step: int, *, state: bool = True, weights: bool = True) -> Path:
    """A checkpoint folder as the Trainer writes it: state, weights, optimiser, RNG."""
    path = run / f"checkpoint-{step}"
    path.mkdir(parents=True)
    if state:
        (path / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    if weights:
        save_file({"w": torch.arange(300.0), "b": torch.ones(7)}, path / "model.safetensors")
    torch.save({"state": {0: torch.zeros(50)}}, path / "optimizer.pt")
    torch.save({"python": list(range(20))}, path / "rng_state.pth")
    return path


def _cut(path: Path, keep: int | None = None) -> None:
    """Truncates a file to ``keep`` bytes (default: half of it)."""
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2 if keep is None else keep])


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


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (lambda c: _cut(c / "model.safetensors"), r"model.safetensors is cut short \(\d"),
        (lambda c: _cut(c / "model.safetensors", 5), "model.safetensors is damaged"),
        (lambda c: _cut(c / "model.safetensors", 0), "model.safetensors is empty"),
        (lambda c: _cut(c / "optimizer.pt"), "optimizer.pt is damaged or cut short"),
        (lambda c: _cut(c / "rng_state.pth", 0), "rng_state.pth is empty"),
        (lambda c: (c / "trainer_state.json").write_text(""), "trainer_state.json is empty"),
        (lambda c: _cut(c / "trainer_state.json"), "trainer_state.json is not valid JSON"),
        (
            lambda c: (c / "trainer_state.json").write_text("{}"),
            "trainer_state.json records no global_step",
        ),
    ],
)
def test_damaged_newest_checkpoint_falls_back_and_names_the_file(tmp_path, caplog, damage, problem):
    _checkpoint(tmp_path, 3)
    newest = _checkpoint(tmp_path, 6)
    assert ck.checkpoint_problems(newest) == []
    damage(newest)
    (found,) = ck.checkpoint_problems(newest)
    assert re.match(problem, found)
    with caplog.at_level(logging.WARNING, logger="tisa.checkpoints"):
        assert ck.latest_checkpoint(tmp_path) == tmp_path / "checkpoint-3"
    assert f"skipping checkpoint {newest}: {found}" in caplog.text
    with pytest.raises(ValueError, match=rf"resume: '{newest}' is not a complete checkpoint: "):
        ck.check_checkpoint(newest)
    assert ck.check_checkpoint(tmp_path / "checkpoint-3") == tmp_path / "checkpoint-3"


def test_sharded_weights_need_every_shard(tmp_path):
    path = _checkpoint(tmp_path, 1, weights=False)
    save_file({"w": torch.ones(3)}, path / "model-00001-of-00002.safetensors")
    index = {
        "weight_map": {
            "w": "model-00001-of-00002.safetensors",
            "v": "model-00002-of-00002.safetensors",
        }
    }
    (path / "model.safetensors.index.json").write_text(json.dumps(index))
    assert ck.checkpoint_problems(path) == [
        "model.safetensors.index.json names model-00002-of-00002.safetensors, which is missing"
    ]
    save_file({"v": torch.ones(3)}, path / "model-00002-of-00002.safetensors")
    assert ck.checkpoint_problems(path) == []


def test_a_json_finish_marker_counts_only_with_data(tmp_path):
    marker = tmp_path / "result.json"
    assert not ck.marker_complete(marker)
    for text in ("", "{}", '{"score": 0.5', "[1]"):
        marker.write_text(text)
        assert not ck.marker_complete(marker), text
    marker.write_text('{"score": 0.5}')
    assert ck.marker_complete(marker)
    (tmp_path / "model").mkdir()
    assert ck.marker_complete(tmp_path / "model")


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
    [
        ("nothing", "start"),
        ("empty", "start"),
        ("checkpoint", "resume"),
        ("finished", "reuse"),
        ("empty marker", "resume"),
    ],
)
def test_run_status(tmp_path, layout, action):
    run = tmp_path / "run"
    if layout != "nothing":
        run.mkdir()
    if layout in ("checkpoint", "finished", "empty marker"):
        _checkpoint(run / "checkpoints", 5)
    if layout == "finished":
        (run / "result.json").write_text('{"score": 1.0}')
    if layout == "empty marker":  # a result file that a full disk left empty
        (run / "result.json").write_text("")
    status = ck.run_status(run, finished="result.json", checkpoints="checkpoints")
    assert status.action == action
    assert status.started == (layout != "nothing")
    assert (status.checkpoint is not None) == (layout != "nothing" and layout != "empty")
