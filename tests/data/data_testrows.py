"""Row builders for the data tests (a uniquely named module, so no clash with other conftests)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from judgeflow.data.jsonl import BOM  # the UTF-8 byte-order mark, as the readers know it


def pointwise_row(
    query: str = "What is 2 + 2?",
    response: str = "2 + 2 = 4.",
    label: Any = 4,
    source: str | None = "unit",
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "input": [{"role": "user", "content": query}],
        "output": [
            {"answer": {"role": "assistant", "content": response, "label": {"helpfulness": label}}}
        ],
    }
    if source is not None:
        row["source"] = source
    return row


def pairwise_row(
    query: str = "Capital of France?",
    a: str = "Paris.",
    b: str = "Lyon.",
    preference: Any = "A",
    source: str = "unit",
) -> dict[str, Any]:
    return {
        "input": [{"role": "user", "content": query}],
        "output": [
            {"answer": {"role": "assistant", "content": a, "label": {"preference": preference}}},
            {"answer": {"role": "assistant", "content": b, "label": {"preference": preference}}},
        ],
        "source": source,
    }


def rb2_row(
    i: int,
    chosen: Sequence[str] = ("good",),
    rejected: Sequence[str] = ("bad 1", "bad 2", "bad 3"),
    subset: str = "Factuality",
    prompt: str | None = None,
) -> dict[str, Any]:
    return {
        "id": str(i),
        "prompt": prompt if prompt is not None else f"question {i}?",
        "chosen": list(chosen),
        "rejected": list(rejected),
        "subset": subset,
    }


def resave(
    data: bytes, *, bom: bool = False, crlf: bool = False, blank_lines: bool = False
) -> bytes:
    """A JSONL file's bytes as another tool saves them: with a UTF-8 byte-order mark first
    (spreadsheet tools, some editors), CRLF line endings (Windows), and/or a blank line after
    every line (line `r` becomes line `2 r`; a last line without a newline stays without)."""
    *lines, tail = data.split(b"\n")
    if blank_lines:
        lines = [piece for line in lines for piece in (line, b"")]
    return (BOM if bom else b"") + (b"\r\n" if crlf else b"\n").join([*lines, tail])
