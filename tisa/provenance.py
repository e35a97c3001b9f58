"""Where a measurement comes from: the code, the command, the software and the machine.

Written beside benchmark results, so that a figure can be traced to the commit and the
command that produced it.
"""

from __future__ import annotations

import datetime
import platform
import shlex
import subprocess
import sys
from pathlib import Path

import torch

__all__ = ["run_metadata"]


def run_metadata(argv: list[str] | None = None) -> dict:
    """Provenance of a run: a plain dict, ready for JSON.

    Args:
        argv: the command line (default ``sys.argv``).

    Returns:
        ``commit`` (the git commit of this checkout, None outside git), ``command``,
        ``torch`` and ``python`` versions, ``cpu`` model, torch ``threads``, ``date``
        (UTC, ISO 8601).
    """
    argv = sys.argv if argv is None else argv
    return {
        "commit": _git_commit(),
        "command": shlex.join(argv),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cpu": _cpu_model(),
        "threads": torch.get_num_threads(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def _git_commit() -> str | None:
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
