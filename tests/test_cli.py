import importlib
import subprocess
import sys

import pytest

from tisa import cli


@pytest.mark.parametrize("name", sorted(cli.SUBCOMMANDS))
def test_every_subcommand_module_has_the_interface(name):
    path, help_text = cli.SUBCOMMANDS[name]
    module = importlib.import_module(path)
    assert callable(module.add_arguments) and callable(module.run)
    assert module.HELP == help_text  # the listing shows what the subcommand says of itself


def test_help_lists_subcommands_without_importing_them():
    code = (
        "import sys; from tisa import cli; cli.build_parser().format_help(); "
        "print('transformers' in sys.modules, 'tisa.train.glue' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_no_command_prints_help_and_fails(capsys):
    assert cli.main([]) == 2
    assert "analyze" in capsys.readouterr().out


def test_unknown_command_is_an_argparse_error():
    with pytest.raises(SystemExit) as err:
        cli.main(["frobnicate"])
    assert err.value.code == 2


def test_bench_rejects_bad_sizes():
    with pytest.raises(SystemExit, match="--batch must be >= 1"):
        cli.main(["bench", "attention", "--batch", "0"])
