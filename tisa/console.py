"""What the commands print: one progress bar per stage and one line when it ends.

By default (``tisa <command>``) the libraries speak only when something went wrong:
transformers and datasets log errors only, the datasets progress bars (for maps that take
a fraction of a second) are off, the Trainer's raw log dictionaries are replaced by one
named bar (:class:`tisa.hf.trainer.StageProgress`), and the Python warnings in
:data:`QUIET_WARNINGS`, which a user cannot act on, are not shown. The metrics still go
to the run folder's files. ``tisa --verbose <command>`` (:func:`configure` with
``verbose=True``) shows all of it: the Trainer's dictionaries, every warning and
transformers' info log.

Library code asks :func:`verbose` which of the two it is; outside the command line
(Python, tests) it is the quiet console, with the libraries' logging left as it is.
"""

from __future__ import annotations

import contextlib
import sys
import warnings
from collections.abc import Iterator

__all__ = [
    "QUIET_WARNINGS",
    "configure",
    "forget_caught_interrupt",
    "format_seconds",
    "stage_done",
    "verbose",
]

#: (category, message regex) of the Python warnings that the quiet console does not show:
#: said by a library about its own internals, nothing a user of tisa can change. (The
#: libraries' logged warnings, such as a classifier head that starts untrained, are
#: silenced by their log level.)
QUIET_WARNINGS: tuple[tuple[type[Warning], str], ...] = ()

_verbose = False


def verbose() -> bool:
    """True when the full logs were asked for (``tisa --verbose``)."""
    return _verbose


@contextlib.contextmanager
def configure(*, verbose: bool) -> Iterator[None]:
    """The console of a command, for the ``with`` block: quiet libraries, or their full logs.

    Quiet: transformers and datasets log errors only, their progress bars are off (the
    commands draw their own) and the warnings of :data:`QUIET_WARNINGS` are ignored.
    Verbose: transformers logs at info level, everything else as the libraries do it.
    The libraries' settings are restored afterwards.
    """
    global _verbose
    import datasets
    from transformers.utils import logging as hf_logging

    before = (
        _verbose,
        hf_logging.get_verbosity(),
        hf_logging.is_progress_bar_enabled(),
        datasets.logging.get_verbosity(),
        datasets.are_progress_bars_disabled(),
    )
    _verbose = bool(verbose)
    with warnings.catch_warnings():
        if _verbose:
            hf_logging.set_verbosity_info()
        else:
            hf_logging.set_verbosity_error()
            hf_logging.disable_progress_bar()  # "Writing model shards" and the like
            datasets.logging.set_verbosity_error()
            datasets.disable_progress_bars()  # maps over a few thousand rows: under a second
            for category, message in QUIET_WARNINGS:
                warnings.filterwarnings("ignore", message=message, category=category)
        try:
            yield
        finally:
            _verbose, hf_level, hf_bars, ds_level, ds_bars_off = before
            hf_logging.set_verbosity(hf_level)
            if hf_bars:
                hf_logging.enable_progress_bar()
            datasets.logging.set_verbosity(ds_level)
            if not ds_bars_off:
                datasets.enable_progress_bars()


def format_seconds(seconds: float) -> str:
    """``"42 s"``, ``"3 min 5 s"`` or ``"1 h 2 min"``.

    >>> format_seconds(185.2)
    '3 min 5 s'
    """
    s = int(round(seconds))
    if s < 60:
        return f"{seconds:.1f} s" if seconds < 10 else f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"


def stage_done(name: str, text: str) -> None:
    """The one line that ends a stage, ``<name>: <text>``, on stderr next to the bars."""
    from tqdm.auto import tqdm

    tqdm.write(f"{name}: {text}", file=sys.stderr)


def forget_caught_interrupt() -> None:
    """Lets a caught Ctrl-C end ``python -m ...`` with the exit code the program returns.

    CPython flags a KeyboardInterrupt as unhandled when it passes through ``exec()`` or
    ``eval()`` of a string (dataclasses build their methods that way), even if it is
    caught further up; a process started with ``-m`` then kills itself with SIGINT at exit
    instead of returning its code. Running an empty string clears that flag.
    """
    exec("")
