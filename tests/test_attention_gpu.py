"""CUDA paths (pytest -m gpu): the checks of benchmarks/flex_gpu.py, the sdpa backend's
gradient for a float mask, and the content term's band construction."""

import importlib.util
from pathlib import Path

import pytest
import torch

from tisa import scoring
from tisa.attention import attention, resolve_backend
from tisa.scoring import RelativeContent

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


@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_trains_a_differentiable_mask_like_eager_on_cuda(causal):
    """The sdpa backend's own backward (a float mask that requires grad gets dS) on CUDA:
    the same outputs and gradients as eager, for a broadcast mask with padding added."""
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 40, 16, generator=generator).cuda().requires_grad_()
               for _ in range(3))
    s = scoring.build("rbf", num_heads=3, amplitude_mean=1.0, amplitude_std=0.5).cuda()
    mask = torch.randn(2, 1, 40, 40, generator=generator).cuda().requires_grad_()
    pad = torch.zeros(2, 1, 1, 40, device="cuda")
    pad[1, ..., 30:] = float("-inf")
    assert resolve_backend("auto", q, k, v, None, mask) == "sdpa"
    grads = {}
    for backend in ("eager", "sdpa"):
        for t in (q, k, v, mask, *s.parameters()):
            t.grad = None
        out = attention(q, k, v, s, mask=mask + pad, causal=causal, backend=backend)
        out.backward(torch.ones_like(out))
        grads[backend] = (out.detach(), q.grad.clone(), k.grad.clone(), v.grad.clone(),
                          mask.grad.clone(), s.amplitude.grad.clone())
    assert grads["sdpa"][4].abs().sum() > 0
    for a, e in zip(grads["sdpa"], grads["eager"]):
        torch.testing.assert_close(a, e, atol=1e-4, rtol=1e-3)


@pytest.mark.parametrize("beyond", ["clip", "zero"])
def test_the_content_term_on_cuda_is_the_cpu_term(beyond):
    """The content term's band construction (strided views, blocks of rows) on CUDA: the
    term and its gradients equal the CPU's."""
    term = RelativeContent(num_heads=2, head_dim=8, max_offset=4, beyond=beyond)
    with torch.no_grad():
        term.key_vectors.normal_()
        term.query_vectors.normal_()
    generator = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 2, 150, 8, generator=generator), torch.randn(2, 2, 200, 8,
                                                                         generator=generator)
    weight = torch.randn(2, 2, 150, 200, generator=generator)
    results = {}
    for device in ("cpu", "cuda"):
        t = term.to(device)
        t.zero_grad()
        qd, kd = q.to(device).requires_grad_(), k.to(device).requires_grad_()
        out = t(qd, kd, 0.3)
        (out * weight.to(device)).sum().backward()
        results[device] = [x.detach().cpu() for x in (out, qd.grad, kd.grad,
                                                       t.key_vectors.grad, t.query_vectors.grad)]
    for a, e in zip(results["cuda"], results["cpu"]):
        torch.testing.assert_close(a, e, atol=1e-3, rtol=1e-3)
