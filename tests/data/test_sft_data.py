"""Judge SFT data: `messages` rows validated into one parquet, bad rows named, nothing silent;
every row carries its prompt hash."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from judgeflow.data import DataError, DataValidationError, render_pointwise
from judgeflow.data.prompt_hashes import chat_prompt_hash, judge_prompt_hash, text_prompt_hash
from judgeflow.data.sft import prepare_sft_messages
from judgeflow.data.templates import parse_pairwise
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


def test_every_row_carries_its_prompt_hash_and_the_report_its_duplicates(
    write_jsonl: Callable[..., Path], tmp_path: Path
) -> None:
    judge = [
        {"role": "user", "content": render_pointwise("What is 2 + 2?", "Four.")},
        {"role": "assistant", "content": "<think>ok</think><score>4</score>"},
    ]
    again = [  # the same judge prompt up to case and spacing, another verdict
        {"role": "user", "content": render_pointwise("what is 2 +  2?", "FOUR.")},
        {"role": "assistant", "content": "<think>hm</think><score>3</score>"},
    ]
    src = write_jsonl([{"messages": judge}, GOOD, {"messages": again}])
    result = prepare_sft_messages([src], tmp_path / "sft.parquet")
    rows = pq.read_table(tmp_path / "sft.parquet").to_pylist()
    digest = judge_prompt_hash("What is 2 + 2?", ["Four."])
    assert [r["prompt_hash"] for r in rows] == [digest, chat_prompt_hash(GOOD["messages"]), digest]
    assert rows[1]["prompt_hash"] == text_prompt_hash("Rate this.")  # not a judge template
    within = result.report["duplicates"]["within"]["train"]
    assert (within["unit"], within["count"], within["prompts"]) == ("row", 2, 1)
    assert within["listed"][0]["occurrences"] == [
        {"file": str(src), "row": 0, "index": 0},
        {"file": str(src), "row": 2, "index": 2},
    ]


def test_the_demo_sft_rows_hash_to_their_judge_prompts(tmp_path: Path) -> None:
    out = tmp_path / "sft.parquet"
    prepare_sft_messages([sample_path("tinyjudge_pairwise_sft.jsonl")], out)
    for row in pq.read_table(out).to_pylist()[:10]:
        parsed = parse_pairwise(row["messages"][0]["content"])
        assert parsed is not None
        assert row["prompt_hash"] == judge_prompt_hash(parsed[0], parsed[1:])
