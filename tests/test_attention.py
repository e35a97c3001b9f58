import pytest
import torch

from tests import reference
from tisa import bias, scoring
from tisa.attention import TisaSelfAttention, attention, resolve_backend

LENGTHS = [1, 7, 97, 257]


def make_inputs(b, h, lq, lk, d, dtype=torch.float32, seed=0, grad=False):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(b, h, n, d, generator=g, dtype=dtype) for n in (lq, lk, lk))
    if grad:
        q, k, v = (t.requires_grad_() for t in (q, k, v))
    return q, k, v


def sharp_rbf(h, seed=0):
    """An RBF scorer with large amplitudes, so a wrong bias changes the output visibly."""
    torch.manual_seed(seed)
    return scoring.build("rbf", num_heads=h, amplitude_mean=2.0, amplitude_std=1.0)


def padding_mask(b, lk):
    keep = torch.ones(b, lk, dtype=torch.bool)
    keep[0, max(1, lk - lk // 3) :] = False  # first sequence padded, at least one real key
    return keep


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("lq,lk", [(1, 1), (7, 7), (3, 9), (17, 17)])
def test_eager_matches_naive_reference(lq, lk, causal):
    q, k, v = make_inputs(2, 3, lq, lk, 8)
    s = sharp_rbf(3)
    keep = padding_mask(2, lk)
    expected = reference.attention(
        q, k, v, reference.toeplitz_bias(s, lq, lk).detach(), keep=keep, causal=causal
    )
    out = attention(q, k, v, s, mask=keep[:, None, None, :], causal=causal, backend="eager")
    torch.testing.assert_close(out.detach(), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("length", LENGTHS)
@pytest.mark.parametrize("case", ["plain", "padding", "causal", "padding+causal", "float"])
def test_sdpa_forward_and_gradients_match_eager(length, case):
    b, h, d = 2, 3, 16
    q, k, v = make_inputs(b, h, length, length, d, grad=True)
    s = sharp_rbf(h)
    causal = "causal" in case
    mask = padding_mask(b, length)[:, None, None, :] if "padding" in case else None
    if case == "float":
        mask = torch.randn(b, 1, length, length)
    results = {}
    for backend in ("eager", "sdpa"):
        for t in (q, k, v, *s.parameters()):
            t.grad = None
        out = attention(q, k, v, s, mask=mask, causal=causal, backend=backend)
        out.backward(torch.randn_like(out, generator=torch.Generator().manual_seed(1)))
        results[backend] = [out.detach(), q.grad, k.grad, v.grad] + [
            p.grad.clone() for p in s.parameters()
        ]
    for a, e in zip(results["sdpa"], results["eager"]):
        torch.testing.assert_close(a, e, atol=1e-5, rtol=1e-4)
    assert all(p.grad.abs().sum() > 0 for p in s.parameters())


@pytest.mark.parametrize("lq,lk", [(1, 9), (5, 64), (96, 97)])
def test_kv_cache_lengths_match_eager(lq, lk):
    q, k, v = make_inputs(2, 3, lq, lk, 8, grad=True)
    s = sharp_rbf(3)
    outs = {}
    for backend in ("eager", "sdpa"):
        for t in (q, k, v, *s.parameters()):
            t.grad = None
        out = attention(q, k, v, s, causal=True, backend=backend)
        out.sum().backward()
        outs[backend] = (out.detach(), q.grad, k.grad, s.offset.grad.clone())
    for a, e in zip(outs["sdpa"], outs["eager"]):
        torch.testing.assert_close(a, e, atol=1e-5, rtol=1e-4)
    # the last query of a cache step equals the last row of full causal self-attention
    qf = torch.cat([torch.randn(2, 3, lk - lq, 8), q.detach()], dim=2)
    full = attention(qf, k.detach(), v.detach(), s, causal=True, backend="eager")
    last = full[:, :, lk - lq :].detach()
    torch.testing.assert_close(outs["eager"][0], last, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("length", LENGTHS)
def test_flex_forward_matches_eager(length):
    b, h, d = 2, 3, 16
    q, k, v = make_inputs(b, h, length, length, d)
    s = sharp_rbf(h)
    mask = padding_mask(b, length)[:, None, None, :]
    with torch.no_grad():
        expected = attention(q, k, v, s, mask=mask, causal=True, backend="eager")
        out = attention(q, k, v, s, mask=mask, causal=True, backend="flex")
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


def test_flex_kv_cache_matches_eager():
    q, k, v = make_inputs(2, 3, 5, 40, 16)
    s = sharp_rbf(3)
    with torch.no_grad():
        expected = attention(q, k, v, s, causal=True, backend="eager")
        out = attention(q, k, v, s, causal=True, backend="flex")
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", sorted(scoring.REGISTRY))
def test_gradcheck_through_sdpa_backward(name):
    torch.manual_seed(0)
    h = 2
    s = scoring.build(name, num_heads=h).double()
    q, k, v = make_inputs(2, h, 6, 6, 4, dtype=torch.float64, grad=True)
    keep = padding_mask(2, 6)[:, None, None, :]
    names = [n for n, _ in s.named_parameters()]
    params = tuple(p.detach().clone().requires_grad_() for p in s.parameters())

    def f(q, k, v, *ps):
        tab = torch.func.functional_call(s, dict(zip(names, ps)), (bias.offsets(6, 6),))
        return attention(q, k, v, tab, mask=keep, causal=True, backend="sdpa")

    assert torch.autograd.gradcheck(f, (q, k, v, *params))


@pytest.mark.parametrize("backend", ["eager", "sdpa"])
def test_gradients_reach_every_family(backend):
    for name in sorted(scoring.REGISTRY):
        s = scoring.build(name, num_heads=2)
        q, k, v = make_inputs(1, 2, 9, 9, 4, grad=True)
        attention(q, k, v, s, backend=backend).square().sum().backward()
        for pname, p in s.named_parameters():
            assert p.grad is not None and p.grad.abs().sum() > 0, (name, pname)


def test_sdpa_trains_a_differentiable_mask_like_eager():
    q, k, v = make_inputs(2, 3, 9, 9, 8, grad=True)
    s = sharp_rbf(3)
    mask = torch.randn(2, 1, 9, 9, requires_grad=True)
    grads = {}
    for backend in ("eager", "sdpa"):
        for t in (q, mask, *s.parameters()):
            t.grad = None
        attention(q, k, v, s, mask=mask, backend=backend).square().sum().backward()
        grads[backend] = (q.grad.clone(), mask.grad.clone(), s.amplitude.grad.clone())
    for a, e in zip(grads["sdpa"], grads["eager"]):
        torch.testing.assert_close(a, e, atol=1e-5, rtol=1e-4)


def test_zero_amplitudes_equal_plain_attention_exactly():
    s = scoring.build("rbf", num_heads=3, amplitude_mean=0.0, amplitude_std=0.0)
    q, k, v = make_inputs(2, 3, 33, 33, 8)
    mask = padding_mask(2, 33)[:, None, None, :]
    for backend in ("eager", "sdpa"):
        with_bias = attention(q, k, v, s, mask=mask, backend=backend)
        plain = attention(q, k, v, None, mask=mask, backend=backend)
        assert torch.equal(with_bias, plain), backend


def test_shifting_input_shifts_output():
    """TISA-only attention (no absolute positions) is translation invariant."""
    torch.manual_seed(0)
    layer = TisaSelfAttention(32, 4, scoring="rbf", amplitude_mean=1.0, amplitude_std=0.5)
    x = torch.randn(1, 20, 32)
    out = layer(x)
    for t in (1, 5, 13):
        shifted = torch.cat([torch.randn(1, t, 32), x], dim=1)
        keep = torch.cat([torch.zeros(1, t), torch.ones(1, 20)], dim=1).bool()
        out_shifted = layer(shifted, padding_mask=keep)
        torch.testing.assert_close(out_shifted[:, t:], out, atol=1e-5, rtol=1e-5)
    # and the positional part matters: reversing the sequence does not just reverse the output
    assert not torch.allclose(layer(x.flip(1)).flip(1), out, atol=1e-3)


def test_bf16_error_within_twice_eager():
    s = sharp_rbf(4)
    q, k, v = make_inputs(2, 4, 97, 97, 32)
    mask = padding_mask(2, 97)[:, None, None, :]
    oracle = attention(q, k, v, s, mask=mask, backend="eager")
    qb, kb, vb = (t.bfloat16() for t in (q, k, v))
    eager_err = (attention(qb, kb, vb, s, mask=mask, backend="eager").float() - oracle).abs().max()
    for backend in ("sdpa", "flex"):
        with torch.no_grad():
            out = attention(qb, kb, vb, s, mask=mask, backend=backend)
        assert out.dtype == torch.bfloat16
        err = (out.float() - oracle).abs().max()
        assert err <= 2 * eager_err, (backend, err.item(), eager_err.item())


def test_auto_backend_choice():
    q, k, v = make_inputs(1, 2, 8, 8, 4, grad=True)
    tab = bias.table(scoring.build("rbf", num_heads=2), 8, 8)
    assert resolve_backend("auto", q, k, v, tab) == "sdpa"
    assert resolve_backend("auto", q, k, v, tab, dropout_p=0.1) == "eager"
    with torch.no_grad():
        assert resolve_backend("auto", q, k, v, tab) == "sdpa"


def test_tisa_self_attention_module_trains_scorer():
    torch.manual_seed(0)
    layer = TisaSelfAttention(16, 2, scoring="rbf")
    layer(torch.randn(3, 10, 16)).sum().backward()
    assert layer.scorer.amplitude.grad.abs().sum() > 0
    assert layer.scorer.num_positional_parameters() == 3 * 5 * 2


def test_bad_input():
    q, k, v = make_inputs(2, 3, 5, 5, 8)
    s = scoring.build("rbf", num_heads=3)
    with pytest.raises(ValueError, match="q must be a 4-D"):
        attention(q[0], k, v, s)
    with pytest.raises(ValueError, match="share a dtype"):
        attention(q.double(), k, v, s)
    with pytest.raises(ValueError, match="batch and heads"):
        attention(q, k[:, :2], v[:, :2], s)
    with pytest.raises(ValueError, match="scoring function has 4 heads, q has 3"):
        attention(q, k, v, scoring.build("rbf", num_heads=4))
    with pytest.raises(ValueError, match="head size D"):
        attention(q, k[..., :4], v, s)
    with pytest.raises(ValueError, match=r"\(H, Lq \+ Lk - 1\) = \(3, 9\)"):
        attention(q, k, v, torch.zeros(3, 8))
    with pytest.raises(ValueError, match="bias is on meta but q is on cpu"):
        attention(q, k, v, torch.zeros(3, 9, device="meta"))
    with pytest.raises(ValueError, match="mask is on meta"):
        attention(q, k, v, s, mask=torch.ones(2, 1, 1, 5, dtype=torch.bool, device="meta"))
    with pytest.raises(ValueError, match="one device"):
        attention(q, k.to("meta"), v, s)
    with pytest.raises(ValueError, match="does not broadcast"):
        attention(q, k, v, s, mask=torch.ones(2, 1, 1, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="mask must be bool"):
        attention(q, k, v, s, mask=torch.ones(2, 1, 1, 5, dtype=torch.long))
    with pytest.raises(ValueError, match="backend must be one of"):
        attention(q, k, v, s, backend="cuda-magic")
    with pytest.raises(ValueError, match="must not exceed k length"):
        attention(k, q[:, :, :3], v[:, :, :3], s)
    with pytest.raises(ValueError, match="dropout_p"):
        attention(q, k, v, s, dropout_p=1.5)
    qg = q.clone().requires_grad_()
    with pytest.raises(ValueError, match="backend='flex' cannot train on cpu"):
        attention(qg, k, v, s, backend="flex")
    with pytest.raises(ValueError, match="divisible"):
        TisaSelfAttention(10, 3)
