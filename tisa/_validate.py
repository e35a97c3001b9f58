"""Argument checks shared by the public entry points (one wording for every error)."""

from __future__ import annotations

import numbers
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
