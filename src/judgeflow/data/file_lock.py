"""An exclusive `flock(2)` on a lock file: one holder at a time, released by the kernel when its
process dies, however it dies, so a lock file left by a killed holder is simply taken over.

Written once for the locks that judgeflow keeps in files: the claim on a judging's output
(`inference.claim`: refused at once, naming the holder), the Prefect cache-key locks
(`tasks/locking`) and the registered models' locks (`stages.register.registry_lock`), both polled
until free. Nothing here waits: a caller that waits polls, so it never blocks while it holds a
guard of its own.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
import socket
import sys
from pathlib import Path

__all__ = ["LockBusy", "is_held", "release", "take"]


class LockBusy(Exception):
    """Another process holds the lock; `holder` says who, from what it wrote in the file."""

    def __init__(self, path: Path, holder: str) -> None:
        super().__init__(f"{path} is held by {holder}")
        self.path, self.holder = path, holder


def take(path: Path, *, say_who: bool = False) -> int:
    """An exclusive flock on `path` (created, folder too, if needed), without waiting: the open
    descriptor, which holds it until `release`; `LockBusy` when another process has it.
    `say_who` writes this process (pid, host, start, command) into the file for `LockBusy`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise LockBusy(path, holder) from None
        except BaseException:
            os.close(fd)
            raise
        # The holder before us may have removed the file between our open and our flock: a
        # lock on a removed file guards nothing, so open the path again.
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    if say_who:
        _write_holder(fd)
    return fd


def release(fd: int, *, remove: Path | None = None) -> None:
    """Give the lock up. `remove` (its file) is removed first, before the unlock: a process
    waiting to open it then opens a new file, never the one about to be gone."""
    if remove is not None:
        with contextlib.suppress(FileNotFoundError):
            remove.unlink()
    os.close(fd)  # closing the file releases its flock


def is_held(path: Path) -> bool:
    """Whether some process holds `path`'s lock (a missing file is free); takes nothing."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # free unless someone holds it
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _write_holder(fd: int) -> None:
    about = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "command": " ".join(Path(sys.argv[0]).name.split() + sys.argv[1:])[:300],
    }
    os.ftruncate(fd, 0)
    os.write(fd, json.dumps(about).encode())


def _holder(fd: int) -> str:
    """Who holds a lock, from what it wrote in the file."""
    try:
        about = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        about = {}
    if not about:
        return "a process that has not said who it is yet"
    return (
        f"pid {about.get('pid')} on {about.get('host')}, started {about.get('started')}: "
        f"{about.get('command')}"
    )
