"""Readers: OpenJudge and raw RewardBench2 rows (parquet, JSONL or JSON) to judge examples.

Files are streamed (parquet in record batches, JSONL line by line) into batches of examples as
columns (`read_batches`, which `prepare` renders and writes one at a time; `read_examples`
collects them), every row is validated, and every row that does not become an example is
accounted for: either it is a RewardBench2 tie (`tie`), or it is invalid. Invalid rows are
collected across all inputs and raised together as one `DataValidationError` (so a user fixes a
file once, not once per row), unless `skip_invalid=True`, in which case they are dropped with
reason `invalid` and listed.

A line that is not a JSON object (undecodable, truncated, a JSON array) is an invalid row
whether the format was given or detected: a file with no object at all has no format to
detect, and its rows are still reported one by one. A RewardBench2 `id` seen before in the same
preparation (any of its inputs) makes the later row invalid (field `id`): the same row twice
would be trained on twice, and a source with clashing ids cannot be traced back row by row.
"""

from __future__ import annotations

import io
import json
import os
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import pyarrow.parquet as pq

from judgeflow.data.errors import (
    MAX_LISTED_ISSUES,
    DataError,
    DataFileNotFoundError,
    DataValidationError,
    Hint,
    RowIssue,
)
from judgeflow.data.examples import Example, ExampleBatch
from judgeflow.data.io import PathLike, exists, open_binary, parquet_read_errors
from judgeflow.data.jsonl import BadLine, not_an_object, parse_bytes, skip_bom
from judgeflow.data.judge_parsers import (
    SourceFormat,
    _Invalid,
    _Parser,
    _parser,
    _Tie,
    _type_name,
)
from judgeflow.modes import JUDGE_MODES, JudgeMode

InputFormat = Literal["auto", "openjudge", "rewardbench2"]
SOURCE_FORMATS: tuple[SourceFormat, ...] = ("openjudge", "rewardbench2")

_PARQUET_SUFFIXES = (".parquet", ".pq")
_JSONL_SUFFIXES = (".jsonl", ".ndjson")
_JSON_SUFFIXES = (".json",)


@dataclass(frozen=True)
class DroppedRow:
    """A source row (or, for `prompt_too_long`, one example of it) that was not written."""

    file: str
    row: int
    reason: str
    detail: str
    field: str | None = None
    chosen_index: int | None = None
    rejected_index: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "row": self.row,
            "reason": self.reason,
            "field": self.field,
            "detail": self.detail,
            "chosen_index": self.chosen_index,
            "rejected_index": self.rejected_index,
        }


@dataclass(frozen=True)
class InputSummary:
    """What one input file contributed."""

    path: str
    format: SourceFormat | None
    rows_read: int
    rows_used: int
    examples: int


@dataclass
class ReadResult:
    """Examples read from all inputs plus the accounting `prepare` puts in its report.

    Invariant: `rows_read == rows_used + len(dropped)`; each used row yields >= 1 example.
    """

    examples: list[Example] = field(default_factory=list)
    rows_read: int = 0
    rows_used: int = 0
    dropped: list[DroppedRow] = field(default_factory=list)
    inputs: list[InputSummary] = field(default_factory=list)


# --------------------------------------------------------------------------- raw rows


def _suffix_kind(path: str) -> Literal["parquet", "jsonl", "json"]:
    lowered = path.lower()
    for suffixes, kind in (
        (_PARQUET_SUFFIXES, "parquet"),
        (_JSONL_SUFFIXES, "jsonl"),
        (_JSON_SUFFIXES, "json"),
    ):
        if lowered.endswith(suffixes):
            return kind  # type: ignore[return-value]
    raise DataError(
        f"{path}: unsupported file type; expected one of "
        f"{', '.join(_PARQUET_SUFFIXES + _JSONL_SUFFIXES + _JSON_SUFFIXES)}"
    )


def iter_records(path: PathLike, *, batch_size: int = 1024) -> Iterator[tuple[int, Any]]:
    """Yield `(row, record)` for every record of a parquet, JSONL or JSON file.

    `row` is 0-based (the JSONL line number minus one; blank lines are skipped but counted). A
    byte-order mark at the start of a JSONL or JSON file is skipped. A JSONL line that is not
    valid UTF-8 or JSON yields a `RowIssue` instead of a record, so the caller can count it like
    any invalid row.
    """
    name = os.fspath(path)
    if not exists(name):
        raise DataFileNotFoundError(name)
    kind = _suffix_kind(name)
    if kind == "parquet":
        yield from _iter_parquet(name, batch_size)
    elif kind == "jsonl":
        yield from _iter_jsonl(name)
    else:
        yield from _iter_json(name)


def _iter_parquet(name: str, batch_size: int) -> Iterator[tuple[int, Any]]:
    with open_binary(name) as handle, parquet_read_errors(name):
        parquet = pq.ParquetFile(handle)
        row = 0
        for batch in parquet.iter_batches(batch_size=batch_size):
            for record in batch.to_pylist():
                yield row, record
                row += 1


def _iter_jsonl(name: str) -> Iterator[tuple[int, Any]]:
    with open_binary(name) as handle:
        lines, _ = skip_bom(handle)
        for row, raw in enumerate(lines):
            if raw.isspace() or not raw:  # `not raw.strip()`, without copying the line
                continue
            record = parse_bytes(raw)
            yield row, RowIssue(name, row, None, record) if isinstance(record, BadLine) else record


def _parse_json_line(name: str, row: int, raw: bytes) -> Iterator[tuple[int, Any]]:
    if not raw.strip():
        return
    record = parse_bytes(raw)
    yield row, RowIssue(name, row, None, record) if isinstance(record, BadLine) else record


def _iter_json(name: str) -> Iterator[tuple[int, Any]]:
    """A `.json` file holding a list of records, or JSON lines under a `.json` name."""
    with open_binary(name) as handle:
        data = skip_bom(handle)[0].read()
    try:
        parsed = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        # Many tools (e.g. `datasets.Dataset.to_json`) write JSON lines under a .json name.
        for row, raw in enumerate(io.BytesIO(data)):
            yield from _parse_json_line(name, row, raw)
        return
    if isinstance(parsed, dict) and len(data.strip().splitlines()) <= 1:
        yield 0, parsed  # a one-line JSON-lines file
        return
    if not isinstance(parsed, list):
        raise DataError(f"{name}: expected a JSON list of rows, got {_type_name(parsed)}")
    yield from enumerate(parsed)


# --------------------------------------------------------------------------- format detection


FORMAT_HINT = Hint(
    "pass",
    (("input_format", "openjudge"), ("input_format", "rewardbench2")),
    "to read every row as that format",
)


def _format_from_columns(name: str, columns: Sequence[str]) -> SourceFormat:
    cols = set(columns)
    if {"input", "output"} <= cols:
        return "openjudge"
    if {"prompt", "chosen", "rejected"} <= cols:
        return "rewardbench2"
    raise DataError(
        f"{name}: cannot detect the data format from columns {sorted(cols)}; expected "
        "'input' + 'output' (OpenJudge) or 'prompt' + 'chosen' + 'rejected' (RewardBench2)",
        hints=[FORMAT_HINT],
    )


def detect_format(path: PathLike) -> SourceFormat | None:
    """The source format of a file from its columns; None for a file with no object rows
    (empty, or every line unreadable: `read_examples` then reports each of them)."""
    name = os.fspath(path)
    if not exists(name):
        raise DataFileNotFoundError(name)
    if _suffix_kind(name) == "parquet":
        with open_binary(name) as handle, parquet_read_errors(name):
            schema = pq.read_schema(handle)
        return _format_from_columns(name, schema.names)
    for _, record in iter_records(name):
        if isinstance(record, dict):
            return _format_from_columns(name, list(record))
    return None


# --------------------------------------------------------------------------- public entry


@dataclass
class ReadLog:
    """What reading has met so far, for the report: counts, dropped rows and problems.

    `dropped` keeps the first `listed_limit` dropped rows (None: all of them) and `issues` the
    first `MAX_LISTED_ISSUES` invalid rows; `by_reason` and `invalid` count every one.
    Invariant: `rows_read == rows_used + sum(by_reason.values())`.
    """

    listed_limit: int | None = None
    rows_read: int = 0
    rows_used: int = 0
    examples: int = 0
    invalid: int = 0
    dropped: list[DroppedRow] = field(default_factory=list)
    by_reason: Counter[str] = field(default_factory=Counter)
    issues: list[RowIssue] = field(default_factory=list)
    inputs: list[InputSummary] = field(default_factory=list)

    def drop(self, dropped: DroppedRow) -> None:
        self.by_reason[dropped.reason] += 1
        if self.listed_limit is None or len(self.dropped) < self.listed_limit:
            self.dropped.append(dropped)
        if dropped.reason == "invalid":
            self.invalid += 1
            if len(self.issues) < MAX_LISTED_ISSUES:
                issue = RowIssue(dropped.file, dropped.row, dropped.field, dropped.detail)
                self.issues.append(issue)

    def check(self, skip_invalid: bool) -> None:
        """Raise the invalid rows met, unless they are to be skipped."""
        if self.invalid and not skip_invalid:
            raise DataValidationError(self.issues, total=self.invalid)


def _check_label_param(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 4:
        raise DataError(f"{name} must be an integer 0-4, got {value!r}")


def read_batches(
    mode: JudgeMode,
    inputs: PathLike | Sequence[PathLike],
    log: ReadLog,
    *,
    input_format: InputFormat = "auto",
    chosen_label: int = 4,
    rejected_label: int = 0,
    batch_size: int = 1024,
) -> Iterator[ExampleBatch]:
    """Read and validate judge examples, streamed: batches of about `batch_size` examples
    (a source row's examples stay together; a batch never spans two files).

    The parameters are checked now, the files as the batches are taken. Every row that gives no
    example is recorded in `log` (see `read_examples` for what is read and how); raising for
    invalid rows is the caller's (`log.check`), once it has read everything.
    """
    if mode not in JUDGE_MODES:
        raise DataError(f"mode must be one of {list(JUDGE_MODES)}, got {mode!r}")
    if input_format not in ("auto", *SOURCE_FORMATS):
        raise DataError(
            f"input_format must be 'auto', 'openjudge' or 'rewardbench2', got {input_format!r}"
        )
    _check_label_param("chosen_label", chosen_label)
    _check_label_param("rejected_label", rejected_label)
    paths = [inputs] if isinstance(inputs, str | os.PathLike) else list(inputs)
    if not paths:
        raise DataError("no input files given")
    first_seen: dict[str, tuple[str, int]] = {}  # RewardBench2 id -> (file, row)

    def parser(fmt: SourceFormat) -> _Parser:
        return _parser(fmt, mode, chosen_label, rejected_label, first_seen)

    return _batches([os.fspath(p) for p in paths], mode, log, input_format, parser, batch_size)


def _batches(
    names: list[str],
    mode: JudgeMode,
    log: ReadLog,
    input_format: InputFormat,
    parser: Callable[[SourceFormat], _Parser],
    batch_size: int,
) -> Iterator[ExampleBatch]:
    pairwise = mode == "pairwise"
    for name in names:
        fmt = detect_format(name) if input_format == "auto" else input_format
        # No format: the file has no object row, so each row fails below before parsing.
        parse = parser(fmt or "openjudge")
        rows_read = rows_used = examples = 0
        batch = ExampleBatch(name, pairwise)
        for row, record in iter_records(name, batch_size=batch_size):
            rows_read += 1
            before = len(batch)
            try:
                if isinstance(record, RowIssue):
                    raise _Invalid(record.field, record.message)
                if not isinstance(record, dict):
                    raise _Invalid(None, not_an_object(record))
                parse(record, row, batch)
            except _Tie:
                log.drop(DroppedRow(name, row, "tie", "RewardBench2 'Ties' subset", "subset"))
                continue
            except _Invalid as exc:
                log.drop(DroppedRow(name, row, "invalid", exc.message, exc.field))
                continue
            rows_used += 1
            examples += len(batch) - before
            if len(batch) >= batch_size:
                yield batch
                batch = ExampleBatch(name, pairwise)
        log.rows_read += rows_read
        log.rows_used += rows_used
        log.examples += examples
        log.inputs.append(InputSummary(name, fmt, rows_read, rows_used, examples))
        if len(batch):
            yield batch


def read_examples(
    mode: JudgeMode,
    inputs: PathLike | Sequence[PathLike],
    *,
    input_format: InputFormat = "auto",
    skip_invalid: bool = False,
    chosen_label: int = 4,
    rejected_label: int = 0,
    batch_size: int = 1024,
) -> ReadResult:
    """Read and validate judge examples from one or more files.

    `input_format="auto"` detects each file's format from its columns. RewardBench2 rows in the
    `Ties` subset are dropped (reason `tie`); pairwise mode makes one example per
    (chosen, rejected) pair with chosen as A; pointwise mode labels every chosen response
    `chosen_label` and every rejected one `rejected_label`.
    """
    log = ReadLog()
    result = ReadResult()
    for batch in read_batches(
        mode,
        inputs,
        log,
        input_format=input_format,
        chosen_label=chosen_label,
        rejected_label=rejected_label,
        batch_size=batch_size,
    ):
        result.examples.extend(batch.examples())
    log.check(skip_invalid)
    result.rows_read, result.rows_used = log.rows_read, log.rows_used
    result.dropped, result.inputs = log.dropped, log.inputs
    return result
