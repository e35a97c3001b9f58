"""Metrics on position-to-position matrices: pure tensor -> number, no plotting, no models.

Letters: L positions, ``...`` any batch shape. Offsets follow the project convention
k = j - i (key minus query, so k > 0 looks ahead). Every function accepts a batch of
square matrices ``(..., L, L)`` and returns one value per matrix, shape ``(...)`` (a 0-d
tensor for a single matrix; ``float(result)`` gives the number). Computation is done in
float64 so that "1.0 for a Toeplitz matrix" holds to ~1e-12.

Translation invariance (Wennberg & Henter, 2021; the definition this project fixes)
    ``TI(M) = 1 - ||M - T(M)||_F^2 / ||M - mean(M)||_F^2`` where T(M) is the
    least-squares Toeplitz approximation (each entry replaced by the mean of its
    diagonal). It is the share of M's variance explained by a function of j - i alone:
    1 for any Toeplitz matrix, about (2L - 1) / L^2 for i.i.d. noise, and always in
    [0, 1] because T(M) is an orthogonal projection onto a space holding the constants.
    A constant matrix (zero variance) is Toeplitz, so its TI is defined as 1.0.

    The main diagonal of a Gram matrix P P^T holds the squared norms of the positions,
    which are nearly equal for any table, random ones included: for n random
    d-dimensional positions that diagonal alone explains about d / (d + n) of the
    variance (0.43 for 512 x 384). ``exclude_diagonal=True`` measures TI over the entries
    with j != i only (the off-diagonal TI), which is near 0 for such noise. Which
    entries count (all, j <= i with ``causal=True``, and j != i with
    ``exclude_diagonal=True``) is always a union of whole diagonals, so T(M) on those
    entries is the full T(M) restricted to them; mean and variance are taken over the
    same entries.

Locality and symmetry (Chen, Varoquaux & Suchanek, "The Locality and Symmetry of
Positional Encodings", EMNLP Findings 2023), for attention matrices (non-negative rows
summing to 1):
    ``locality(A) = mean_i sum_j A[i, j] * 2^-|j - i|``: 1 when every query attends only
    to itself, small when attention is spread out. The published definition.
    ``symmetry(A)`` compares the weight a query gives to the key d positions to its left
    with the key d positions to its right, for every d with both keys inside the
    sequence. The default ``method="mass"`` is this project's bounded form:
    ``1 - sum |A[i,i-d] - A[i,i+d]| / sum (A[i,i-d] + A[i,i+d])`` (1 for mirror-symmetric
    rows, 0 for strictly one-sided attention such as a causal mask). ``method="chen"``
    reproduces the published definition, which min-max normalises the differences within
    each row before averaging (scale-free per row, so small asymmetries already count).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

from tisa.bias import diagonal_sums, offsets
from tisa.bias import toeplitz_projection as _toeplitz_projection

__all__ = [
    "OffsetProfile",
    "locality",
    "offset_profile",
    "symmetry",
    "toeplitz_projection",
    "translation_invariance",
    "transpose_symmetry",
]

#: Relative variance below which a matrix counts as constant (TI defined as 1.0).
CONSTANT_TOLERANCE = 1e-24


def _square(matrix: Tensor, name: str = "matrix") -> Tensor:
    if not isinstance(matrix, Tensor):
        raise ValueError(f"{name} must be a torch.Tensor of shape (..., L, L), got {type(matrix)}")
    if matrix.dim() < 2 or matrix.shape[-1] != matrix.shape[-2] or matrix.shape[-1] < 1:
        raise ValueError(
            f"{name} must have shape (..., L, L) with L >= 1, got {tuple(matrix.shape)}"
        )
    if matrix.is_complex():
        raise ValueError(f"{name} must be real, got dtype {matrix.dtype}")
    return matrix.detach().to(torch.float64)


def _attention(matrix: Tensor, name: str = "attention", atol: float = 1e-3) -> Tensor:
    a = _square(matrix, name)
    if (a < 0).any():
        raise ValueError(f"{name} must be non-negative (attention probabilities)")
    rows = a.sum(-1)
    if not torch.allclose(rows, torch.ones_like(rows), atol=atol):
        worst = (rows - 1).abs().max().item()
        raise ValueError(f"{name} rows must sum to 1 (attention probabilities); off by {worst:.3g}")
    return a


def toeplitz_projection(matrix: Tensor) -> Tensor:
    """Least-squares Toeplitz approximation T(M): each entry -> the mean of its diagonal.

    Args:
        matrix: (..., L, L) real tensor.

    Returns:
        (..., L, L) tensor in the dtype of ``matrix`` (float64 for integer input).
    """
    m = _square(matrix)
    out = _toeplitz_projection(m)
    return out.to(matrix.dtype) if matrix.is_floating_point() else out


def _used_entries(n: int, *, causal: bool, exclude_diagonal: bool, device: torch.device) -> Tensor:
    """(L, L) float64 0/1 weights of the entries a TI uses: j <= i if causal, j != i if excluded.

    Each selection keeps or drops whole diagonals (k <= 0, k != 0), which is why the
    Toeplitz projection of the full matrix is also the projection on the kept entries.
    """
    w = torch.ones(n, n, dtype=torch.float64, device=device)
    if causal:
        w = w.tril()
    if exclude_diagonal:
        w = w - torch.diag_embed(torch.diagonal(w))
    return w


def translation_invariance(
    matrix: Tensor, *, causal: bool = False, exclude_diagonal: bool = False
) -> Tensor:
    """Degree of translation invariance, TI(M) = 1 - ||M - T(M)||^2 / ||M - mean(M)||^2.

    With U the set of entries used (all (i, j); only j <= i when ``causal``; without
    j == i when ``exclude_diagonal``), D_k = {(i, j) in U : j - i = k} and |U| its size::

        T(M)[i, j] = mean_{(a, b) in D_{j-i}} M[a, b]             (mean of its diagonal)
        mean(M)    = (1 / |U|) sum_{(i, j) in U} M[i, j]
        TI(M)      = 1 - sum_U (M[i, j] - T(M)[i, j])^2 / sum_U (M[i, j] - mean(M))^2

    Args:
        matrix: (..., L, L) real tensor (a Gram matrix, attention logits or weights).
        causal: only use entries with j <= i (the part a causal model ever sees). Each
            diagonal lies entirely inside or outside that triangle, so T(M) is unchanged.
        exclude_diagonal: leave out the main diagonal j == i (the off-diagonal TI). Use it
            wherever the diagonal is special for reasons other than position, such as
            the squared norms on the diagonal of P P^T or the ones of a cosine matrix.

    Returns:
        (...) float64 tensor of values in [0, 1]; 1.0 for Toeplitz matrices, and 1.0 by
        definition when the used entries have zero variance (constant, a single entry,
        or none: L == 1, or L == 2 with both options).
    """
    m = _square(matrix)
    n = m.shape[-1]
    w = _used_entries(n, causal=causal, exclude_diagonal=exclude_diagonal, device=m.device)
    resid = ((m - _toeplitz_projection(m)).square() * w).sum((-2, -1))
    mean = (m * w).sum((-2, -1), keepdim=True) / w.sum().clamp_min(1.0)
    total = ((m - mean).square() * w).sum((-2, -1))
    scale = (m.square() * w).sum((-2, -1))
    constant = total <= CONSTANT_TOLERANCE * scale.clamp_min(torch.finfo(torch.float64).tiny)
    ti = 1.0 - resid / torch.where(constant, torch.ones_like(total), total)
    return torch.where(constant, torch.ones_like(ti), ti).clamp(0.0, 1.0)


@dataclass(frozen=True)
class OffsetProfile:
    """Statistics of each diagonal of (..., L, L) matrices.

    Attributes:
        offsets: (2L-1,) long tensor, k = j - i from -(L-1) to L-1.
        mean: (..., 2L-1) mean of the entries with j - i = k (the Toeplitz projection's value).
        std: (..., 2L-1) population standard deviation of those entries (0 on a Toeplitz matrix).
        count: (2L-1,) number of entries on each diagonal, L - |k|.
    """

    offsets: Tensor
    mean: Tensor
    std: Tensor
    count: Tensor


def offset_profile(matrix: Tensor) -> OffsetProfile:
    """Mean and standard deviation of M[i, j] as a function of the offset k = j - i.

    Args:
        matrix: (..., L, L) real tensor.

    Returns:
        :class:`OffsetProfile` with float64 statistics of shape (..., 2L-1).
    """
    m = _square(matrix)
    n = m.shape[-1]
    count = diagonal_sums(torch.ones(n, n, dtype=torch.float64, device=m.device))
    mean = diagonal_sums(m) / count
    var = (diagonal_sums(m.square()) / count - mean.square()).clamp_min(0.0)
    return OffsetProfile(
        offsets=offsets(n, n, device=m.device), mean=mean, std=var.sqrt(), count=count.long()
    )


def locality(attention: Tensor, *, base: float = 2.0) -> Tensor:
    """Attention locality of Chen et al. (2023): mean_i sum_j A[i, j] * base^-|j - i|.

    Args:
        attention: (..., L, L) non-negative rows summing to 1.
        base: decay base (> 1); the published metric uses 2.

    Returns:
        (...) float64 values in (0, 1]: 1 exactly when each query attends only to itself;
        uniform attention over L keys gives (1 + 2 * sum_{d=1}^{L-1} (L - d) base^-d) / L^2.
    """
    if not base > 1.0:
        raise ValueError(f"base must be > 1, got {base!r}")
    a = _attention(attention)
    n = a.shape[-1]
    idx = torch.arange(n, device=a.device)
    distance = (idx[None, :] - idx[:, None]).abs().to(torch.float64)  # (L, L)
    decay = torch.pow(float(base), -distance)
    return (a * decay).sum(-1).mean(-1)


def _mirror_pairs(a: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Left/right weights at mirror offsets: each (..., L, L-1) plus a (L, L-1) validity mask.

    ``left[..., i, d-1] = A[i, i-d]`` and ``right[..., i, d-1] = A[i, i+d]``; valid where
    both keys exist.
    """
    n = a.shape[-1]
    i = torch.arange(n, device=a.device)[:, None]
    d = torch.arange(1, n, device=a.device)[None, :]
    valid = (i - d >= 0) & (i + d <= n - 1)  # (L, L-1)
    left_idx = (i - d).clamp(0, n - 1).expand(n, n - 1)
    right_idx = (i + d).clamp(0, n - 1).expand(n, n - 1)
    shape = (*a.shape[:-1], n - 1)
    left = a.gather(-1, left_idx.expand(shape))
    right = a.gather(-1, right_idx.expand(shape))
    return left, right, valid


def symmetry(attention: Tensor, *, method: Literal["mass", "chen"] = "mass") -> Tensor:
    """Left/right (mirror) symmetry of attention around each query position.

    Args:
        attention: (..., L, L) non-negative rows summing to 1.
        method: ``"mass"`` (default): ``1 - sum|A[i,i-d] - A[i,i+d]| / sum(A[i,i-d] +
            A[i,i+d])`` over all queries i and distances d with both keys inside the
            sequence; 1.0 when that mass is zero. ``"chen"``: the published definition of
            Chen et al. (2023): per query row, the differences |A[i,i-d] - A[i,i+d]| are
            min-max scaled to [0, 1] (all zeros when they are equal, e.g. a single pair),
            and the result is 1 minus their mean over all rows and distances.

    Returns:
        (...) float64 values in [0, 1]; 1 for mirror-symmetric rows (e.g. a symmetric
        Toeplitz matrix), 0 for one-sided attention with ``"mass"``. 1.0 when L < 3
        (no query has keys on both sides).
    """
    if method not in ("mass", "chen"):
        raise ValueError(f"method must be 'mass' or 'chen', got {method!r}")
    a = _attention(attention)
    if a.shape[-1] < 3:
        return torch.ones(a.shape[:-2], dtype=torch.float64, device=a.device)
    left, right, valid = _mirror_pairs(a)
    diff = (left - right).abs() * valid
    if method == "mass":
        mass = ((left + right) * valid).sum((-2, -1))
        ratio = diff.sum((-2, -1)) / torch.where(mass > 0, mass, torch.ones_like(mass))
        return torch.where(mass > 0, 1.0 - ratio, torch.ones_like(ratio)).clamp(0.0, 1.0)
    inf = torch.tensor(float("inf"), dtype=torch.float64, device=a.device)
    lo = torch.where(valid, diff, inf).amin(-1, keepdim=True)
    hi = torch.where(valid, diff, -inf).amax(-1, keepdim=True)
    span = hi - lo
    scaled = torch.where(span > 0, (diff - lo) / torch.where(span > 0, span, 1.0), 0.0)
    scaled = scaled * valid
    return 1.0 - scaled.sum((-2, -1)) / valid.sum()


def transpose_symmetry(matrix: Tensor) -> Tensor:
    """Symmetry under transposition: 1 - ||M - M^T||_F / (||M||_F + ||M^T||_F).

    For a Toeplitz matrix this is the symmetry f(k) = f(-k) of its offset function.

    Args:
        matrix: (..., L, L) real tensor (any sign: logits, Gram matrices).

    Returns:
        (...) float64 values in [0, 1]: 1 for symmetric, 0 for antisymmetric matrices;
        1.0 for the zero matrix.
    """
    m = _square(matrix)
    norm = torch.linalg.matrix_norm(m)  # ||M|| == ||M^T||
    diff = torch.linalg.matrix_norm(m - m.transpose(-2, -1))
    denom = 2.0 * norm
    out = 1.0 - diff / torch.where(denom > 0, denom, torch.ones_like(denom))
    return torch.where(denom > 0, out, torch.ones_like(out)).clamp(0.0, 1.0)
