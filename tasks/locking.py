"""Cache-key locks that die with their holder: one `flock(2)` per key, for Prefect transactions.

Two runs that need the same stage result at once (same data, same settings) should compute it
once. `tasks.policies.cached` runs each stage's transaction at Prefect's SERIALIZABLE isolation
with this lock manager: the first run holds the key's lock from the cache lookup until its
result is written, the second waits for it, then finds the record and reads it whole.

Why not Prefect's `FileSystemLockManager`: its lock is a file that outlives a killed holder (a
run killed mid-stage would make every later run of that stage wait forever), and it writes the
holder into that file after creating it, so a reader can find it empty and fail. An flock
(`judgeflow.data.file_lock`) is released by the kernel when its process dies, however it dies.
Flow runs in one process (threads) exclude each other through the table of locks this process
holds. `hold_timeout` is not supported: a lock lasts as long as its holder's process. The lock
files live next to the cache keys, on the same (shared) filesystem; NFS and most cluster
filesystems implement flock.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio

from judgeflow.data import file_lock

POLL_S = 0.2

# The locks this process holds, by (directory, key): the holder and the locked file. Shared by
# every manager instance (Prefect deep-copies cache policies, and with them their manager).
_HELD: dict[tuple[str, str], tuple[str, int]] = {}
_GUARD = threading.Lock()


class FlockLockManager:
    """Prefect `LockManager` over flock(2) on `<directory>/<key>.lock`."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)

    def acquire_lock(
        self,
        key: str,
        holder: str,
        acquire_timeout: float | None = None,
        hold_timeout: float | None = None,
    ) -> bool:
        deadline = None if acquire_timeout is None else time.monotonic() + acquire_timeout
        while not self._try_acquire(key, holder):
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(POLL_S)
        return True

    async def aacquire_lock(
        self,
        key: str,
        holder: str,
        acquire_timeout: float | None = None,
        hold_timeout: float | None = None,
    ) -> bool:
        deadline = None if acquire_timeout is None else time.monotonic() + acquire_timeout
        while not self._try_acquire(key, holder):
            if deadline is not None and time.monotonic() >= deadline:
                return False
            await anyio.sleep(POLL_S)
        return True

    def release_lock(self, key: str, holder: str) -> None:
        with _GUARD:
            held = _HELD.get(self._id(key))
            if held is None or held[0] != holder:
                raise ValueError(f"No lock held by {holder} for transaction with key {key}")
            del _HELD[self._id(key)]
            file_lock.release(held[1])  # the file stays: one per key, taken again

    def is_locked(self, key: str) -> bool:
        with _GUARD:  # file operations under the guard: see `_try_acquire`
            return self._id(key) in _HELD or file_lock.is_held(self._path(key))

    def is_lock_holder(self, key: str, holder: str) -> bool:
        with _GUARD:
            held = _HELD.get(self._id(key))
        return held is not None and held[0] == holder

    def wait_for_lock(self, key: str, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.is_locked(key):
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(POLL_S)
        return True

    async def await_for_lock(self, key: str, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.is_locked(key):
            if deadline is not None and time.monotonic() >= deadline:
                return False
            await anyio.sleep(POLL_S)
        return True

    def _try_acquire(self, key: str, holder: str) -> bool:
        # Under the guard, and never blocking in it: where flock is emulated with POSIX locks
        # (NFS), locks belong to the process and closing any descriptor of the file drops them,
        # so no thread may open or close a lock file while another thread of ours takes it.
        with _GUARD:
            held = _HELD.get(self._id(key))
            if held is not None:
                return held[0] == holder  # ours already, or another thread's here
            try:
                fd = file_lock.take(self._path(key))
            except file_lock.LockBusy:
                return False
            _HELD[self._id(key)] = (holder, fd)
            return True

    def _path(self, key: str) -> Path:
        return self.directory / f"{key}.lock"

    def _id(self, key: str) -> tuple[str, str]:
        return str(self.directory), key


@contextlib.contextmanager
def holding(
    manager: FlockLockManager,
    key: str,
    holder: str,
    on_wait: Callable[[Path], None] | None = None,
) -> Iterator[FlockLockManager]:
    """Hold `key`'s lock for the block (waits for the current holder to finish). `on_wait` is
    called once, with the lock file, when another holder has it and this one starts waiting."""
    if not manager.acquire_lock(key, holder, acquire_timeout=0):
        if on_wait is not None:
            on_wait(manager._path(key))
        manager.acquire_lock(key, holder)
    try:
        yield manager
    finally:
        manager.release_lock(key, holder)


__all__ = ["FlockLockManager", "holding"]
