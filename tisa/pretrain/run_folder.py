"""A pretraining run folder: what ``--overwrite`` removes, whether it holds a run, which
checkpoint ``--resume`` continues from (refusing a run started with other settings), and
the step a finished run ended at."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from tisa.checkpoints import check_checkpoint, latest_checkpoint, list_checkpoints, marker_complete
from tisa.pretrain.config import RESUME_KEYS, PretrainConfig

__all__ = ["RUN_FILES", "check_resume_settings", "finished_step", "holds_run", "resume_point"]

logger = logging.getLogger(__name__)

#: Artefacts of a run that --overwrite removes (nothing else in the folder is touched).
RUN_FILES = (
    "pretrain_config.json",
    "tokenizer",
    "model",
    "metrics.jsonl",
    "metrics.csv",
    "ti.jsonl",
    "results.json",
    "runs",
)


def holds_run(run: Path) -> bool:
    """Whether ``run`` holds a pretraining run (its settings or a checkpoint)."""
    return (run / "pretrain_config.json").exists() or bool(list_checkpoints(run))


def resume_point(config: PretrainConfig, run: Path) -> Path | None:
    """Checks the run folder against the config; the checkpoint to resume from (or None)."""
    if config.resume is False:
        if holds_run(run) and not config.overwrite:
            raise ValueError(
                f"output_dir {str(run)!r} already holds a run; pass --resume to continue it "
                "or --overwrite to start over"
            )
        return None
    check_resume_settings(config, run)
    if isinstance(config.resume, str):
        return check_checkpoint(config.resume, "resume")  # names a missing or damaged file
    found = latest_checkpoint(run)  # the newest complete one; damaged ones are named
    if found is None:
        logger.warning("resume: no complete checkpoint in %s; starting from scratch", run)
    return found


def check_resume_settings(config: PretrainConfig, run: Path) -> None:
    """Refuses to resume a run started with other settings of :data:`RESUME_KEYS`."""
    saved = run / "pretrain_config.json"
    if saved.is_file():
        previous = json.loads(saved.read_text()).get("config", {})
        current = config.to_dict()  # the JSON form, as saved
        changed = [
            f"{k}: {previous.get(k)!r} -> {current[k]!r}"
            for k in RESUME_KEYS
            if k in previous and previous[k] != current[k]
        ]
        if changed:
            raise ValueError(
                "resume: the run was started with other settings (" + "; ".join(changed) + ")"
            )


def finished_step(run: Path) -> int | None:
    """The step a finished run in ``run`` ended at (its results.json), else None."""
    if not marker_complete(run / "results.json") or not (run / "model").is_dir():
        return None
    step = json.loads((run / "results.json").read_text()).get("step")
    return step if isinstance(step, int) else None
