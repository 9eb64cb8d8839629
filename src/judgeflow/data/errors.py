"""Errors raised while reading and preparing judge data.

Every row-level problem names the file, the 0-based row and the dotted field path, so a bad
row in a 100k-row file can be found without a debugger.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

#: How many invalid rows a `DataValidationError` lists before summarising the rest.
MAX_LISTED_ISSUES = 20


class DataError(ValueError):
    """Base class for data problems the user must fix (bad file, bad parameters, no rows)."""


class DataFileNotFoundError(DataError, FileNotFoundError):
    """An input file does not exist (also a `FileNotFoundError`, so either catch works)."""

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(f"{path}: input file not found")


@dataclass(frozen=True)
class RowIssue:
    """One invalid row: `row` is the 0-based index of the record in its file.

    For JSONL files the row is the 0-based line number (blank lines are skipped but counted),
    so row 12 is line 13 in an editor. `field` is a dotted path such as
    `output[0].answer.label.helpfulness`, or None when the row as a whole is bad.
    """

    file: str
    row: int
    field: str | None
    message: str

    def __str__(self) -> str:
        where = f"{self.file}: row {self.row}"
        if self.field:
            where += f", field '{self.field}'"
        return f"{where}: {self.message}"

    def to_dict(self) -> dict[str, object]:
        return {"file": self.file, "row": self.row, "field": self.field, "message": self.message}


class DataValidationError(DataError):
    """One or more rows failed validation.

    `issues` holds the first `MAX_LISTED_ISSUES` problems, `total` counts all of them. The
    attributes `file`, `row`, `field` and `message` describe the first problem, which is what
    most callers (and a single-row error) need.
    """

    def __init__(self, issues: Sequence[RowIssue], total: int | None = None) -> None:
        if not issues:
            raise ValueError("DataValidationError needs at least one issue")
        self.issues: list[RowIssue] = list(issues[:MAX_LISTED_ISSUES])
        self.total: int = max(total if total is not None else len(issues), len(self.issues))
        first = self.issues[0]
        self.file, self.row, self.field, self.message = (
            first.file,
            first.row,
            first.field,
            first.message,
        )
        super().__init__(self._render())

    def _render(self) -> str:
        if self.total == 1:
            return str(self.issues[0])
        lines = [
            f"{self.total} invalid rows (rows are 0-based; pass skip_invalid=True to drop "
            "them and list them in the data report):"
        ]
        lines += [f"  {issue}" for issue in self.issues]
        if self.total > len(self.issues):
            lines.append(f"  ... and {self.total - len(self.issues)} more")
        return "\n".join(lines)
