"""Positional scoring functions f_h(k), the positional half of TISA.

Every family maps integer offsets ``k = j - i`` (key position minus query position, so
``k > 0`` looks ahead) to one value per attention head::

    scorer = build("rbf", num_heads=12)
    scorer(torch.arange(-3, 4))          # (12, 7): f_h(k) for k = -3..3

Letters used in shapes: H heads, S kernels per head, K the largest distinct offset a table
keeps, ``*`` any shape of offsets.

Families
--------
``rbf``          the paper: f_h(k) = sum_s a_hs * exp(-|b_hs| * (k - c_hs)^2)
``alibi``        fixed geometric slopes: f_h(k) = -m_h * |k| (no parameters)
``t5``           learned log-spaced distance buckets (one value per bucket and head)
``kerple_log``   f_h(k) = -r1_h * log(1 + r2_h * |k|), with r1, r2 > 0
``free``         one learned value per offset in [-K, K], offsets beyond clipped to +-K
``rbf_linear``   RBF kernels plus a learned linear tail: rbf_h(k) - m_h * |k|, m_h >= 0
``rbf_log``      RBF kernels plus a learned KERPLE-log tail: rbf_h(k) - r1_h log(1 + r2_h |k|)
``rbf_logdist``  RBF kernels on the log-distance axis psi(k) = sign(k) log(1 + |k|/w),
                 plus a tail (log by default)
``alibi_learned`` ALiBi with learned slopes -m_h |k|, m_h >= 0 (ALiBi's at the start)
``fire``         FIRE: an MLP of log(c|k| + 1) over a log normaliser; the paper's
                 normaliser depends on the query position (not translation invariant),
                 ours (``normalizer="length"``) on a learned length only

The last three exist for length extrapolation. RBF kernels are local bumps that vanish far
away, so beyond the kernels every key gets the same bias; at lengths beyond training a
query then spreads its attention over more distant keys than it ever saw. A tail that
falls monotonically with |k| (as ALiBi's does) keeps distant keys down at any length while
the kernels keep the local, direction-aware structure. Tails start from ALiBi's geometric
slopes, so a model begins with ALiBi's recency prior.

The kernel families also take ``far_offset=K`` (off by default): an extra penalty
``-far_slope * (|k| - K)`` on offsets beyond +-K. With K at least the largest offset seen
in training it leaves every trained offset unchanged, so it can be switched on for
evaluation at longer lengths without retraining (a soft attention window).

Any family can also be read with its offsets clipped at +-K, f_h(clamp(k, -K, K))
(:class:`ClippedOffsets`; ``TisaSettings.clip_distance`` switches it on for a model at
inference): keys beyond the longest trained offset then get the bias of that offset.
Or with a hard window, f_h(k) on |k| <= W and -inf beyond (:class:`WindowedOffsets`;
``TisaSettings.attention_window``): each query then sees at most 2W + 1 keys, and the
sdpa backend costs O(L * W).

Next to f_h, a model can also take a relative content term (:class:`RelativeContent`;
``TisaSettings.content_offsets``): logits q_i . rk_h(j - i) + k_j . rq_h(j - i) with
learned vectors per head and offset clipped to +-K, the part of how far a query looks that
depends on what it is.

Names resolve through :data:`REGISTRY` (see :func:`build`), so configs hold plain data:
``{"name": "rbf", "num_heads": 12, "num_kernels": 5}``.

The package: :mod:`~tisa.scoring.base` (the interface, the registry, :func:`build`),
:mod:`~tisa.scoring.rbf` (the paper's family and its kernels),
:mod:`~tisa.scoring.baselines` (ALiBi, T5, KERPLE, free, FIRE) and
:mod:`~tisa.scoring.tails` (kernels plus a tail), :mod:`~tisa.scoring.content` (the
relative content term).
"""

from tisa.scoring.base import (
    REGISTRY,
    ClippedOffsets,
    ScoringFunction,
    WindowedOffsets,
    build,
    register,
)
from tisa.scoring.baselines import (
    FIRE_NORMALIZERS,
    ALiBiLearnedScoring,
    ALiBiScoring,
    FIREScoring,
    FreeScoring,
    KerpleLogScoring,
    T5Scoring,
    alibi_slopes,
    t5_bucket,
)
from tisa.scoring.content import RelativeContent
from tisa.scoring.rbf import RBFScoring, far_ramp
from tisa.scoring.tails import (
    TAILS,
    RBFLinearScoring,
    RBFLogDistScoring,
    RBFLogScoring,
    RBFTailScoring,
    log_distance,
)

__all__ = [
    "REGISTRY",
    "TAILS",
    "ScoringFunction",
    "ClippedOffsets",
    "WindowedOffsets",
    "RelativeContent",
    "RBFScoring",
    "ALiBiScoring",
    "T5Scoring",
    "KerpleLogScoring",
    "FreeScoring",
    "RBFTailScoring",
    "RBFLinearScoring",
    "RBFLogScoring",
    "RBFLogDistScoring",
    "ALiBiLearnedScoring",
    "FIREScoring",
    "FIRE_NORMALIZERS",
    "alibi_slopes",
    "t5_bucket",
    "build",
    "far_ramp",
    "log_distance",
    "register",
]
