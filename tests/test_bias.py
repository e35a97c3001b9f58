import pytest
import torch

from tests import reference
from tisa import bias, scoring


@pytest.mark.parametrize("lq,lk", [(1, 1), (7, 7), (3, 10), (97, 97)])
def test_table_expansion_matches_formula(lq, lk):
    torch.manual_seed(0)
    s = scoring.build("rbf", num_heads=3)
    dense = bias.expand(bias.table(s, lq, lk), lq, lk)
    if lq * lk <= 1000:
        expected = reference.toeplitz_bias(s, lq, lk)
    else:  # the same formula, vectorised over positions
        i = torch.arange(lk - lq, lk)[:, None]
        j = torch.arange(lk)[None, :]
        expected = reference.rbf(j - i, s.amplitude, s.sharpness, s.offset)
    torch.testing.assert_close(dense, expected)


def test_bias_is_toeplitz():
    s = scoring.build("rbf", num_heads=2)
    dense = bias.expand(bias.table(s, 50, 50), 50, 50)
    for d in range(-49, 50):
        diag = torch.diagonal(dense, offset=d, dim1=-2, dim2=-1)
        assert torch.equal(diag, diag[:, :1].expand_as(diag))
    torch.testing.assert_close(bias.toeplitz_projection(dense), dense)


def test_offsets_cover_kv_cache_positions():
    assert bias.offsets(2, 5).tolist() == [-4, -3, -2, -1, 0, 1]
    idx = bias.table_index(2, 5)
    # query 0 is at absolute position 3: key 0 -> offset -3 -> column 1
    assert idx[0, 0] == 1 and idx[1, 4] == 4


def test_diagonal_sums_is_adjoint_of_expand():
    torch.manual_seed(0)
    for lq, lk in [(1, 1), (4, 4), (3, 8), (8, 3)]:
        t = torch.randn(2, lq + lk - 1, dtype=torch.float64)
        g = torch.randn(2, lq, lk, dtype=torch.float64)
        lhs = (bias.expand(t, lq, lk) * g).sum()
        rhs = (t * bias.diagonal_sums(g)).sum()
        torch.testing.assert_close(lhs, rhs)


def test_expand_gradcheck():
    t = torch.randn(2, 9, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: bias.expand(x, 4, 6), (t,))


def test_bad_input():
    s = scoring.build("rbf", num_heads=2)
    with pytest.raises(ValueError, match="Lq"):
        bias.table(s, 5, 3)
    with pytest.raises(ValueError, match="lengths must be >= 1"):
        bias.table(s, 0)
    with pytest.raises(ValueError, match=r"\(H, Lq \+ Lk - 1\)"):
        bias.expand(torch.zeros(2, 5), 4, 4)
