"""Settings of ``tisa longeval`` (plain data, no heavy imports: the command line reads
them before anything else is loaded)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Literal

from tisa._validate import check_int

__all__ = ["DRAWS", "STRATEGIES", "TASKS", "LongEvalConfig", "chunk_window"]

#: the retrieval tasks (see :mod:`tisa.longeval.tasks`)
TASKS = ("passkey", "needle", "passage")
#: how documents are drawn: once per seed (shared by its depths) or once per cell
DRAWS = ("seed", "cell")
#: ways to run a model with a position table on inputs longer than it (see
#: :mod:`tisa.longeval.strategies`); a model without one (TISA) runs ``native``
STRATEGIES = ("truncate", "chunk", "interpolate", "copy", "context-extension")

#: ``chunk-W``: windows of W tokens (special tokens included) for any model that reads W
#: tokens, a converted TISA model among them
_CHUNK_W = re.compile(r"chunk-([0-9]+)")


def chunk_window(name: str) -> int | None:
    """W of a strategy named ``chunk-W``, None for any other name."""
    found = _CHUNK_W.fullmatch(name)
    return int(found.group(1)) if found else None


Task = Literal["passkey", "needle", "passage"]
#: a name from STRATEGIES, or ``chunk-W`` for a window of W tokens (not a Literal, which
#: could not list every W)
Strategy = str


@dataclass(frozen=True)
class LongEvalConfig:
    """What ``tisa longeval`` measures (validated on construction).

    Attributes:
        models: HF model ids or local folders of sentence-embedding encoders (a
            sentence-transformers folder's pooling is used; mean pooling otherwise), and
            converted models (the ``model/`` folder of ``tisa convert``).
        output_dir: the results folder (finished cells are kept there and not recomputed).
        lengths: document lengths L in tokens, special tokens included.
        tasks: the retrieval tasks: passkey (a name's pass key hidden in filler text),
            needle (a fact hidden in Penn Treebank text, asked for in other words),
            passage (the document a removed passage came from).
        strategies: how a model with a position table reads documents longer than it:
            truncate, chunk, interpolate, copy, context-extension (needs the PyPI package
            context-extension); a model without one (a converted TISA model) runs on the
            whole document (``native``). ``chunk-W`` (e.g. ``chunk-2048``): windows of W
            tokens, embedded alone and averaged as ``chunk`` does, for every model that
            reads W tokens (a TISA model, or a table of at least W rows).
        depths: where the evidence sits in the document (0: at the start, 1: at the end).
        draw: ``seed``: one draw of documents and queries per seed, the same at every
            depth with the evidence moved (the depths of a seed are then not independent,
            and comparisons pair seeds); ``cell``: a draw of its own for every depth and
            seed, so each cell is an independent sample and comparisons pair cells.
        candidates: documents per retrieval problem; each has its own query.
        seeds: one set of documents and queries per seed.
        passage_tokens: tokens of the passage task's query passage (removed from its
            document).
        text_file: plain text (one text per line) for the needle and passage tasks
            instead of the Penn Treebank test and validation sets.
        batch_size: documents per forward pass (time and memory are per forward).
        threads: torch CPU threads (default: torch's own choice).
        progress: show progress bars.
    """

    models: tuple[str, ...] = field(metadata={"cli": {"positional": True, "metavar": "MODEL"}})
    output_dir: str = "runs/longeval"
    lengths: tuple[int, ...] = (256, 512, 1024, 2048, 4096, 8192)
    # names are checked by the config (one-line errors), not by argparse's choices
    tasks: tuple[Task, ...] = field(
        default=TASKS, metadata={"cli": {"choices": None, "metavar": "TASK"}}
    )
    strategies: tuple[Strategy, ...] = field(
        default=("truncate", "chunk", "interpolate", "copy"),
        metadata={"cli": {"choices": None, "metavar": "STRATEGY"}},
    )
    depths: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0)
    draw: Literal["seed", "cell"] = field(
        default="seed", metadata={"cli": {"choices": None, "metavar": "{seed,cell}"}}
    )
    candidates: int = 16
    seeds: tuple[int, ...] = (0, 1, 2)
    passage_tokens: int = 64
    text_file: str | None = None
    batch_size: int = 1
    threads: int | None = None
    progress: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.models, str):
            object.__setattr__(self, "models", (self.models,))
        object.__setattr__(self, "models", tuple(str(m) for m in self.models))
        if not self.models or not all(self.models):
            raise ValueError("models: name at least one model id or folder")
        if len(set(self.models)) != len(self.models):
            raise ValueError(f"models: each model once, got {list(self.models)}")
        lengths = tuple(check_int(n, "lengths") for n in self.lengths)
        if not lengths or len(set(lengths)) != len(lengths):
            raise ValueError(f"lengths: expected distinct lengths, got {list(self.lengths)}")
        object.__setattr__(self, "lengths", tuple(sorted(lengths)))
        for name, allowed in (("tasks", TASKS), ("strategies", (*STRATEGIES, "chunk-W"))):
            values = tuple(getattr(self, name))
            if name == "strategies":  # one spelling of each window: chunk-0512 is chunk-512
                values = tuple(v if chunk_window(v) is None else f"chunk-{chunk_window(v)}"
                               for v in values)
            unknown = [v for v in values if v not in allowed and not (
                name == "strategies" and chunk_window(v) is not None)]
            if unknown or not values or len(set(values)) != len(values):
                which = f" ({', '.join(map(repr, unknown))} unknown)" if unknown else ""
                raise ValueError(
                    f"{name}: expected distinct names from {', '.join(allowed)}; got "
                    f"{list(values)}{which}"
                )
            object.__setattr__(self, name, values)
        depths = tuple(self.depths)
        for d in depths:
            if isinstance(d, bool) or not isinstance(d, int | float) or not 0.0 <= d <= 1.0:
                raise ValueError(f"depths: expected numbers in [0, 1], got {d!r}")
            if math.isnan(d):
                raise ValueError("depths: expected numbers in [0, 1], got nan")
        if not depths or len(set(depths)) != len(depths):
            raise ValueError(f"depths: expected distinct depths, got {list(depths)}")
        if len({f"{d:.3f}" for d in depths}) != len(depths):  # cell files name depths so
            raise ValueError(f"depths: expected depths that differ in the first three "
                             f"decimals, got {list(depths)}")
        object.__setattr__(self, "depths", tuple(sorted(float(d) for d in depths)))
        if self.draw not in DRAWS:
            raise ValueError(f"draw: expected {' or '.join(DRAWS)}, got {self.draw!r}")
        check_int(self.candidates, "candidates", minimum=2)
        seeds = tuple(check_int(s, "seeds", minimum=0) for s in self.seeds)
        if not seeds or len(set(seeds)) != len(seeds):
            raise ValueError(f"seeds: expected distinct seeds, got {list(self.seeds)}")
        object.__setattr__(self, "seeds", seeds)
        check_int(self.passage_tokens, "passage_tokens", minimum=4)
        check_int(self.batch_size, "batch_size")
        check_int(self.threads, "threads", optional=True)
