"""CUDA paths (pytest -m gpu): the checks of benchmarks/flex_gpu.py, one test each."""

import importlib.util
from pathlib import Path

import pytest
import torch

from tisa.attention import resolve_backend

pytestmark = pytest.mark.gpu

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "flex_gpu.py"


def _flex_gpu():
    spec = importlib.util.spec_from_file_location("flex_gpu", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def checks():
    flex_gpu = _flex_gpu()
    return {c["check"]: c for c in flex_gpu.run_checks("cuda", flex_gpu.parse_args([]))}


def test_every_flex_check_passes_on_cuda(checks):
    failed = {name: c for name, c in checks.items() if not c["passed"]}
    assert not failed, failed
    # forward+backward at every length, causal and not; table gradient; masked rows;
    # dropout; bf16
    assert sum(name.startswith("forward + backward") for name in checks) == 8
    assert any(name.startswith("table gradient") for name in checks)
    assert any("rows without keys" in name for name in checks)
    assert "auto trains with dropout (eager) and drops" in checks
    assert any(name.startswith("bf16") for name in checks)


def test_auto_picks_flex_for_training_on_cuda():
    q = torch.randn(1, 2, 8, 4, device="cuda", requires_grad=True)
    tab = torch.zeros(2, 15, device="cuda", requires_grad=True)
    assert resolve_backend("auto", q, q, q, tab) == "flex"
