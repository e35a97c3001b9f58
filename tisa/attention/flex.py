"""The flex backend: FlexAttention with a ``score_mod`` that gathers from the (H, N) bias
table, and the CPU work-around of Inductor's kernel (see :mod:`tisa.attention`,
"FlexAttention on CPU").

Letters: B batch, H heads, Lq queries, Lk keys, D head size, N = Lq + Lk - 1 offsets.
"""

from __future__ import annotations

import contextlib
import functools

import torch
import torch.nn.functional as F
from torch import Tensor

from tisa.attention.masks import additive

_FLEX = None
_FLEX_RECOMPILE_LIMIT = 64
# Head sizes below this are zero-padded on CPU (see the module docstring).
_FLEX_CPU_MIN_HEAD_DIM = 24
_FLEX_BLOCK = 128  # FlexAttention's default sparse block size


def has_flex() -> bool:
    try:
        from torch.nn.attention import flex_attention  # noqa: F401
    except ImportError:
        return False
    return True


def _compiled_flex():
    global _FLEX
    if _FLEX is None:
        if not has_flex():
            raise ValueError("backend='flex' needs torch.nn.attention.flex_attention (torch>=2.5)")
        _FLEX = torch.compile(_flex_impl, dynamic=False)
    return _FLEX


def _cpu_isa_config(cpu: bool):
    """Inductor config naming the CPU vector width it compiles for.

    Inductor picks the instruction set from ``ATEN_CPU_CAPABILITY`` but its on-disk cache
    key does not include it: a kernel generated for AVX2 and found again in a run that
    generates for AVX-512 gives wrong numbers (torch 2.13). An explicit ``cpp.simdlen``
    is part of the key, so kernels for different widths never meet.
    """
    from torch._inductor import config as inductor_config

    if not cpu or inductor_config.cpp.simdlen is not None:
        return contextlib.nullcontext()
    from torch._inductor.cpu_vec_isa import pick_vec_isa

    width = pick_vec_isa().bit_width()
    return inductor_config.patch({"cpp.simdlen": width}) if width else contextlib.nullcontext()


def _flex_bucket(n: int, queries: bool) -> int:
    """Padded length: a power of two, at least 16 (a single query stays 1: decoding)."""
    if queries and n == 1:
        return 1
    return max(16, 1 << (n - 1).bit_length())


def _pad_to(t: Tensor, length: int, dim: int) -> Tensor:
    """Zero-pads the last two axes of (B, H, L, D) to (length, dim) (no copy when equal)."""
    pad_l, pad_d = length - t.shape[-2], dim - t.shape[-1]
    return t if pad_l == pad_d == 0 else F.pad(t, (0, pad_d, 0, pad_l))


def flex(q, k, v, tab, mask, causal, scale, window=None) -> Tensor:
    if not torch.is_grad_enabled():
        # FlexAttention refuses CPU inputs that require grad even under no_grad.
        q, k, v = q.detach(), k.detach(), v.detach()
        tab = None if tab is None else tab.detach()
        mask = None if mask is None else mask.detach()
    b, h, lq, d = q.shape
    lk = k.shape[-2]
    lqp, lkp = _flex_bucket(lq, True), _flex_bucket(lk, False)
    # an attention window: the offsets any query reads, so that blocks beyond are skipped
    band = None if window is None else (-window, 0 if causal else window)
    dv = v.shape[-1]
    # On CPU v is padded alike (its columns are sliced off again), so that head sizes
    # below the minimum share one kernel.
    cpu = q.device.type == "cpu"
    dp = max(d, _FLEX_CPU_MIN_HEAD_DIM) if cpu else d
    dvp = max(dv, _FLEX_CPU_MIN_HEAD_DIM) if cpu else dv
    q, k, v = _pad_to(q, lqp, dp), _pad_to(k, lkp, dp), _pad_to(v, lkp, dvp)
    # Padded table: column kv - q + Lqp - 1 holds the offset the real table holds at
    # kv - q + Lq - 1, for every (q, kv) of the padded grid (padding reads zeros).
    tab = q.new_zeros(h, lq + lk - 1) if tab is None else tab
    tab = F.pad(tab, (lqp - lq, lkp - lk))
    # Masks become an additive tensor broadcast (stride 0) to (B, H, Lqp, Lkp): a padding
    # mask (B, 1, 1, Lk) stays O(B * Lk) in memory.
    add = additive(mask, q.dtype)
    if add is not None:
        pad_q = lqp - lq if add.shape[-2] > 1 else 0
        pad_k = lkp - lk if add.shape[-1] > 1 else 0
        add = F.pad(add, (0, pad_k, 0, pad_q)).expand(b, h, lqp, lkp)
    # Real lengths are data, not shapes, so every length in a bucket shares one kernel:
    # keys at kv >= Lk are padding, and causally query q sees kv <= q + Lk - Lq.
    limits = torch.tensor([lk, lk - lq if causal else lkp], device=q.device)
    if lk == lkp and not causal:
        limits = None  # nothing to mask inside the grid: a kernel without the comparison
    scale_t = torch.tensor(scale, dtype=torch.float32, device=q.device)
    block_mask = _flex_block_mask(lq, lk, lqp, lkp, causal, q.device, band)
    # Inductor's CPU FlexAttention template does not compile with dynamic shapes (torch
    # 2.13), so kernels are specialised per bucket.
    with torch._dynamo.config.patch(recompile_limit=_FLEX_RECOMPILE_LIMIT), _cpu_isa_config(cpu):
        out = _compiled_flex()(q, k, v, tab, add, limits, scale_t, block_mask)
    return out[:, :, :lq, :dv]


@functools.lru_cache(maxsize=64)
def _flex_block_mask(
    lq: int,
    lk: int,
    lqp: int,
    lkp: int,
    causal: bool,
    device: torch.device,
    band: tuple[int, int] | None = None,
):
    """FlexAttention block mask of the padded (Lqp, Lkp) grid, built from the lengths.

    Lists, per block of 128 query rows, the key blocks it must visit: none for blocks of
    padded rows, up to the last real key (or the last key a causal row sees) otherwise;
    with ``band`` (the lowest and highest offset j - i any query reads: an attention
    window), only the key blocks the block's rows reach. O((Lqp/128) * (Lkp/128))
    memory. Masking inside blocks is done by the score_mod, so on CUDA every visited block
    is listed as a full one (the kernel then skips the mask_mod); on CPU as partial ones
    with a mask_mod that keeps everything (inductor's CPU template does not compile with
    full blocks alone, torch 2.13).
    """
    from torch.nn.attention.flex_attention import BlockMask

    n_q, n_kv = -(-lqp // _FLEX_BLOCK), -(-lkp // _FLEX_BLOCK)
    counts = torch.zeros(n_q, dtype=torch.int32)
    indices = torch.arange(n_kv, dtype=torch.int32).expand(n_q, n_kv).contiguous()
    for block in range(n_q):
        first, last = block * _FLEX_BLOCK, min(lq, (block + 1) * _FLEX_BLOCK) - 1
        if first >= lq:
            continue
        first_key, last_key = 0, min(lk - 1, last + lk - lq) if causal else lk - 1
        if band is not None:  # positions of the rows: first + lk - lq .. last + lk - lq
            first_key = max(first_key, first + lk - lq + band[0])
            last_key = min(last_key, last + lk - lq + band[1])
        if first_key > last_key:
            continue
        start = first_key // _FLEX_BLOCK
        counts[block] = last_key // _FLEX_BLOCK + 1 - start
        indices[block] = indices[block].roll(-start)  # the visited blocks first
    indices = indices[None, None].to(device)
    counts = counts[None, None].to(device)
    if device.type == "cpu":
        return BlockMask.from_kv_blocks(
            counts, indices, BLOCK_SIZE=_FLEX_BLOCK, seq_lengths=(lqp, lkp)
        )
    return BlockMask.from_kv_blocks(
        torch.zeros_like(counts),  # no partial blocks
        indices,
        counts,
        indices,
        BLOCK_SIZE=_FLEX_BLOCK,
        seq_lengths=(lqp, lkp),
    )


def _flex_impl(q, k, v, tab, add, limits, scale, block_mask):
    from torch.nn.attention.flex_attention import flex_attention

    shift = q.shape[-2] - 1  # table column = kv_idx - q_idx + Lqp - 1

    def score_mod(score, bi, hi, qi, ki):
        score = score * scale + tab[hi, ki - qi + shift]
        if add is not None:
            score = score + add[bi, hi, qi, ki]
        if limits is None:
            return score
        keep = (ki < limits[0]) & (ki <= qi + limits[1])
        return torch.where(keep, score, -float("inf"))

    return flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask, scale=1.0)
