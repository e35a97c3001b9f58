"""Scaled dot-product attention with a translation-invariant positional bias.

    out = softmax(q k^T * scale + F + M) v,     F[h, i, j] = f_h(j - i)

where F is a Toeplitz bias from a positional scoring function (see :mod:`tisa.scoring`,
:mod:`tisa.bias`) and M the padding / causal mask. A scoring function that is not
translation invariant (``translation_invariant = False``: FIRE's query normaliser) gives
its whole (H, Lq, Lk) bias instead (:meth:`~tisa.scoring.ScoringFunction.position_bias`),
which is added to M: the backends then see a float mask (trainable: ``"auto"`` trains it
on ``"sdpa"``, whose backward gives the mask its gradient, or on ``"eager"`` with
dropout).

Letters: B batch, H heads, Lq queries, Lk keys, D head size, N = Lq + Lk - 1 offsets,
R query rows of a block.
Queries sit at the last Lq of the Lk key positions (a key/value cache); with Lq == Lk this
is ordinary self-attention.

Backends
--------
``"eager"``  the formula written out with matmul + softmax. Readable; the test oracle.
``"sdpa"``   :func:`torch.nn.functional.scaled_dot_product_attention` (the fused kernel)
             with the bias as a constant float mask built a block of query rows at a
             time: the mask of a block is a strided view of the (H, N) table (rows
             reversed, see :func:`tisa.bias.reversed_rows`, with the block's queries
             reversed to match), plus the padding mask of those rows if there is one
             (a block with a mask: all heads, as many rows as keep it within 4M logits).
             Causality is folded into the table (-inf at positive offsets). When the bias
             trains, a custom backward recomputes the probabilities block by block,
             returns dq/dk/dv and reduces the logit gradient to the table by summing over
             the batch and along anti-diagonals; no (H, Lq, Lk) tensor exists beyond those
             blocks, except the gradient of a float mask that requires grad (dS, written
             block by block).
``"flex"``   FlexAttention with a ``score_mod`` that gathers from the (H, N) table, so no
             Lq x Lk bias is ever built. Compiled; on CPU forward only (PyTorch has no
             FlexAttention backward on CPU), on CUDA forward and backward. Has no
             attention dropout: ``dropout_p > 0`` is refused.
``"auto"``   ``"sdpa"``, except: dropout during training -> ``"eager"``; CUDA with
             gradients and no grad-requiring mask -> ``"flex"`` when available.

Masked rows
-----------
Bool masks (False = masked) and causality mask with -inf, as stock SDPA does: a query row
whose keys are all masked gets output 0 and zero, finite gradients on every backend. An
additive mask of ``finfo.min`` values is a finite number, so such a row averages over its
keys, also as in stock SDPA.

FlexAttention on CPU
--------------------
Inductor's CPU FlexAttention kernel (torch 2.13) computes ``q k^T`` with a micro-kernel
that writes past its tile when the head size is a multiple of the vector width below 24
and a key tile is not a multiple of 16 (e.g. D = 8 or 16 with AVX2: wrong values or NaN
at L = 40, 56, 72, 120). The flex backend therefore pads q and k with zero columns up to
D = 24 on CPU (zeros leave ``q . k`` unchanged; the scale is applied from the real D) and
pads the lengths to a few bucket sizes (masked keys, padded query rows sliced off), which
also bounds recompilation to one kernel per bucket. Inductor's on-disk cache does not
tell kernels generated for different instruction sets apart (``ATEN_CPU_CAPABILITY``):
a kernel generated for AVX2 and reused by an AVX-512 run gives wrong numbers. The flex
backend compiles with the vector width named in inductor's config, which is part of the
cache key; other code compiled in the same process is not covered by this.

The package: :mod:`~tisa.attention.dispatch` (:func:`attention`, the checks, the choice of
backend), :mod:`~tisa.attention.eager` (the formula, the test oracle),
:mod:`~tisa.attention.sdpa` (blocked SDPA with its backward), :mod:`~tisa.attention.flex`
(FlexAttention), :mod:`~tisa.attention.masks` and :mod:`~tisa.attention.layer`
(:class:`TisaSelfAttention`).
"""

from tisa.attention.dispatch import (
    BACKENDS,
    Backend,
    attention,
    attention_with_weights,
    resolve_backend,
)
from tisa.attention.layer import TisaSelfAttention

__all__ = [
    "BACKENDS",
    "Backend",
    "TisaSelfAttention",
    "attention",
    "attention_with_weights",
    "resolve_backend",
]
