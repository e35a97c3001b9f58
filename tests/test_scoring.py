import json

import pytest
import torch

from tests import reference, reference_scoring
from tisa import bias, scoring

FAMILIES = sorted(scoring.REGISTRY)


@pytest.mark.parametrize("name", FAMILIES)
def test_output_shape_any_offsets_shape(name):
    s = scoring.build(name, num_heads=3)
    k = torch.arange(-6, 6).view(3, 4)
    assert s(k).shape == (3, 3, 4)
    assert s(torch.tensor(2)).shape == (3,)


def test_rbf_matches_formula():
    torch.manual_seed(0)
    s = scoring.build("rbf", num_heads=4, num_kernels=3)
    k = torch.arange(-20, 21)
    expected = reference.rbf(k, s.amplitude, s.sharpness, s.offset)
    torch.testing.assert_close(s(k), expected)


def test_rbf_defaults_and_initialisation():
    torch.manual_seed(0)
    s = scoring.build("rbf", num_heads=64)
    assert s.amplitude.shape == s.sharpness.shape == s.offset.shape == (64, 5)
    assert s.num_positional_parameters() == 3 * 5 * 64
    assert abs(s.amplitude.mean().item() - 0.1) < 0.005
    assert abs(s.amplitude.std().item() - 0.01) < 0.003
    assert abs(s.sharpness.mean().item() - 0.1) < 0.005
    assert abs(s.offset.std().item() - 5.0) < 0.6
    custom = scoring.build("rbf", num_heads=2, num_kernels=2, amplitude_mean=0.0, amplitude_std=0.0)
    assert torch.count_nonzero(custom.amplitude) == 0


def test_alibi_slopes_and_values():
    s = scoring.build("alibi", num_heads=8)
    assert torch.allclose(s.slopes, torch.tensor([2.0 ** -(i + 1) for i in range(8)]))
    k = torch.tensor([-3, 0, 2])
    torch.testing.assert_close(s(k)[0], torch.tensor([-1.5, 0.0, -1.0]))
    assert s.num_positional_parameters() == 0
    assert scoring.build("alibi", num_heads=12).slopes.shape == (12,)


def test_t5_buckets_bidirectional_and_causal():
    s = scoring.build("t5", num_heads=2)
    assert s.num_positional_parameters() == 32 * 2
    b = scoring.t5_bucket(
        torch.tensor([0, 1, 7, -1, -7, 200, -200]),
        bidirectional=True,
        num_buckets=32,
        max_distance=128,
    )
    # exact buckets for small distances; positive offsets use the upper half
    assert b.tolist()[:5] == [0, 17, 23, 1, 7]
    assert b[5] == 31 and b[6] == 15  # beyond max_distance: last bucket of each half
    c = scoring.t5_bucket(
        torch.tensor([3, 0, -1, -500]), bidirectional=False, num_buckets=32, max_distance=128
    )
    assert c.tolist() == [0, 0, 1, 31]
    causal = scoring.build("t5", num_heads=2, bidirectional=False)
    assert torch.equal(causal(torch.tensor([5])), causal(torch.tensor([0])))


def test_kerple_log_formula_and_positivity():
    s = scoring.build("kerple_log", num_heads=2, init_r1=2.0, init_r2=0.5)
    k = torch.tensor([-4, 0, 4])
    expected = -2.0 * torch.log1p(0.5 * torch.tensor([4.0, 0.0, 4.0]))
    torch.testing.assert_close(s(k)[0], expected)
    with torch.no_grad():
        s.r1.fill_(-1.0)
    assert (s(torch.tensor([3])) <= 0).all()  # r1 clamped positive: never a reward for distance


def test_free_clips_beyond_max_offset():
    s = scoring.build("free", num_heads=2, max_offset=3)
    with torch.no_grad():
        s.values.copy_(torch.arange(14.0).view(2, 7))
    out = s(torch.tensor([-10, -3, 0, 3, 10]))
    assert out[0].tolist() == [0.0, 0.0, 3.0, 6.0, 6.0]
    assert s.num_positional_parameters() == 2 * 7


@pytest.mark.parametrize("name", FAMILIES)
def test_config_round_trip(name):
    s = scoring.build(name, num_heads=3)
    rebuilt = scoring.build(**s.config())
    assert type(rebuilt) is type(s)
    assert rebuilt.config() == s.config()
    rebuilt.load_state_dict(s.state_dict())
    k = torch.arange(-40, 41)
    torch.testing.assert_close(rebuilt(k), s(k))


@pytest.mark.parametrize("name", [n for n in FAMILIES if n != "alibi"])
def test_gradcheck_float64(name):
    torch.manual_seed(0)
    s = scoring.build(name, num_heads=2).double()
    k = torch.arange(-9, 10)
    params = [p for p in s.parameters()]
    names = [n for n, _ in s.named_parameters()]

    def f(*ps):
        state = dict(zip(names, ps))
        return torch.func.functional_call(s, state, (k,))

    assert torch.autograd.gradcheck(f, tuple(p.detach().requires_grad_() for p in params))


def test_bad_input():
    with pytest.raises(ValueError, match="unknown family 'nope'"):
        scoring.build("nope", num_heads=2)
    with pytest.raises(ValueError, match="num_kernels"):
        scoring.build("rbf", num_heads=2, num_kernels=0)
    with pytest.raises(ValueError, match="num_heads"):
        scoring.build("rbf", num_heads=0)
    with pytest.raises(ValueError, match="integer tensor"):
        scoring.build("rbf", num_heads=2)(torch.tensor([0.5]))
    with pytest.raises(ValueError, match="init_r1"):
        scoring.build("kerple_log", num_heads=2, init_r1=0.0)


# --- RBF sharpness enters as |b| (training can make it negative) ------------------------


def test_rbf_negative_sharpness_acts_as_its_absolute_value():
    torch.manual_seed(1)
    s = scoring.build("rbf", num_heads=3, num_kernels=4)
    k = torch.tensor([-(10**6), -300, -7, -1, 0, 2, 9, 300, 10**6])
    with torch.no_grad():
        s.sharpness.copy_(-s.sharpness.abs())  # every kernel's sharpness negative
    out = s(k)
    assert torch.isfinite(out).all()
    expected = reference.rbf(k, s.amplitude, s.sharpness, s.offset)
    torch.testing.assert_close(out, expected)
    flipped = scoring.build(**s.config())
    flipped.load_state_dict(s.state_dict())
    with torch.no_grad():
        flipped.sharpness.neg_()
    torch.testing.assert_close(flipped(k), out)
    # a Gaussian kernel is bounded by its amplitude and vanishes far away
    assert (out.abs() <= s.amplitude.abs().sum(-1, keepdim=True) + 1e-6).all()
    assert out[:, [0, -1]].abs().max() == 0


# --- kernel-plus-tail families ----------------------------------------------------------

TAIL_FAMILIES = ["rbf_linear", "rbf_log", "rbf_logdist"]

#: (family, options): every axis x tail x symmetry x far-ramp combination worth testing.
VARIANTS = [
    ("rbf_linear", {}),
    ("rbf_linear", {"asymmetric": True}),
    ("rbf_linear", {"learn_tail": False, "far_offset": 6, "far_slope": 0.5}),
    ("rbf_log", {}),
    ("rbf_log", {"asymmetric": True, "init_r1": 1.5, "tail_scale": 0.5}),
    ("rbf_logdist", {}),
    ("rbf_logdist", {"tail": "linear", "asymmetric": True, "distance_scale": 3.0}),
    ("rbf_logdist", {"tail": "none", "far_offset": 0}),
    ("rbf_logdist", {"learn_tail": False, "distance_scale": 0.5}),
]
VARIANT_IDS = [
    f"{n}-{'-'.join(f'{k}={v}' for k, v in o.items()) or 'default'}" for n, o in VARIANTS
]


def _tail_of(s):
    return s.config().get("tail", {"rbf_linear": "linear", "rbf_log": "log"}.get(s.family))


def _scramble(s, seed=0):
    """Random parameters of every sign: negative sharpness, amplitudes and raw tail values."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for t in (*s.parameters(), *s.buffers()):
            t.copy_(torch.randn(t.shape, generator=g, dtype=torch.float64) * 2)
        s.sharpness.copy_(s.sharpness / 4)
    return s


def _reference(s, k):
    raw = {n: getattr(s, n) for n in ("raw_slope", "raw_r1", "raw_r2") if hasattr(s, n)}
    return reference_scoring.kernel_tail(
        k,
        s.amplitude.detach(),
        s.sharpness.detach(),
        s.offset.detach(),
        axis=s.axis,
        distance_scale=getattr(s, "distance_scale", 1.0),
        tail_kind=_tail_of(s),
        raw={n: v.detach() for n, v in raw.items()},
        far_offset=s.far_offset,
        far_slope=s.far_slope,
    )


@pytest.mark.parametrize("name,options", VARIANTS, ids=VARIANT_IDS)
def test_kernel_tail_matches_formula(name, options):
    s = _scramble(scoring.build(name, num_heads=3, num_kernels=4, **options).double())
    assert (s.sharpness < 0).any() and (s.amplitude < 0).any()
    k = torch.tensor([[-1000, -129, -17, -5], [-1, 0, 1, 3], [8, 63, 130, 4097]])
    out = s(k)
    assert out.shape == (3, 3, 4) and out.dtype == torch.float64
    torch.testing.assert_close(out, _reference(s, k), rtol=1e-12, atol=1e-12)
    ramp = 0 if s.far_offset is None else scoring.far_ramp(k, s.far_offset, s.far_slope)
    torch.testing.assert_close(s.kernels(k) + s.tail(k) + ramp, out)


@pytest.mark.parametrize("name,options", VARIANTS, ids=VARIANT_IDS)
def test_kernel_tail_through_bias_table_with_a_cache(name, options):
    # Lq < Lk (queries at the last Lq positions), awkward sizes: F[h, i, j] = f_h(j - i)
    s = _scramble(scoring.build(name, num_heads=2, num_kernels=3, **options).double(), seed=1)
    lq, lk = 5, 13
    tab = bias.table(s, lq, lk)
    assert tab.shape == (2, lq + lk - 1)
    torch.testing.assert_close(tab, _reference(s, bias.offsets(lq, lk)), rtol=1e-12, atol=1e-12)
    dense = bias.expand(tab, lq, lk)
    torch.testing.assert_close(dense, reference.toeplitz_bias(s, lq, lk))


@pytest.mark.parametrize("name,options", VARIANTS, ids=VARIANT_IDS)
def test_kernel_tail_gradients_reach_every_parameter(name, options):
    s = scoring.build(name, num_heads=3, **options)
    s(torch.arange(-40, 41)).square().sum().backward()
    for pname, p in s.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), pname
        if p.dim() == 2 and pname.startswith("raw_"):  # asymmetric: each side on its own
            assert (p.grad != 0).all(), pname
        else:
            assert (p.grad != 0).any(dim=-1).all(), pname  # every head


@pytest.mark.parametrize("name,options", VARIANTS[1::2], ids=VARIANT_IDS[1::2])
def test_kernel_tail_gradcheck_float64(name, options):
    s = _scramble(scoring.build(name, num_heads=2, num_kernels=2, **options).double(), seed=2)
    s.sharpness.data.abs_()  # |b| has no derivative at 0; keep away from it
    k = torch.tensor([-50, -9, -2, -1, 0, 1, 4, 31])
    names = [n for n, _ in s.named_parameters()]

    def f(*ps):
        return torch.func.functional_call(s, dict(zip(names, ps)), (k,))

    assert torch.autograd.gradcheck(f, tuple(p.detach().requires_grad_() for p in s.parameters()))


@pytest.mark.parametrize(
    "name,options",
    [(n, o) for n, o in VARIANTS if o.get("tail") != "none"],
    ids=[i for (_, o), i in zip(VARIANTS, VARIANT_IDS) if o.get("tail") != "none"],
)
@pytest.mark.parametrize("raw", [-1000.0, -60.0, -3.0, 0.0, 2.5, 60.0, "random"])
def test_tail_monotone_in_distance_for_any_parameters(name, options, raw):
    s = scoring.build(name, num_heads=4, **options)
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for pname in ("raw_slope", "raw_r1", "raw_r2"):
            if hasattr(s, pname):
                t = getattr(s, pname)
                t.copy_(torch.randn(t.shape, generator=g) * 20 if raw == "random" else raw)
    dist = torch.cat([torch.arange(0, 3000), torch.tensor([10**4, 10**5, 10**6 - 1, 10**6])])
    for side in (dist, -dist):  # k >= 0 and k <= 0, each ordered by growing |k|
        t = s.tail(side)
        assert torch.isfinite(t).all()
        assert (t[:, 0] == 0).all() and (t <= 0).all()
        assert (t.diff(dim=-1) <= 0).all(), "tail rises with |k|"


@pytest.mark.parametrize("name,options", VARIANTS, ids=VARIANT_IDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_kernel_tail_large_offsets_finite(name, options, dtype):
    s = _scramble(scoring.build(name, num_heads=3, **options), seed=4).to(dtype)
    for pname in ("raw_slope", "raw_r1", "raw_r2"):  # extreme tails: steep and flat
        if hasattr(s, pname):
            getattr(s, pname).data[0] = 40.0
            getattr(s, pname).data[1] = -40.0
    s.sharpness.data[0, 0] = 0.0  # a kernel that is flat everywhere
    k = torch.tensor([-(10**6), -(10**6) + 1, -65537, -257, -1, 0, 1, 255, 4099, 10**6])
    out = s(k.to(torch.int32))
    assert out.dtype == dtype and torch.isfinite(out).all()
    torch.testing.assert_close(out, s(k))  # int32 and int64 offsets agree
    out.float().sum().backward()
    for pname, p in s.named_parameters():
        assert torch.isfinite(p.grad).all(), pname
    # low precision only rounds the result: computed from the same (rounded) parameters
    # in float32, cast to the module's dtype
    ref = scoring.build(**s.config()).to(torch.float32)
    ref.load_state_dict({n: t.float() for n, t in s.state_dict().items()})
    for n, b in s.named_buffers():
        getattr(ref, n).copy_(b.float())
    torch.testing.assert_close(out, ref(k).to(dtype), rtol=0, atol=0)


@pytest.mark.parametrize("name,options", VARIANTS, ids=VARIANT_IDS)
def test_kernel_tail_config_round_trip(name, options):
    s = _scramble(scoring.build(name, num_heads=5, num_kernels=2, **options))
    cfg = s.config()
    assert cfg == json.loads(json.dumps(cfg))  # plain data
    rebuilt = scoring.build(**cfg)
    assert type(rebuilt) is type(s) and rebuilt.config() == cfg
    rebuilt.load_state_dict(s.state_dict())
    for n, b in s.named_buffers():  # fixed tails are rebuilt from the config, not loaded
        torch.testing.assert_close(getattr(rebuilt, n), scoring.build(**cfg).get_buffer(n))
        getattr(rebuilt, n).copy_(b)
    k = torch.arange(-300, 301)
    torch.testing.assert_close(rebuilt(k), s(k))


@pytest.mark.parametrize(
    "name,options,per_layer",
    [
        ("rbf_linear", {}, 3 * 5 * 4 + 4),
        ("rbf_linear", {"asymmetric": True}, 3 * 5 * 4 + 8),
        ("rbf_linear", {"learn_tail": False}, 3 * 5 * 4),
        ("rbf_log", {}, 3 * 5 * 4 + 8),
        ("rbf_log", {"asymmetric": True}, 3 * 5 * 4 + 16),
        ("rbf_logdist", {}, 3 * 5 * 4 + 8),
        ("rbf_logdist", {"tail": "linear"}, 3 * 5 * 4 + 4),
        ("rbf_logdist", {"tail": "none"}, 3 * 5 * 4),
        ("rbf_logdist", {"num_kernels": 3, "asymmetric": True}, 3 * 3 * 4 + 16),
    ],
)
def test_kernel_tail_parameter_counts(name, options, per_layer):
    s = scoring.build(name, num_heads=4, **options)
    assert s.num_positional_parameters() == per_layer
    assert sum(p.numel() for p in s.parameters()) == per_layer
    assert 4 * per_layer < 655  # the small ALBERT (4 layers): under 1% of its 65,536


def test_rbf_linear_starts_as_alibi_plus_the_papers_kernels():
    torch.manual_seed(0)
    s = scoring.build("rbf_linear", num_heads=12)
    alibi = scoring.build("alibi", num_heads=12)
    torch.testing.assert_close(s.tail_parameters()["slope"], alibi.slopes)
    k = torch.arange(-2048, 2049)
    torch.testing.assert_close(s.tail(k), alibi(k))
    far = k.abs() > 200  # beyond every kernel: exactly ALiBi
    torch.testing.assert_close(s(k)[:, far], alibi(k)[:, far])
    assert abs(s.amplitude.mean().item() - 0.1) < 0.01 and abs(s.offset.std().item() - 5) < 1.5
    # without kernels and with fixed slopes the family is ALiBi itself
    bare = scoring.build(
        "rbf_linear", num_heads=7, amplitude_mean=0.0, amplitude_std=0.0, learn_tail=False
    )
    assert bare.num_positional_parameters() == 3 * 5 * 7
    torch.testing.assert_close(bare(k), scoring.build("alibi", num_heads=7)(k))
    half = scoring.build("rbf_linear", num_heads=4, tail_scale=0.5, asymmetric=True)
    expected = 0.5 * scoring.alibi_slopes(4)[:, None].expand(4, 2)
    torch.testing.assert_close(half.tail_parameters()["slope"], expected)


def test_rbf_log_starts_with_alibis_slope_and_a_summable_power():
    s = scoring.build("rbf_log", num_heads=8)
    p = s.tail_parameters()
    torch.testing.assert_close(p["r1"], torch.full((8,), 2.0))
    torch.testing.assert_close(p["r1"] * p["r2"], scoring.alibi_slopes(8))  # slope at k = 0
    # with zero kernels it is KERPLE-log with those r1, r2
    bare = scoring.build("rbf_log", num_heads=8, amplitude_mean=0.0, amplitude_std=0.0)
    kerple = scoring.build("kerple_log", num_heads=8, eps=1e-9)
    with torch.no_grad():
        kerple.r1.copy_(p["r1"])
        kerple.r2.copy_(p["r2"])
    k = torch.arange(-5000, 5001, 7)
    torch.testing.assert_close(bare(k), kerple(k))
    # r1 = 2 > 1: the positional weights exp(tail) have a finite sum, so keys ever further
    # away add ever less to a query's positional prior; with r1 = 1 they would not
    for r1, most in ((2.0, 0.01), (1.0, None)):
        s = scoring.build("rbf_log", num_heads=4, init_r1=r1)
        w = s.tail(torch.arange(0, 10**6)).double().exp()  # (H, K)
        share = w[:, 10**5 :].sum(-1) / w.sum(-1)  # keys at 10^5 .. 10^6
        if most is not None:
            assert (share < most).all()
        else:
            assert (share > 0.1).all()


def test_log_distance_axis():
    k = torch.arange(-5000, 5001).double()
    for w in (0.5, 1.0, 7.0):
        psi = scoring.log_distance(k, w)
        torch.testing.assert_close(psi, -psi.flip(0))  # odd
        assert (psi.diff() > 0).all()  # strictly increasing
        expected = [reference_scoring.log_distance(x, w) for x in (-3000.0, -1.0, 0.0, 2.0)]
        got = scoring.log_distance(torch.tensor([-3000.0, -1.0, 0.0, 2.0]).double(), w)
        torch.testing.assert_close(got, torch.tensor(expected).double())
    small = torch.tensor([1.0, 2.0]).double()
    torch.testing.assert_close(scoring.log_distance(small, 1e4), small / 1e4, rtol=1e-3, atol=0)


def test_rbf_logdist_kernels_widen_with_distance():
    s = scoring.build("rbf_logdist", num_heads=1, num_kernels=2, tail="none", distance_scale=2.0)
    with torch.no_grad():
        s.amplitude.fill_(1.0)
        s.sharpness.fill_(2.0)
        s.offset.copy_(torch.tensor([[1.0, 4.0]]))  # centres at k = w (e^c - 1)
    centres = (2.0 * (torch.tensor([1.0, 4.0]).exp() - 1)).round().long()  # 3 and 107
    k = torch.arange(0, 1000)
    f = s.kernels(k)[0]
    for c in centres.tolist():  # a maximum at each centre
        assert f[c] > f[c - 1] and f[c] >= f[c + 1]
    # half-height widths in tokens: the far kernel is many times wider
    width = [((f > 0.5) & (abs(k - c) < c)).sum().item() for c in centres.tolist()]
    assert width[1] > 10 * width[0]
    # default start: centres spread evenly over the log axis [-4, 4] (+ noise)
    d = scoring.build("rbf_logdist", num_heads=64, offset_std=0.0)
    torch.testing.assert_close(d.offset[0], torch.linspace(-4, 4, 5))


def test_asymmetric_tail_sides_are_independent():
    s = scoring.build("rbf_linear", num_heads=2, asymmetric=True, amplitude_std=0.0)
    k = torch.arange(-20, 21)
    before = s(k).detach()
    with torch.no_grad():
        s.raw_slope[:, 1] += 3.0  # only the k > 0 side
    after = s(k).detach()
    assert torch.equal(after[:, k <= 0], before[:, k <= 0])
    assert (after[:, k > 0] < before[:, k > 0]).all()


@pytest.mark.parametrize("name", ["rbf", *TAIL_FAMILIES])
def test_far_ramp_changes_only_offsets_beyond_it(name):
    torch.manual_seed(0)
    plain = scoring.build(name, num_heads=3)
    ramped = scoring.build(**{**plain.config(), "far_offset": 127, "far_slope": 2.0})
    ramped.load_state_dict(plain.state_dict())
    assert ramped.num_positional_parameters() == plain.num_positional_parameters()
    k = torch.arange(-2047, 2048)
    a, b = plain(k), ramped(k)
    inside = k.abs() <= 127
    assert torch.equal(a[:, inside], b[:, inside])
    excess = (k.abs() - 127).clamp(min=0).float()
    torch.testing.assert_close(b - a, (-2.0 * excess).expand_as(a), rtol=1e-6, atol=1e-3)
    assert torch.equal(
        scoring.far_ramp(torch.tensor([-10, 3, 4, 9]), 3, 0.5),
        torch.tensor([-3.5, 0.0, -0.5, -3.0]),
    )


def test_near_table_adds_free_values_on_short_offsets_only():
    torch.manual_seed(0)
    plain = scoring.build("rbf", num_heads=3)
    near = scoring.build(**{**plain.config(), "near_offsets": 4})
    near.load_state_dict(plain.state_dict(), strict=False)
    k = torch.arange(-300, 301)
    assert torch.equal(near(k), plain(k))  # starts at 0: the same function
    assert "near_offsets" not in plain.config()  # saved configs name it only when set
    assert near.near.shape == (3, 9)
    assert near.num_positional_parameters() == plain.num_positional_parameters() + 27
    with torch.no_grad():
        near.near.copy_(torch.arange(27.0).view(3, 9))
    inside = k.abs() <= 4
    assert torch.equal(near(k)[:, ~inside], plain(k)[:, ~inside])
    torch.testing.assert_close(
        near(k)[:, inside] - plain(k)[:, inside], torch.arange(27.0).view(3, 9)
    )
    near(k).sum().backward()
    assert torch.equal(near.near.grad, torch.ones(3, 9))  # every short offset read once
    back = scoring.build(**json.loads(json.dumps(near.config())))
    back.load_state_dict(near.state_dict())
    assert back.near_offsets == 4 and torch.equal(back(k), near(k))
    zero = scoring.build("rbf", num_heads=2, near_offsets=0)
    assert zero.near.shape == (2, 1)
    with pytest.raises(ValueError, match="near_offsets"):
        scoring.build("rbf", num_heads=2, near_offsets=-1)


def test_build_rejects_unknown_options():
    with pytest.raises(ValueError, match=r"rbf_linear.*unknown option.*\['init_r1'\]"):
        scoring.build("rbf_linear", num_heads=2, init_r1=2.0)
    with pytest.raises(ValueError, match=r"unknown option.*\['num_kernel'\]"):
        scoring.build("rbf", num_heads=2, num_kernel=3)
    with pytest.raises(ValueError, match="unknown option"):
        scoring.build("alibi", num_heads=2, slopes=[1.0])


@pytest.mark.parametrize(
    "name,options,match",
    [
        ("rbf_linear", {"tail_scale": 0.0}, "tail_scale"),
        ("rbf_linear", {"tail_scale": float("inf")}, "tail_scale"),
        ("rbf_linear", {"learn_tail": 1}, "learn_tail"),
        ("rbf_linear", {"asymmetric": "yes"}, "asymmetric"),
        ("rbf_linear", {"num_kernels": 0}, "num_kernels"),
        ("rbf_linear", {"far_offset": -1}, "far_offset"),
        ("rbf_linear", {"far_offset": 2.5}, "far_offset"),
        ("rbf_linear", {"far_slope": 0.0}, "far_slope"),
        ("rbf_log", {"init_r1": -1.0}, "init_r1"),
        ("rbf_log", {"amplitude_std": -0.1}, "amplitude_std"),
        ("rbf_log", {"offset_mean": float("nan")}, "offset_mean"),
        ("rbf_log", {"offset_range": -2.0}, "offset_range"),
        ("rbf_logdist", {"distance_scale": 0.0}, "distance_scale"),
        ("rbf_logdist", {"tail": "cubic"}, "tail"),
        ("rbf_logdist", {"tail": "linear", "init_r1": 2.0}, "init_r1.*tail='linear'"),
        ("rbf_logdist", {"tail": "none", "asymmetric": True}, "asymmetric.*tail='none'"),
        ("rbf", {"far_slope": -1.0}, "far_slope"),
        ("rbf", {"sharpness_std": -1.0}, "sharpness_std"),
    ],
)
def test_kernel_tail_bad_options_name_the_option(name, options, match):
    with pytest.raises(ValueError, match=match):
        scoring.build(name, num_heads=2, **options)


@pytest.mark.parametrize("name", TAIL_FAMILIES)
def test_kernel_tail_rejects_float_offsets(name):
    s = scoring.build(name, num_heads=2)
    for method in (s, s.kernels, s.tail):
        with pytest.raises(ValueError, match="integer tensor"):
            method(torch.tensor([0.5]))
