"""The one flock helper: one holder at a time, the holder named when it said who it is, a lock
file removed under a taker opened again, and a released lock free for the next."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from judgeflow.data import file_lock


def test_a_held_lock_refuses_another_taker_and_names_the_holder(tmp_path: Path) -> None:
    path = tmp_path / "folder" / "out.lock"
    assert not file_lock.is_held(path)  # no file yet: free
    fd = file_lock.take(path, say_who=True)
    try:
        assert file_lock.is_held(path)
        with pytest.raises(file_lock.LockBusy) as caught:
            file_lock.take(path)  # another open file: refused even in this process
        assert caught.value.holder.startswith(f"pid {os.getpid()} on ")
    finally:
        file_lock.release(fd)
    assert path.exists() and not file_lock.is_held(path)
    file_lock.release(file_lock.take(path), remove=path)
    assert not path.exists()


def test_a_holder_that_did_not_say_who_it_is_is_named_as_such(tmp_path: Path) -> None:
    path = tmp_path / "key.lock"
    fd = file_lock.take(path)
    try:
        with pytest.raises(file_lock.LockBusy, match="has not said who it is yet"):
            file_lock.take(path)
    finally:
        file_lock.release(fd)


def test_a_lock_file_removed_before_the_flock_is_opened_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The holder before us removed the file between our open and our flock: the lock taken
    must be on the file at the path now, not on the removed one."""
    path = tmp_path / "out.lock"
    flock = fcntl.flock
    removed: list[int] = []

    def flock_after_the_holder_left(fd: int, operation: int) -> None:
        if not removed:
            path.unlink()
            removed.append(os.fstat(fd).st_ino)
        flock(fd, operation)

    monkeypatch.setattr(fcntl, "flock", flock_after_the_holder_left)
    fd = file_lock.take(path)
    try:
        assert removed and os.fstat(fd).st_ino == path.stat().st_ino
    finally:
        file_lock.release(fd)
