"""Argument checks shared by the public entry points (one wording for every error): numbers,
and output folders and files checked before any long work."""

from __future__ import annotations

import numbers
import os
import tempfile
from pathlib import Path
from typing import Any


def check_int(value: Any, name: str, minimum: int = 1, *, optional: bool = False) -> Any:
    """Return ``int(value)`` when it is an integer ``>= minimum``, else raise ``ValueError``.

    Booleans are rejected (``True`` is not a batch size); NumPy integers are accepted.
    With ``optional=True`` a ``None`` passes through unchanged.

    >>> check_int(4, "batch_size")
    4
    >>> check_int(0, "batch_size")
    Traceback (most recent call last):
    ...
    ValueError: batch_size must be an integer >= 1, got 0
    """
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_output_dir(path: str | os.PathLike[str], name: str = "output_dir") -> Path:
    """Return ``path`` when a folder can be written there, else raise ``ValueError``.

    Called before any long work, so that a results folder that is a file, sits below a
    file, or cannot be written fails at once instead of after hours of training. Nothing
    is created: a probe file is written into ``path`` (or into its nearest existing
    parent when ``path`` does not exist yet) and removed again.

    Args:
        path: the folder (it need not exist yet).
        name: the argument's name, for the message.

    Raises:
        ValueError: ``path`` is a file, lies below a file, or cannot be written.
    """
    out = Path(path).expanduser()
    if out.exists() and not out.is_dir():
        raise ValueError(f"{name}: {str(path)!r} is a file, expected a folder")
    existing = next(p for p in (out, *out.parents) if p.exists() or p == p.parent)
    if not existing.is_dir():
        raise ValueError(f"{name}: {str(path)!r} cannot be a folder: {str(existing)!r} is a file")
    try:
        fd, probe = tempfile.mkstemp(prefix=".tisa-write-test-", dir=existing)
    except OSError as err:
        where = "" if existing == out else f" (its parent {str(existing)!r} is not writable)"
        raise ValueError(
            f"{name}: cannot write to {str(path)!r}{where}: {err.strerror or err}"
        ) from None
    os.close(fd)
    os.unlink(probe)
    return out


def check_output_file(path: str | os.PathLike[str], name: str = "output") -> Path:
    """Return ``path`` when a file can be written there, else raise ``ValueError``.

    The file's folder is checked as :func:`check_output_dir` does; an existing folder at
    ``path`` itself is refused.

    Raises:
        ValueError: ``path`` is a folder, or its folder cannot be written.
    """
    out = Path(path).expanduser()
    if out.is_dir():
        raise ValueError(f"{name}: {str(path)!r} is a folder, expected a file name")
    check_output_dir(out.parent, name)
    return out
