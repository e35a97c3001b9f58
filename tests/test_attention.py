import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

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


class Largest(TorchDispatchMode):
    """While active, the largest value ``measure(func, args, out)`` takes over every op the
    dispatcher runs (e.g. an output's size, or the keys one attention call reads)."""

    def __init__(self, measure):
        super().__init__()
        self.measure, self.largest = measure, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.largest = max(self.largest, self.measure(func, args, out))
        return out


def output_size(func, args, out) -> int:
    return max((t.numel() for t in (out if isinstance(out, (tuple, list)) else (out,))
                if isinstance(t, torch.Tensor)), default=0)


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
        out.backward(torch.randn(out.shape, generator=torch.Generator().manual_seed(1)))
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


def _flex_against_eager(lengths, head_dims, seed=0):
    """Largest |flex - eager| per case, causal and not, plain self-attention."""
    s = sharp_rbf(3, seed)
    errors = {}
    for d in head_dims:
        for length in lengths:
            q, k, v = make_inputs(2, 3, length, length, d, seed=length)
            for causal in (False, True):
                with torch.no_grad():
                    expected = attention(q, k, v, s, causal=causal, backend="eager")
                    out = attention(q, k, v, s, causal=causal, backend="flex")
                errors[d, length, causal] = (out - expected).abs().max().item()
    return errors


def test_flex_matches_eager_where_the_cpu_kernel_breaks():
    """D = 8 and 16 at the lengths where the CPU kernel writes past its tile (AVX2)."""
    errors = _flex_against_eager([40, 56, 64, 72, 120], [8, 16])  # 64: nothing padded
    bad = {case: e for case, e in errors.items() if not e < 1e-5}  # NaN fails too
    assert not bad, bad


@pytest.mark.slow
def test_flex_matches_eager_on_every_length_and_head_size():
    errors = _flex_against_eager(range(1, 301), [8, 16, 64])
    bad = {case: e for case, e in errors.items() if not e < 1e-5}
    assert not bad, bad


@pytest.mark.parametrize("length", [1, 56, 120])
def test_flex_forward_matches_eager(length):
    b, h, d = 2, 3, 16
    q, k, v = make_inputs(b, h, length, length, d)
    s = sharp_rbf(h)
    mask = padding_mask(b, length)[:, None, None, :]
    with torch.no_grad():
        expected = attention(q, k, v, s, mask=mask, causal=True, backend="eager")
        out = attention(q, k, v, s, mask=mask, causal=True, backend="flex")
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


def test_flex_pads_to_buckets_and_head_size():
    from tisa.attention import flex as flex_module

    assert [flex_module._flex_bucket(n, True) for n in (1, 2, 16, 17, 129)] == [
        1,
        16,
        16,
        32,
        256,
    ]
    assert [flex_module._flex_bucket(n, False) for n in (1, 16, 17, 300)] == [16, 16, 32, 512]
    # lengths of one bucket share a block mask shape and the masking is by the real lengths
    a = flex_module._flex_block_mask(40, 56, 64, 64, True, torch.device("cpu"))
    assert a.kv_num_blocks.tolist() == [[[1]]] and a.seq_lengths == (64, 64)
    b = flex_module._flex_block_mask(130, 300, 256, 512, True, torch.device("cpu"))
    # query block 0 (rows 0..127, positions up to 297) reaches key block 2; block 1 has
    # real rows 128..129 (positions 298, 299): key blocks 0..2
    assert b.kv_num_blocks.tolist() == [[[3, 3]]]
    c = flex_module._flex_block_mask(1, 300, 1, 512, False, torch.device("cpu"))
    assert c.kv_num_blocks.tolist() == [[[3]]]


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


@pytest.mark.parametrize(
    ("mask_shape", "lq", "causal"),
    [((2, 1, 9, 9), 9, False), ((2, 3, 9, 9), 9, True), ((2, 3, 4, 9), 4, False),
     ((1, 3, 9, 9), 9, False)],
)
def test_sdpa_trains_a_differentiable_mask_like_eager(mask_shape, lq, causal):
    """The fused path's own backward gives a mask that requires grad its gradient (summed
    over broadcast axes), also after a cache, causal, and with padding it adds to."""
    q, k, v = make_inputs(2, 3, lq, 9, 8, grad=True)
    s = sharp_rbf(3)
    mask = torch.randn(mask_shape, requires_grad=True)
    keep = torch.ones(2, 1, 1, 9, dtype=torch.bool)
    keep[1, ..., 6:] = False
    assert resolve_backend("auto", q, k, v, None, mask) == "sdpa"
    grads = {}
    for backend in ("eager", "sdpa"):
        for t in (q, k, v, mask, *s.parameters()):
            t.grad = None
        full = mask + torch.zeros(2, 1, 1, 9).masked_fill(~keep, NEG)
        out = attention(q, k, v, s, mask=full, causal=causal, backend=backend)
        out.backward(torch.randn(out.shape, generator=torch.Generator().manual_seed(1)))
        grads[backend] = (out.detach(), q.grad.clone(), k.grad.clone(), v.grad.clone(),
                          mask.grad.clone(), s.amplitude.grad.clone())
    assert grads["sdpa"][4].abs().sum() > 0
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
    trained = torch.zeros(1, 1, 1, k.shape[-2], requires_grad=True)
    assert resolve_backend("auto", q, k, v, tab, trained) == "sdpa"  # dS is its gradient
    assert resolve_backend("auto", q, k, v, tab, trained, dropout_p=0.1) == "eager"
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


# ------------------------------------------------------------------ fully masked rows

NEG = float("-inf")


def masked_row_cases(b, lq, lk):
    """name -> (mask, causal): masks under which some query rows see no key at all."""
    additive = torch.randn(b, 1, lq, lk)
    additive[0, 0, 2] = NEG  # one row: -inf over all keys
    additive[1, 0, :, 3] = NEG  # one key masked for everyone: rows stay alive
    rows = torch.ones(b, 1, lq, lk, dtype=torch.bool)
    rows[1, 0, lq - 1] = False  # a bool row False over all keys
    empty = torch.ones(b, 1, 1, lk, dtype=torch.bool)
    empty[1] = False  # a sequence with no real key
    left = torch.ones(b, 1, 1, lk, dtype=torch.bool)
    left[0, ..., :4] = False  # left padding: causally, the first queries see only padding
    finfo = torch.zeros(b, 1, lq, lk)
    finfo[0, 0, 1] = torch.finfo(torch.float32).min  # finite: the row averages its keys
    return {
        "additive -inf row": (additive, False),
        "bool row": (rows, True),
        "no key at all": (empty, False),
        "left padding, causal": (left, True),
        "finfo.min row": (finfo, False),
    }


def stock_sdpa(q, k, v, tab, mask, causal):
    """Stock SDPA with the dense bias (and the mask, and causality) as one float mask."""
    lq, lk = q.shape[-2], k.shape[-2]
    attn_mask = bias.expand(tab, lq, lk)[None]
    if mask.dtype == torch.bool:
        mask = torch.zeros(mask.shape).masked_fill(~mask, NEG)
    attn_mask = attn_mask + mask
    if causal:
        keep = torch.arange(lk)[None, :] <= torch.arange(lk - lq, lk)[:, None]
        attn_mask = attn_mask.masked_fill(~keep, NEG)
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)


@pytest.mark.parametrize("case", list(masked_row_cases(2, 7, 7)))
@pytest.mark.parametrize("backend", ["eager", "sdpa"])
def test_fully_masked_rows_behave_as_stock_sdpa(backend, case):
    q, k, v = make_inputs(2, 3, 7, 7, 8, grad=True)
    s = sharp_rbf(3)
    mask, causal = masked_row_cases(2, 7, 7)[case]
    results = {}
    for name in ("stock", backend):
        for t in (q, k, v, *s.parameters()):
            t.grad = None
        if name == "stock":
            out = stock_sdpa(q, k, v, bias.table(s, 7, 7), mask, causal)
        else:
            out = attention(q, k, v, s, mask=mask, causal=causal, backend=backend)
        out.backward(torch.randn(out.shape, generator=torch.Generator().manual_seed(2)))
        results[name] = [out.detach(), q.grad, k.grad, v.grad] + [
            p.grad.clone() for p in s.parameters()
        ]
    for got, expected in zip(results[backend], results["stock"]):
        assert torch.isfinite(got).all()
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-4)
    keep = ~torch.isneginf(mask) if mask.is_floating_point() else mask
    if causal:
        keep = keep & (torch.arange(7)[None, :] <= torch.arange(7)[:, None])
    dead = ~keep.expand(2, 3, 7, 7).any(-1)  # (B, H, Lq): rows that see no key
    assert dead.any() == (case != "finfo.min row")
    # such rows are 0 and pass no gradient to their queries
    assert (results[backend][0][dead] == 0).all() and (results[backend][1][dead] == 0).all()


def test_fully_masked_rows_on_flex_match_stock_sdpa():
    q, k, v = make_inputs(2, 3, 56, 56, 16)
    s = sharp_rbf(3)
    for case, (mask, causal) in masked_row_cases(2, 56, 56).items():
        if mask.shape[-2] > 1:
            continue  # full (B, 1, Lq, Lk) masks: covered by eager and sdpa; one kernel less
        with torch.no_grad():
            expected = stock_sdpa(q, k, v, bias.table(s, 56, 56), mask, causal)
            out = attention(q, k, v, s, mask=mask, causal=causal, backend="flex")
        torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5, msg=case)


# ------------------------------------------------------------------------ dropout


def test_flex_refuses_dropout():
    q, k, v = make_inputs(1, 2, 8, 8, 4)
    with pytest.raises(ValueError, match="backend='flex' has no attention dropout"):
        with torch.no_grad():
            attention(q, k, v, None, dropout_p=0.1, backend="flex")
    layer = TisaSelfAttention(8, 2, dropout=0.1, backend="flex").eval()
    with torch.no_grad():
        layer(torch.randn(1, 5, 8))  # evaluation: no dropout, flex runs
    with pytest.raises(ValueError, match="no attention dropout"), torch.no_grad():
        layer.train()(torch.randn(1, 5, 8))


@pytest.mark.parametrize("backend", ["eager", "sdpa"])
def test_dropout_drops_and_rescales(backend):
    q, k, v = make_inputs(1, 2, 64, 64, 8)
    v = torch.ones_like(v)  # every row of the output is the sum of its kept probabilities
    torch.manual_seed(0)
    with torch.no_grad():
        out = attention(q, k, v, sharp_rbf(2), dropout_p=0.5, backend=backend)
    row_sums = out[..., 0]
    assert not torch.allclose(row_sums, torch.ones_like(row_sums))  # something was dropped
    assert abs(row_sums.mean().item() - 1.0) < 0.1  # kept ones rescaled by 1 / (1 - p)


# ---------------------------------------------------------------- sdpa in blocks


@pytest.mark.parametrize("plan", [(1, 1, 5), (1, 3, 4), (2, 4, 3), (3, 4, 64)])
@pytest.mark.parametrize("case", ["plain", "padding+causal", "float"])
def test_sdpa_backward_in_many_blocks_matches_eager(monkeypatch, plan, case):
    """Blocks (batch elements, heads, query rows) that split the batch, the heads (3 + 1)
    and the rows: every block's table gradient must land on its own heads and columns."""
    from tisa.attention import sdpa as sdpa_module

    plan = sdpa_module._Plan(*plan)
    monkeypatch.setattr(sdpa_module, "_block_plan", lambda q, k, v, add: plan)
    b, h, lq, lk = 3, 4, 13, 21
    q, k, v = make_inputs(b, h, lq, lk, 8, grad=True)
    s = sharp_rbf(h)
    mask = {
        "plain": None,
        "padding+causal": padding_mask(b, lk)[:, None, None, :],
        "float": torch.randn(b, 1, lq, lk),
    }[case]
    grads = {}
    for backend in ("eager", "sdpa"):
        for t in (q, k, v, *s.parameters()):
            t.grad = None
        out = attention(q, k, v, s, mask=mask, causal="causal" in case, backend=backend)
        out.backward(torch.randn(out.shape, generator=torch.Generator().manual_seed(1)))
        grads[backend] = [out.detach(), q.grad, k.grad, v.grad] + [
            p.grad.clone() for p in s.parameters()
        ]
    for a, e in zip(grads["sdpa"], grads["eager"]):
        torch.testing.assert_close(a, e, atol=1e-5, rtol=1e-4)


def test_sdpa_default_blocks_at_length_512_match_eager():
    from tisa.attention import sdpa as sdpa_module

    b, h, length = 2, 12, 512
    q, k, v = make_inputs(b, h, length, length, 16, grad=True)
    plan = sdpa_module._block_plan(q, k, v, None)
    blocks = list(sdpa_module._blocks(plan, b, h, length))
    assert len({start for *_, start, _ in blocks}) > 1  # several blocks of rows
    assert len({bs.start for bs, *_ in blocks}) > 1  # and of batch elements
    s = sharp_rbf(h)
    grads = {}
    for backend in ("eager", "sdpa"):
        for t in (q, k, v, *s.parameters()):
            t.grad = None
        attention(q, k, v, s, causal=True, backend=backend).square().sum().backward()
        grads[backend] = [q.grad, k.grad, v.grad, *(p.grad.clone() for p in s.parameters())]
    for a, e in zip(grads["sdpa"], grads["eager"]):
        torch.testing.assert_close(a, e, atol=1e-4, rtol=1e-4)


def test_sdpa_never_builds_a_full_bias(monkeypatch):
    """No tensor of H * Lq * Lk elements or more is created, forward or backward, when the
    forward's blocks with a mask (at most _MASK_BLOCK_ELEMENTS logits) are smaller."""
    from tisa.attention import sdpa as sdpa_module

    b, h, length = 2, 3, 200
    limit = h * length * length
    monkeypatch.setattr(sdpa_module, "_MASK_BLOCK_ELEMENTS", limit // 2)
    q, k, v = make_inputs(b, h, length, length, 16, grad=True)
    s = sharp_rbf(h)
    mask = padding_mask(b, length)[:, None, None, :]
    plan = sdpa_module._block_plan(q, k, v, mask)
    assert plan.batch * plan.heads * plan.rows < h * length  # blocks under one (H, L, L) bias
    with Largest(output_size) as seen:
        out = attention(q, k, v, s, mask=mask, causal=True, backend="sdpa")
        out.sum().backward()
    assert 0 < seen.largest < limit
    with Largest(output_size) as seen:  # and the eager backend does build it (the check can fail)
        attention(q, k, v, s, backend="eager").sum().backward()
    assert seen.largest >= limit


def test_rows_without_keys_are_found_from_table_and_mask():
    """Every way the table and the mask can mask a whole row, against brute force."""
    from tisa.attention import masks as masks_module
    from tisa.attention import sdpa as sdpa_module

    lq, lk, h = 6, 9, 2
    g = torch.Generator().manual_seed(0)
    finite = torch.randn(h, lq + lk - 1, generator=g)
    window = finite.masked_fill((bias.offsets(lq, lk).abs() > 1)[None], NEG)  # |j - i| <= 1
    window[1] = NEG  # head 1 sees nothing at all
    tables = {
        "finite": finite,
        "causal": masks_module.causal_table(finite, lk),
        "window": window,
    }
    padding = torch.zeros(3, 1, 1, lk)
    padding[1, ..., 3:] = NEG
    padding[2] = NEG
    rows = torch.zeros(3, 1, lq, lk)
    rows[0, 0, 2, :] = NEG
    rows[1, 0, :, :5] = NEG
    for name, tab in tables.items():
        for mask in (None, padding, rows):
            got = sdpa_module._dead_rows(tab, mask, lq, lk)
            keep = ~torch.isneginf(bias.expand(tab, lq, lk))[None]  # (1, H, Lq, Lk)
            if mask is not None:
                keep = keep & ~torch.isneginf(mask)
            expected = ~keep.any(-1, keepdim=True)
            if not expected.any():
                assert got is None, name
            else:
                torch.testing.assert_close(got.expand_as(expected), expected, msg=name)


def test_a_table_that_masks_trains_like_eager():
    """A table with -inf (a hard window) and padding: rows that see nothing train to 0."""
    lq = lk = 11
    q, k, v = make_inputs(2, 2, lq, lk, 8, grad=True)
    base = torch.randn(2, lq + lk - 1)
    window = base.masked_fill((bias.offsets(lq, lk).abs() > 2)[None], NEG).requires_grad_()
    keep = torch.ones(2, 1, 1, lk, dtype=torch.bool)
    keep[0, ..., :6] = False  # query 0..3 of sequence 0 have no key in their window
    grads = {}
    for backend in ("eager", "sdpa"):
        for t in (q, k, v, window):
            t.grad = None
        out = attention(q, k, v, window, mask=keep, backend=backend)
        out.backward(torch.randn(out.shape, generator=torch.Generator().manual_seed(1)))
        grads[backend] = [out.detach(), q.grad, k.grad, v.grad, window.grad]
    assert (grads["sdpa"][0][0, :, :4] == 0).all()
    for a, e in zip(grads["sdpa"], grads["eager"]):
        assert torch.isfinite(a).all()
        torch.testing.assert_close(a, e, atol=1e-5, rtol=1e-4)


def test_flex_compiles_with_the_vector_width_in_the_cache_key(monkeypatch):
    """Inductor's cache key has no instruction set; an explicit simdlen puts one in."""
    from torch._inductor import config as inductor_config
    from torch._inductor.cpu_vec_isa import pick_vec_isa, valid_vec_isa_list

    from tisa.attention import flex as flex_module

    # inductor_config.patch, not monkeypatch: undoing a monkeypatch deletes the setting
    # (a deleted inductor setting is hidden, and reading it then raises)
    with inductor_config.patch({"cpp.simdlen": None}):
        with flex_module._cpu_isa_config(True):
            assert inductor_config.cpp.simdlen == pick_vec_isa().bit_width()
        assert inductor_config.cpp.simdlen is None
        monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")
        if any(isa.bit_width() == 256 for isa in valid_vec_isa_list()):
            with flex_module._cpu_isa_config(True):
                assert inductor_config.cpp.simdlen == 256
    with inductor_config.patch({"cpp.simdlen": 512}):  # the user's own choice stays
        with flex_module._cpu_isa_config(True):
            assert inductor_config.cpp.simdlen == 512
    assert inductor_config.cpp.simdlen is None


@pytest.mark.parametrize("masked", [False, True])
def test_sdpa_forward_in_blocks_matches_eager(monkeypatch, masked):
    """Forward blocks that split batch, heads and rows write every row back in order."""
    from tisa.attention import sdpa as sdpa_module

    plan = sdpa_module._Plan(2, 3, 10)
    monkeypatch.setattr(sdpa_module, "_block_plan", lambda q, k, v, add: plan)
    monkeypatch.setattr(sdpa_module, "_forward_plan", lambda q, k, add, p: plan)
    q, k, v = make_inputs(3, 4, 37, 41, 8)
    s = sharp_rbf(4)
    mask = padding_mask(3, 41)[:, None, None, :] if masked else None
    with torch.no_grad():
        expected = attention(q, k, v, s, mask=mask, causal=True, backend="eager")
        out = attention(q, k, v, s, mask=mask, causal=True, backend="sdpa")
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("shape", [(3, 4, 37, 41), (3, 1, 37, 41), (1, 4, 1, 41)])
def test_sdpa_forward_with_a_mask_in_blocks_of_rows_matches_eager(monkeypatch, shape):
    """A forward that adds a mask runs in blocks of all heads and as many rows as the
    budget allows: here 10 rows, so blocks of one batch element and several of rows."""
    from tisa.attention import sdpa as sdpa_module

    monkeypatch.setattr(sdpa_module, "_MASK_BLOCK_ELEMENTS", 4 * 10 * 41)
    q, k, v = make_inputs(3, 4, 37, 41, 8)
    plan = sdpa_module._forward_plan(q, k, torch.zeros(shape), None)
    assert plan == sdpa_module._Plan(1, 4, 10)
    s = sharp_rbf(4)
    mask = torch.randn(shape, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        expected = attention(q, k, v, s, mask=mask, causal=True, backend="eager")
        out = attention(q, k, v, s, mask=mask, causal=True, backend="sdpa")
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("beyond", ["zero", "clip"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(("band_batch", "lq", "lk", "mask_kind"),
                         [(2, 37, 37, "padding"), (1, 5, 41, None), (2, 37, 41, "float"),
                          (1, 37, 41, "padding")])
def test_a_band_term_added_by_rows_is_its_dense_mask(monkeypatch, beyond, causal, band_batch,
                                                      lq, lk, mask_kind):
    """``band_term`` on sdpa, in blocks of rows (here 6; the clipped term's sides in
    blocks of 4), never builds a (B, H, Lq, Lk) tensor and gives what the dense term added
    to the mask gives on eager."""
    from tisa.attention import sdpa as sdpa_module
    from tisa.scoring import content as content_module

    b, h, width = 2, 3, 7
    monkeypatch.setattr(sdpa_module, "_MASK_BLOCK_ELEMENTS", h * 6 * lk)
    monkeypatch.setattr(content_module, "_BLOCK", 4)
    q, k, v = make_inputs(b, h, lq, lk, 8)
    s = sharp_rbf(h)
    term = scoring.RelativeContent(h, 8, width // 2, beyond=beyond)
    with torch.no_grad():
        term.key_vectors.normal_()
        term.query_vectors.normal_()
        band = term.band(q[:band_batch], k[:band_batch], 0.5)
    assert isinstance(band, content_module.ClippedBand) == (beyond == "clip")
    mask = {"padding": padding_mask(b, lk)[:, None, None, :], None: None,
            "float": torch.randn(b, 1, lq, lk)}[mask_kind]
    dense = content_module.to_dense(band, lk)
    with torch.no_grad():
        torch.testing.assert_close(dense, term(q[:band_batch], k[:band_batch], 0.5))
    full = dense if mask is None else dense + (
        torch.zeros(mask.shape).masked_fill(~mask, NEG) if mask.dtype == torch.bool else mask)
    with torch.no_grad():
        want = attention(q, k, v, s, mask=full, causal=causal, backend="eager")
        with Largest(output_size) as seen:
            got = attention(q, k, v, s, mask=mask, causal=causal, backend="sdpa",
                            band_term=band)
        on_eager = attention(q, k, v, s, mask=mask, causal=causal, backend="eager",
                             band_term=band)
    assert seen.largest < b * h * lq * lk
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(on_eager, want, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("clipped", [False, True])
def test_a_band_term_that_trains_or_is_as_wide_as_the_keys_goes_into_the_mask(clipped):
    """With a gradient to give, or Lk <= 2K + 1 (the band's diagonals would overlap in a
    row's storage), the band is laid into a dense mask: the same outputs, and gradients;
    a padding mask joins it."""
    from tisa.scoring.content import ClippedBand, to_dense

    s = sharp_rbf(2)
    for lk, width in ((9, 5), (5, 7)):
        q, k, v = make_inputs(2, 2, lk, lk, 4, grad=True)
        mask = padding_mask(2, lk)[:, None, None, :]
        parts = [torch.randn(2, 2, lk, width, requires_grad=True)]
        if clipped:
            parts += [torch.randn(2, 2, lk, 2, requires_grad=True) for _ in range(2)]
        term = ClippedBand(*parts) if clipped else parts[0]
        got = attention(q, k, v, s, mask=mask, band_term=term, backend="sdpa")
        got.sum().backward()
        assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in parts)
        with torch.no_grad():
            dense = to_dense(term, lk).masked_fill(~mask, NEG)
            want = attention(q, k, v, s, mask=dense, backend="eager")
            torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)
            fixed = ClippedBand(*(p.detach() for p in parts)) if clipped else parts[0].detach()
            by_rows = attention(q, k, v, s, mask=mask, band_term=fixed, backend="sdpa")
        torch.testing.assert_close(by_rows, want, atol=1e-5, rtol=1e-4)


def test_a_band_term_of_the_wrong_shape_is_refused():
    from tisa.scoring.content import ClippedBand, to_dense

    q, k, v = make_inputs(2, 3, 5, 9, 4)
    for band in (torch.zeros(2, 3, 5, 4), torch.zeros(2, 1, 5, 5), torch.zeros(3, 3, 5, 5)):
        with pytest.raises(ValueError, match="band_term must be"):
            attention(q, k, v, None, band_term=band)
    band = torch.zeros(2, 3, 5, 5)
    for sides, name in (((torch.zeros(2, 3, 5, 2), torch.zeros(2, 3, 5, 2)), "by_key"),
                        ((torch.zeros(2, 3, 9, 2), torch.zeros(2, 3, 9, 2)), "by_query"),
                        ((torch.zeros(2, 3, 5, 1), torch.zeros(2, 3, 9, 2)), "by_query"),
                        ((torch.zeros(2, 3, 5, 2), torch.zeros(1, 3, 9, 2)), "by_key")):
        with pytest.raises(ValueError, match=f"band_term.{name} must be"):
            attention(q, k, v, None, band_term=ClippedBand(band, *sides))
    with pytest.raises(ValueError, match="lk=8, but the ClippedBand has 9 keys"):
        to_dense(ClippedBand(band, torch.zeros(2, 3, 5, 2), torch.zeros(2, 3, 9, 2)), 8)


# --------------------------------------------------------------------- mask conventions


def test_a_float_keep_mask_is_refused():
    """1 = keep / 0 = pad as float would be added to the scores and mask nothing."""
    q, k, v = make_inputs(2, 3, 5, 5, 8)
    keep = padding_mask(2, 5)
    for mask in (keep.float(), keep.float()[:, None, None, :], torch.ones(2, 1, 1, 5)):
        with pytest.raises(ValueError, match=r"keep mask.*bool mask \(True = attend"):
            attention(q, k, v, None, mask=mask)
    # additive masks pass: all zeros (nothing masked), 0 / -inf, any other values
    additive = torch.zeros(2, 1, 1, 5).masked_fill(~keep[:, None, None, :], NEG)
    expected = attention(q, k, v, None, mask=keep[:, None, None, :], backend="eager")
    for backend in ("eager", "sdpa"):
        torch.testing.assert_close(
            attention(q, k, v, None, mask=additive, backend=backend), expected
        )
        attention(q, k, v, None, mask=torch.zeros(2, 1, 1, 5), backend=backend)
        attention(q, k, v, None, mask=torch.tensor([0.0, 1.0, 0.5, 0.0, 1.0]).expand(2, 1, 1, 5))
        # a first row of 0s and 1s and other values later: not a keep mask either
        later = torch.zeros(2, 3, 5, 5)
        later[1, 2, 4, 0] = 0.5
        attention(q, k, v, None, mask=later, backend=backend)
    # a keep mask whose first row keeps everything, and one that is 0/1 in a dense layout
    dense = keep.float()[:, None, None, :].expand(2, 3, 5, 5)
    with pytest.raises(ValueError, match="keep mask"):
        attention(q, k, v, None, mask=dense)


def test_a_2d_mask_is_a_padding_mask_even_when_lq_equals_b():
    """(B, Lk) means batch by keys, not queries by keys, also when Lq == B."""
    b = lq = 4
    q, k, v = make_inputs(b, 2, lq, 6, 8)
    keep = torch.ones(b, 6, dtype=torch.bool)
    keep[0, 3:] = False
    keep[2, 1:] = False
    s = sharp_rbf(2)
    expected = reference.attention(q, k, v, reference.toeplitz_bias(s, lq, 6).detach(), keep=keep)
    additive = torch.zeros(b, 6).masked_fill(~keep, NEG)
    with torch.no_grad():
        for backend in ("eager", "sdpa"):
            for mask in (keep, additive):
                out = attention(q, k, v, s, mask=mask, backend=backend)
                torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


def test_mask_shapes_are_checked_by_meaning():
    q, k, v = make_inputs(2, 3, 4, 5, 8)
    ok = {  # every shape that is accepted
        (2, 5),
        (2, 1, 1, 5),
        (1, 1, 1, 5),
        (2, 3, 4, 5),
        (1, 1, 4, 5),
        (2, 1, 4, 5),
    }
    for shape in ok:
        attention(q, k, v, None, mask=torch.ones(shape, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"a 2-D mask is a padding mask \(B, Lk\) = \(2, 5\)"):
        attention(q, k, v, None, mask=torch.ones(4, 5, dtype=torch.bool))  # (Lq, Lk)
    for shape in [(5,), (2, 1, 5), (4, 4, 5), (1, 2, 1, 1, 5)]:
        with pytest.raises(ValueError, match=r"mask must be 4-D .* or a 2-D padding mask"):
            attention(q, k, v, None, mask=torch.ones(shape, dtype=torch.bool))
    for shape in [(2, 2, 1, 5), (3, 1, 1, 5), (2, 1, 3, 5)]:
        with pytest.raises(ValueError, match="each axis must be that size or 1"):
            attention(q, k, v, None, mask=torch.ones(shape, dtype=torch.bool))


# ------------------------------------------------------------------------ the scale


def _scaled_case(masked, causal, with_bias, grad):
    b, h, lq, lk, d = 2, 3, 7, 9, 8  # queries at the last 7 of 9 keys
    q, k, v = make_inputs(b, h, lq, lk, d, grad=grad)
    s = sharp_rbf(h) if with_bias else None
    keep = padding_mask(b, lk) if masked else None
    return q, k, v, s, keep


SCALE = 0.9  # not 1 / sqrt(8) = 0.354: a backend that drops it changes every output


@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("backend", ["eager", "sdpa"])
def test_the_callers_scale_is_used_forward_and_backward(backend, masked, causal, with_bias):
    q, k, v, s, keep = _scaled_case(masked, causal, with_bias, grad=True)
    params = [] if s is None else list(s.parameters())
    tab = None if s is None else reference.toeplitz_bias(s, q.shape[-2], k.shape[-2])
    expected = reference.attention(q, k, v, tab, keep=keep, causal=causal, scale=SCALE)
    cotangent = torch.randn(expected.shape, generator=torch.Generator().manual_seed(3))
    want = torch.autograd.grad(expected, [q, k, v, *params], cotangent)
    mask = None if keep is None else keep[:, None, None, :]
    out = attention(q, k, v, s, mask=mask, causal=causal, scale=SCALE, backend=backend)
    got = torch.autograd.grad(out, [q, k, v, *params], cotangent)
    torch.testing.assert_close(out.detach(), expected.detach(), atol=1e-5, rtol=1e-5)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, atol=1e-5, rtol=1e-4)
    with torch.no_grad():  # the forward without autograd takes other paths
        out = attention(q, k, v, s, mask=mask, causal=causal, scale=SCALE, backend=backend)
    torch.testing.assert_close(out, expected.detach(), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("masked", [False, True])
def test_the_callers_scale_is_used_by_flex(masked, causal):
    """Flex forward on CPU (it has no backward there)."""
    q, k, v, s, keep = _scaled_case(masked, causal, True, grad=False)
    tab = reference.toeplitz_bias(s, q.shape[-2], k.shape[-2]).detach()
    expected = reference.attention(q, k, v, tab, keep=keep, causal=causal, scale=SCALE)
    mask = None if keep is None else keep[:, None, None, :]
    with torch.no_grad():
        out = attention(q, k, v, s, mask=mask, causal=causal, scale=SCALE, backend="flex")
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)

@pytest.mark.parametrize("plan", [None, (1, 2, 16), (3, 4, 64)])
@pytest.mark.parametrize("masked", [False, True])
def test_sdpa_trains_on_transposed_inputs_like_eager(monkeypatch, plan, masked):
    """q, k, v as (B, L, H, D) storage seen as (B, H, L, D), as a Hugging Face layer passes
    them (odd lengths, Lq < Lk, a scale of its own): the same outputs and gradients as
    eager, in every way of cutting blocks."""
    from tisa.attention import sdpa as sdpa_module

    if plan is not None:
        plan = sdpa_module._Plan(*plan)
        monkeypatch.setattr(sdpa_module, "_block_plan", lambda q, k, v, add: plan)
    b, h, lq, lk, d = 3, 4, 37, 41, 8
    g = torch.Generator().manual_seed(0)
    leaves = [torch.randn(b, n, h, d, generator=g).requires_grad_() for n in (lq, lk, lk)]
    s = sharp_rbf(h)
    mask = padding_mask(b, lk)[:, None, None, :] if masked else None
    grads = {}
    for backend in ("eager", "sdpa"):
        for t in (*leaves, *s.parameters()):
            t.grad = None
        q, k, v = (t.transpose(1, 2) for t in leaves)  # (B, H, L, D), not contiguous
        out = attention(q, k, v, s, mask=mask, causal=True, scale=0.3, backend=backend)
        out.backward(torch.randn(out.shape, generator=torch.Generator().manual_seed(1)))
        grads[backend] = [out.detach()] + [t.grad for t in leaves]
        grads[backend] += [p.grad.clone() for p in s.parameters()]
    for a, e in zip(grads["sdpa"], grads["eager"]):
        torch.testing.assert_close(a, e, atol=1e-5, rtol=1e-4)
    for t, grad in zip(leaves, grads["sdpa"][1:4]):
        assert grad.stride() == t.stride()


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("padded", [False, True])
def test_a_window_reads_only_the_keys_in_reach(causal, padded):
    """A windowed table (-inf beyond +-W) on the sdpa backend: in blocks of rows that each
    read only the keys their window reaches (no block as wide as all keys), with the eager
    backend's result, padding and rows whose window holds only padding included."""
    from tisa.attention import masks as masks_module
    from tisa.attention import sdpa as sdpa_module

    b, h, length, w = 2, 3, 600, 20
    q, k, v = make_inputs(b, h, length, length, 8)
    windowed = scoring.WindowedOffsets(sharp_rbf(h), w)
    keep = padding_mask(b, length)[:, None, None, :] if padded else None
    band = masks_module.window_band(w, length, length, False)
    assert band == (length - 1 - w, length - 1 + w)
    assert masks_module.window_band(w, length, length, True) == (length - 1 - w, length - 1)
    assert masks_module.window_band(length, length, length, False) is None  # every key
    plan = sdpa_module._band_plan(q, band, sdpa_module._block_plan(q, k, v, None))
    assert plan.rows < length  # several blocks of rows

    def keys_read(func, args, out) -> int:
        flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default
        return args[1].shape[-2] if func is flash else 0

    with torch.no_grad(), Largest(keys_read) as widest:
        got = attention(q, k, v, windowed, mask=keep, causal=causal, backend="sdpa")
    assert 0 < widest.largest <= plan.rows + 2 * w
    with torch.no_grad():
        expected = attention(q, k, v, windowed, mask=keep, causal=causal, backend="eager")
        unwindowed = attention(q, k, v, windowed.scorer, mask=keep, causal=causal)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-4)
    assert (got - unwindowed).abs().max() > 1e-2  # the window changes the output
    if padded:  # sequence 0 is padded from 400 on: queries past 420 see only padding
        assert (got[0, :, 421:] == 0).all()


def test_flex_skips_the_key_blocks_beyond_a_window():
    """With a windowed table, flex visits only the key blocks each query block reaches, and
    its output is the eager backend's (padding and a causal window included)."""
    from tisa.attention import flex as flex_module

    # rows 0..127 reach keys 0..127+20 (blocks 0, 1); rows 256..383: 236..403 (blocks 1..3)
    m = flex_module._flex_block_mask(600, 600, 1024, 1024, False, torch.device("cpu"), (-20, 20))
    counts = m.kv_num_blocks[0, 0].tolist()
    assert counts[:5] == [2, 3, 3, 3, 2] and counts[5:] == [0, 0, 0]
    assert m.kv_indices[0, 0, 2, :3].tolist() == [1, 2, 3]
    c = flex_module._flex_block_mask(600, 600, 1024, 1024, True, torch.device("cpu"), (-20, 0))
    assert c.kv_num_blocks[0, 0].tolist()[:5] == [1, 2, 2, 2, 2]
    b, h, length = 2, 3, 300
    q, k, v = make_inputs(b, h, length, length, 16)
    windowed = scoring.WindowedOffsets(sharp_rbf(h), 20)
    mask = padding_mask(b, length)[:, None, None, :]
    for causal in (False, True):
        with torch.no_grad():
            expected = attention(q, k, v, windowed, mask=mask, causal=causal, backend="eager")
            out = attention(q, k, v, windowed, mask=mask, causal=causal, backend="flex")
        torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)



@pytest.mark.parametrize("backend", ["sdpa", "flex"])
@pytest.mark.parametrize("causal", [False, True])
def test_a_window_with_fewer_queries_than_keys_matches_eager(backend, causal):
    """Queries the last Lq of Lk keys (a chunk of a prefill, a key/value cache) under a
    window: the blocks' reach and flex's block mask follow the queries' positions."""
    q, k, v = make_inputs(2, 3, 150, 420, 16)
    windowed = scoring.WindowedOffsets(sharp_rbf(3), 30)
    with torch.no_grad():
        expected = attention(q, k, v, windowed, causal=causal, backend="eager")
        out = attention(q, k, v, windowed, causal=causal, backend=backend)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("lq", [300, 120])
def test_a_window_trains_like_eager_reading_only_the_keys_in_reach(causal, lq):
    """The sdpa backward under a window: blocks of rows read only the keys they reach, and
    every gradient (q, k, v and the scorer's parameters, through the table) is eager's,
    with padding, and with fewer queries than keys."""
    lk, w = 300, 20
    q, k, v = make_inputs(2, 3, lq, lk, 8, grad=True)
    windowed = scoring.WindowedOffsets(sharp_rbf(3), w)
    keep = padding_mask(2, lk)[:, None, None, :]
    upstream = torch.randn(2, 3, lq, 8, generator=torch.Generator().manual_seed(1))

    def keys_read(func, args, out) -> int:  # the keys of one q k^T
        product = func.overloadpacket in (torch.ops.aten.baddbmm, torch.ops.aten.baddbmm_)
        return args[2].shape[-1] if product else 0

    widest, grads = Largest(keys_read), {}
    for backend in ("eager", "sdpa"):
        for t in (q, k, v, *windowed.parameters()):
            t.grad = None
        out = attention(q, k, v, windowed, mask=keep, causal=causal, backend=backend)
        with widest:
            out.backward(upstream)
        grads[backend] = [out.detach(), q.grad, k.grad, v.grad,
                          *(p.grad.clone() for p in windowed.parameters())]
    assert 0 < widest.largest <= 64 + 2 * w  # blocks of 64 rows and the keys they reach
    for a, e in zip(grads["sdpa"], grads["eager"], strict=True):
        torch.testing.assert_close(a, e, atol=1e-5, rtol=1e-4)
