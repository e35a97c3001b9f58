"""Atomic writes: result files, and whole folders such as checkpoints; run-folder locks.

A reader (or a resumed run) sees the old version or the new one, never half of one. A
file's data goes to a temporary file beside the target, is flushed to disk and replaces
the target in one ``os.replace``; a folder is written completely under another name, its
files flushed to disk, and renamed into place (:func:`replace_folder`).

A run folder is written by one run at a time (:class:`RunLock`): a second run into the
same folder is refused in one line instead of interleaving its files with the first's.

(Named ``files`` rather than ``io``: modules that write results often need the standard
library's ``io`` too.)
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

__all__ = [
    "LOCK_FILE",
    "RunLock",
    "append_jsonl",
    "fsync_folder",
    "fsync_tree",
    "json_ready",
    "read_jsonl",
    "replace_folder",
    "write_atomic",
    "write_json",
]


def json_ready(obj: Any) -> Any:
    """Plain JSON data: numpy scalars to Python numbers, NaN to None, keys to strings."""
    if isinstance(obj, float | np.floating):
        return None if math.isnan(obj) else float(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, dict):
        return {str(k): json_ready(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [json_ready(v) for v in obj]
    return obj


def write_atomic(path: str | os.PathLike[str], data: str | bytes) -> Path:
    """Writes ``data`` (text as UTF-8) to ``path`` atomically; creates the parent folder.

    The temporary file has a name of its own (several processes may write the same file,
    e.g. the tables of runs sharing an output folder): the last complete write wins.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_json(path: str | os.PathLike[str], obj: Any) -> Path:
    """Writes ``obj`` as indented JSON (see :func:`json_ready`) atomically."""
    return write_atomic(path, json.dumps(json_ready(obj), indent=2) + "\n")


def read_jsonl(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Rows of a JSON-lines file ([] when it does not exist).

    A last line cut short by a killed process is skipped.
    """
    p = Path(path)
    if not p.is_file():
        return []
    rows = []
    for line in p.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line:
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:  # a line cut short by a killed process
                continue
    return rows


def append_jsonl(path: str | os.PathLike[str], row: dict[str, Any]) -> None:
    """Appends one JSON line to ``path`` (a log: rows are only ever added at the end)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(row) + "\n")


def fsync_folder(path: str | os.PathLike[str]) -> None:
    """Flushes a folder's entries (names, renames) to disk; a no-op where unsupported."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def fsync_tree(path: str | os.PathLike[str]) -> None:
    """Flushes every file below ``path``, and every folder's entries, to disk."""
    for root, _, names in os.walk(path):
        for name in names:
            try:
                with open(os.path.join(root, name), "rb") as fh:
                    os.fsync(fh.fileno())
            except OSError:
                pass
        fsync_folder(root)


def replace_folder(staged: str | os.PathLike[str], final: str | os.PathLike[str]) -> Path:
    """Moves the complete folder ``staged`` to ``final`` in one rename, durably.

    The files are flushed to disk first, so that after a crash a folder named ``final``
    is always complete. An existing ``final`` (the same checkpoint saved again after a
    resume, distillation's one checkpoint) is moved aside to ``<final>.old`` and removed
    once the new one is in place, so a crash in between leaves the previous one there.

    Returns:
        ``final`` as a path.
    """
    staged, final = Path(staged), Path(final)
    fsync_tree(staged)
    old = final.with_name(final.name + ".old")
    if final.is_dir():
        shutil.rmtree(old, ignore_errors=True)
        os.replace(final, old)
    os.replace(staged, final)
    fsync_folder(final.parent)
    shutil.rmtree(old, ignore_errors=True)
    return final


#: The lock file inside a run folder (see :class:`RunLock`).
LOCK_FILE = ".lock"

# Locks this process holds: resolved folder -> [open file descriptor, depth, created].
_HELD: dict[Path, list[int]] = {}


class RunLock:
    """The exclusive hold of a run folder by one process.

    ``fcntl.flock`` on ``FOLDER/.lock``, which also records the holder's process id. The
    kernel drops the lock when the holding process ends, however it ends (SIGKILL
    included), so a lock left by a dead run never stays in the way: the next run takes
    it over. Locks are re-entrant within a process (a run that calls another on the same
    folder, or a second :class:`RunLock` of it), and only the main process of a
    distributed run (``RANK`` 0) takes one: the other ranks write into rank 0's folder.

    Used as a context manager, it takes the lock at once when the folder exists (so that
    nothing reads the folder's state while another run changes it) and otherwise leaves
    it to :meth:`acquire`, called where the run creates the folder: a run refused by a
    check before that leaves no folder behind, and neither does one that fails before
    writing anything into the folder it created. It is released on exit.

    With ``shared=True`` the hold is shared (``LOCK_SH``): any number of shared holders
    at once, none while an exclusive one holds the folder, and the other way round. Several
    processes that each fill their own part of one folder (each part under its own
    exclusive lock) hold the folder shared; a shared hold never removes the folder.

    Args:
        folder: the run folder.
        name: the argument that named it, for the message.
        shared: take a shared hold instead of an exclusive one.

    Raises:
        ValueError: (from :meth:`acquire`) another process holds the folder; the message
            names the folder and that process.
    """

    def __init__(
        self, folder: str | os.PathLike[str], name: str = "output_dir", *, shared: bool = False
    ) -> None:
        self.folder = Path(folder)
        self.name = name
        self.shared = shared
        self._key: Path | None = None

    @property
    def held(self) -> bool:
        """Whether this object holds the lock."""
        return self._key is not None

    def acquire(self, *, create: bool = True) -> bool:
        """Takes the lock (a no-op when this object holds it); creates the folder when
        ``create``. Returns whether the lock is held (False: ``create`` is False and the
        folder does not exist, or this is not the main process of a distributed run)."""
        import fcntl

        if self._key is not None:
            return True
        if int(os.environ.get("RANK", "0")) != 0:
            return False
        if not create and not self.folder.is_dir():
            return False
        while True:
            try:
                created = not self.folder.is_dir()
                self.folder.mkdir(parents=True, exist_ok=True)
                key = self.folder.resolve()
                if key in _HELD:
                    _HELD[key][1] += 1
                    self._key = key
                    return True
                path = self.folder / LOCK_FILE
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as err:
                raise ValueError(
                    f"{self.name}: cannot write to {str(self.folder)!r}: {err.strerror or err}"
                ) from None
            try:
                mode = fcntl.LOCK_SH if self.shared else fcntl.LOCK_EX
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
            except OSError:  # BlockingIOError: held by another process
                holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
                os.close(fd)
                who = f" (process {holder})" if holder.isdigit() else ""
                raise ValueError(
                    f"{self.name}: {str(self.folder)!r} is in use by another run{who}; wait "
                    "for it to finish or use another folder"
                ) from None
            try:  # the file locked is still the one in the folder (see release)
                same = os.stat(path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        _HELD[key] = [fd, 1, int(created and not self.shared)]
        self._key = key
        return True

    def release(self) -> None:
        """Lets the folder go (when this object holds it and no other in the process).

        A folder this lock created that holds nothing but the lock file (a run that
        failed before writing anything) is removed, so that it leaves nothing behind.
        """
        import fcntl

        key, self._key = self._key, None
        if key is None:
            return
        held = _HELD[key]
        held[1] -= 1
        if held[1] > 0:
            return
        del _HELD[key]
        fd, _, created = held
        try:
            if created and [p.name for p in self.folder.iterdir()] == [LOCK_FILE]:
                # unlinked while still locked: whoever opened it meanwhile sees that the
                # file it locked is no longer the folder's and starts over
                (self.folder / LOCK_FILE).unlink()
                self.folder.rmdir()
        except OSError:
            pass
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def __enter__(self) -> RunLock:
        self.acquire(create=False)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()
