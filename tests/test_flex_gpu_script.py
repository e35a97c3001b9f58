"""benchmarks/flex_gpu.py off a GPU: arguments, the no-CUDA exit, and its logic on CPU."""

from __future__ import annotations

import json

import pytest
import torch

from tests.scripts import load_script


@pytest.fixture(scope="module")
def flex_gpu():
    return load_script("benchmarks/flex_gpu.py")


def test_arguments_are_checked(flex_gpu, capsys):
    args = flex_gpu.parse_args([])
    assert args.device == "cuda" and args.dtypes == ["bfloat16", "float32"]
    assert flex_gpu.parse_args(["--quick"]).lengths == [56]
    for bad in (["--batch", "0"], ["--lengths", "0"], ["--dtypes", "float64"]):
        with pytest.raises(SystemExit) as err:
            flex_gpu.parse_args(bad)
        assert err.value.code == 2
    assert "unknown dtype 'float64'" in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the machine without CUDA")
def test_without_cuda_it_says_so_and_runs_nothing(flex_gpu, tmp_path, capsys):
    out = tmp_path / "r.json"
    assert flex_gpu.main(["--json", str(out)]) == 2
    assert "no CUDA device" in capsys.readouterr().err and not out.exists()


def test_tables_mark_failures(flex_gpu):
    checks = []
    flex_gpu._record(checks, "good", 1e-6, 2e-4)
    flex_gpu._record(checks, "bad", 1e-2, 2e-4)
    flex_gpu._record(checks, "nan", float("nan"), 2e-4)
    assert [c["passed"] for c in checks] == [True, False, False]
    table = flex_gpu.format_checks(checks)
    assert table.count("FAILED") == 2 and "| good | 1.00e-06 | 2.00e-04 | ok |" in table
    rows = [
        {
            "dtype": "bfloat16",
            "pass": "fwd+bwd",
            "length": 1024,
            "variant": "flex + TISA",
            "ms": 2.0,
            "speed_vs_flex": 0.9,
        }
    ]
    assert "| bfloat16 | fwd+bwd | 1024 | flex + TISA | 2.00 | 0.90x |" in flex_gpu.format_timings(
        rows
    )


@pytest.mark.slow
def test_dry_run_on_cpu_passes_and_writes_json(flex_gpu, tmp_path):
    """Every check and timing the GPU run makes, forward only (about a minute)."""
    out = tmp_path / "r.json"
    assert flex_gpu.main(["--device", "cpu", "--quick", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["checks"] and all(c["passed"] for c in result["checks"])
    assert {r["variant"] for r in result["timings"]} == {
        "flex, no score_mod",
        "flex + TISA",
        "sdpa + dense trained bias",
    }


def test_a_failed_check_fails_the_run(flex_gpu, monkeypatch, tmp_path):
    def failing(device, args):
        checks = []
        flex_gpu._record(checks, "forward, L=1", 1.0, 2e-4)
        return checks

    monkeypatch.setattr(flex_gpu, "run_checks", failing)
    monkeypatch.setattr(flex_gpu, "run_timings", lambda *a: pytest.fail("timed after a failure"))
    out = tmp_path / "r.json"
    assert flex_gpu.main(["--device", "cpu", "--json", str(out)]) == 1
    assert json.loads(out.read_text())["checks"][0]["passed"] is False
