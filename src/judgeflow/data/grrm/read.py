"""Reading GRRM input in record batches: parquet (`iter_batches`) or JSONL, line-accurate.

A parquet file that cannot be read, or lacks a column, fails the run naming the file; a JSONL
line that is not valid UTF-8 or JSON becomes a `BadLine`, an invalid row like any other.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import IO, Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq

from judgeflow.data.errors import DataError, Hint
from judgeflow.data.grrm.common import InputFormat, _Columns
from judgeflow.data.io import open_binary, parquet_read_errors
from judgeflow.data.jsonl import parse_text, skip_bom

FORMAT_HINT = Hint(
    "pass", (("input_format", "parquet"), ("input_format", "jsonl")), "to say how to read it"
)


def _detect_format(path: str, input_format: InputFormat) -> Literal["parquet", "jsonl"]:
    if input_format != "auto":
        return input_format
    lowered = path.lower()
    if lowered.endswith(".parquet"):
        return "parquet"
    if lowered.endswith((".jsonl", ".json")):
        return "jsonl"
    raise DataError(
        f"{path}: cannot tell the format from the name (.parquet, .jsonl or .json)",
        hints=[FORMAT_HINT],
    )


@dataclass(frozen=True)
class _Span:
    """A row range of the input that starts on a batch boundary, so that its batches are the
    ones a whole-file run reads (and its output row groups the ones that run writes).

    Rows are parquet row numbers or 0-based JSONL line numbers (blank lines included): `start`
    is the first, `stop` is one past the last (None: to the end of the file). For JSONL,
    `offset` is the byte offset of line `start`, so a shard seeks instead of re-reading the file.
    """

    start: int = 0
    stop: int | None = None
    offset: int = 0


_WHOLE_FILE = _Span()


def _parquet_batches(
    path: str, cols: _Columns, batch_size: int, span: _Span = _WHOLE_FILE
) -> Iterator[tuple[range, pa.RecordBatch]]:
    """(row numbers, record batch) per batch of `span`; only the needed columns are read.

    Only the row groups that overlap `span` are read. Batches are `batch_size` rows counted
    from `span.start` (the reader's batches may straddle row groups, so a span that starts
    inside a row group is re-cut rather than read with the reader's own boundaries).
    """
    columns = cols.required()
    with open_binary(path) as handle, parquet_read_errors(path):
        parquet = pq.ParquetFile(handle)
        names = parquet.schema_arrow.names
        missing = [c for c in columns if c not in names]
        if missing:
            raise DataError(
                f"{path}: missing column(s) {missing} (columns: {names})",
                hints=[
                    Hint(
                        "pass", ((cols.keyword(c), ...),), f"to name the column of {cols.holds(c)}"
                    )
                    for c in missing
                ],
            )
        meta = parquet.metadata
        stop = meta.num_rows if span.stop is None else min(span.stop, meta.num_rows)
        groups: list[int] = []
        first_row = group_start = 0
        for group in range(meta.num_row_groups):
            group_rows = meta.row_group(group).num_rows
            if group_start + group_rows > span.start and group_start < stop:
                if not groups:
                    first_row = group_start
                groups.append(group)
            group_start += group_rows
        if not groups or stop <= span.start:
            return
        batches = parquet.iter_batches(batch_size=batch_size, columns=columns, row_groups=groups)
        start = span.start
        for batch in _recut(batches, span.start - first_row, stop - span.start, batch_size):
            yield range(start, start + batch.num_rows), batch
            start += batch.num_rows


def _recut(
    batches: Iterable[pa.RecordBatch], skip: int, count: int, batch_size: int
) -> Iterator[pa.RecordBatch]:
    """`count` rows after the first `skip`, in batches of exactly `batch_size` (the last may be
    shorter). Batches that already have the right size pass through untouched."""
    pending: list[pa.RecordBatch] = []
    held = 0
    for batch in batches:
        if skip >= batch.num_rows:
            skip -= batch.num_rows
            continue
        piece = batch.slice(skip, min(batch.num_rows - skip, count))
        skip = 0
        count -= piece.num_rows
        while piece.num_rows:
            take = min(batch_size - held, piece.num_rows)
            pending.append(piece.slice(0, take))
            held += take
            piece = piece.slice(take)
            if held == batch_size:
                yield pending[0] if len(pending) == 1 else pa.concat_batches(pending)
                pending, held = [], 0
        if count <= 0:
            break
    if pending:
        yield pending[0] if len(pending) == 1 else pa.concat_batches(pending)


def _jsonl_batches(
    path: str, columns: list[str], batch_size: int, span: _Span = _WHOLE_FILE
) -> Iterator[tuple[list[int], list[Any]]]:
    """(line numbers, records) per batch of non-blank lines; rows are 0-based line numbers.

    A line that is not valid UTF-8 or JSON is passed on as a `BadLine` for the validator to
    report (bytes that do not decode are kept as surrogates, so one bad line does not stop the
    file). Lines are split as Python's text mode splits them (universal newlines), after a
    byte-order mark at the start of the file; `_jsonl_batch_starts` uses the same rules, so
    spans it finds line up with this reader.
    """
    with open_binary(path) as raw:
        if span.offset:  # a later batch of a shard starts at its byte offset, past any mark
            raw.seek(span.offset)
            body = raw
        else:
            body, _ = skip_bom(raw)
        text: IO[str] = io.TextIOWrapper(body, encoding="utf-8", errors="surrogateescape")
        rows: list[int] = []
        records: list[Any] = []
        for line_no, line in enumerate(text, start=span.start):
            if span.stop is not None and line_no >= span.stop:
                break
            if not line.strip():
                continue
            rows.append(line_no)
            records.append(parse_text(line))
            if len(rows) == batch_size:
                yield rows, records
                rows, records = [], []
        if rows:
            yield rows, records


def _jsonl_batch_starts(path: str, batch_size: int) -> tuple[list[_Span], int]:
    """Where each batch of a JSONL file starts, and the number of non-blank lines.

    Each span's `start`/`offset` are the line number and byte offset of the batch's first
    non-blank line (its `stop` is left open). One streaming pass that splits lines like
    `_jsonl_batches` (`newline=""` keeps the line endings, so byte lengths add up) and parses
    no JSON.
    """
    starts: list[_Span] = []
    records = 0
    with open_binary(path) as raw:
        body, offset = skip_bom(raw)
        text = io.TextIOWrapper(body, encoding="utf-8", errors="surrogateescape", newline="")
        for line_no, line in enumerate(text):
            if line.strip():
                if records % batch_size == 0:
                    starts.append(_Span(start=line_no, offset=offset))
                records += 1
            offset += len(line.encode("utf-8", "surrogateescape"))
    return starts, records
