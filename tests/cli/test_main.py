import importlib
import subprocess
import sys

import pytest

from tisa import cli


@pytest.mark.parametrize("name", sorted(cli.SUBCOMMANDS))
def test_every_subcommand_module_has_the_interface(name):
    path, _ = cli.SUBCOMMANDS[name]
    module = importlib.import_module(path)
    assert callable(module.add_arguments) and callable(module.run)
    parser = cli.build_parser(name)
    assert parser.parse_args([name, *_REQUIRED.get(name, [])])._run is module.run


_REQUIRED = {
    "bench": ["attention"],
    "convert": ["model-folder"],
    "extrapolate": ["run-folder"],
    "glue": ["--model", "m"],
    "longeval": ["model"],
    "pretrain": ["--output-dir", "out"],
}


def test_help_lists_subcommands_without_importing_them():
    code = (
        "import sys; from tisa import cli; cli.build_parser().format_help(); "
        "print('transformers' in sys.modules, 'tisa.glue.run' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_feature_commands_read_their_config_without_the_heavy_libraries():
    """``tisa <command> --help`` imports the command's config.py only, not its runner."""
    commands = ["analyze", "pretrain", "extrapolate", "convert", "glue", "longeval"]
    code = (
        "import sys; from tisa import cli\n"
        f"for c in {commands!r}: cli.build_parser(c).format_help()\n"
        "print(*[m in sys.modules for m in ('torch', 'transformers', 'matplotlib')])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False", "False"]


def test_no_command_prints_help_and_fails(capsys):
    assert cli.main([]) == 2
    assert "analyze" in capsys.readouterr().out


def test_unknown_command_is_an_argparse_error():
    with pytest.raises(SystemExit) as err:
        cli.main(["frobnicate"])
    assert err.value.code == 2


def test_user_errors_are_one_line_and_exit_code_2(capsys):
    assert cli.main(["bench", "attention", "--batch", "0"]) == 2
    err = capsys.readouterr().err
    assert err == "tisa bench: error: batch must be an integer >= 1, got 0\n"


def test_python_m_tisa_cli_is_the_tisa_command():
    out = subprocess.run(
        [sys.executable, "-m", "tisa.cli", "--version"], capture_output=True, text=True, check=True
    )
    assert out.stdout.startswith("tisa ")
