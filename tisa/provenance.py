"""Where a result came from: the record every committed result file carries.

A figure in the docs is only as good as the file behind it, and a file is only checkable
when it says which code wrote it, with which command, on which build and machine::

    from tisa.provenance import run_metadata
    write_json(out / "results.json", {"provenance": run_metadata(), "rows": rows})

``run_metadata()`` is cheap (one ``git`` call, cached) and never fails: outside a git
checkout the commit is ``None``, or the one ``TISA_SOURCE_COMMIT`` names. Large artefacts
(model weights) stay out of the repository; :func:`sha256_file` gives the digest a
result file records instead.
"""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import os
import platform
import shlex
import subprocess
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tisa.files import write_atomic, write_json

__all__ = ["cpu_model", "git_commit", "run_metadata", "save_result", "sha256_file"]

_REPO = Path(__file__).resolve().parent.parent


@functools.cache
def git_commit() -> dict[str, Any]:
    """The commit of the checkout this package runs from, and whether it had changes.

    Returns ``{"commit": sha or None, "dirty": bool or None}``; ``None`` when the package
    is not in a git checkout (an installed wheel) or git is missing. A copy of the source
    without its ``.git`` (synced to a cluster, say) can name its commit in the environment
    variable ``TISA_SOURCE_COMMIT`` (40 hex digits); ``dirty`` is then None (unknown).
    """
    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(
                ["git", "-C", str(_REPO), *args],
                capture_output=True, text=True, timeout=10, check=True,
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip()

    commit = git("rev-parse", "HEAD")
    if not commit:
        named = os.environ.get("TISA_SOURCE_COMMIT", "").strip().lower()
        valid = len(named) == 40 and all(c in "0123456789abcdef" for c in named)
        if named and not valid:
            warnings.warn(f"TISA_SOURCE_COMMIT: expected a full commit (40 hex digits), got "
                          f"{named!r}; the commit is recorded as unknown", stacklevel=2)
        return {"commit": named if valid else None, "dirty": None}
    # changes to tracked files of the package only: result files being written are not code
    status = git("status", "--porcelain", "--untracked-files=no", "--", "tisa", "benchmarks")
    return {"commit": commit, "dirty": bool(status) if status is not None else None}


@functools.cache
def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, else ``platform.processor()``)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def run_metadata(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """The provenance record of a result: commit, command, builds, CPU, threads, date.

    Args:
        argv: the command line to record; default ``sys.argv`` with the program named by
            its file name only (no machine paths in committed files).

    Returns:
        ``{"commit", "dirty", "command", "torch", "transformers", "python", "cpu",
        "cpu_count", "threads", "gpu", "date"}``; ``gpu`` is the visible CUDA device's name
        (whether or not the run used it), or None without one; ``date`` is UTC in ISO 8601.
    """
    import torch

    try:
        import transformers

        transformers_version: str | None = transformers.__version__
    except ImportError:  # pragma: no cover - a dependency of the package
        transformers_version = None
    if argv is None:
        argv = [_program(sys.argv[0]), *sys.argv[1:]] if sys.argv else []
    return {
        **git_commit(),
        # the program may be several words ("python -m tisa.cli"); its arguments are quoted
        "command": " ".join([str(argv[0]), *(shlex.quote(str(a)) for a in argv[1:])])
        if argv else "",
        "torch": torch.__version__,
        "transformers": transformers_version,
        "python": platform.python_version(),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "gpu": _gpu_name(),
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


def _gpu_name() -> str | None:
    """The name of the visible CUDA device (the current one), or None without one."""
    import torch

    try:
        return torch.cuda.get_device_name() if torch.cuda.is_available() else None
    except RuntimeError:  # a device that is listed but cannot be queried
        return None


def _program(arg0: str) -> str:
    """``sys.argv[0]`` without machine paths: ``benchmarks/x.py``, ``python -m tisa.cli``,
    ``python -c`` (code given on the command line, whose text Python does not keep), or
    the bare name of a console script such as ``tisa``."""
    if arg0 == "-c":
        return "python -c"
    path = Path(arg0).resolve()
    try:
        relative = path.relative_to(_REPO)
    except ValueError:
        return path.name
    if relative.name == "__main__.py":
        return "python -m " + ".".join(relative.parent.parts)
    return relative.as_posix()


def sha256_file(path: str | os.PathLike[str], *, chunk: int = 1 << 20) -> str:
    """The SHA-256 hex digest of a file, read in chunks (model weights are large)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def weights_sha256(folder: str | os.PathLike[str] | None) -> str | None:
    """The SHA-256 of a model folder's ``model.safetensors``, the digest ``tisa convert``
    records for its model; None without a folder or without that file (a hub id, a folder
    of sharded or ``.bin`` weights)."""
    weights = Path(folder) / "model.safetensors" if folder is not None else None
    return sha256_file(weights) if weights is not None and weights.is_file() else None


def save_result(folder: str | os.PathLike[str], stem: str, text: str, result: dict) -> Path:
    """Writes ``FOLDER/STEM.md`` (``text``) and ``FOLDER/STEM.json`` (``result`` with its
    provenance, :func:`run_metadata`), each atomically; returns the JSON file."""
    folder = Path(folder)
    write_atomic(folder / f"{stem}.md", text)
    write_json(folder / f"{stem}.json", {**result, "provenance": run_metadata()})
    return folder / f"{stem}.json"
