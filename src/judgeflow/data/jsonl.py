"""JSON lines: parse one line, or say in one phrase why it is not a JSON value.

The judge reader splits bytes on `\\n`, the GRRM reader reads text with universal newlines;
both describe a bad line with these functions, so an undecodable, truncated or non-object
line reads the same whichever preparation meets it. Both start after `skip_bom`, so a file that
begins with a UTF-8 byte-order mark reads like one without; CRLF line endings need nothing (the
`\r` is JSON whitespace) and blank lines are skipped but counted, so row numbers stay line
numbers.
"""

from __future__ import annotations

import codecs
import io
import json
import re
from typing import IO, Any

#: The UTF-8 byte-order mark that spreadsheet tools and some editors write at a file's start.
BOM = codecs.BOM_UTF8

#: What Python's "surrogateescape" decoding turns an undecodable byte into (U+DC80..U+DCFF).
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")


def skip_bom(handle: IO[bytes]) -> tuple[IO[bytes], int]:
    """The bytes of `handle`, open at the start of a file, after a UTF-8 byte-order mark if the
    file starts with one, and the number of bytes skipped (0 or 3).

    Never seeks: a stream that cannot (fsspec over HTTP without a Content-Length) reads the same.
    A buffered reader is peeked at and returned itself; from any other stream the first bytes
    are read, and returned in front of the rest unless they are the mark (a buffered reader
    over both, which splits lines without seeking)."""
    peek = getattr(handle, "peek", None)
    start = peek(len(BOM))[: len(BOM)] if peek is not None else b""
    if len(start) == len(BOM) or (start and not BOM.startswith(start)):  # decided by peeking
        if start == BOM:
            handle.read(len(BOM))
            return handle, len(BOM)
        return handle, 0
    start = b""
    while len(start) < len(BOM) and (more := handle.read(len(BOM) - len(start))):
        start += more  # a stream may hand out fewer bytes than asked
    skipped = len(BOM) if start == BOM else 0
    # Buffered here too: such a stream may seek to split lines (fsspec's readline does).
    rest = io.BufferedReader(_Prefixed(start[skipped:], handle), buffer_size=1 << 20)
    return rest, skipped


class _Prefixed(io.RawIOBase):
    """`prefix`, then the rest of `stream`: bytes read ahead put back in front."""

    def __init__(self, prefix: bytes, stream: IO[bytes]) -> None:
        self._prefix, self._stream = prefix, stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        if self._prefix:
            n = min(len(view), len(self._prefix))
            view[:n], self._prefix = self._prefix[:n], self._prefix[n:]
            return n
        data = self._stream.read(len(view))
        view[: len(data)] = data
        return len(data)


class BadLine(str):
    """A line that is not a JSON value; the text says why (the row's error message)."""


def parse_bytes(raw: bytes) -> Any:
    """The JSON value of one line of bytes, or a `BadLine`."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        column = len(raw[: err.start].decode("utf-8", "replace")) + 1
        return _not_utf8(raw[err.start], column)
    return _parse(text)


def parse_text(line: str) -> Any:
    """The JSON value of one line decoded with `errors="surrogateescape"`, or a `BadLine`
    (an undecodable byte is found here instead of failing the whole file's decoding)."""
    if not line.isascii() and (bad := _ESCAPED_BYTE.search(line)):
        return _not_utf8(ord(bad.group()) - 0xDC00, bad.start() + 1)
    return _parse(line)


def _not_utf8(byte: int, column: int) -> BadLine:
    return BadLine(
        f"line is not valid UTF-8 (byte 0x{byte:02x} at column {column}); save the file as UTF-8"
    )


def _parse(text: str) -> Any:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        message = f"line is not valid JSON ({err.msg}, column {err.colno})"
        if err.msg.startswith("Unterminated") or err.pos >= len(text.rstrip()):
            message += "; it ends early: a truncated file?"
        return BadLine(message)
    escaped = "\\ud" in text or "\\uD" in text  # "\ud800" alone is valid JSON, not Unicode
    if escaped and not _encodable(value):
        return BadLine("line is not valid Unicode (an unpaired surrogate escape such as \\ud800)")
    return value


def _encodable(value: Any) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def not_an_object(value: Any) -> str:
    """The message for a record that is a JSON value but not an object."""
    if isinstance(value, list):
        return "expected an object, got a list (a JSON array? JSONL holds one object per line)"
    kinds = {bool: "a bool", str: "a string", int: "a number", float: "a number"}
    kind = "null" if value is None else kinds.get(type(value), "a value")
    return f"expected an object, got {kind}"
