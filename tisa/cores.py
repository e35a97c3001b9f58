"""How many CPU threads to use: the cores that other work leaves free.

Torch's intra-op threads meet at a barrier after every parallel operation, so one thread
that shares its core with another process holds back all the others.
:func:`free_cores` looks at what the machine is doing for a moment (``/proc/stat``) and
counts the cores that no other process keeps busy; :func:`choose_threads` is what a
command uses, with the user's own number first.
"""

from __future__ import annotations

import os
import time

__all__ = ["available_cores", "busy_cores", "choose_threads", "free_cores"]


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity where the system says it)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def _cpu_times(stat_path: str) -> tuple[int, int] | None:
    """(busy, total) jiffies of all cores together from ``/proc/stat``; None if unreadable."""
    try:
        with open(stat_path, encoding="ascii") as fh:
            fields = fh.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    values = [int(v) for v in fields[1:]]
    # user nice system idle iowait irq softirq steal [guest guest_nice: inside user, nice]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    total = sum(values[:8])
    return total - idle, total


def busy_cores(window_s: float = 0.5, *, stat_path: str = "/proc/stat") -> float | None:
    """Cores' worth of work the machine did over ``window_s`` seconds, while this process
    slept (so: other processes' work). None where ``/proc/stat`` cannot be read."""
    before = _cpu_times(stat_path)
    time.sleep(window_s)
    after = _cpu_times(stat_path)
    if before is None or after is None or after[1] <= before[1]:
        return None
    cores = os.cpu_count() or 1
    return cores * (after[0] - before[0]) / (after[1] - before[1])


def free_cores(window_s: float = 0.5, *, stat_path: str = "/proc/stat") -> int:
    """The cores of :func:`available_cores` that other work leaves free, at least 1.

    A core counts as taken when the machine's other work over the window adds up to at
    least half a core per core counted (one busy job on 2 cores: 1 free). Where the load
    cannot be read, every available core counts as free.
    """
    cores = available_cores()
    busy = busy_cores(window_s, stat_path=stat_path)
    if busy is None:
        return cores
    return max(1, min(cores, (os.cpu_count() or cores) - round(busy)))


def choose_threads(threads: int | None) -> tuple[int, str]:
    """(torch threads to use, a short reason): ``threads`` when given, else the free cores.

    The reason is for the console, e.g. ``"1 of 2 cores (1 busy with other work)"``.
    """
    cores = available_cores()
    if threads is not None:
        return threads, f"{threads} thread{'s' if threads != 1 else ''} (as asked)"
    free = free_cores()
    reason = f"{free} of {cores} core{'s' if cores != 1 else ''}"
    if free < cores:
        reason += f" ({cores - free} busy with other work; --threads N sets it)"
    return free, reason
