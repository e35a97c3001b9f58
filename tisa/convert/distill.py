"""Distillation of the converted model (student) towards the original (teacher).

Teacher: the original model with its position table. Student: the same weights without it
and with fitted TISA scorers (:mod:`tisa.convert.student`). On blocks of real text of mixed
lengths (up to the teacher's limit), the loss is

    sum_l ||h_l^S - h_l^T||^2 / ||h_l^T||^2  /  (number of layers)
    + pooled_weight * (1 - cos(mean_pool(h^S), mean_pool(h^T)))

over every layer's hidden states h_l (each layer weighs the same, whatever its scale) and,
for sentence-embedding models, the mean-pooled embedding. With ``order_weight`` above 0,
half the blocks of a step are word-order twins of the other half (adjacent tokens
swapped), and the loss adds

    order_weight * sum_l ||d_l^S - d_l^T||^2 / ||d_l^T||^2  /  (number of layers)

where d_l = h_l(block) - h_l(twin): the student's reaction to a change of word order is
fitted to the teacher's, at its own scale (the hidden-state term sees it only as a small
part of ||h_l^T||^2). With ``attention_weight`` above 0 the loss adds

    attention_weight * sum_l mean_(b,h,i) KL(A_l^T[b,h,i,:] || A_l^S[b,h,i,:])  /  (layers)

the divergence of the student's attention probabilities A^S from the teacher's, row by
row: the hidden-state term sees a head's attention only through what it writes, so a
head can attend elsewhere and still match its output on the text it was fitted on. With
``long_weight`` above 0 each step also draws one block longer than the teacher's table
(``long_length`` tokens), which the student reads in one pass. Its target is the teacher
read in overlapping windows of ``max_length`` tokens, each token's states taken from the
window in which it lies nearest the middle (:func:`windowed_states`): what the original
makes of each token with the context around it. The loss adds ``long_weight`` times the
first line above (hidden states and pooled embedding) on that block; with
``long_every`` K above 1, only every K-th step draws one.
``train="scoring"`` trains only
the scoring parameters (a few thousand numbers; the rest of the model stays the
original's), ``train="all"`` trains every parameter, the scoring ones at their own
learning rate (:func:`tisa.hf.parameter_groups`).

Runs are resumable: every ``save_every`` steps the student, the optimizer, the schedule,
the sampler's state and the loss curve are written into ``checkpoint/`` atomically (a
staging folder renamed into place), and :func:`distill` continues from there.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import asdict
from pathlib import Path

import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

import tisa.hf  # noqa: F401  (registers TISA models with the Auto classes)
from tisa.checkpoints import load_plain
from tisa.convert.config import DistillSettings
from tisa.files import replace_folder
from tisa.hf.attention_fn import eager_attention

logger = logging.getLogger(__name__)

__all__ = [
    "DistillSettings", "LengthSampler", "attention_loss", "distill", "distillation_loss",
    "order_loss", "row_kl", "windowed_states",
]


class LengthSampler:
    """Blocks of real text of random lengths, cut from one token stream, reproducibly.

    Step ``t`` draws a length L (log-uniform in [min_length, max_length]) and
    ``tokens // L`` blocks ``[first] stream[o : o + L - 2] [last]`` at random offsets o,
    all from a generator seeded with (seed, t): a resumed run draws the same batches.

    With ``settings.order_weight > 0`` the batch is ``n = max(1, tokens // L // 2)``
    blocks followed by their ``n`` twins (:meth:`twins`), in the same order. With
    ``settings.long_weight > 0``, :meth:`long_batch` draws the step's long block.
    """

    def __init__(self, stream: Tensor, *, first: int, last: int, settings: DistillSettings) -> None:
        need = max(settings.max_length, settings.long_length if settings.long_weight else 0)
        if stream.dim() != 1 or stream.numel() < need:
            raise ValueError(f"stream: expected at least {need} tokens, got {stream.numel()}")
        self.stream, self.first, self.last, self.settings = stream, first, last, settings

    def batch(self, step: int) -> Tensor:
        """(B, L) token ids of step ``step``."""
        s = self.settings
        g = torch.Generator().manual_seed(s.seed * 1_000_003 + step)
        lo, hi = math.log(s.min_length), math.log(s.max_length)
        length = int(round(math.exp(lo + (hi - lo) * torch.rand((), generator=g).item())))
        length = min(max(length, s.min_length), s.max_length)
        size = max(1, s.tokens_per_batch // length)
        if s.order_weight > 0:
            size = max(1, size // 2)
        starts = torch.randint(0, self.stream.numel() - (length - 2), (size,), generator=g)
        body = torch.stack([self.stream[o : o + length - 2] for o in starts.tolist()])
        if s.order_weight > 0:
            body = torch.cat([body, self.twins(body, g)])
        n = body.shape[0]
        return torch.cat([torch.full((n, 1), self.first), body, torch.full((n, 1), self.last)], 1)

    def long_batch(self, step: int) -> Tensor:
        """(1, long_length) token ids of step ``step``'s long block, from a generator of
        its own (the short blocks are drawn as without it)."""
        s = self.settings
        g = torch.Generator().manual_seed((s.seed * 1_000_003 + step) ^ 0x5DEECE66D)
        length = s.long_length
        start = int(torch.randint(0, self.stream.numel() - (length - 2) + 1, (), generator=g))
        body = self.stream[start : start + length - 2]
        return torch.cat([torch.tensor([self.first]), body, torch.tensor([self.last])])[None]

    @staticmethod
    def twins(body: Tensor, generator: torch.Generator) -> Tensor:
        """``body`` (B, T) with ``max(1, T // 64)`` adjacent pairs of each row swapped.

        The pairs of a row are disjoint and hold two different tokens (fewer pairs when
        a row has fewer such), so every twin differs from its block whenever the row has
        two different neighbours. Tokens, not words: a word-piece may swap with its
        neighbour.
        """
        twins = body.clone()
        width = body.shape[1]
        if width < 2:
            return twins
        swaps = max(1, width // 64)
        for row in range(body.shape[0]):
            tokens = twins[row]
            differs = (tokens[:-1] != tokens[1:]).nonzero().flatten()
            if differs.numel() == 0:
                continue
            picks = differs[torch.randperm(differs.numel(), generator=generator)]
            taken: set[int] = set()
            for i in picks.tolist():
                if len(taken) == 2 * swaps:
                    break
                if i in taken or i + 1 in taken:
                    continue
                taken.update((i, i + 1))
                tokens[[i, i + 1]] = tokens[[i + 1, i]]
        return twins


def distillation_loss(
    student_hidden: Sequence[Tensor], teacher_hidden: Sequence[Tensor], pooled_weight: float
) -> tuple[Tensor, dict[str, float]]:
    """The loss of the module docstring on one batch (no padding: blocks are full).

    Args:
        student_hidden, teacher_hidden: hidden states (B, L, D) of every layer, the
            embeddings' output first (as ``output_hidden_states`` returns them); the
            embeddings' output is left out (the student's differs by construction).
        pooled_weight: weight of the pooled-embedding term.

    Returns:
        The loss and its parts as floats (``hidden``, ``pooled_cosine``).
    """
    layers = list(zip(student_hidden[1:], teacher_hidden[1:]))
    hidden = sum(
        (s - t).square().mean() / t.square().mean().clamp_min(1e-12) for s, t in layers
    ) / len(layers)
    cos = nn.functional.cosine_similarity(
        student_hidden[-1].mean(1), teacher_hidden[-1].mean(1), dim=-1
    ).mean()
    loss = hidden + pooled_weight * (1 - cos)
    return loss, {"hidden": float(hidden.detach()), "pooled_cosine": float(cos.detach())}


@torch.no_grad()
def windowed_states(model: nn.Module, ids: Tensor, window: int) -> tuple[Tensor, ...]:
    """Every layer's hidden states of a long block as ``model`` makes them in windows.

    Args:
        model: a base model (``output_hidden_states`` gives the embeddings' output, then
            one tensor per layer).
        ids: (1, L) ids ``[first] body [last]``.
        window: the tokens of one window, ``[first] body[o : o + window - 2] [last]``;
            windows start half a window apart, the last one ending with the body.

    Returns:
        One (1, L, D) tensor per entry of ``hidden_states``: each body token's states from
        the window whose middle is nearest to it (every window that holds it is a
        candidate; the earlier one on a tie), ``first``'s from the first window and
        ``last``'s from the last. With L <= ``window`` this is one ordinary pass.
    """
    if ids.dim() != 2 or ids.shape[0] != 1:
        raise ValueError(f"ids: expected one block (1, L), got {tuple(ids.shape)}")
    if window < 4:
        raise ValueError(f"window: expected at least 4 tokens, got {window}")
    if ids.shape[1] <= window:
        return tuple(model(input_ids=ids, output_hidden_states=True).hidden_states)
    body, width = ids[0, 1:-1], window - 2
    n = body.numel()
    stride = max(1, width // 2)
    starts = list(range(0, n - width, stride)) + [n - width]
    blocks = torch.stack([torch.cat([ids[0, :1], body[o : o + width], ids[0, -1:]])
                          for o in starts])
    states = model(input_ids=blocks, output_hidden_states=True).hidden_states
    t = torch.arange(n)
    first = torch.tensor(starts)
    middle = first + (width - 1) / 2
    inside = (t[:, None] >= first[None]) & (t[:, None] < first[None] + width)
    distance = (t[:, None] - middle[None]).abs().masked_fill(~inside, math.inf)
    chosen = distance.argmin(1)  # the first minimum: the earlier window on a tie
    rows = chosen, t - first[chosen] + 1  # window, its row of the token
    return tuple(
        torch.cat([h[0, :1], h[rows], h[-1, -1:]])[None] for h in states
    )


def order_loss(student_hidden: Sequence[Tensor], teacher_hidden: Sequence[Tensor]) -> Tensor:
    """The word-order term of the module docstring, before its weight.

    Args:
        student_hidden, teacher_hidden: hidden states (2n, L, D) of every layer, the
            embeddings' output first (left out); rows ``n + k`` are the twins of rows
            ``k`` (:meth:`LengthSampler.batch` with ``order_weight > 0``).
    """
    n = student_hidden[0].shape[0] // 2
    if n == 0 or student_hidden[0].shape[0] != 2 * n:
        raise ValueError(
            f"order_loss: expected an even number of rows (blocks, then their twins), "
            f"got {student_hidden[0].shape[0]}"
        )
    layers = list(zip(student_hidden[1:], teacher_hidden[1:]))
    total = 0.0
    for s, t in layers:
        ds, dt = s[:n] - s[n:], t[:n] - t[n:]
        total = total + (ds - dt).square().mean() / dt.square().mean().clamp_min(1e-12)
    return total / len(layers)


def attention_loss(
    student_attention: Sequence[Tensor], teacher_attention: Sequence[Tensor]
) -> Tensor:
    """The attention-map term of the module docstring, before its weight.

    Args:
        student_attention, teacher_attention: attention probabilities (B, H, L, L) of
            every layer (as ``output_attentions`` returns them; no padding).

    Returns:
        The mean over layers of the mean over (b, h, i) of KL(teacher row || student row),
        in nats (0 when they agree).
    """
    if len(student_attention) != len(teacher_attention) or not student_attention:
        raise ValueError(
            f"attention_loss: expected the same number of layers, got "
            f"{len(student_attention)} and {len(teacher_attention)}"
        )
    total = 0.0
    for s, t in zip(student_attention, teacher_attention):
        log_t = t.float().clamp_min(1e-30).log()
        log_s = s.float().clamp_min(1e-30).log()
        total = total + row_kl(log_t, log_s).mean()
    return total / len(student_attention)


def row_kl(log_p: Tensor, log_q: Tensor) -> Tensor:
    """KL(p || q) in nats of each row (the last dimension) of two distributions given as
    log-probabilities; the one divergence of the attention term and the diagnostics."""
    return (log_p.exp() * (log_p - log_q)).sum(-1)


def _trainable(student: nn.Module, settings: DistillSettings) -> list[dict]:
    names = set(tisa.hf.scoring_parameter_names(student))
    for name, p in student.named_parameters():
        p.requires_grad_(settings.train == "all" or name in names)
    return tisa.hf.parameter_groups(
        student,
        learning_rate=settings.learning_rate,
        tisa_learning_rate=settings.tisa_learning_rate,
        weight_decay=0.0,
    )


def _schedule(settings: DistillSettings) -> Callable[[int], float]:
    warm = max(1, int(settings.warmup * settings.steps))

    def factor(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        return max(0.0, (settings.steps - step) / max(1, settings.steps - warm))

    return factor


def _save(
    folder: Path, student, optimizer, scheduler, step: int, curve: list[dict], settings
) -> None:
    """Writes the checkpoint into a staging folder and renames it into place; the previous
    one stays as ``<name>.old`` until the new one is in place (see :func:`_load`)."""
    staging = folder.with_name(folder.name + ".staging")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    torch.save(
        {
            "student": student.state_dict(),
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "step": step,
            "settings": asdict(settings),
        },
        staging / "state.pt",
    )
    (staging / "curve.json").write_text(json.dumps(curve))
    replace_folder(staging, folder)  # the previous one stays as <name>.old until then


def _load(folder: Path) -> dict | None:
    """The checkpoint in ``folder`` (or its last complete predecessor), None if there is none."""
    for candidate in (folder, folder.with_name(folder.name + ".old")):
        state, curve = candidate / "state.pt", candidate / "curve.json"
        if state.is_file() and curve.is_file():
            try:
                data = load_plain(state)  # a ValueError names a file that is not plain data
                data["curve"] = json.loads(curve.read_text())
            except (RuntimeError, EOFError, json.JSONDecodeError, OSError) as err:
                raise ValueError(
                    f"checkpoint {candidate}: cannot be read ({type(err).__name__}: {err}); "
                    f"delete it to start over"
                ) from None
            return data
    return None


def distill(
    teacher: nn.Module,
    student: nn.Module,
    sampler: LengthSampler,
    settings: DistillSettings,
    *,
    checkpoint_dir: str | os.PathLike[str],
    progress: bool = True,
) -> list[dict]:
    """Trains ``student`` towards ``teacher`` in place (see the module docstring).

    Args:
        teacher: the original model (not changed).
        student: the converted model.
        sampler: where the batches come from.
        settings: the run.
        checkpoint_dir: folder of the resumable checkpoint.
        progress: show a progress bar.

    Returns:
        The loss curve: one dict per step (``step``, ``loss``, ``hidden``,
        ``pooled_cosine``, ``order`` with ``order_weight`` above 0, ``attention``
        with ``attention_weight`` above 0, ``long`` and ``long_pooled_cosine`` with
        ``long_weight`` above 0 on the steps that draw a long block, ``length``,
        ``seconds``).
    """
    folder = Path(checkpoint_dir)
    teacher_base = getattr(teacher, "base_model", teacher).eval()
    student_base = getattr(student, "base_model", student)
    for p in teacher_base.parameters():
        p.requires_grad_(False)
    optimizer = torch.optim.AdamW(_trainable(student, settings))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, _schedule(settings))
    curve: list[dict] = []
    start = 0
    saved = _load(folder)
    if saved is not None:
        # checkpoints from before the order, attention and long-input terms existed were
        # made without them
        older = {"order_weight": 0.0, "attention_weight": 0.0, "long_weight": 0.0,
                 "long_length": 2048, "long_every": 1}
        if {**older, **saved.get("settings", {})} != asdict(settings):
            raise ValueError(
                f"checkpoint {folder}: made with other settings ({saved.get('settings')}); "
                "use another output folder or the same settings"
            )
        student.load_state_dict(saved["student"])
        optimizer.load_state_dict(saved["optimizer"])
        scheduler.load_state_dict(saved["scheduler"])
        start, curve = int(saved["step"]), saved["curve"]
        logger.warning("convert: resuming distillation from step %d of %d", start, settings.steps)
    # dropout off: the student is fitted to the teacher's deterministic outputs
    student_base.eval()
    maps = settings.attention_weight > 0
    with eager_attention(teacher_base, student_base) if maps else nullcontext():
        _steps(teacher_base, student, sampler, settings, optimizer, scheduler,
               folder=folder, curve=curve, start=start, progress=progress)
    for p in student.parameters():
        p.requires_grad_(True)
    return curve


def _steps(teacher_base, student, sampler, settings, optimizer, scheduler, *,
           folder: Path, curve: list[dict], start: int, progress: bool) -> None:
    """The steps of :func:`distill` from ``start`` on: appends to ``curve`` and
    checkpoints ``student`` into ``folder``."""
    student_base = getattr(student, "base_model", student)
    maps = settings.attention_weight > 0
    bar = tqdm(total=settings.steps, initial=start, desc="distil", disable=not progress)
    for step in range(start, settings.steps):
        began = time.perf_counter()
        ids = sampler.batch(step)
        with torch.no_grad():
            teacher_out = teacher_base(input_ids=ids, output_hidden_states=True,
                                       output_attentions=maps)
        student_out = student_base(input_ids=ids, output_hidden_states=True,
                                   output_attentions=maps)
        want, got = teacher_out.hidden_states, student_out.hidden_states
        loss, parts = distillation_loss(got, want, settings.pooled_weight)
        if settings.order_weight > 0:
            order = order_loss(got, want)
            loss = loss + settings.order_weight * order
            parts["order"] = float(order.detach())
        if maps:
            divergence = attention_loss(student_out.attentions, teacher_out.attentions)
            loss = loss + settings.attention_weight * divergence
            parts["attention"] = float(divergence.detach())
        if settings.long_weight > 0 and step % settings.long_every == 0:
            long_ids = sampler.long_batch(step)
            long_want = windowed_states(teacher_base, long_ids, settings.max_length)
            long_got = student_base(input_ids=long_ids, output_hidden_states=True).hidden_states
            long_loss, long_parts = distillation_loss(long_got, long_want, settings.pooled_weight)
            loss = loss + settings.long_weight * long_loss
            parts["long"] = float(long_loss.detach())
            parts["long_pooled_cosine"] = long_parts["pooled_cosine"]
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        scheduler.step()
        loss = loss.item()
        curve.append(
            {
                "step": step + 1,
                "loss": loss,
                **parts,
                "length": int(ids.shape[1]),
                "seconds": time.perf_counter() - began,
            }
        )
        bar.update()
        bar.set_postfix(loss=f"{loss:.4f}", cos=f"{parts['pooled_cosine']:.4f}")
        if (step + 1) % settings.save_every == 0 or step + 1 == settings.steps:
            _save(folder, student, optimizer, scheduler, step + 1, curve, settings)
    bar.close()
