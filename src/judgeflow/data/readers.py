"""Readers: OpenJudge and raw RewardBench2 rows (parquet, JSONL or JSON) to judge examples.

Files are streamed (parquet in record batches, JSONL line by line), every row is validated, and
every row that does not become an example is accounted for: either it is a RewardBench2 tie
(`tie`), or it is invalid. Invalid rows are collected across all inputs and raised together as
one `DataValidationError` (so a user fixes a file once, not once per row), unless
`skip_invalid=True`, in which case they are dropped with reason `invalid` and listed.

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
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import pyarrow.parquet as pq

from judgeflow.data.errors import (
    DataError,
    DataFileNotFoundError,
    DataValidationError,
    Hint,
    RowIssue,
)
from judgeflow.data.examples import (
    Example,
    Origin,
    PairwiseExample,
    PointwiseExample,
    Preference,
)
from judgeflow.data.io import PathLike, exists, open_binary, parquet_read_errors
from judgeflow.data.jsonl import BadLine, not_an_object, parse_bytes, skip_bom
from judgeflow.modes import JUDGE_MODES, JudgeMode

SourceFormat = Literal["openjudge", "rewardbench2"]
InputFormat = Literal["auto", "openjudge", "rewardbench2"]
SOURCE_FORMATS: tuple[SourceFormat, ...] = ("openjudge", "rewardbench2")

#: RewardBench2's subset whose rows have several equally good answers: no clear preference.
TIES_SUBSET = "Ties"
DEFAULT_SOURCE = {"openjudge": "openjudge", "rewardbench2": "rewardbench2"}

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


class _Invalid(Exception):
    """A row-level validation failure at `field`."""

    def __init__(self, field: str | None, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


class _Tie(Exception):
    """A RewardBench2 `Ties` row: filtered, not invalid."""


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
            yield from _parse_json_line(name, row, raw)


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


# --------------------------------------------------------------------------- field checks


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _got(value: Any) -> str:
    if isinstance(value, bool):
        return f"{value} (a bool)"
    if isinstance(value, str | int | float) or value is None:
        text = repr(value) if value is not None else "null"
        return text if len(text) <= 60 else text[:57] + "..."
    return f"a {_type_name(value)}"


def _text(record: dict[str, Any], key: str, path: str, what: str) -> str:
    """A required non-empty string field."""
    value = record.get(key)
    if value is None:
        raise _Invalid(path, f"missing {what}")
    if not isinstance(value, str):
        raise _Invalid(path, f"expected {what} to be a string, got {_got(value)}")
    if not value.strip():
        raise _Invalid(path, f"{what} is empty")
    return value


def _object(value: Any, path: str, what: str) -> dict[str, Any]:
    if value is None:
        raise _Invalid(path, f"missing {what}")
    if not isinstance(value, dict):
        raise _Invalid(path, f"expected {what} to be an object, got {_got(value)}")
    return value


def _list(value: Any, path: str, what: str) -> list[Any]:
    if value is None:
        raise _Invalid(path, f"missing {what}")
    if not isinstance(value, list):
        raise _Invalid(path, f"expected {what} to be a list, got {_got(value)}")
    return value


def _label(value: Any, path: str) -> int:
    """A helpfulness label: an int 0-4 (a bool or 3.0 is a type error, not a label)."""
    if value is None:
        raise _Invalid(path, "missing helpfulness label (an integer 0-4)")
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 4:
        raise _Invalid(path, f"expected an integer 0-4, got {_got(value)}")
    return value


def _source(record: dict[str, Any], default: str) -> str:
    value = record.get("source")
    if value is None:
        return default
    if not isinstance(value, str) or not value.strip():
        raise _Invalid("source", f"expected a non-empty string, got {_got(value)}")
    return value


# --------------------------------------------------------------------------- OpenJudge


def _openjudge_query(record: dict[str, Any]) -> str:
    """The content of the first user message of `input` (later turns are context only)."""
    messages = _list(record.get("input"), "input", "input messages")
    for i, message in enumerate(messages):
        msg = _object(message, f"input[{i}]", "a message with role and content")
        role = msg.get("role")
        if not isinstance(role, str):
            raise _Invalid(f"input[{i}].role", f"expected a string role, got {_got(role)}")
        if role == "user":
            return _text(msg, "content", f"input[{i}].content", "query (first user message)")
    raise _Invalid("input", "no user message; the query is the first message with role 'user'")


def _openjudge_answers(record: dict[str, Any], count: int, mode: JudgeMode) -> list[dict[str, Any]]:
    outputs = _list(record.get("output"), "output", "output answers")
    if len(outputs) != count:
        raise _Invalid("output", f"{mode} rows need exactly {count} answer(s), got {len(outputs)}")
    answers = []
    for i, item in enumerate(outputs):
        wrapper = _object(item, f"output[{i}]", "an object with an 'answer'")
        answer = _object(wrapper.get("answer"), f"output[{i}].answer", "answer")
        _text(answer, "content", f"output[{i}].answer.content", "response")
        answers.append(answer)
    return answers


def _openjudge_pointwise(record: dict[str, Any], origin: Origin) -> list[Example]:
    query = _openjudge_query(record)
    (answer,) = _openjudge_answers(record, 1, "pointwise")
    label = _object(answer.get("label"), "output[0].answer.label", "label")
    helpfulness = _label(label.get("helpfulness"), "output[0].answer.label.helpfulness")
    return [
        PointwiseExample(
            query=query,
            response=answer["content"],
            label=helpfulness,
            source=_source(record, DEFAULT_SOURCE["openjudge"]),
            origin=origin,
        )
    ]


def _openjudge_pairwise(record: dict[str, Any], origin: Origin) -> list[Example]:
    query = _openjudge_query(record)
    answers = _openjudge_answers(record, 2, "pairwise")
    found: list[tuple[str, Preference]] = []
    for i, answer in enumerate(answers):
        path = f"output[{i}].answer.label"
        label = answer.get("label")
        if label is None:
            continue
        label = _object(label, path, "label")
        value = label.get("preference")
        if value is None:
            continue
        if value not in ("A", "B"):
            raise _Invalid(f"{path}.preference", f"expected 'A' or 'B', got {_got(value)}")
        found.append((f"{path}.preference", value))
    if not found:
        raise _Invalid(
            "output[0].answer.label.preference", "missing preference ('A' or 'B') on both answers"
        )
    if len(found) == 2 and found[0][1] != found[1][1]:
        raise _Invalid(
            found[1][0],
            f"preference {found[1][1]!r} disagrees with {found[0][0]} = {found[0][1]!r}",
        )
    return [
        PairwiseExample(
            query=query,
            response_a=answers[0]["content"],
            response_b=answers[1]["content"],
            preference=found[0][1],
            source=_source(record, DEFAULT_SOURCE["openjudge"]),
            origin=origin,
        )
    ]


# --------------------------------------------------------------------------- RewardBench2


def _responses(record: dict[str, Any], key: str) -> list[str]:
    items = _list(record.get(key), key, f"'{key}' responses")
    if not items:
        raise _Invalid(key, f"'{key}' has no responses")
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise _Invalid(f"{key}[{i}]", f"expected a string response, got {_got(item)}")
        if not item.strip():
            raise _Invalid(f"{key}[{i}]", "response is empty")
        out.append(item)
    return out


def _rewardbench2_common(
    record: dict[str, Any], origin: Origin
) -> tuple[str, list[str], list[str], str, Origin]:
    subset = record.get("subset")
    if subset is not None and not isinstance(subset, str):
        raise _Invalid("subset", f"expected a string, got {_got(subset)}")
    if subset == TIES_SUBSET:
        raise _Tie
    row_id = record.get("id")
    if row_id is not None and (isinstance(row_id, bool) or not isinstance(row_id, str | int)):
        raise _Invalid("id", f"expected a string or integer id, got {_got(row_id)}")
    prompt = _text(record, "prompt", "prompt", "query (prompt)")
    chosen = _responses(record, "chosen")
    rejected = _responses(record, "rejected")
    source = _source(record, DEFAULT_SOURCE["rewardbench2"])
    origin = Origin(
        file=origin.file,
        row=origin.row,
        id=None if row_id is None else str(row_id),
        subset=subset,
    )
    return prompt, chosen, rejected, source, origin


def _rewardbench2_reader(mode: JudgeMode, chosen_label: int, rejected_label: int) -> _Parser:
    def pointwise(record: dict[str, Any], origin: Origin) -> list[Example]:
        prompt, chosen, rejected, source, base = _rewardbench2_common(record, origin)
        examples: list[Example] = [
            PointwiseExample(prompt, text, chosen_label, source, _with(base, chosen_index=i))
            for i, text in enumerate(chosen)
        ]
        examples += [
            PointwiseExample(prompt, text, rejected_label, source, _with(base, rejected_index=j))
            for j, text in enumerate(rejected)
        ]
        return examples

    def pairwise(record: dict[str, Any], origin: Origin) -> list[Example]:
        prompt, chosen, rejected, source, base = _rewardbench2_common(record, origin)
        return [
            PairwiseExample(prompt, good, bad, "A", source, _with(base, i, j))
            for i, good in enumerate(chosen)
            for j, bad in enumerate(rejected)
        ]

    return pointwise if mode == "pointwise" else pairwise


def _with(
    origin: Origin, chosen_index: int | None = None, rejected_index: int | None = None
) -> Origin:
    return Origin(origin.file, origin.row, origin.id, origin.subset, chosen_index, rejected_index)


_Parser = Callable[[dict[str, Any], Origin], list[Example]]


def _parser(fmt: SourceFormat, mode: JudgeMode, chosen_label: int, rejected_label: int) -> _Parser:
    if fmt == "openjudge":
        return _openjudge_pointwise if mode == "pointwise" else _openjudge_pairwise
    return _rewardbench2_reader(mode, chosen_label, rejected_label)


# --------------------------------------------------------------------------- public entry


def _examples(
    parse: _Parser, name: str, row: int, record: Any, first_seen: dict[str, tuple[str, int]]
) -> list[Example]:
    """The examples of one record; raises `_Invalid` (or `_Tie`) as the parsers do."""
    if isinstance(record, RowIssue):
        raise _Invalid(record.field, record.message)
    if not isinstance(record, dict):
        raise _Invalid(None, not_an_object(record))
    examples = parse(record, Origin(file=name, row=row))
    row_id = examples[0].origin.id if examples else None
    if row_id is not None:
        file, first = first_seen.setdefault(row_id, (name, row))
        if (file, first) != (name, row):
            where = f"row {first}" if file == name else f"{file}, row {first}"
            raise _Invalid("id", f"duplicate id {row_id!r} (first at {where})")
    return examples


def _check_label_param(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 4:
        raise DataError(f"{name} must be an integer 0-4, got {value!r}")


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

    result = ReadResult()
    issues: list[RowIssue] = []
    first_seen: dict[str, tuple[str, int]] = {}  # RewardBench2 id -> (file, row)
    for path in paths:
        name = os.fspath(path)
        fmt = detect_format(name) if input_format == "auto" else input_format
        # No format: the file has no object row, so each row fails below before parsing.
        parse = _parser(fmt or "openjudge", mode, chosen_label, rejected_label)
        rows_read = rows_used = n_examples = 0
        for row, record in iter_records(name, batch_size=batch_size):
            rows_read += 1
            try:
                examples = _examples(parse, name, row, record, first_seen)
            except _Tie:
                result.dropped.append(
                    DroppedRow(name, row, "tie", "RewardBench2 'Ties' subset", "subset")
                )
                continue
            except _Invalid as exc:
                issues.append(RowIssue(name, row, exc.field, exc.message))
                result.dropped.append(DroppedRow(name, row, "invalid", exc.message, exc.field))
                continue
            result.examples.extend(examples)
            rows_used += 1
            n_examples += len(examples)
        result.rows_read += rows_read
        result.rows_used += rows_used
        result.inputs.append(InputSummary(name, fmt, rows_read, rows_used, n_examples))
    if issues and not skip_invalid:
        raise DataValidationError(issues, total=len(issues))
    return result
