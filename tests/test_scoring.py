import pytest
import torch

from tests import reference
from tisa import scoring

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
