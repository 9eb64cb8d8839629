"""Atomic file writes and small path helpers for data outputs.

A prepared parquet file is an input to a long GPU job and a cache entry; a half-written file
must never sit at the destination. Local writes go to a temporary file in the destination's
directory and are published with `os.replace` (atomic on POSIX); on failure the previous file
is untouched and the temporary file is removed. URLs (`s3://…`, `memory://…`) go through fsspec,
where object stores publish an object only when it is closed; on failure we discard it when the
filesystem supports that.

A local output location that cannot take the file (disk full, read-only, a file where a
directory should be: `OutputWriteError.is_output_problem`) raises `OutputWriteError` naming
the destination, so the user reads which file and what to do instead of a traceback; other OS
errors (I/O, network) pass unchanged, so the retry policy still sees them as transient.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any, cast

import pyarrow as pa
import pyarrow.parquet as pq

from judgeflow.data.errors import DataError, OutputWriteError

PathLike = str | os.PathLike[str]


def is_url(path: PathLike) -> bool:
    """True for fsspec URLs other than `file://` (those are treated as local paths)."""
    text = os.fspath(path)
    return "://" in text and not text.startswith("file://")


def local_path(path: PathLike) -> Path:
    """A local `Path` for a plain path or a `file://` URL."""
    text = os.fspath(path)
    return Path(text.removeprefix("file://"))


@contextlib.contextmanager
def atomic_writer(path: PathLike, *, mode: int | None = None) -> Iterator[IO[bytes]]:
    """Open `path` for binary writing so that it appears complete or not at all.

    A local file gets permission bits `mode` (default: those of `tempfile.mkstemp`, 0600).
    """
    if is_url(path):
        with _url_writer(os.fspath(path)) as handle:
            yield handle
        return
    dest = local_path(path)
    with _output_errors(dest):
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    raw = os.fdopen(fd, "wb")
    try:
        with _output_errors(dest):
            if mode is not None:
                os.fchmod(fd, mode)
        yield cast(IO[bytes], _GuardedWrites(raw, dest))
        with _output_errors(dest):
            raw.flush()
            os.fsync(raw.fileno())
            raw.close()
            os.replace(tmp_name, dest)
    except BaseException:
        with contextlib.suppress(OSError):  # a full disk fails the flush; the file goes anyway
            raw.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise


@contextlib.contextmanager
def _output_errors(dest: PathLike) -> Iterator[None]:
    """An OS error that says the output location is unusable, as an `OutputWriteError`."""
    try:
        yield
    except OSError as exc:
        if isinstance(exc, OutputWriteError) or not OutputWriteError.is_output_problem(exc):
            raise
        raise OutputWriteError(os.fspath(dest), exc) from exc


class _GuardedWrites:
    """The temporary file's handle, whose write errors name the destination (a failure while
    the caller computes what to write, e.g. reading its input, stays its own)."""

    def __init__(self, raw: IO[bytes], dest: Path) -> None:
        self._raw, self._dest = raw, dest

    def write(self, data: Any) -> int:
        with _output_errors(self._dest):
            return self._raw.write(data)

    def flush(self) -> None:
        with _output_errors(self._dest):
            self._raw.flush()

    def __getattr__(self, name: str) -> Any:  # tell, fileno, closed, writable, …
        return getattr(self._raw, name)


@contextlib.contextmanager
def _url_writer(url: str) -> Iterator[IO[bytes]]:
    import fsspec

    fs, fs_path = fsspec.core.url_to_fs(url)
    parent = fs._parent(fs_path)
    if parent:
        with contextlib.suppress(Exception):
            fs.makedirs(parent, exist_ok=True)
    handle: Any = fs.open(fs_path, "wb")
    try:
        yield handle
    except BaseException:
        if hasattr(handle, "discard"):
            handle.discard()
        raise
    handle.close()


def atomic_write_bytes(path: PathLike, data: bytes, *, mode: int | None = None) -> None:
    """Write `data` to `path` atomically."""
    with atomic_writer(path, mode=mode) as handle:
        handle.write(data)


def atomic_write_text(path: PathLike, text: str, *, mode: int | None = None) -> None:
    """Write UTF-8 `text` to `path` atomically."""
    atomic_write_bytes(path, text.encode("utf-8"), mode=mode)


def write_parquet_atomic(table: pa.Table, path: PathLike) -> None:
    """Write a parquet table atomically."""
    with atomic_writer(path) as handle:
        pq.write_table(table, handle)


def parquet_bytes(table: pa.Table) -> bytes:
    """A parquet file's bytes, for callers that hash or stage a file before publishing it."""
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return bytes(sink.getvalue().to_pybytes())


def atomic_write_many(files: Sequence[tuple[PathLike, bytes]]) -> None:
    """Publish several files together: all temporary files are written and synced first, then
    renamed in the given order (put the file that marks completion, e.g. a report, last).

    A failure while writing leaves every destination untouched and removes all temporary files.
    Only a failing rename (same directory, so practically never) can publish some and not
    others. URLs are written one by one in order (object stores have no multi-object commit).
    """
    local = [(local_path(p), data) for p, data in files if not is_url(p)]
    staged: list[tuple[str, Path]] = []
    try:
        for dest, data in local:
            with _output_errors(dest):
                dest.parent.mkdir(parents=True, exist_ok=True)
                fd, tmp_name = tempfile.mkstemp(
                    prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent
                )
                staged.append((tmp_name, dest))
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                    handle.flush()
                    os.fsync(handle.fileno())
        while staged:
            tmp_name, dest = staged[0]
            with _output_errors(dest):
                os.replace(tmp_name, dest)
            staged.pop(0)
    finally:
        for tmp_name, _ in staged:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp_name)
    for path, data in files:
        if is_url(path):
            atomic_write_bytes(path, data)


@contextlib.contextmanager
def parquet_read_errors(name: str) -> Iterator[None]:
    """A parquet input that cannot be read (truncated, not parquet, a corrupt page) as a
    `DataError` naming it. OS errors with an errno (I/O, network) stay as they are."""
    try:
        yield
    except (pa.ArrowException, OSError) as exc:
        if isinstance(exc, DataError) or (isinstance(exc, OSError) and exc.errno is not None):
            raise
        raise DataError(f"{name}: cannot read parquet file: {exc}") from exc


def open_binary(path: PathLike) -> IO[bytes]:
    """Open a local path or fsspec URL for binary reading."""
    if is_url(path):
        import fsspec

        handle: Any = fsspec.open(os.fspath(path), "rb").open()
        return handle
    return local_path(path).open("rb")


def exists(path: PathLike) -> bool:
    """Whether a local path or fsspec URL exists."""
    if is_url(path):
        import fsspec

        fs, fs_path = fsspec.core.url_to_fs(os.fspath(path))
        return bool(fs.exists(fs_path))
    return local_path(path).exists()


def remove(path: PathLike) -> None:
    """Delete a local path or fsspec URL if it exists."""
    if is_url(path):
        import fsspec

        fs, fs_path = fsspec.core.url_to_fs(os.fspath(path))
        if fs.exists(fs_path):
            fs.rm(fs_path)
        return
    with contextlib.suppress(FileNotFoundError):
        local_path(path).unlink()


def sha256_file(path: PathLike, chunk_size: int = 1 << 20) -> str:
    """Hex sha256 of a file's bytes, read in chunks."""
    digest = hashlib.sha256()
    with open_binary(path) as handle:
        while chunk := handle.read(chunk_size):
            digest.update(chunk)
    return digest.hexdigest()
