"""What ``tisa extrapolate`` returns: runs, one row per run and length, and the tables.

:class:`ExtrapolationResults` holds the settings, the runs (:class:`RunInfo`) and their
rows (:class:`ExtrapolationRow`), and renders them as Markdown, CSV and plain data. The loss
is a masked-LM run's mean cross-entropy over masked tokens, or a causal run's mean
next-token cross-entropy; both in nats, token-weighted.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from tisa.pretrain.schemes import describe_variant
from tisa.reports.markdown import markdown_table

if TYPE_CHECKING:
    from tisa.pretrain.config import ExtrapolateConfig

__all__ = [
    "OBJECTIVES",
    "ContextRow",
    "ExtrapolationResults",
    "ExtrapolationRow",
    "RunInfo",
    "Status",
    "log2_slope",
]

Status = Literal["ok", "n/a", "error"]
#: What a run's loss measures: masked-LM loss on masked tokens, or next-token loss.
OBJECTIVES: tuple[str, ...] = ("masked", "causal")


@dataclass(frozen=True)
class RunInfo:
    """Where a run's model lives and how it was trained.

    Attributes:
        label: short unique name used in tables and plots.
        path: the folder given.
        model_dir: the folder the model and tokenizer are loaded from.
        train_seq_len: training length (None when unknown).
        block_format: ``"cls_sep"`` or ``"plain"``.
        position: position scheme (None when unknown).
        objective: ``"masked"`` (masked LM) or ``"causal"`` (next-token loss).
    """

    label: str
    path: str
    model_dir: str
    train_seq_len: int | None
    block_format: str
    position: str | None
    objective: str = "masked"


@dataclass(frozen=True)
class ExtrapolationRow:
    """The result of one run at one length.

    Attributes:
        run: the run's label.
        length: evaluation length L.
        status: ``"ok"``, ``"n/a"`` (the model cannot represent L) or ``"error"``.
        loss: mean cross-entropy (nats) over the masked tokens (masked LM) or over the
            next-token predictions (causal LM), None unless ok.
        perplexity: exp(loss), None unless ok.
        blocks: blocks scored (windows, for a causal LM with a stride).
        masked_tokens: tokens scored (masked positions, or next-token predictions).
        reason: why n/a or error.
    """

    run: str
    length: int
    status: Status
    loss: float | None = None
    perplexity: float | None = None
    blocks: int = 0
    masked_tokens: int = 0
    reason: str | None = None

    def cell(self) -> str:
        """Table cell: ``"loss (ppl)"``, ``"n/a"`` or ``"error"``."""
        if self.status != "ok" or self.loss is None or self.perplexity is None:
            return self.status
        return f"{self.loss:.3f} ({self.perplexity:.1f})"


@dataclass(frozen=True)
class ContextRow:
    """The loss of one run on the context curve's target spans with context ``context``.

    Attributes:
        run: the run's label.
        context: window length c (tokens the model sees, special tokens included).
        status: ``"ok"``, ``"n/a"`` or ``"error"``.
        loss: mean cross-entropy (nats) over the scored tokens of the spans, None unless ok.
        tokens: tokens scored (the same at every context of a run).
        reason: why n/a or error.
    """

    run: str
    context: int
    status: Status
    loss: float | None = None
    tokens: int = 0
    reason: str | None = None


def log2_slope(points: list[tuple[int, float]]) -> float | None:
    """Least-squares slope of loss against log2(context), in nats per doubling.

    None with fewer than two points.
    """
    if len(points) < 2:
        return None
    xs = [math.log2(c) for c, _ in points]
    ys = [loss for _, loss in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx


@dataclass(frozen=True)
class ExtrapolationResults:
    """All rows of an evaluation, with the runs and settings that produced them.

    ``context_rows`` hold the context curve (empty unless ``config.context_curve``).
    """

    config: ExtrapolateConfig
    runs: tuple[RunInfo, ...]
    rows: tuple[ExtrapolationRow, ...]
    context_rows: tuple[ContextRow, ...] = ()

    def context_points(self, run: str) -> list[tuple[int, float]]:
        """(context, loss) of run label ``run`` where it was scored, by context."""
        return sorted(
            (r.context, r.loss)
            for r in self.context_rows
            if r.run == run and r.status == "ok" and r.loss is not None
        )

    def context_slopes(self) -> dict[str, float | None]:
        """Per run: the slope of loss against log2(context) from its training length on.

        Points at contexts >= the run's training length (all points when it is unknown);
        nats per doubling of the context, negative when more context helps. None with
        fewer than two such points.
        """
        out = {}
        for info in self.runs:
            points = self.context_points(info.label)
            if info.train_seq_len is not None:
                points = [(c, v) for c, v in points if c >= info.train_seq_len]
            out[info.label] = log2_slope(points)
        return out

    def row(self, run: str, length: int) -> ExtrapolationRow:
        """The row of run label ``run`` at ``length``.

        Raises:
            KeyError: no such run label or length.
        """
        for r in self.rows:
            if r.run == run and r.length == length:
                return r
        raise KeyError(f"no result for run {run!r} at length {length}")

    @property
    def has_errors(self) -> bool:
        """True when some run failed at some length."""
        return any(r.status == "error" for r in self.rows)

    def to_markdown(self) -> str:
        """Runs x lengths table of "loss (perplexity)" cells, n/a where not applicable."""
        lengths = self.config.lengths
        rows = [
            [
                info.label,
                "?" if info.train_seq_len is None else info.train_seq_len,
                *(self.row(info.label, n).cell() for n in lengths),
            ]
            for info in self.runs
        ]
        table = markdown_table(
            ["run", "train length", *map(str, lengths)], rows, align="lr" + "r" * len(lengths)
        )
        kinds = {info.objective for info in self.runs}
        what = {"masked": "Masked-LM loss", "causal": "Next-token loss"}
        head = " / ".join(what[k] for k in OBJECTIVES if k in kinds) or "Loss"
        text = f"{head} in nats (perplexity) by evaluation length.\n\n" + table
        changed = [f"scoring options {', '.join(self.config.scoring_options)}"
                   if self.config.scoring_options else "",
                   describe_variant(self.config.length_scale, self.config.clip_distance)]
        if any(changed):
            text += ("\nScored with " + "; ".join(c for c in changed if c)
                     + " (runs with TISA attention).\n")
        notes = [r for r in self.rows if r.reason]
        if notes:
            text += "\n" + "".join(
                f"- {r.run} @ {r.length}: {r.status}, {r.reason}\n" for r in notes
            )
        if self.context_rows:
            text += "\n" + self.context_markdown()
        return text

    def context_markdown(self) -> str:
        """Runs x contexts table of the context curve, with the slope beyond training."""
        contexts = self.config.context_curve
        cells = {(r.run, r.context): r for r in self.context_rows}
        slopes = self.context_slopes()
        rows = []
        for info in self.runs:
            row = [info.label, "?" if info.train_seq_len is None else info.train_seq_len]
            for c in contexts:
                r = cells.get((info.label, c))
                ok = r is not None and r.status == "ok" and r.loss is not None
                row.append(f"{r.loss:.3f}" if ok else (r.status if r else ""))
            slope = slopes.get(info.label)
            row.append("" if slope is None else f"{slope:+.4f}")
            rows.append(row)
        table = markdown_table(
            ["run", "train length", *map(str, contexts), "slope"],
            rows,
            align="lr" + "r" * (len(contexts) + 1),
        )
        span, spans = self.config.context_span, self.config.context_spans
        text = (
            f"Loss in nats on the same {spans} target spans of {span} tokens with a window of "
            "c tokens (causal: the span ends the window; masked: the span is in its middle). "
            "Slope: nats per doubling of c, fitted from the training length on.\n\n" + table
        )
        notes = [r for r in self.context_rows if r.reason]
        if notes:
            text += "\n" + "".join(
                f"- {r.run} @ context {r.context}: {r.status}, {r.reason}\n" for r in notes
            )
        return text

    def context_csv(self) -> str:
        """One line per run and context of the context curve."""
        fields = [f.name for f in dataclasses.fields(ContextRow)]
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=[*fields, "slope"])
        writer.writeheader()
        slopes = self.context_slopes()
        for r in self.context_rows:
            values = {k: ("" if v is None else v) for k, v in dataclasses.asdict(r).items()}
            slope = slopes.get(r.run)
            writer.writerow({**values, "slope": "" if slope is None else slope})
        return buf.getvalue()

    def to_csv(self) -> str:
        """One line per run and length."""
        fields = [f.name for f in dataclasses.fields(ExtrapolationRow)]
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=["path", *fields])
        writer.writeheader()
        paths = {info.label: info.path for info in self.runs}
        for r in self.rows:
            values = {k: ("" if v is None else v) for k, v in dataclasses.asdict(r).items()}
            writer.writerow({"path": paths[r.run], **values})
        return buf.getvalue()

    def to_dict(self) -> dict[str, Any]:
        """Plain data: settings, runs and rows."""
        return {
            "config": dataclasses.asdict(self.config),
            "runs": [dataclasses.asdict(info) for info in self.runs],
            "rows": [dataclasses.asdict(r) for r in self.rows],
            "context_rows": [dataclasses.asdict(r) for r in self.context_rows],
            "context_slopes": self.context_slopes() if self.context_rows else {},
        }
