"""Resuming ``tisa pretrain`` runs under faults: damaged checkpoints, finished runs,
nothing to resume, a logging window across a resume, and Ctrl-C."""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.pretrain.tiny import TINY as TINY_RUN
from tests.pretrain.tiny import tokenizer_cache  # noqa: F401  (module-wide fixture)
from tisa.files import LOCK_FILE, read_jsonl
from tisa.pretrain.run import PretrainConfig, pretrain

REPO = Path(__file__).resolve().parents[2]

#: The shared tiny run, with a seed of its own.
TINY = dict(TINY_RUN, seed=3)
SIX = dict(TINY, max_steps=6, save_steps=3, eval_steps=3)


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished six-step run with checkpoints at steps 3 and 6 (do not modify)."""
    run = tmp_path_factory.mktemp("runs") / "six"
    pretrain(PretrainConfig(output_dir=str(run), **SIX))
    return run


def _interrupted_copy(finished: Path, dest: Path) -> Path:
    """The finished run as a kill after its last checkpoint leaves it: no model, no
    results.json, the metrics of every step."""
    shutil.copytree(finished, dest)
    shutil.rmtree(dest / "model")
    (dest / "results.json").unlink()
    return dest


def _cut_weights(ckpt: Path) -> str:
    weights = ckpt / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])  # e.g. a copy cut short
    return "model.safetensors is cut short"


def _empty_state(ckpt: Path) -> str:
    (ckpt / "trainer_state.json").write_text("")
    return "trainer_state.json is empty"


@pytest.mark.parametrize("damage", [_cut_weights, _empty_state], ids=["weights", "state"])
def test_a_damaged_newest_checkpoint_falls_back_to_the_older_one(
    finished, tmp_path, caplog, damage
):
    run = _interrupted_copy(finished, tmp_path / "run")
    problem = damage(run / "checkpoint-6")
    with caplog.at_level(logging.WARNING, logger="tisa.checkpoints"):
        pretrain(PretrainConfig(output_dir=str(run), resume=True, **SIX))
    assert f"skipping checkpoint {run / 'checkpoint-6'}: {problem}" in caplog.text
    a = json.loads((finished / "results.json").read_text())
    b = json.loads((run / "results.json").read_text())
    assert b["resumed_from"] == "checkpoint-3" and b["step"] == 6
    assert b["eval_loss"] == pytest.approx(a["eval_loss"], rel=1e-6)
    # steps 4-6 were trained again and checkpoint-6 replaced by a whole one
    from tisa.checkpoints import checkpoint_problems

    assert checkpoint_problems(run / "checkpoint-6") == []
    assert [r["step"] for r in read_jsonl(run / "metrics.jsonl")] == [
        r["step"] for r in read_jsonl(finished / "metrics.jsonl")
    ]


def test_resume_at_the_last_step_finishes_without_another_step(finished, tmp_path):
    """Killed after the last checkpoint but before the model was saved: the resume
    saves the model of that checkpoint and takes no step beyond max_steps."""
    run = _interrupted_copy(finished, tmp_path / "run")
    pretrain(PretrainConfig(output_dir=str(run), resume=True, **SIX))
    b = json.loads((run / "results.json").read_text())
    a = json.loads((finished / "results.json").read_text())
    assert b["step"] == 6 and b["resumed_from"] == "checkpoint-6"
    assert b["eval_loss"] == pytest.approx(a["eval_loss"], rel=1e-6)
    assert sorted(p.name for p in run.glob("checkpoint-*")) == ["checkpoint-3", "checkpoint-6"]


def test_resume_on_a_finished_run_does_nothing_and_says_so(finished, capsys, caplog):
    from tisa.cli import main

    def snapshot() -> dict[str, int]:
        # (the lock file records who holds the folder: rewritten by every run)
        files = [p for p in finished.rglob("*") if p.is_file() and p.name != LOCK_FILE]
        return {str(p): p.stat().st_mtime_ns for p in files}

    before = snapshot()
    argv = ["pretrain", "--output-dir", str(finished), "--resume", "--max-steps", "6"]
    argv += ["--save-steps", "3", "--eval-steps", "3", "--seed", "3", "--size", "tiny"]
    argv += ["--seq-len", "32", "--batch-size", "8", "--max-train-blocks", "48"]
    argv += ["--max-eval-blocks", "8", "--vocab-size", "600", "--max-positions", "64"]
    argv += ["--logging-steps", "1", "--no-progress", "--no-tensorboard"]
    for _ in range(2):  # each rerun: nothing trained, no checkpoint rotated out
        with caplog.at_level(logging.WARNING, logger="tisa.pretrain.run"):
            assert main(argv) == 0
        assert "holds a finished run (step 6, max_steps 6); nothing to do" in caplog.text
        assert snapshot() == before
        caplog.clear()
    # other settings are still refused, finished or not
    assert main([*argv, "--position", "tisa"]) == 2
    assert "other settings" in capsys.readouterr().err


def test_resume_with_nothing_to_resume_says_so(tmp_path, caplog):
    run = tmp_path / "fresh"
    with caplog.at_level(logging.WARNING, logger="tisa.pretrain.run"):
        pretrain(PretrainConfig(output_dir=str(run), resume=True, **dict(TINY, max_steps=2)))
    assert f"resume: no complete checkpoint in {run}; starting from scratch" in caplog.text
    assert json.loads((run / "results.json").read_text())["resumed_from"] is None


def test_a_checkpoint_beyond_max_steps_is_refused(finished, tmp_path):
    run = _interrupted_copy(finished, tmp_path / "run")
    with pytest.raises(ValueError, match=r"max_steps: .*checkpoint-6 is at step 6, beyond"):
        pretrain(PretrainConfig(output_dir=str(run), resume=True, **dict(SIX, max_steps=5)))


_KILL_SCRIPT = textwrap.dedent(
    """
    import os, signal, sys
    from transformers import TrainerCallback
    from tisa.pretrain.run import PretrainConfig, pretrain

    class KillAt(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == int(sys.argv[2]):
                os.kill(os.getpid(), signal.SIGKILL)

    pretrain(PretrainConfig(output_dir=sys.argv[1], **eval(sys.argv[3])), callbacks=[KillAt()])
    """
)


@pytest.mark.slow  # two full runs; the kill-and-resume equality is in the default tier
def test_a_logging_window_across_a_resume_logs_the_same_losses(tmp_path):
    """Logging every 3 steps and saving every 4: the window 4-6 would span the resume
    at 4; the loss is logged at every checkpoint, so every logged loss is the same."""
    settings = dict(TINY, max_steps=8, save_steps=4, eval_steps=4, logging_steps=3)
    straight = tmp_path / "straight"
    pretrain(PretrainConfig(output_dir=str(straight), **settings))
    killed = tmp_path / "killed"
    script = tmp_path / "kill.py"
    script.write_text(_KILL_SCRIPT)
    proc = subprocess.run(
        [sys.executable, str(script), str(killed), "6", repr(settings)],
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    pretrain(PretrainConfig(output_dir=str(killed), resume=True, **settings))

    def losses(run: Path) -> dict[int, float]:
        return {r["step"]: r["loss"] for r in read_jsonl(run / "metrics.jsonl") if "loss" in r}

    a, b = losses(straight), losses(killed)
    assert sorted(a) == [3, 4, 6, 8]  # every logging_steps, and at each checkpoint
    assert sorted(b) == sorted(a)
    for step in a:
        assert b[step] == pytest.approx(a[step], rel=1e-6), step


def test_ctrl_c_is_one_line_saying_how_to_resume(tmp_path):
    """SIGINT to a real ``tisa pretrain``: exit 130, one line, the checkpoints kept."""
    run = tmp_path / "run"
    argv = [sys.executable, "-m", "tisa.cli", "pretrain", "--output-dir", str(run)]
    argv += ["--max-steps", "100000", "--save-steps", "2", "--eval-steps", "100000"]
    argv += ["--size", "tiny", "--seq-len", "32", "--batch-size", "8"]
    argv += ["--max-train-blocks", "48", "--max-eval-blocks", "8", "--vocab-size", "600"]
    argv += ["--max-positions", "64", "--no-progress", "--no-tensorboard"]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen(
        argv,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        # a test run started in the background (nohup, &) ignores SIGINT, and so would
        # the child: give it the default disposition, which Python turns into Ctrl-C
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 240
        while not (run / "checkpoint-2").is_dir():
            assert proc.poll() is None, proc.communicate()[1].decode()[-2000:]
            assert time.monotonic() < deadline, "no checkpoint within 240 s"
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    err = err.decode()
    assert proc.returncode == 130, err[-2000:]
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last == (
        "tisa pretrain: interrupted; checkpoints are kept; continue with the same command "
        "and --resume"
    )
    assert (run / "checkpoint-2" / "trainer_state.json").is_file()
