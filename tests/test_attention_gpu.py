"""CUDA paths: FlexAttention forward and backward against the eager oracle (pytest -m gpu)."""

import pytest
import torch

from tisa import scoring
from tisa.attention import attention, resolve_backend

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("length", [1, 7, 97, 257, 1025])
@pytest.mark.parametrize("causal", [False, True])
def test_flex_forward_backward_match_eager_on_cuda(length, causal):
    torch.manual_seed(0)
    dev = "cuda"
    s = scoring.build("rbf", num_heads=4, amplitude_mean=2.0, amplitude_std=1.0).to(dev)
    q, k, v = (torch.randn(2, 4, length, 32, device=dev, requires_grad=True) for _ in range(3))
    keep = torch.ones(2, 1, 1, length, dtype=torch.bool, device=dev)
    keep[0, ..., max(1, length - length // 3) :] = False
    grads = {}
    for backend in ("eager", "flex"):
        for t in (q, k, v, *s.parameters()):
            t.grad = None
        out = attention(q, k, v, s, mask=keep, causal=causal, backend=backend)
        out.backward(torch.ones_like(out))
        grads[backend] = [out.detach(), q.grad, k.grad, v.grad, s.amplitude.grad.clone()]
    for a, e in zip(grads["flex"], grads["eager"]):
        torch.testing.assert_close(a, e, atol=2e-4, rtol=2e-4)


def test_auto_picks_flex_for_training_on_cuda():
    q = torch.randn(1, 2, 8, 4, device="cuda", requires_grad=True)
    tab = torch.zeros(2, 15, device="cuda", requires_grad=True)
    assert resolve_backend("auto", q, q, q, tab) == "flex"
