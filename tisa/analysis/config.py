"""Settings of ``tisa analyze`` (plain data, no heavy imports: the command line reads them
before anything else is loaded)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tisa._validate import check_int

__all__ = ["DEFAULT_MODEL_NAME", "AnalysisConfig"]


DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"


@dataclass(frozen=True)
class AnalysisConfig:
    """Settings of an analysis (validated on construction).

    Attributes:
        models: Hugging Face Hub ids or local model folders (several: side-by-side
            comparison). Default: the offline all-MiniLM-L6-v2 (unless only
            ``checkpoints`` is given, then its last checkpoint).
        output_dir: folder for metrics.json, figures and report.html.
        max_positions: analyse the first N positions of the position table (default: all,
            e.g. 512).
        probe_length: sequence length of the attention probes (capped at the model's
            positions).
        num_sequences: real-text sequences averaged by the sentence probe.
        checkpoints: a Trainer output folder with checkpoint-<step>/ subfolders: TI over
            training.
        ln_input: what the embedding LayerNorm sees for the 'through LN' F_P: P plus the
            mean token-type embedding (position+type) or P alone (position).
        include_bias: include the query/key biases in F_P (default: the pure
            P W_Q W_K^T P^T term).
        probe: run the attention probes (forward passes).
        max_offset: TISA models: plot f_h(k) for k = -K..K.
        null_draws: null tables per null for the figures of the position table (P P^T,
            cos(P), F_P; also per checkpoint with ``checkpoints``); 0 computes no nulls.
        probe_null_draws: null tables per null for the attention probes (each costs two
            forward passes of every probe input); 0 computes none.
        null_seed: seed of the null tables.
        progress: show progress bars.
        report: write figures and report.html (metrics.json is always written).
    """

    models: tuple[str, ...] = field(
        default=(), metadata={"cli": {"positional": True, "metavar": "MODEL"}}
    )
    output_dir: str = "runs/analyze"
    max_positions: int | None = field(default=None, metadata={"cli": {"metavar": "N"}})
    probe_length: int = field(default=128, metadata={"cli": {"metavar": "N"}})
    num_sequences: int = field(default=8, metadata={"cli": {"metavar": "N"}})
    checkpoints: str | None = field(default=None, metadata={"cli": {"metavar": "DIR"}})
    ln_input: Literal["position+type", "position"] = "position+type"
    include_bias: bool = False
    probe: bool = True
    max_offset: int = field(default=64, metadata={"cli": {"metavar": "K"}})
    null_draws: int = field(default=10, metadata={"cli": {"metavar": "N"}})
    probe_null_draws: int = field(default=8, metadata={"cli": {"metavar": "N"}})
    null_seed: int = field(default=0, metadata={"cli": {"metavar": "SEED"}})
    progress: bool = field(
        default=True, metadata={"cli": {"flag": "--quiet", "help": "no progress bars or summary"}}
    )
    report: bool = field(default=True, metadata={"cli": {"skip": True}})

    def __post_init__(self) -> None:
        models = (self.models,) if isinstance(self.models, str) else self.models
        object.__setattr__(self, "models", tuple(str(m) for m in models))
        object.__setattr__(self, "output_dir", str(self.output_dir))
        if self.checkpoints is not None:
            object.__setattr__(self, "checkpoints", str(self.checkpoints))
            if not Path(self.checkpoints).is_dir():
                raise ValueError(
                    f"checkpoints must be an existing folder, got {self.checkpoints!r}"
                )
        check_int(self.max_positions, "max_positions", 2, optional=True)
        check_int(self.probe_length, "probe_length", 2)
        check_int(self.num_sequences, "num_sequences", 1)
        check_int(self.max_offset, "max_offset", 1)
        for name in ("null_draws", "probe_null_draws"):
            if check_int(getattr(self, name), name, 0) == 1:
                raise ValueError(f"{name} must be 0 (no nulls) or >= 2, got 1")
        check_int(self.null_seed, "null_seed", 0)
        if self.ln_input not in ("position+type", "position"):
            raise ValueError(
                f"ln_input must be 'position+type' or 'position', got {self.ln_input!r}"
            )

    def settings(self) -> dict[str, Any]:
        """The measurement options, as recorded in metrics.json."""
        keys = ("max_positions", "probe_length", "num_sequences", "ln_input", "include_bias")
        nulls = ("null_draws", "probe_null_draws", "null_seed")
        return {k: getattr(self, k) for k in (*keys, "probe", "max_offset", *nulls)}
