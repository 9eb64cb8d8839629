"""Judge SFT data: `messages` rows validated into one parquet, bad rows named, nothing silent."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from judgeflow.data import DataError, DataValidationError
from judgeflow.data.sft import prepare_sft_messages
from judgeflow.samples import sample_path

GOOD = {
    "messages": [
        {"role": "system", "content": "You judge."},
        {"role": "user", "content": "Rate this."},
        {"role": "assistant", "content": "<think>ok</think><score>3</score>"},
    ]
}


def test_the_shipped_demo_sft_rows_are_valid_and_kept_whole(tmp_path: Path) -> None:
    out = tmp_path / "sft.parquet"
    result = prepare_sft_messages([sample_path("tinyjudge_pointwise_sft.jsonl")], out)
    rows = pq.read_table(out).to_pylist()
    assert result.rows_read == result.rows_written == len(rows) > 0
    assert rows[0]["messages"][-1]["role"] == "assistant"
    assert rows[0]["messages"][-1]["content"].startswith("<think>")
    assert result.report["counts"]["rows_dropped"] == 0 and len(result.sha256) == 64


@pytest.mark.parametrize(
    ("row", "field", "message"),
    [
        ({"text": "x"}, "messages", "at least two chat turns"),
        ({"messages": [GOOD["messages"][1]] * 2}, "messages[1].role", "assistant's"),
        (
            {"messages": [{"role": "bot", "content": "x"}, GOOD["messages"][2]]},
            "messages[0].role",
            "expected one of",
        ),
        (
            {"messages": [{"role": "user", "content": " "}, GOOD["messages"][2]]},
            "messages[0].content",
            "non-empty",
        ),
        ({"messages": [GOOD["messages"][0], GOOD["messages"][2]]}, "messages", "no user turn"),
        ({"messages": ["hi", GOOD["messages"][2]]}, "messages[0]", "expected an object"),
    ],
)
def test_an_invalid_row_fails_with_file_row_and_field(
    write_jsonl: Callable[..., Path], tmp_path: Path, row: dict, field: str, message: str
) -> None:
    src = write_jsonl([GOOD, row])
    out = tmp_path / "sft.parquet"
    with pytest.raises(DataValidationError) as info:
        prepare_sft_messages([src], out)
    assert (info.value.file, info.value.row, info.value.field) == (str(src), 1, field)
    assert message in str(info.value)
    assert not out.exists()  # nothing half-written


def test_skip_invalid_drops_and_counts_the_bad_rows(
    write_jsonl: Callable[..., Path], tmp_path: Path
) -> None:
    src = write_jsonl([GOOD, "{not json", {"messages": []}, GOOD])
    result = prepare_sft_messages([src], tmp_path / "sft.parquet", skip_invalid=True)
    assert (result.rows_read, result.rows_written) == (4, 2)
    assert [d["row"] for d in result.dropped] == [1, 2]
    assert result.report["counts"]["rows_dropped"] == 2


def test_no_usable_row_is_an_error_not_an_empty_file(
    write_jsonl: Callable[..., Path], tmp_path: Path
) -> None:
    with pytest.raises(DataError, match="no usable SFT rows"):
        prepare_sft_messages([write_jsonl([{"messages": []}])], tmp_path / "o.parquet", skip_invalid=True)  # fmt: skip
