"""A child process that dies with its parent, in a module that imports nothing heavy (the
console script uses it before anything else loads; cluster/procs for every process tree)."""

from __future__ import annotations

import contextlib
import ctypes
import signal


def die_with_parent() -> None:
    """In the child (a `preexec_fn`): SIGTERM when the starting process dies, even by SIGKILL
    (Linux's PR_SET_PDEATHSIG; elsewhere a no-op)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
