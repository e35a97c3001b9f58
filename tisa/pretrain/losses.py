"""Losses of a pretrained LM on held-out text: summed cross-entropies and the number of
scored tokens, on non-overlapping blocks or on windows of a token stream, for masked and
causal LMs (what ``tisa extrapolate`` reports, :mod:`tisa.pretrain.extrapolation`).

Every function returns ``(sum of cross-entropies in nats, scored tokens)``, so that
losses over several batches or lengths add up token-weighted.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from tisa.data.windows import Window
from tisa.pretrain.causal_lm import next_token_loss
from tisa.pretrain.config import ExtrapolateConfig
from tisa.pretrain.masked_lm import masked_lm_forward

__all__ = [
    "causal_blocks_loss",
    "causal_windows_loss",
    "masked_blocks_loss",
    "masked_windows_loss",
]


def masked_blocks_loss(
    model, inputs, labels, config: ExtrapolateConfig, device, desc: str
) -> tuple[float, int]:
    """(sum of cross-entropies, scored tokens) of a masked LM on (N, L) masked blocks."""
    return _masked_loss_sum(
        model,
        inputs,
        labels,
        batch_tokens=config.batch_tokens,
        device=device,
        progress=config.progress,
        desc=desc,
    )


def _masked_loss_sum(
    model, inputs, labels, *, batch_tokens: int, device, progress: bool, desc: str | None
) -> tuple[float, int]:
    """(sum of cross-entropies, scored tokens) of a masked LM on (N, L) inputs and labels
    (-100: not scored), in batches of about ``batch_tokens`` tokens."""
    batch = max(1, batch_tokens // inputs.shape[1])
    total, count = 0.0, 0
    with torch.inference_mode():
        starts = range(0, inputs.shape[0], batch)
        for start in tqdm(starts, desc=desc, disable=not progress or desc is None, leave=False):
            x = inputs[start : start + batch].to(device)
            y = labels[start : start + batch].to(device)
            n = int((y != -100).sum())
            if n == 0:
                continue
            loss = masked_lm_forward(
                model, labels=y, input_ids=x, token_type_ids=torch.zeros_like(x)
            ).loss
            total += float(loss) * n
            count += n
    return total, count


def causal_blocks_loss(model, blocks, config: ExtrapolateConfig, device) -> tuple[float, int]:
    """(sum of cross-entropies, predictions) of a causal LM on (N, L) non-overlapping blocks."""
    inputs = torch.as_tensor(blocks, dtype=torch.long)
    length = inputs.shape[1]
    batch = max(1, config.batch_tokens // length)
    total, count = 0.0, 0
    with torch.inference_mode():
        for start in tqdm(
            range(0, inputs.shape[0], batch),
            desc=f"L={length}",
            disable=not config.progress,
            leave=False,
        ):
            loss, n = next_token_loss(model, inputs[start : start + batch].to(device))
            total += float(loss) * n
            count += n
    return total, count


def _group_by_length(windows: Sequence[Window]) -> dict[int, list[Window]]:
    groups: dict[int, list[Window]] = {}
    for w in windows:
        groups.setdefault(w.end - w.begin, []).append(w)
    return groups


def causal_windows_loss(
    model, stream, windows: Sequence[Window], *, batch_tokens: int, device, progress=False
) -> tuple[float, int]:
    """Next-token loss of a causal LM on the scored tokens of each window.

    Args:
        model: a causal LM (``model(input_ids=...).logits`` (B, L, V)).
        stream: (T,) token ids.
        windows: :class:`~tisa.data.windows.Window` s; token t in ``first .. last - 1``
            is scored as the target of the prediction at t - 1 (inside the window).
        batch_tokens: tokens per forward pass.
        device: torch device.
        progress: show a progress bar.

    Returns:
        (sum of cross-entropies in nats, number of scored tokens).
    """
    ids = torch.as_tensor(stream, dtype=torch.long)
    total, count = 0.0, 0
    with torch.inference_mode():
        for length, group in _group_by_length(windows).items():
            batch = max(1, batch_tokens // length)
            for start in tqdm(
                range(0, len(group), batch), desc=f"L={length}", disable=not progress, leave=False
            ):
                part = group[start : start + batch]
                x = torch.stack([ids[w.begin : w.end] for w in part]).to(device)  # (B, L)
                # column q - 1 predicts local token q, i.e. stream token begin + q
                target = torch.arange(1, length, device=device)[None, :]  # (1, L - 1)
                begin = torch.tensor([w.begin for w in part], device=device)[:, None]
                first = torch.tensor([w.first for w in part], device=device)[:, None]
                last = torch.tensor([w.last for w in part], device=device)[:, None]
                scored = (begin + target >= first) & (begin + target < last)  # (B, L - 1)
                logits = model(input_ids=x).logits[:, :-1]  # (B, L - 1, V)
                rows = logits[scored].float()  # (n, V)
                if rows.shape[0] == 0:
                    continue
                loss = F.cross_entropy(rows, x[:, 1:][scored], reduction="sum")
                total += float(loss)
                count += int(rows.shape[0])
    return total, count


def masked_windows_loss(
    model,
    inputs,
    labels,
    windows: Sequence[Window],
    tokenizer,
    *,
    block_format: str,
    batch_tokens: int,
    device,
    progress=False,
) -> tuple[float, int]:
    """Masked-LM loss on the masked tokens of ``first .. last - 1`` in each window.

    Args:
        model: an ALBERT/BERT-style masked LM.
        inputs, labels: the (T,) masked stream (:func:`tisa.data.mlm.mask_stream`).
        windows: text windows; framed by [CLS] / [SEP] for ``"cls_sep"``.
        tokenizer: the tokenizer.
        block_format: ``"cls_sep"`` or ``"plain"``.
        batch_tokens: tokens per forward pass.
        device: torch device.
        progress: show a progress bar.

    Returns:
        (sum of cross-entropies in nats, number of scored tokens).
    """
    total, count = 0.0, 0
    with torch.inference_mode():
        for _, group in _group_by_length(windows).items():
            xs, ys = [], []
            for w in group:
                y = torch.full((w.end - w.begin,), -100, dtype=torch.long)
                y[w.first - w.begin : w.last - w.begin] = labels[w.first : w.last]
                x = inputs[w.begin : w.end]
                if block_format == "cls_sep":
                    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
                    x = torch.cat([x.new_tensor([cls]), x, x.new_tensor([sep])])
                    y = torch.cat([y.new_tensor([-100]), y, y.new_tensor([-100])])
                xs.append(x)
                ys.append(y)
            part, n = _masked_loss_sum(
                model,
                torch.stack(xs),
                torch.stack(ys),
                batch_tokens=batch_tokens,
                device=device,
                progress=False,
                desc=None,
            )
            total += part
            count += n
    return total, count
