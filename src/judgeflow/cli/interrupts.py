"""Ctrl-C that is never lost: a command's SIGINT raises KeyboardInterrupt as Python's own handler
does, and is also noted, so the command can ask again at a safe point.

Python runs a signal's handler in whatever Python code the main thread executes next; when that
is a `__del__`, a weakref callback or code a C extension calls and whose errors it clears, the
KeyboardInterrupt is printed as "Exception ignored" (or not at all) and the command carries on as
if nothing happened. A long command (judging a file) checks `raise_if_interrupted()` between
batches, and once more before it reports success, so a Ctrl-C always stops it.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

_noted = threading.Event()


@contextlib.contextmanager
def noting_interrupts() -> Iterator[None]:
    """Within the block, SIGINT raises KeyboardInterrupt and is noted; outside the main thread
    (where handlers cannot be installed) it changes nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        _noted.set()
        signal.default_int_handler(signum, frame)

    _noted.clear()
    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def raise_if_interrupted() -> None:
    """KeyboardInterrupt when a SIGINT arrived in `noting_interrupts` (its first one may have
    been swallowed); nothing otherwise."""
    if _noted.is_set():
        raise KeyboardInterrupt
