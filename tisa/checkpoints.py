"""Run folders and their checkpoints: find, validate, resume, save atomically.

A run folder holds the Hugging Face Trainer's checkpoints, one folder per saved step::

    RUN/
      checkpoint-<step>/      model weights, optimiser, scheduler, RNG, trainer_state.json
      .staging/               checkpoints being written (see AtomicCheckpoints)
      <marker>                what a finished run leaves (``model/`` for pretraining,
                              ``result.json`` for a GLUE run)

Everything that reads or writes such folders goes through this module: the step is
parsed from a folder name in one place (:func:`checkpoint_step`); a checkpoint is complete
when :func:`checkpoint_problems` finds nothing missing or cut short (a trainer state that
parses, the weights, every saved tensor file whole); :func:`latest_checkpoint` falls back
from a damaged newest checkpoint to the newest complete one and names the bad file; and
:func:`run_status` tells whether a run folder holds a finished run (reuse it), an
interrupted one (resume from its newest complete checkpoint) or nothing (start). A finish
marker that is a JSON file counts only when it holds data (:func:`marker_complete`).

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
import pickle
import re
import shutil
import struct
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from transformers import TrainerCallback

from tisa.files import replace_folder

__all__ = [
    "STAGING",
    "AtomicCheckpoints",
    "RunStatus",
    "check_checkpoint",
    "checkpoint_name",
    "checkpoint_problems",
    "checkpoint_step",
    "clear_run",
    "latest_checkpoint",
    "list_checkpoints",
    "load_plain",
    "marker_complete",
    "prune_checkpoints",
    "run_status",
    "staging_folder",
    "tensor_file_problems",
    "trainer_step",
]

logger = logging.getLogger(__name__)

#: Folder inside a run folder where checkpoints are written before they are renamed.
STAGING = ".staging"
_PATTERN = re.compile(r"^checkpoint-(\d+)$")
#: Weight files of a checkpoint, one of which must be present (the index files: weights
#: saved in shards).
_WEIGHTS = ("model.safetensors", "pytorch_model.bin")
_INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")
#: Suffixes of ``torch.save`` archives in a checkpoint (optimiser, scheduler, RNG, ...).
_TORCH_FILES = (".pt", ".pth", ".bin")
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

    Complete means a ``trainer_state.json`` that parses and records the step; model
    weights (``model.safetensors`` or ``pytorch_model.bin``, or an index of shards that
    are all there); and every tensor file in the folder whole: a safetensors file as long
    as its header says, a ``torch.save`` archive (optimiser, scheduler, RNG states) with
    its zip directory at the end and every member inside the file. Only headers are read,
    not the tensors. A process killed while writing, a full disk or a copy cut short
    leaves a checkpoint that fails one of these checks; each problem names its file.
    """
    path = Path(path)
    if not path.is_dir():
        return [f"{path} is not a folder"]
    problems = []
    state = path / _STATE
    if state.is_file():
        problems += _state_problems(state)
    else:
        problems.append(f"no {_STATE}")
    indexes = [path / name for name in _INDEXES if (path / name).is_file()]
    if not indexes and not any((path / name).is_file() for name in _WEIGHTS):
        problems.append("no model weights (" + " or ".join(_WEIGHTS) + ")")
    for index in indexes:
        problems += _index_problems(index)
    for child in sorted(path.iterdir()):
        problems += tensor_file_problems(child)
    return problems


def tensor_file_problems(path: str | os.PathLike[str]) -> list[str]:
    """Why a safetensors file or a ``torch.save`` archive is cut short or damaged ([]: it
    is whole, or it is no such file). Reads the header only."""
    path = Path(path)
    if path.suffix == ".safetensors" and path.is_file():
        return _safetensors_problems(path)
    if path.suffix in _TORCH_FILES and path.is_file():
        return _archive_problems(path)
    return []


def check_checkpoint(path: str | os.PathLike[str], name: str = "resume") -> Path:
    """``path`` as a path when it is a complete checkpoint folder, else ``ValueError``.

    Args:
        path: a ``checkpoint-<step>`` folder (or any Trainer checkpoint folder).
        name: the argument's name, for the message.

    Raises:
        ValueError: what :func:`checkpoint_problems` found, naming the bad files.
    """
    problems = checkpoint_problems(path)
    if problems:
        raise ValueError(
            f"{name}: {str(path)!r} is not a complete checkpoint: " + "; ".join(problems)
        )
    return Path(path)


def _state_problems(state: Path) -> list[str]:
    try:
        text = state.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        return [f"{state.name} cannot be read ({err})"]
    if not text.strip():
        return [f"{state.name} is empty"]
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        return [f"{state.name} is not valid JSON ({err.msg} at character {err.pos})"]
    if not isinstance(data, dict) or not isinstance(data.get("global_step"), int):
        return [f"{state.name} records no global_step"]
    return []


def _index_problems(index: Path) -> list[str]:
    """Shards named by a ``*.index.json`` weight map that are not there."""
    try:
        shards = set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values())
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return [f"{index.name} is not a readable weight index"]
    missing = sorted(s for s in shards if not (index.parent / s).is_file())
    return [f"{index.name} names {shard}, which is missing" for shard in missing]


def _safetensors_problems(path: Path) -> list[str]:
    """A safetensors file is an 8-byte header length, a JSON header with each tensor's
    byte range, then the data: it is whole when it is as long as the header says."""
    size = path.stat().st_size
    if size == 0:
        return [f"{path.name} is empty"]
    try:
        with open(path, "rb") as fh:
            (length,) = struct.unpack("<Q", fh.read(8))
            if length > size - 8:
                raise ValueError("header longer than the file")
            header = json.loads(fh.read(length))
        ends = [int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__"]
    except (struct.error, ValueError, KeyError, TypeError, IndexError, AttributeError):
        return [f"{path.name} is damaged: no readable safetensors header ({size:,} bytes)"]
    expected = 8 + length + max(ends, default=0)
    if size < expected:
        return [f"{path.name} is cut short ({size:,} of {expected:,} bytes)"]
    return []


def _archive_problems(path: Path) -> list[str]:
    """A ``torch.save`` file is a zip archive whose directory sits at its end; a file cut
    short has none (or one pointing past the end)."""
    size = path.stat().st_size
    if size == 0:
        return [f"{path.name} is empty"]
    with open(path, "rb") as fh:
        if fh.read(4) != b"PK\x03\x04":
            return []  # torch.save's legacy pickle format: nothing cheap to check
    try:
        with zipfile.ZipFile(path) as archive:
            end = max((m.header_offset + m.compress_size for m in archive.infolist()), default=0)
    except (zipfile.BadZipFile, OSError, ValueError):
        return [f"{path.name} is damaged or cut short: no zip directory ({size:,} bytes)"]
    if end > size:
        return [f"{path.name} is cut short ({size:,} of at least {end:,} bytes)"]
    return []


def load_plain(path: str | os.PathLike[str]) -> Any:
    """What a ``torch.save`` file of tensors and plain data (dicts, lists, tuples, numbers,
    strings) holds, read without running anything from it (``weights_only=True``).

    A pickle can run any code while it is read, and files in a run folder may have been
    written by anyone: a file that holds other Python objects is refused before any of
    them is built.

    Raises:
        ValueError: the file holds objects other than tensors and plain data (named).
        RuntimeError, EOFError, OSError: the file is damaged or cannot be read, as
            ``torch.load`` raises them.
    """
    import torch

    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        raise ValueError(
            f"{path}: holds Python objects other than tensors and plain data; refused "
            "without loading it (it could run code); delete it if you did not write it"
        ) from None


def latest_checkpoint(folder: str | os.PathLike[str], *, complete: bool = True) -> Path | None:
    """The newest checkpoint in ``folder`` (None when there is none).

    Args:
        folder: a run folder (or a Trainer's output folder).
        complete: skip checkpoints that :func:`checkpoint_problems` finds incomplete or
            damaged, with a warning that names the bad files, and fall back to the newest
            complete one; ``False`` takes the highest step as it is.
    """
    for path in reversed(list_checkpoints(folder)):
        if not complete:
            return path
        problems = checkpoint_problems(path)
        if not problems:
            return path
        logger.warning("skipping checkpoint %s: %s", path, "; ".join(problems))
    return None


def marker_complete(path: str | os.PathLike[str]) -> bool:
    """Whether a finish marker counts: it exists and, for a ``.json`` file, holds a JSON
    object with content (an empty or cut-short file marks nothing)."""
    path = Path(path)
    if path.suffix != ".json":
        return path.exists()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(data, dict) and bool(data)


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
        finished: the run's finish marker is there and complete (its results can be reused).
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
    valid: Callable[[Path], bool] = marker_complete,
) -> RunStatus:
    """Reads the state of a run folder.

    Args:
        folder: the run folder.
        finished: path (relative to ``folder``) that marks a finished run.
        checkpoints: subfolder holding the checkpoints (default: ``folder`` itself).
        complete: only complete checkpoints count (see :func:`latest_checkpoint`).
        valid: whether the marker counts (default :func:`marker_complete`: it exists
            and, for a JSON file, holds data).
    """
    folder = Path(folder)
    where = folder if checkpoints is None else folder / checkpoints
    return RunStatus(
        folder=folder,
        finished=valid(folder / finished),
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
