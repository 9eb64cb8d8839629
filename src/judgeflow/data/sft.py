"""Judge SFT data: OpenJudge SFT rows (a `messages` chat list) validated into one parquet.

The judge recipes' optional warm start trains on conversations whose last turn is the judge's
verdict. LLaMA-Factory reads the parquet written here (sharegpt `messages`, as the GRRM SFT
file; it ignores the other columns). Each row also carries `prompt_hash` (`chat_prompt_hash`:
the judge prompt's query and responses), so evaluation can leave out what the warm start
trained on; the report counts duplicated prompts. Bad rows fail the run with file, row and
field, or are dropped and counted with `skip_invalid`; nothing is dropped silently.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from judgeflow.data.duplicates import PromptUnits, prompt_duplicates
from judgeflow.data.errors import DataError, DataValidationError, RowIssue
from judgeflow.data.examples import with_system_prompt
from judgeflow.data.io import PathLike, sha256_file, write_parquet_atomic
from judgeflow.data.jsonl import not_an_object
from judgeflow.data.prompt_hashes import chat_prompt_hash
from judgeflow.data.readers import iter_records

__all__ = ["SftPrepareResult", "prepare_sft_messages"]

_ROLES = ("system", "user", "assistant")
_SCHEMA = pa.schema(
    [
        ("messages", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
        ("prompt_hash", pa.string()),
    ]
)
_LISTED = 50


@dataclass(frozen=True)
class SftPrepareResult:
    output_path: str
    rows_read: int
    rows_written: int
    sha256: str
    dropped: list[dict[str, Any]] = field(default_factory=list)  # the first 50 dropped rows
    duplicates: dict[str, Any] = field(default_factory=dict)  # `prompt_duplicates`, split train

    @property
    def report(self) -> dict[str, Any]:
        return {
            "counts": {
                "rows_read": self.rows_read,
                "rows_written": self.rows_written,
                "rows_dropped": self.rows_read - self.rows_written,
            },
            "dropped": self.dropped,
            "duplicates": self.duplicates,
            "sha256": self.sha256,
        }


def prepare_sft_messages(
    inputs: Sequence[PathLike],
    output: PathLike,
    *,
    skip_invalid: bool = False,
    system_prompt: str | None = None,
) -> SftPrepareResult:
    """Validate `messages` rows from parquet / JSONL files and write them to `output` (parquet).

    A valid row has a `messages` list of at least two `{"role", "content"}` turns, roles from
    system/user/assistant, non-empty string contents, a user turn, and an assistant turn last.
    With `system_prompt` (a policy's `data.system_prompt`) each row's system turn is it, as
    the RLVR rows' is (`with_system_prompt`).
    """
    rows: list[dict[str, Any]] = []
    origins: list[tuple[str, int]] = []
    issues: list[RowIssue] = []
    read = 0
    for path in inputs:
        for row, record in iter_records(path):
            read += 1
            issue = record if isinstance(record, RowIssue) else _check(str(path), row, record)
            if issue is None:
                turns = tuple((t["role"], t["content"]) for t in record["messages"])
                messages = [
                    {"role": r, "content": c} for r, c in with_system_prompt(turns, system_prompt)
                ]
                rows.append({"messages": messages, "prompt_hash": chat_prompt_hash(messages)})
                origins.append((str(path), row))
            else:
                issues.append(issue)
    if issues and not skip_invalid:
        raise DataValidationError(issues)
    if not rows:
        lines = [
            f"no usable SFT rows in {', '.join(map(str, inputs))} ({read} read, "
            f"{len(issues)} invalid): each row needs a `messages` list ending with the "
            "assistant's turn"
        ]
        raise DataError("\n".join(lines + [f"  {issue}" for issue in issues[:5]]))
    write_parquet_atomic(pa.Table.from_pylist(rows, schema=_SCHEMA), output)
    units = PromptUnits(
        "row",
        [r["prompt_hash"] for r in rows],
        lambda i: {"file": origins[i][0], "row": origins[i][1], "index": i},
    )
    return SftPrepareResult(
        output_path=str(output),
        rows_read=read,
        rows_written=len(rows),
        sha256=sha256_file(output),
        dropped=[{"reason": "invalid", **i.to_dict()} for i in issues[:_LISTED]],
        duplicates=prompt_duplicates({"train": units}),
    )


def _check(path: str, row: int, record: Any) -> RowIssue | None:
    if not isinstance(record, dict):
        return RowIssue(path, row, None, not_an_object(record))
    messages = record.get("messages")
    if messages is None:
        return RowIssue(
            path, row, "messages", "missing `messages` (a list of at least two chat turns)"
        )
    if not isinstance(messages, list) or len(messages) < 2:
        return RowIssue(path, row, "messages", "expected a list of at least two chat turns")
    for i, turn in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(turn, dict):
            return RowIssue(path, row, where, f"expected an object, got {type(turn).__name__}")
        if turn.get("role") not in _ROLES:
            return RowIssue(
                path, row, f"{where}.role", f"expected one of {_ROLES}, got {turn.get('role')!r}"
            )
        content = turn.get("content")
        if not isinstance(content, str) or not content.strip():
            return RowIssue(path, row, f"{where}.content", "expected a non-empty string")
    if messages[-1]["role"] != "assistant":
        return RowIssue(
            path,
            row,
            f"messages[{len(messages) - 1}].role",
            "the last turn must be the assistant's",
        )
    if not any(turn["role"] == "user" for turn in messages):
        return RowIssue(path, row, "messages", "no user turn")
    return None
