"""Errors users see: one line naming the argument or file, a non-zero exit, no traceback,
nothing written, and each before any long work starts."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tisa import cli

REPO = Path(__file__).resolve().parents[2]

#: Every command with an output folder, with the other arguments it requires.
WITH_OUTPUT_DIR = {
    "analyze": [],
    "convert": ["model-folder"],
    "demo": [],
    "extrapolate": ["run-folder"],
    "glue": ["--model", "m"],
    "longeval": ["model"],
    "pretrain": [],
}


def test_every_command_with_an_output_folder_is_covered():
    required = {"bench": ["attention"], "pretrain": ["--output-dir", "out"]}
    found = set()
    for name in cli.SUBCOMMANDS:
        argv = [name, *required.get(name, WITH_OUTPUT_DIR.get(name, []))]
        if hasattr(cli.build_parser(name).parse_args(argv), "output_dir"):
            found.add(name)
    assert found == set(WITH_OUTPUT_DIR)


def _one_line_error(capsys, command: str) -> str:
    captured = capsys.readouterr()
    err = captured.err
    assert "Traceback" not in err + captured.out
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"tisa {command}: error: "), err
    return err.strip()


@pytest.mark.parametrize("command", sorted(WITH_OUTPUT_DIR))
def test_output_dir_that_is_a_file_fails_at_once(command, tmp_path, capsys, monkeypatch):
    started = []
    module = importlib.import_module(cli.SUBCOMMANDS[command][0])
    monkeypatch.setattr(module, "run", lambda args: started.append(args) or 0)
    taken = tmp_path / "taken"
    taken.write_text("results of something else")
    argv = [command, *WITH_OUTPUT_DIR[command]]
    assert cli.main([*argv, "--output-dir", str(taken)]) == 2
    err = _one_line_error(capsys, command)
    assert err.endswith(f"--output-dir: {str(taken)!r} is a file, expected a folder")
    assert cli.main([*argv, "--output-dir", str(taken / "run")]) == 2
    err = _one_line_error(capsys, command)
    assert f"cannot be a folder: {str(taken)!r} is a file" in err
    assert cli.main([*argv, "--output-dir", "/sys/tisa-run"]) == 2  # read-only, even as root
    assert "--output-dir: cannot write to '/sys/tisa-run'" in _one_line_error(capsys, command)
    assert started == [] and taken.read_text() == "results of something else"


def test_bench_output_that_is_a_folder_fails_before_the_run(tmp_path, capsys, monkeypatch):
    import tisa.cli.bench as bench

    ran = []
    monkeypatch.setattr(bench, "run_attention_benchmark", lambda cfg: ran.append(cfg) or [])
    assert cli.main(["bench", "attention", "--output", str(tmp_path)]) == 2
    err = _one_line_error(capsys, "bench")
    assert f"--output {tmp_path} is a folder; give a file name" in err
    assert ran == []


@pytest.mark.parametrize(
    ("option", "value"), [("--pretrain-steps", "-1"), ("--glue-steps", "-3"), ("--seed", "-1")]
)
def test_demo_refuses_negative_counts(option, value, tmp_path, capsys):
    out = tmp_path / "demo"
    assert cli.main(["demo", "--output-dir", str(out), option, value]) == 2
    err = _one_line_error(capsys, "demo")
    assert f"{option[2:].replace('-', '_')} must be an integer >= 0, got {value}" in err
    assert not out.exists()


@pytest.mark.parametrize(
    ("command", "hint"),
    [
        ("pretrain", "checkpoints are kept; continue with the same command and --resume"),
        ("glue", "finished runs are kept; rerun the same command to resume"),
        ("demo", "finished parts are kept; rerun the same command to continue"),
        ("analyze", "nothing was kept; rerun the command"),
    ],
)
def test_ctrl_c_is_one_line_and_exit_130(command, hint, tmp_path, capsys, monkeypatch):
    module = importlib.import_module(cli.SUBCOMMANDS[command][0])

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(module, "run", interrupted)
    argv = [command, *WITH_OUTPUT_DIR[command], "--output-dir", str(tmp_path / "out")]
    assert cli.main(argv) == cli.INTERRUPTED_EXIT == 130
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert err.strip().startswith(f"tisa {command}: interrupted; {hint}")


def test_ctrl_c_through_exec_still_exits_130_under_python_m(tmp_path):
    """An interrupt raised inside exec() of a string (as in a dataclass being built) and
    caught by the CLI: ``python -m`` must still return 130, not die by SIGINT."""
    (tmp_path / "interrupt_in_exec.py").write_text(
        "import sys\n"
        "import tisa.cli.analyze as analyze\n"
        "from tisa import cli\n"
        "analyze.run = lambda args: exec('raise KeyboardInterrupt')\n"
        f"sys.exit(cli.main(['analyze', '--output-dir', {str(tmp_path / 'out')!r}]))\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(tmp_path)]))
    proc = subprocess.run(
        [sys.executable, "-m", "interrupt_in_exec"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 130, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1].startswith("tisa analyze: interrupted;")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", r"train_file: .*empty\.txt.* (is empty|holds no text)"),
        (b"\x00\x01\x02\xff\xfe" * 50, r"train_file: .*empty\.txt"),
    ],
    ids=["empty", "binary"],
)
def test_pretrain_with_an_unusable_corpus_is_one_line(content, message, tmp_path, capsys):
    import re

    corpus = tmp_path / "empty.txt"
    corpus.write_bytes(content)
    out = tmp_path / "run"
    argv = ["pretrain", "--output-dir", str(out), "--train-file", str(corpus)]
    assert cli.main([*argv, "--size", "tiny", "--no-progress", "--no-tensorboard"]) == 2
    err = _one_line_error(capsys, "pretrain")
    assert re.search(message, err), err
