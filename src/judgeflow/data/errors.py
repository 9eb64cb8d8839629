"""Errors raised while reading and preparing judge data.

Every row-level problem names the file, the 0-based row and the dotted field path, so a bad
row in a 100k-row file can be found without a debugger.

A way past an error that needs an option (`skip_invalid`, `input_format`, a column name) is a
structured `Hint`, not text: the option is named by its Python keyword, and each front end
renders it in its own words (`str(error)`: `skip_invalid=True`; the command line:
`--skip-invalid`; `judgeflow run`: `--set data.skip_invalid=true`), see `DataError.render`.
"""

from __future__ import annotations

import errno
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

#: How many invalid rows a `DataValidationError` lists before summarising the rest.
MAX_LISTED_ISSUES = 20

#: Names an option (Python keyword, value) in a front end's words; None: it has no such option.
OptionNamer = Callable[[str, Any], str | None]


def keyword_argument(option: str, value: Any) -> str:
    """How a Python caller passes an option: `skip_invalid=True`; `...` is "a value of yours"."""
    return f"{option}=…" if value is ... else f"{option}={value!r}"


@dataclass(frozen=True)
class Hint:
    """`{verb} {choice} or {choice} {purpose}`, e.g. "pass skip_invalid=True to drop …".

    `choices` are (Python keyword, value) pairs; `...` as the value stands for one the user
    picks (a column name). Choices a front end has no name for are left out, and so is a hint
    with none left.
    """

    verb: str
    choices: tuple[tuple[str, Any], ...]
    purpose: str

    def render(self, name: OptionNamer = keyword_argument) -> str | None:
        names = [shown for option, value in self.choices if (shown := name(option, value))]
        if not names:
            return None
        return f"{self.verb} {' or '.join(dict.fromkeys(names))} {self.purpose}"


SKIP_INVALID_HINT = Hint(
    "pass", (("skip_invalid", True),), "to drop invalid rows and count them in the data report"
)


class DataError(ValueError):
    """Base class for data problems the user must fix (bad file, bad parameters, no rows).

    `detail` says what is wrong; `hints` (rendered on their own lines) say what to change.
    """

    def __init__(self, detail: str, *, hints: Sequence[Hint] = ()) -> None:
        self.detail = detail
        self.hints: tuple[Hint, ...] = tuple(hints)
        super().__init__(self.render())

    #: The message is the text above, also in subclasses that mix in `OSError` (whose own
    #: `__str__` would show only the errno and the file name).
    __str__ = BaseException.__str__

    def render(self, name: OptionNamer = keyword_argument) -> str:
        """The message with the hints' options named by `name` (default: Python keywords)."""
        shown = (hint.render(name) for hint in self.hints)
        return "\n".join([self.detail, *(f"hint: {text}" for text in shown if text)])

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuilt from its attributes, not by calling `__init__` again (whose arguments differ
        # per subclass): a flow's or a Ray worker's error reaches the caller with its hints.
        state = dict(self.__dict__)
        if isinstance(self, OSError):  # slots, not in `__dict__`
            state.update(errno=self.errno, strerror=self.strerror, filename=self.filename)
        return (_restore, (type(self), self.args, state))


def _restore(cls: type[DataError], args: tuple[Any, ...], state: dict[str, Any]) -> DataError:
    # An `OSError` mix-in has its own object layout, made only by `OSError.__new__`.
    error = (OSError if issubclass(cls, OSError) else ValueError).__new__(cls, *args)
    error.args = args
    for key, value in state.items():
        setattr(error, key, value)
    return error


class DataFileNotFoundError(DataError, FileNotFoundError):
    """An input file does not exist (also a `FileNotFoundError`, so either catch works)."""

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(f"{path}: input file not found")


#: OS errors that say the output location is unusable (full, read-only, not a directory, …):
#: retrying will not help, the user must act. Others (EIO, network) stay as they are.
_OUTPUT_ERRNOS = frozenset(
    {
        errno.ENOSPC,
        errno.EDQUOT,
        errno.EFBIG,
        errno.EROFS,
        errno.EACCES,
        errno.EPERM,
        errno.ENOTDIR,
        errno.EISDIR,
        errno.EEXIST,
        errno.ENAMETOOLONG,
    }
)


class OutputWriteError(DataError, OSError):
    """An output file could not be written (disk full, read-only, a file where a directory
    should be, …). Also an `OSError` with the original `errno`. Nothing was published at `path`
    and no temporary file is left."""

    def __init__(self, path: str, cause: OSError, *, kept: str | None = None) -> None:
        """`kept`: where the work behind the output waits for a rerun, if anywhere."""
        self.path = path
        reason = cause.strerror or str(cause)
        where = f" ({cause.filename})" if cause.filename and str(cause.filename) != path else ""
        if cause.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
            remedy = "free some space or choose another output location"
        elif cause.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            remedy = "make it writable or choose another output location"
        else:
            remedy = "choose another output location"
        if kept:
            remedy = f"fix the location and run the same command again: {kept}"
        super().__init__(
            f"{path}: cannot write the output: {reason}{where}. Nothing was written there; "
            + remedy
        )
        self.errno, self.strerror, self.filename = cause.errno, cause.strerror, path

    @staticmethod
    def is_output_problem(error: BaseException) -> bool:
        """Whether `error` says the output location is unusable (see `_OUTPUT_ERRNOS`)."""
        return isinstance(error, OSError) and error.errno in _OUTPUT_ERRNOS


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
    most callers (and a single-row error) need. The message is one line per problem, then the
    `skip_invalid` hint.
    """

    def __init__(
        self, issues: Sequence[RowIssue], total: int | None = None, summary: str | None = None
    ) -> None:
        if not issues:
            raise ValueError("DataValidationError needs at least one issue")
        self.summary = summary  # what the rows have in common, said once above them
        self.issues: list[RowIssue] = list(issues[:MAX_LISTED_ISSUES])
        self.total: int = max(total if total is not None else len(issues), len(self.issues))
        first = self.issues[0]
        self.file, self.row, self.field, self.message = (
            first.file,
            first.row,
            first.field,
            first.message,
        )
        super().__init__(self._problems(), hints=[SKIP_INVALID_HINT])

    def _problems(self) -> str:
        above = [self.summary] if self.summary else []
        if self.total == 1:
            return "\n".join([*above, str(self.issues[0])])
        lines = [*above, f"{self.total} invalid rows (rows are 0-based):"]
        lines += [f"  {issue}" for issue in self.issues]
        if self.total > len(self.issues):
            lines.append(f"  ... and {self.total - len(self.issues)} more")
        return "\n".join(lines)
