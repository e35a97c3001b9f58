"""Peak resident memory of a call on CPU, read from the kernel (Linux): what the speed
benchmarks, ``tisa convert``'s long inputs and ``tisa longeval`` report as peak memory.

The peak is ``VmHWM`` in ``/proc/self/status``, reset through ``/proc/self/clear_refs``
before the call; free heap memory is returned to the system first (glibc's
``malloc_trim``) so that it cannot hide the call's allocations. :func:`set_mmap_threshold`
lowers glibc's mmap threshold, so that every tensor is mapped on allocation and unmapped
on release (see :mod:`tisa.bench`).
"""

from __future__ import annotations

import ctypes
import gc
import re
from collections.abc import Callable

__all__ = ["peak_memory", "set_mmap_threshold"]


def _status(field_name: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            m = re.search(rf"{field_name}:\s+(\d+) kB", f.read())
    except OSError:
        return None
    return int(m.group(1)) * 1024 if m else None


def peak_memory(fn: Callable[[], object]) -> int | None:
    """Extra resident memory (bytes) at the peak of ``fn()``; None where unmeasurable."""
    gc.collect()
    _trim()
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset the high-water mark
    except OSError:
        fn()
        return None
    before = _status("VmRSS")
    fn()
    hwm = _status("VmHWM")
    if before is None or hwm is None:
        return None
    return max(0, hwm - before)


_M_MMAP_THRESHOLD = -3  # glibc mallopt parameter


def set_mmap_threshold(nbytes: int) -> bool:
    """Sets glibc's mmap threshold; False where the C library is not glibc."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, int(nbytes)))
    except (OSError, AttributeError):
        return False


def _trim() -> None:
    """Returns free heap memory to the system (glibc), so it cannot hide new allocations."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
