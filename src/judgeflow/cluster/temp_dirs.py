"""Per-job temp dirs that the next job on the node removes when their owner died without doing so.

A Ray bootstrap removes its temp dir when it tears down, but a process that is SIGKILLed (Slurm
after ``KillWait`` when teardown runs long, the OOM killer, ``kill -9``) runs no teardown, and
its dir (sockets, session logs) stays in ``/tmp`` for good. So the owner holds an exclusive
``flock`` on ``<dir>/.owner.lock`` for as long as it lives; the kernel drops the lock when the
process dies, however it dies. :func:`sweep_stale` removes the dirs of the given pattern whose
lock is free: their owner is gone. A dir without the lock file (being created, or made by some
other program) is never touched, nor is one whose lock file names another host.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
import tempfile
from dataclasses import dataclass
from pathlib import Path

OWNER_LOCK = ".owner.lock"
#: What the lock file holds: the owner's host. Hosts that share a base (a network filesystem,
#: where one host may not see another's lock) each sweep only their own dirs.
_HOST = socket.gethostname().encode()

__all__ = ["OWNER_LOCK", "OwnedDir", "sweep_stale"]


@dataclass
class OwnedDir:
    """A fresh temp dir, locked by this process until :meth:`remove` (or its death)."""

    path: Path
    _fd: int

    @classmethod
    def create(cls, base: str | Path, prefix: str) -> OwnedDir:
        path = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
        # Locked before it has its final name, so a sweeper never sees the lock file unlocked.
        part = path / f"{OWNER_LOCK}.part"
        fd = os.open(part, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, _HOST)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.replace(part, path / OWNER_LOCK)
        except OSError:  # a filesystem without flock: nothing to sweep by, nothing left here
            os.close(fd)
            shutil.rmtree(path, ignore_errors=True)
            raise
        return cls(path, fd)

    def remove(self) -> None:
        """Remove the dir, then give up the lock (idempotent)."""
        shutil.rmtree(self.path, ignore_errors=True)
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def sweep_stale(base: str | Path, pattern: str) -> list[Path]:
    """Remove the dirs ``base/<pattern>`` (a glob) whose owner died; return them."""
    removed = []
    for path in sorted(Path(base).glob(pattern)):
        try:
            fd = os.open(path / OWNER_LOCK, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:  # no lock file: not one of ours, or still being created
            continue
        try:
            if os.read(fd, len(_HOST) + 1) != _HOST:  # another host's (a shared base), or not ours
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:  # its owner is alive
                continue
            shutil.rmtree(path, ignore_errors=True)
            if not path.exists():
                removed.append(path)
        finally:
            os.close(fd)
    return removed
