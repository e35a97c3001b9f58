"""Options derived from config dataclasses: names, types, defaults, help, parsing."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Literal

import pytest

from tisa.cli.args import add_config_arguments, config_from_args, field_help


@dataclass(frozen=True)
class _Config:
    """A config.

    Attributes:
        name: what it is called (see :func:`tisa.files.write_json`); it may go on
            over two lines with ``code``.
        items: values (:data:`tisa.hf.STARTS`).
        mode: ``fast`` or ``slow``.
        count: how many.
        rate: optional rate.
        verbose: print more.
        progress: show progress bars.
        auto: decide for me.
        caps: N or K=N.
        steps: gradient steps.
        hidden: not on the command line.
    """

    name: str
    items: tuple[int, ...] = field(default=(1, 2), metadata={"cli": {"positional": True}})
    mode: Literal["fast", "slow"] = "fast"
    count: int = 3
    rate: float | None = None
    verbose: bool = False
    progress: bool = True
    auto: bool | None = None
    caps: str | None = field(
        default=None, metadata={"cli": {"nargs": "+", "parse": lambda v: "+".join(v)}}
    )
    steps: int = field(default=1, metadata={"cli": {"flag": "--grad-steps"}})
    hidden: int = field(default=0, metadata={"cli": {"skip": True}})


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="x")
    add_config_arguments(parser, _Config, exclusive=[("count", "rate")])
    return parser


def test_help_comes_from_the_docstring():
    helps = field_help(_Config)
    assert helps["name"] == (
        "what it is called (see write_json); it may go on over two lines with code."
    )
    assert helps["items"] == "values."
    assert helps["mode"] == "fast or slow."
    text = _parser().format_help()
    assert "how many (default: 3)" in text and "do not show progress bars" in text
    assert "--grad-steps GRAD_STEPS" in text and "hidden" not in text


def test_defaults_are_the_fields_defaults():
    config = config_from_args(_Config, _parser().parse_args(["--name", "a"]))
    assert config == _Config(name="a")


def test_every_kind_of_option():
    argv = ["4", "5", "--name", "b", "--mode", "slow", "--rate", "0.5", "--verbose"]
    argv += ["--no-progress", "--no-auto", "--caps", "x", "y", "--grad-steps", "7"]
    config = config_from_args(_Config, _parser().parse_args(argv), hidden=9)
    assert config == _Config(
        name="b",
        items=(4, 5),
        mode="slow",
        rate=0.5,
        verbose=True,
        progress=False,
        auto=False,
        caps="x+y",
        steps=7,
        hidden=9,
    )


@pytest.mark.parametrize(
    "argv",
    [
        [],  # --name is required: the field has no default
        ["--name", "a", "--mode", "medium"],  # a Literal gives the choices
        ["--name", "a", "--count", "2", "--rate", "1.0"],  # exclusive
        ["--name", "a", "--count", "two"],
    ],
)
def test_parse_errors_are_argparse_errors(argv):
    with pytest.raises(SystemExit):
        _parser().parse_args(argv)


@pytest.mark.parametrize("command", ["analyze", "bench", "demo", "extrapolate", "glue", "pretrain"])
def test_each_command_defaults_to_its_configs_defaults(command):
    """One declaration: what the command line leaves out is what the config defaults to."""
    import importlib

    from tisa.cli import SUBCOMMANDS, build_parser

    required = {
        "bench": ["attention"],
        "extrapolate": ["run"],
        "glue": ["--model", "m", "--task", "rte"],
        "pretrain": ["--output-dir", "out"],
    }
    args = build_parser(command).parse_args([command, *required.get(command, [])])
    module = importlib.import_module(SUBCOMMANDS[command][0])
    config_class = getattr(module, _CONFIGS[command])
    given = {"extrapolate": {"runs": ("run",)}, "glue": {"model": "m", "tasks": ("rte",)}}
    given["pretrain"] = {"output_dir": "out"}
    expected = config_class(**given.get(command, {}))
    assert config_from_args(config_class, args) == expected


_CONFIGS = {
    "analyze": "AnalysisConfig",
    "bench": "AttentionBenchConfig",
    "demo": "DemoConfig",
    "extrapolate": "ExtrapolateConfig",
    "glue": "GlueConfig",
    "pretrain": "PretrainConfig",
}
