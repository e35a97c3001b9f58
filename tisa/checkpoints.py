"""Run folders and their checkpoints: find, validate, resume, save atomically.

A run folder holds the Hugging Face Trainer's checkpoints, one folder per saved step::

    RUN/
      checkpoint-<step>/      model weights, optimiser, scheduler, RNG, trainer_state.json
      .staging/               checkpoints being written (see AtomicCheckpoints)
      <marker>                what a finished run leaves (``model/`` for pretraining,
                              ``result.json`` for a GLUE run)

Everything that reads or writes such folders goes through this module: the step is
parsed from a folder name in one place (:func:`checkpoint_step`), a checkpoint is complete
when :func:`checkpoint_problems` finds nothing missing, and :func:`run_status` tells
whether a run folder holds a finished run (reuse it), an interrupted one (resume from its
newest checkpoint) or nothing (start).

Atomic saves: :class:`AtomicCheckpoints` is a Trainer callback for a Trainer whose
``output_dir`` is :func:`staging_folder` of the run. The Trainer writes each checkpoint
there; once every process has finished writing it, the callback flushes it to disk and
renames it into the run folder (:func:`tisa.files.replace_folder`), so a folder called
``checkpoint-<step>`` is always complete, whatever killed the process.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from transformers import TrainerCallback

from tisa.files import replace_folder

__all__ = [
    "STAGING",
    "AtomicCheckpoints",
    "RunStatus",
    "checkpoint_name",
    "checkpoint_problems",
    "checkpoint_step",
    "clear_run",
    "latest_checkpoint",
    "list_checkpoints",
    "prune_checkpoints",
    "run_status",
    "staging_folder",
    "trainer_step",
]

logger = logging.getLogger(__name__)

#: Folder inside a run folder where checkpoints are written before they are renamed.
STAGING = ".staging"
_PATTERN = re.compile(r"^checkpoint-(\d+)$")
#: Weight files of a checkpoint, one of which must be present.
_WEIGHTS = ("model.safetensors", "pytorch_model.bin")
_STATE = "trainer_state.json"


def checkpoint_name(step: int) -> str:
    """The folder name of the checkpoint at ``step``: ``checkpoint-<step>``."""
    return f"checkpoint-{int(step)}"


def checkpoint_step(path: str | os.PathLike[str]) -> int | None:
    """The step in a ``checkpoint-<step>`` folder name; None for any other name."""
    match = _PATTERN.match(Path(path).name)
    return int(match.group(1)) if match else None


def list_checkpoints(folder: str | os.PathLike[str]) -> list[Path]:
    """Every ``checkpoint-<step>`` folder directly in ``folder``, oldest step first.

    Complete or not (see :func:`checkpoint_problems`); [] when ``folder`` is no folder.
    """
    folder = Path(folder)
    if not folder.is_dir():
        return []
    found = [
        (step, child)
        for child in folder.iterdir()
        if (step := checkpoint_step(child)) is not None and child.is_dir()
    ]
    return [path for _, path in sorted(found)]


def checkpoint_problems(path: str | os.PathLike[str]) -> list[str]:
    """What keeps a checkpoint folder from being resumed: [] when it is complete.

    Complete means a ``trainer_state.json`` and the model weights (``model.safetensors``
    or ``pytorch_model.bin``) are present.
    """
    path = Path(path)
    if not path.is_dir():
        return [f"{path} is not a folder"]
    problems = []
    if not (path / _STATE).is_file():
        problems.append(f"no {_STATE}")
    if not any((path / name).is_file() for name in _WEIGHTS):
        problems.append("no model weights (" + " or ".join(_WEIGHTS) + ")")
    return problems


def latest_checkpoint(folder: str | os.PathLike[str], *, complete: bool = True) -> Path | None:
    """The newest checkpoint in ``folder`` (None when there is none).

    Args:
        folder: a run folder (or a Trainer's output folder).
        complete: skip (with a warning) checkpoints that :func:`checkpoint_problems`
            finds incomplete; ``False`` takes the highest step as it is.
    """
    for path in reversed(list_checkpoints(folder)):
        if not complete:
            return path
        problems = checkpoint_problems(path)
        if not problems:
            return path
        logger.warning("skipping incomplete checkpoint %s (%s)", path, "; ".join(problems))
    return None


def trainer_step(checkpoint: str | os.PathLike[str]) -> int:
    """``global_step`` recorded in a checkpoint's ``trainer_state.json``."""
    state = json.loads((Path(checkpoint) / _STATE).read_text())
    return int(state["global_step"])


def prune_checkpoints(folder: str | os.PathLike[str], keep: int | None) -> None:
    """Deletes all but the ``keep`` newest checkpoints (by step); None or < 1 keeps all."""
    if keep is None or keep < 1:
        return
    for path in list_checkpoints(folder)[:-keep]:
        shutil.rmtree(path, ignore_errors=True)


def clear_run(folder: str | os.PathLike[str], artefacts: Iterable[str]) -> None:
    """Removes a run's ``artefacts`` (names in ``folder``) and all of its checkpoints.

    Nothing else in the folder is touched.
    """
    folder = Path(folder)
    for name in (*artefacts, STAGING):
        path = folder / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    for path in list_checkpoints(folder):
        shutil.rmtree(path)


@dataclass(frozen=True)
class RunStatus:
    """What a run folder holds.

    Attributes:
        folder: the run folder.
        finished: the run's finish marker is there (its results can be reused).
        checkpoint: newest checkpoint an unfinished run resumes from (None: none).
        started: the folder exists (something may be in the way of a fresh start).
    """

    folder: Path
    finished: bool
    checkpoint: Path | None
    started: bool

    @property
    def action(self) -> Literal["reuse", "resume", "start"]:
        """``"reuse"`` a finished run, ``"resume"`` from a checkpoint, or ``"start"``."""
        if self.finished:
            return "reuse"
        return "resume" if self.checkpoint is not None else "start"


def run_status(
    folder: str | os.PathLike[str],
    *,
    finished: str,
    checkpoints: str | None = None,
    complete: bool = True,
) -> RunStatus:
    """Reads the state of a run folder.

    Args:
        folder: the run folder.
        finished: path (relative to ``folder``) whose existence marks a finished run.
        checkpoints: subfolder holding the checkpoints (default: ``folder`` itself).
        complete: only complete checkpoints count (see :func:`latest_checkpoint`).
    """
    folder = Path(folder)
    where = folder if checkpoints is None else folder / checkpoints
    return RunStatus(
        folder=folder,
        finished=(folder / finished).exists(),
        checkpoint=latest_checkpoint(where, complete=complete),
        started=folder.is_dir(),
    )


def staging_folder(run_dir: str | os.PathLike[str]) -> Path:
    """Where :class:`AtomicCheckpoints` expects the Trainer to write (its ``output_dir``)."""
    return Path(run_dir) / STAGING


def _barrier() -> None:
    """Waits for every process of a distributed run (a no-op in a single process)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()


class AtomicCheckpoints(TrainerCallback):
    """Renames each finished checkpoint from the staging folder into the run folder.

    Use with ``TrainingArguments(output_dir=staging_folder(run_dir))``: the Trainer saves
    ``checkpoint-<step>`` into the staging folder; at ``on_save`` (after the save, on
    every process) the main process moves it into ``run_dir`` once all processes have
    written their part, then keeps the ``save_total_limit`` newest checkpoints. A save
    that dies half-way leaves its remains in the staging folder, never a folder named
    ``checkpoint-<step>`` in the run folder.

    Args:
        run_dir: the run folder.
    """

    def __init__(self, run_dir: str | os.PathLike[str]) -> None:
        self.run_dir = Path(run_dir)

    def on_save(self, args, state, control, **kwargs):
        _barrier()  # every process has written its files (e.g. its RNG state)
        if args.should_save:
            name = checkpoint_name(state.global_step)
            staging = Path(args.output_dir)
            replace_folder(staging / name, self.run_dir / name)
            _remove_if_empty(staging)
            prune_checkpoints(self.run_dir, args.save_total_limit)
        _barrier()

    def on_train_end(self, args, state, control, **kwargs):
        if args.should_save:
            _remove_if_empty(Path(args.output_dir))


def _remove_if_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:  # not empty (remains of a failed save), or already gone
        pass
