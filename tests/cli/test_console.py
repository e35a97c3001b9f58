"""The console of a command: quiet by default, the libraries' full logs with --verbose."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.pretrain.tiny import TINY
from tisa.console import format_seconds

REPO = Path(__file__).resolve().parents[2]

#: A Python warning as the warnings module prints it: "file.py:12: UserWarning: ...".
WARNING_LINE = re.compile(r"^.*:\d+: \w*Warning: ", re.MULTILINE)


def _pretrain_args(out: Path) -> list[str]:
    """A tiny ``tisa pretrain`` (the test settings, with its progress shown)."""
    settings = dict(TINY, max_steps=2, save_steps=2, eval_steps=2, progress=True)
    del settings["tensorboard"], settings["progress"]
    args = ["pretrain", "--output-dir", str(out), "--no-tensorboard"]
    for key, value in settings.items():
        args += [f"--{key.replace('_', '-')}", str(value)]
    return args


@pytest.fixture(scope="module")
def consoles(tmp_path_factory):
    """(stdout, stderr, run folder) of the same tiny run, quiet and with --verbose."""
    tmp = tmp_path_factory.mktemp("console")
    env = dict(os.environ, PYTHONPATH=str(REPO), TISA_CACHE_DIR=str(tmp / "cache"))
    env.pop("PYTHONWARNINGS", None)
    out = {}
    for name, flags in (("quiet", []), ("verbose", ["--verbose"])):
        proc = subprocess.run(
            [sys.executable, "-m", "tisa.cli", *flags, *_pretrain_args(tmp / name)],
            env=env,
            capture_output=True,
            timeout=600,
        )
        # decoded by hand: text=True would turn the bars' carriage returns into newlines
        stdout, stderr = proc.stdout.decode(), proc.stderr.decode()
        assert proc.returncode == 0, stderr[-3000:]
        out[name] = (stdout, stderr, tmp / name)
    return out


def test_quiet_pretrain_prints_bars_and_summary_lines_only(consoles):
    stdout, stderr, run = consoles["quiet"]
    text = stdout + stderr
    assert "{'loss'" not in text and "{'eval_loss'" not in text and "{'train_runtime'" not in text
    assert not WARNING_LINE.search(text), text
    assert "Traceback" not in text
    lines = [line for line in text.splitlines() if line.strip()]
    # the bar's last state is overwritten by its summary line (\r), one per stage
    assert any(
        re.search(r"pretrain tiny albert, absolute: 2 steps in .*eval loss", line) for line in lines
    ), text
    assert any(line.startswith("tokenizer: WordPiece") for line in lines), text
    assert stdout == f"run folder: {run}\n"
    assert text.count("\n") <= 6, text
    # the metrics still go to the run folder
    rows = (run / "metrics.jsonl").read_text().splitlines()
    assert any('"loss"' in r for r in rows) and any('"eval_loss"' in r for r in rows)


def test_verbose_pretrain_shows_the_trainer_logs(consoles):
    stdout, stderr, _ = consoles["verbose"]
    text = stdout + stderr
    assert "{'loss'" in text and "{'eval_loss'" in text
    assert "loading file" in text or "Configuration saved" in text  # transformers' info log
    assert text.count("\n") > sum(t.count("\n") for t in consoles["quiet"][:2])


def test_help_lists_verbose(capsys):
    from tisa.cli import main

    with pytest.raises(SystemExit):
        main(["--help"])
    assert "--verbose" in capsys.readouterr().out


@pytest.mark.parametrize(
    "seconds, text", [(3.25, "3.2 s"), (42.4, "42 s"), (185.2, "3 min 5 s"), (3725, "1 h 2 min")]
)
def test_format_seconds(seconds, text):
    assert format_seconds(seconds) == text
