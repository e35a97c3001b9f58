"""Evaluation windows over a token stream: sliding windows and context curves.

Both cut windows ``[begin, end)`` out of one (T,) token stream (:func:`tisa.data.mlm.token_stream`)
and say which of their tokens are scored (``[first, last)``, indices into the stream), so
that the same tokens can be scored with different amounts of context.

Sliding windows (:func:`sliding_windows`), for causal LMs
    Windows of L tokens advancing by a stride S <= L, as in the Hugging Face perplexity
    guide: the first window scores the predictions of its tokens 1 .. L - 1, every later
    window only its last S tokens, which were not scored before. Every token but the
    stream's first is scored exactly once, each with at least L - S tokens of context
    before it (up to L - 1); with S = L these are non-overlapping blocks whose first token
    is never predicted.

Context curves (:func:`context_windows`)
    A fixed set of target spans of W tokens each is scored in windows of c tokens, for
    growing c: the span sits at the end of the window for a causal LM (c - W tokens of
    context before its first token) and in its middle for a masked LM (context on both
    sides). The targets are the same for every c, so the loss against c measures how a
    model uses more context, free of which tokens are scored.

Letters: T stream length, L window length, S stride, W span width, c context (window
length).
"""

from __future__ import annotations

from typing import NamedTuple

from tisa._validate import check_int

__all__ = ["Window", "context_span_starts", "context_windows", "sliding_windows"]


class Window(NamedTuple):
    """One evaluation window: stream tokens ``begin .. end - 1``, scored on ``first .. last - 1``.

    For a causal LM a scored token t is the target of the prediction made at t - 1, which
    lies in the window (``first > begin``).
    """

    begin: int
    end: int
    first: int
    last: int


def sliding_windows(num_tokens: int, *, length: int, stride: int) -> list[Window]:
    """Sliding windows of ``length`` tokens advancing by ``stride`` over ``num_tokens``.

    Args:
        num_tokens: T, tokens in the stream (>= 2).
        length: L, tokens per window (>= 2).
        stride: S, 1 <= S <= L.

    Returns:
        Windows in order; the last may be shorter than L (it ends at T). Scored tokens
        (``first .. last - 1``) of all windows cover 1 .. T - 1 exactly once when S < L;
        with S = L the first token of every window is left out (no context before it).

    Raises:
        ValueError: a length or stride out of range.
    """
    check_int(num_tokens, "num_tokens", minimum=2)
    check_int(length, "length", minimum=2)
    check_int(stride, "stride")
    if stride > length:
        raise ValueError(f"stride must be <= length ({length}), got {stride}")
    windows = []
    scored_to = 1  # the stream's first token is never a target
    begin = 0
    while scored_to < num_tokens:
        end = min(begin + length, num_tokens)
        first = max(scored_to, begin + 1)
        if first < end:
            windows.append(Window(begin, end, first, end))
        scored_to = max(scored_to, end)
        if end == num_tokens:
            break
        begin += stride
    return windows


def context_span_starts(
    num_tokens: int, *, max_context: int, span: int, spans: int, causal: bool
) -> list[int]:
    """Stream positions of ``spans`` consecutive target spans of ``span`` tokens.

    The first span starts late enough for a window of ``max_context`` tokens to fit before
    it (causal) or around it (masked), and the last ends early enough for it too.

    Raises:
        ValueError: the stream is too short for the spans and their largest context.
    """
    check_int(span, "span")
    check_int(spans, "spans")
    check_int(max_context, "max_context")
    start = max_context if causal else (max_context + 1) // 2 + 1
    needed = start + spans * span + (0 if causal else max_context // 2 + 1)
    if needed > num_tokens:
        raise ValueError(
            f"the text has {num_tokens} tokens; {spans} spans of {span} tokens with up to "
            f"{max_context} tokens of context need {needed}"
        )
    return [start + k * span for k in range(spans)]


def context_windows(starts: list[int], *, context: int, span: int, causal: bool) -> list[Window]:
    """The window of ``context`` tokens around each span (``span`` tokens from each start).

    Causal: the span is the window's last ``span`` tokens. Masked: the span is in the
    middle, ``(context - span) // 2`` tokens before it and the rest after it (``context``
    counts text tokens only; a masked LM's [CLS] / [SEP] come on top).

    Raises:
        ValueError: a context shorter than the span (+ 1 for a causal LM, whose first
            target needs a token before it).
    """
    check_int(context, "context")
    if context < span + (1 if causal else 0):
        raise ValueError(
            f"context ({context}) must be at least the span ({span}){' + 1' if causal else ''}"
        )
    out = []
    for s in starts:
        if causal:
            begin = s + span - context
        else:
            begin = s - (context - span) // 2
        if begin < 0:
            raise ValueError(f"the span at {s} has fewer than {context} tokens of context")
        out.append(Window(begin, begin + context, s, s + span))
    return out
