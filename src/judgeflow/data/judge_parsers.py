"""OpenJudge and RewardBench2 records, checked field by field into judge examples.

A parser validates one record completely, then appends its example(s) to an `ExampleBatch`: a
row that fails adds nothing and raises `_Invalid` naming the field (a dotted path such as
`output[0].answer.label.helpfulness`), or `_Tie` for a RewardBench2 `Ties` row. Reading files,
detecting formats and accounting for dropped rows is `readers`'.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, NamedTuple

from judgeflow.data.examples import ExampleBatch, Preference
from judgeflow.modes import JudgeMode

SourceFormat = Literal["openjudge", "rewardbench2"]

#: RewardBench2's subset whose rows have several equally good answers: no clear preference.
TIES_SUBSET = "Ties"
DEFAULT_SOURCE = {"openjudge": "openjudge", "rewardbench2": "rewardbench2"}


class _Invalid(Exception):
    """A row-level validation failure at `field`."""

    def __init__(self, field: str | None, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


class _Tie(Exception):
    """A RewardBench2 `Ties` row: filtered, not invalid."""


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


def _openjudge_pointwise(record: dict[str, Any], row: int, batch: ExampleBatch) -> None:
    query = _openjudge_query(record)
    (answer,) = _openjudge_answers(record, 1, "pointwise")
    label = _object(answer.get("label"), "output[0].answer.label", "label")
    helpfulness = _label(label.get("helpfulness"), "output[0].answer.label.helpfulness")
    source = _source(record, DEFAULT_SOURCE["openjudge"])
    _add(batch, row, query, answer["content"], None, helpfulness, source)


def _openjudge_pairwise(record: dict[str, Any], row: int, batch: ExampleBatch) -> None:
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
    source = _source(record, DEFAULT_SOURCE["openjudge"])
    _add(batch, row, query, answers[0]["content"], answers[1]["content"], found[0][1], source)


def _add(
    batch: ExampleBatch,
    row: int,
    query: str,
    response: str,
    response_b: str | None,
    label: Any,
    source: str,
    row_id: str | None = None,
    subset: str | None = None,
    chosen_index: int | None = None,
    rejected_index: int | None = None,
) -> None:
    """Append one example to the batch's columns."""
    batch.queries.append(query)
    batch.responses.append(response)
    if response_b is not None:
        batch.responses_b.append(response_b)
    batch.labels.append(label)
    batch.sources.append(source)
    batch.rows.append(row)
    batch.ids.append(row_id)
    batch.subsets.append(subset)
    batch.chosen_index.append(chosen_index)
    batch.rejected_index.append(rejected_index)


# --------------------------------------------------------------------------- RewardBench2
#
# `first_seen` maps the ids seen so far in a preparation to their (file, row); it is checked
# last, after every field, and only a valid row enters it.


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


class _Rewardbench2Row(NamedTuple):
    prompt: str
    chosen: list[str]
    rejected: list[str]
    source: str
    id: str | None
    subset: str | None


def _rewardbench2_common(
    record: dict[str, Any], row: int, file: str, first_seen: dict[str, tuple[str, int]]
) -> _Rewardbench2Row:
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
    key = None if row_id is None else str(row_id)
    if key is not None:
        seen_file, seen_row = first_seen.setdefault(key, (file, row))
        if (seen_file, seen_row) != (file, row):
            where = f"row {seen_row}" if seen_file == file else f"{seen_file}, row {seen_row}"
            raise _Invalid("id", f"duplicate id {key!r} (first at {where})")
    return _Rewardbench2Row(prompt, chosen, rejected, source, key, subset)


def _rewardbench2_reader(
    mode: JudgeMode,
    chosen_label: int,
    rejected_label: int,
    first_seen: dict[str, tuple[str, int]],
) -> _Parser:
    def pointwise(record: dict[str, Any], row: int, batch: ExampleBatch) -> None:
        found = _rewardbench2_common(record, row, batch.file, first_seen)
        common = (found.source, found.id, found.subset)
        for i, text in enumerate(found.chosen):
            _add(batch, row, found.prompt, text, None, chosen_label, *common, chosen_index=i)
        for j, text in enumerate(found.rejected):
            _add(batch, row, found.prompt, text, None, rejected_label, *common, rejected_index=j)

    def pairwise(record: dict[str, Any], row: int, batch: ExampleBatch) -> None:
        found = _rewardbench2_common(record, row, batch.file, first_seen)
        for i, good in enumerate(found.chosen):
            for j, bad in enumerate(found.rejected):
                _add(batch, row, found.prompt, good, bad, "A", found.source, found.id,
                     found.subset, i, j)  # fmt: skip

    return pointwise if mode == "pointwise" else pairwise


_Parser = Callable[[dict[str, Any], int, ExampleBatch], None]


def _parser(
    fmt: SourceFormat,
    mode: JudgeMode,
    chosen_label: int,
    rejected_label: int,
    first_seen: dict[str, tuple[str, int]],
) -> _Parser:
    if fmt == "openjudge":
        return _openjudge_pointwise if mode == "pointwise" else _openjudge_pairwise
    return _rewardbench2_reader(mode, chosen_label, rejected_label, first_seen)
