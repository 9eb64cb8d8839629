"""Writing: one ParquetWriter in a background thread, hashed while it writes, published atomically."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor

import pyarrow as pa
import pyarrow.parquet as pq

from judgeflow.data.io import HashingSink, atomic_writer, parquet_writer_options


def _write_tables(
    path: str, schema: pa.Schema, tables: Iterable[pa.Table], check: Callable[[], None]
) -> str:
    """Write `tables` to `path` as one row group each; returns the file's sha256.

    Every GRRM parquet file is written here, by a single or a sharded run alike, so equal
    tables give equal bytes. `check` runs after the last table and before the file is
    published: raising there leaves nothing at `path`.
    """
    with atomic_writer(path) as handle:
        sink = HashingSink(handle)
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
    """The long texts (prompt and target contents, ground truths) are unique per row."""
    return parquet_writer_options(schema, unique={"content", "ground_truth"})
