"""One judging per output, and an output that can be written, known before a model is loaded.

`judgeflow judge` spends minutes to hours judging before it writes its output: a location it
cannot write must fail first, not last, and two runs on one output must not append to one
progress file side by side. `claim_output` checks the location, then holds an exclusive
`flock` on a lock file beside the progress file (`<output>.judging.lock`) for as long as the
judging runs. The kernel releases a flock when its process dies, however it dies, so a lock
file left by a killed run is taken over by the next one; the file itself is removed on every
exit path this process sees. A claim is re-entrant within a process: the command line claims
before it starts its MLflow run, and the stage it runs claims again.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from judgeflow.data import file_lock
from judgeflow.data.errors import DataError, OutputWriteError
from judgeflow.data.io import is_url

__all__ = ["OutputBusy", "check_output", "claim_output", "lock_path", "progress_path"]


class OutputBusy(DataError):
    """Another judging holds this output; the message names it (pid, host, start, command)."""


def progress_path(output: str) -> Path:
    """Where verdicts are recorded as they come: beside a local output; under
    JUDGEFLOW_HOME for a remote one."""
    if not is_url(output):
        return Path(output).with_name(Path(output).name + ".judging.jsonl")
    from judgeflow.config import judgeflow_home

    digest = hashlib.sha256(output.encode()).hexdigest()[:16]
    return judgeflow_home() / "judging" / f"{digest}.jsonl"


def lock_path(output: str) -> Path:
    """The lock file of an output: beside its progress file."""
    progress = progress_path(output)
    return progress.with_name(progress.name.removesuffix(".jsonl") + ".lock")


def check_output(output: str, data: str | None = None) -> None:
    """Refuse, before any work, an output that cannot be written: a directory, a device or
    other non-file (`/dev/null` would be replaced by a file), the input itself, a missing or
    unwritable parent folder, a file that is not writable. A URL (S3) is checked when written."""
    if is_url(output):
        return
    path = Path(output)
    if path.is_dir():
        raise OutputWriteError(output, IsADirectoryError(errno.EISDIR, "is a directory"))
    if path.exists() and not path.is_file():
        raise OutputWriteError(
            output, OSError(errno.EINVAL, "is not a regular file (a device, a pipe or a socket)")
        )
    if data is not None and not is_url(data) and path.exists() and path.samefile(data):
        raise OutputWriteError(
            output, OSError(errno.EINVAL, "is the data being judged: it would be replaced")
        )
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise OutputWriteError(
            output, FileNotFoundError(errno.ENOENT, "its folder does not exist", str(parent))
        )
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputWriteError(
            output, PermissionError(errno.EACCES, "its folder is not writable", str(parent))
        )
    if path.exists() and not os.access(path, os.W_OK):
        raise OutputWriteError(output, PermissionError(errno.EACCES, "it is not writable"))


_held: dict[Path, int] = {}  # lock file -> how many claims of this process hold it
_held_guard = threading.Lock()


@contextlib.contextmanager
def claim_output(output: str, data: str | None = None) -> Iterator[Path]:
    """Check `output` (`check_output`, against `data` too) and hold its lock until the block
    ends; another holder raises `OutputBusy` at once. Yields the lock file's path."""
    check_output(output, data)
    lock = lock_path(output).absolute()
    with _held_guard:
        if lock in _held:
            _held[lock] += 1
            fd = None
        else:
            fd = _acquire(lock, output)
            _held[lock] = 1
    try:
        yield lock
    finally:
        with _held_guard:
            _held[lock] -= 1
            if _held[lock] == 0:
                del _held[lock]
                if fd is not None:
                    file_lock.release(fd, remove=lock)


def _acquire(lock: Path, output: str) -> int:
    """An exclusive flock on `lock`, created if needed, saying who holds it; a file whose flock
    no live process holds (its holder died) is simply taken over."""
    try:
        return file_lock.take(lock, say_who=True)
    except file_lock.LockBusy as busy:
        raise OutputBusy(
            f"{output}: another judging is writing to it ({busy.holder}); wait for it to end, "
            f"or write to another --output. Its lock: {lock}"
        ) from None
