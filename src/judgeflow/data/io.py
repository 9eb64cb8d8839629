"""Atomic file writes and small path helpers for data outputs.

A prepared parquet file is an input to a long GPU job and a cache entry; a half-written file
must never sit at the destination. Local writes go to a temporary file in the destination's
directory and are published with `os.replace` (atomic on POSIX); on failure the previous file
is untouched and the temporary file is removed. URLs (`s3://…`, `memory://…`) go through fsspec,
where object stores publish an object only when it is closed; on failure we discard it when the
filesystem supports that.

Several files that belong together (a prepared split, its twin, their report) are written side
by side as they are produced (`staged_files`) and published together at the end, the way
`atomic_write_many` publishes bytes already in memory: only a large input's batches are ever in
memory, never a whole output.

A local output location that cannot take the file (disk full, read-only, a file where a
directory should be: `OutputWriteError.is_output_problem`) raises `OutputWriteError` naming
the destination, so the user reads which file and what to do instead of a traceback; other OS
errors (I/O, network) pass unchanged, so the retry policy still sees them as transient.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
from collections.abc import Collection, Iterable, Iterator, Sequence
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


class StagedFiles:
    """Temporary files for destinations known up front, created on first `open` and published
    by `publish` in the destinations' order (those never opened are skipped), or discarded.

    A local file is staged in its destination's directory and published like
    `atomic_write_many`: all are synced, then renamed in order. A URL's bytes are staged in a
    local temporary file and uploaded at `publish`, after the local files, in order.
    """

    def __init__(self, destinations: Sequence[PathLike]) -> None:
        self._order = [os.fspath(d) for d in destinations]
        self._open: dict[str, tuple[IO[bytes], str | None]] = {}  # dest -> (handle, temp name)

    def open(self, path: PathLike) -> IO[bytes]:
        """The staged file of `path` (one of the destinations), opened for binary writing."""
        name = os.fspath(path)
        if name not in self._order or name in self._open:
            raise ValueError(f"{name}: not a destination, or opened already")
        if is_url(name):
            spool = cast(IO[bytes], tempfile.TemporaryFile())  # noqa: SIM115 (closed by us)
            self._open[name] = (spool, None)
            return spool
        dest = local_path(name)
        with _output_errors(dest):
            dest.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
        raw = os.fdopen(fd, "wb")
        self._open[name] = (raw, tmp_name)
        return cast(IO[bytes], _GuardedWrites(raw, dest))

    def publish(self) -> None:
        names = [name for name in self._order if name in self._open]
        local = [name for name in names if self._open[name][1] is not None]
        for name in local:
            raw = self._open[name][0]
            with _output_errors(local_path(name)):
                raw.flush()
                os.fsync(raw.fileno())
                raw.close()
        for name in local:
            with _output_errors(local_path(name)):
                os.replace(cast(str, self._open[name][1]), local_path(name))
            del self._open[name]
        for name in [name for name in names if name not in local]:
            spool = self._open[name][0]
            spool.seek(0)
            with atomic_writer(name) as handle:
                shutil.copyfileobj(spool, handle, 1 << 20)
            spool.close()
            del self._open[name]

    def discard(self) -> None:
        """Remove every staged file not published."""
        for raw, tmp_name in self._open.values():
            with contextlib.suppress(OSError):  # a full disk fails the flush; the file goes anyway
                raw.close()
            if tmp_name is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp_name)
        self._open.clear()


@contextlib.contextmanager
def staged_files(destinations: Sequence[PathLike]) -> Iterator[StagedFiles]:
    """`StagedFiles` for `destinations`, published when the block ends without an error and
    discarded when it raises (then no destination has changed)."""
    staged = StagedFiles(destinations)
    try:
        yield staged
        staged.publish()
    finally:
        staged.discard()


class HashingSink:
    """A write-only file object that hashes what passes through (no second read of the output)."""

    def __init__(self, handle: IO[bytes]) -> None:
        self._handle = handle
        self._digest = hashlib.sha256()
        self._position = 0
        self.closed = False

    def write(self, data: Any) -> int:
        view = memoryview(data)
        self._digest.update(view)
        self._handle.write(view)
        self._position += view.nbytes
        return view.nbytes

    def tell(self) -> int:
        return self._position

    def flush(self) -> None:
        self._handle.flush()

    def close(self) -> None:  # the handle's owner closes it
        self.closed = True

    def writable(self) -> bool:
        return True

    def hexdigest(self) -> str:
        return self._digest.hexdigest()


def parquet_writer_options(schema: pa.Schema, unique: Collection[str]) -> dict[str, list[str]]:
    """`ParquetWriter` options per column. Columns named in `unique` (leaf names: long texts,
    hashes) hold a different value in almost every row: no dictionary (a failed try only costs
    time) and no min/max statistics (footer bytes no reader uses). Short strings (roles,
    sources, languages) get a dictionary."""
    short = [(path, leaf) for path, leaf in _leaves(schema) if leaf.name not in unique]
    return {
        "use_dictionary": [path for path, leaf in short if pa.types.is_string(leaf.type)],
        "write_statistics": [path for path, _ in short],
    }


def _leaves(fields: Iterable[pa.Field], prefix: str = "") -> Iterator[tuple[str, pa.Field]]:
    """(parquet column path, field) of every leaf, e.g. `messages.list.element.role`."""
    for field in fields:
        path = f"{prefix}{field.name}"
        if pa.types.is_struct(field.type):
            yield from _leaves(field.type, f"{path}.")
        elif pa.types.is_list(field.type):
            yield from _leaves([field.type.value_field.with_name("element")], f"{path}.list.")
        else:
            yield path, field


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
