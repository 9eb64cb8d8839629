"""Writing: one ParquetWriter in a background thread, hashed while it writes, published atomically."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import IO, Any

import pyarrow as pa
import pyarrow.parquet as pq

from judgeflow.data.io import atomic_writer


class _HashingSink:
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

    def close(self) -> None:  # the atomic writer owns the real handle
        self.closed = True

    def writable(self) -> bool:
        return True

    def hexdigest(self) -> str:
        return self._digest.hexdigest()


def _write_tables(
    path: str, schema: pa.Schema, tables: Iterable[pa.Table], check: Callable[[], None]
) -> str:
    """Write `tables` to `path` as one row group each; returns the file's sha256.

    Every GRRM parquet file is written here, by a single or a sharded run alike, so equal
    tables give equal bytes. `check` runs after the last table and before the file is
    published: raising there leaves nothing at `path`.
    """
    with atomic_writer(path) as handle:
        sink = _HashingSink(handle)
        writer = pq.ParquetWriter(sink, schema, **_writer_options(schema))
        try:
            # Encoding a table overlaps with rendering the next (Arrow releases the GIL); one
            # write in flight keeps the order and bounds memory to two batches. Leaving the
            # executor waits for that write, so the writer is never closed under it.
            with ThreadPoolExecutor(1, "grrm-write") as background:
                writing: Future[None] | None = None
                for table in tables:
                    if writing is not None:
                        writing.result()
                    writing = background.submit(writer.write_table, table)
                if writing is not None:
                    writing.result()
            check()
        finally:
            writer.close()
        return sink.hexdigest()


def _writer_options(schema: pa.Schema) -> dict[str, list[str]]:
    """Parquet options per column. The long texts (prompt and target contents, ground truths)
    are unique per row: no dictionary (a failed try only costs time) and no min/max statistics
    (footer bytes no reader uses). Short strings (roles, sources, languages) get a dictionary."""
    long_texts = {"content", "ground_truth"}
    short = [(path, leaf) for path, leaf in _leaves(schema) if leaf.name not in long_texts]
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
