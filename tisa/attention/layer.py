"""``TisaSelfAttention``: a self-attention layer with a positional scoring function, on
:func:`tisa.attention.attention` (letters as in :mod:`tisa.attention`)."""

from __future__ import annotations

from torch import Tensor, nn

from tisa.attention.dispatch import BACKENDS, Backend, attention
from tisa.scoring import build


class TisaSelfAttention(nn.Module):
    """Multi-head self-attention with a per-layer positional scoring function.

    A building block for people writing their own models: projections, one scoring
    function (``scoring`` family, H heads) and :func:`attention`.

    Args:
        hidden_size: model width; must be divisible by ``num_heads``.
        num_heads: attention heads H.
        scoring: scoring family name (``"rbf"``, ``"alibi"``, ...) or None for none.
        causal: causal self-attention (decoder).
        dropout: attention-probability dropout during training.
        backend: attention backend (see :func:`attention`).
        **scoring_options: passed to :func:`tisa.scoring.build`.
    """

    def __init__(
        self,
        hidden_size: int,
        num_heads: int,
        *,
        scoring: str | None = "rbf",
        causal: bool = False,
        dropout: float = 0.0,
        bias: bool = True,
        backend: Backend = "auto",
        **scoring_options,
    ) -> None:
        super().__init__()
        if hidden_size % num_heads != 0:
            raise ValueError(
                f"hidden_size ({hidden_size}) must be divisible by num_heads ({num_heads})"
            )
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        self.num_heads = num_heads
        self.head_dim = hidden_size // num_heads
        self.causal = causal
        self.dropout = dropout
        self.backend = backend
        self.qkv = nn.Linear(hidden_size, 3 * hidden_size, bias=bias)
        self.out = nn.Linear(hidden_size, hidden_size, bias=bias)
        self.scorer = None if scoring is None else build(scoring, num_heads, **scoring_options)

    def forward(self, x: Tensor, padding_mask: Tensor | None = None) -> Tensor:
        """Self-attention over ``x``.

        Args:
            x: (B, L, hidden) inputs.
            padding_mask: optional (B, L) bool, True for real tokens.

        Returns:
            (B, L, hidden).
        """
        b, n, c = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.num_heads, self.head_dim).unbind(2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # (B, H, L, D)
        mask = None
        if padding_mask is not None:
            if padding_mask.shape != (b, n):
                raise ValueError(
                    f"padding_mask must have shape (B, L) = {(b, n)}, "
                    f"got {tuple(padding_mask.shape)}"
                )
            mask = padding_mask.bool()[:, None, None, :]  # (B, 1, 1, L)
        y = attention(
            q,
            k,
            v,
            self.scorer,
            mask=mask,
            causal=self.causal,
            dropout_p=self.dropout if self.training else 0.0,
            backend=self.backend,
        )  # (B, H, L, D)
        return self.out(y.transpose(1, 2).reshape(b, n, c))
