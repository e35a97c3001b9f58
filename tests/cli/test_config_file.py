"""``--config FILE.json``: every command reads its config's dict form from a file; options
given on the command line override the file; a bad file is one error line, exit code 2."""

from __future__ import annotations

import dataclasses
import json

import pytest

from tisa import cli
from tisa.convert.config import ConvertConfig, DistillSettings
from tisa.glue.config import GlueConfig
from tisa.pretrain.config import PretrainConfig


@pytest.mark.parametrize("command", sorted(cli.SUBCOMMANDS))
def test_every_command_takes_config(command):
    parser = cli.build_parser(command)
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]
    assert any("--config" in a.option_strings for a in sub._actions)


@pytest.fixture
def recorded(monkeypatch):
    """The configs ``tisa pretrain`` and ``tisa convert`` would run with (nothing runs)."""
    import tisa.convert.convert as convert_lib
    import tisa.pretrain.run as pretrain_lib

    seen = []
    monkeypatch.setattr(pretrain_lib, "pretrain", lambda config, **kw: seen.append(config) or "r")
    monkeypatch.setattr(convert_lib, "convert", lambda config: seen.append(config) or 1 / 0)
    return seen


def test_file_then_flags(tmp_path, recorded):
    settings = {"position": "tisa", "seq_len": 64, "max_steps": 7, "mixed_lengths": []}
    path = tmp_path / "run.json"
    path.write_text(json.dumps(settings))
    out = str(tmp_path / "out")
    argv = ["pretrain", "--output-dir", out, "--config", str(path), "--seq-len", "32"]
    assert cli.main(argv) == 0
    (config,) = recorded
    assert (config.position, config.max_steps) == ("tisa", 7)  # from the file
    assert config.seq_len == 32  # the command line wins
    assert config.output_dir == out and config.size == PretrainConfig.size  # flag, default


def test_dict_form_round_trips(tmp_path, recorded):
    """A config's dict form (``to_dict``) read back gives the same config."""
    config = PretrainConfig(
        output_dir=str(tmp_path / "out"), position="alibi", scoring_options=(), seq_len=48
    )
    path = tmp_path / "run.json"
    path.write_text(json.dumps(config.to_dict()))
    assert cli.main(["pretrain", "--output-dir", config.output_dir, "--config", str(path)]) == 0
    assert recorded == [config]


def test_nested_distillation_settings(tmp_path, recorded, capsys):
    config = ConvertConfig(model="m", distill=DistillSettings(steps=3, seed=5))
    path = tmp_path / "convert.json"
    path.write_text(json.dumps(dataclasses.asdict(config)))
    argv = ["convert", "m", "--output-dir", str(tmp_path / "c"), "--config", str(path)]
    with pytest.raises(ZeroDivisionError):  # the recorder stops the command
        cli.main([*argv, "--seed", "9"])
    (got,) = recorded
    assert got.distill == DistillSettings(steps=3, seed=9)
    assert dataclasses.replace(got, distill=config.distill, output_dir=config.output_dir) == config


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "cannot read it"),
        ("{not json", "not a JSON file"),
        ("[1, 2]", "expected a JSON object of settings"),
        (
            '{"epochs": 3, "learning_rat": 1e-5}',
            "unknown setting(s) ['learning_rat'] for GlueConfig",
        ),
        ('{"seeds": [1, 1]}', "seeds"),
    ],
)
def test_bad_file_is_one_error_line(tmp_path, capsys, content, message):
    path = tmp_path / "glue.json"
    if content is not None:
        path.write_text(content)
    argv = ["glue", "--model", "m", "--task", "rte", "--output-dir", str(tmp_path / "g")]
    argv += ["--config", str(path)]
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    (line,) = captured.err.strip().splitlines()
    assert line.startswith("tisa glue: error: ") and message in line, line


def test_glue_config_dict_form_is_accepted():
    fields = {f.name for f in dataclasses.fields(GlueConfig)}
    assert "config" not in fields  # --config cannot collide with a setting
