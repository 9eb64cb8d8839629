"""prepare_judge streams its input a batch at a time: where the batches end changes nothing.

The same files, split into batches of 3 examples instead of `BATCH_SIZE`, give the same rows
and the same report (the files' bytes differ: one parquet row group per batch). A bad row in a
later batch is named by its own line; duplicates and splits see the whole input; invalid rows
are still reported before an output problem met on the way.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from data_testrows import pointwise_row

import judgeflow.data.prepare as prepare
from judgeflow.data import DataValidationError, OutputWriteError, PrepareResult, prepare_judge
from judgeflow.samples import sample_path


def _rows(path: str | None) -> list[dict[str, Any]] | None:
    return None if path is None else pq.read_table(path).to_pylist()


def _without_digests(report: dict[str, Any]) -> dict[str, Any]:
    splits = {s: {k: v for k, v in r.items() if k != "sha256"} if r else r
              for s, r in report["splits"].items()}  # fmt: skip
    return {**report, "splits": splits}


def _same(first: PrepareResult, second: PrepareResult) -> None:
    assert _rows(first.train_path) == _rows(second.train_path)
    assert _rows(first.val_path) == _rows(second.val_path)
    one, other = _without_digests(first.report), _without_digests(second.report)
    assert {**one, "splits": None} == {**other, "splits": None}
    for split in ("train", "val"):  # the same but for their paths
        if one["splits"][split] is not None:
            del one["splits"][split]["path"], other["splits"][split]["path"]
    assert one["splits"] == other["splits"]


CASES = {
    "pointwise": ("pointwise", "openjudge_pointwise.jsonl", {}),
    "pointwise-val-filtered": ("pointwise", "openjudge_pointwise.jsonl",
                               {"val_fraction": 0.3, "seed": 2, "filter": True}),
    "rewardbench2-pointwise-val": ("pointwise", "rewardbench2.jsonl", {"val_fraction": 0.25}),
    "pairwise-balanced-val": ("pairwise", "openjudge_pairwise.jsonl",
                              {"val_fraction": 0.25, "balance_positions": True, "seed": 1}),
    "rewardbench2-both-orders-filtered": ("pairwise", "rewardbench2.jsonl",
                                          {"both_orders": True, "filter": True}),
    "rewardbench2-balanced": ("pairwise", "rewardbench2.jsonl", {"balance_positions": True}),
}  # fmt: skip


@pytest.mark.parametrize("case", CASES)
def test_batches_do_not_change_the_output(
    case: str, tmp_path: Path, tiny_tokenizer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    mode, sample, options = CASES[case]
    options = dict(options)
    if options.pop("filter", False):  # a limit between the shortest and the longest prompt
        measured = prepare_judge(
            mode, sample_path(sample), tmp_path / "m.parquet", tokenizer=tiny_tokenizer
        ).report["prompt_tokens"]
        options["tokenizer"] = tiny_tokenizer
        options["max_prompt_length"] = (measured["min"] + measured["max"]) // 2
    whole = prepare_judge(mode, sample_path(sample), tmp_path / "whole.parquet", **options)
    monkeypatch.setattr(prepare, "BATCH_SIZE", 3)
    batched = prepare_judge(mode, sample_path(sample), tmp_path / "batched.parquet", **options)
    _same(whole, batched)
    if "max_prompt_length" in options:
        assert whole.report["counts"]["examples_dropped"]["prompt_too_long"] > 0


def test_a_bad_row_in_a_later_batch_is_named_by_its_line(
    write_jsonl: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(prepare, "BATCH_SIZE", 4)
    rows: list[Any] = [pointwise_row(f"q{i}", f"r{i}", i % 5) for i in range(12)]
    rows[3] = ""  # a blank line: skipped, but counted in the line numbers
    rows[9] = pointwise_row("q9", "r9", label=7)
    source = write_jsonl(rows)
    with pytest.raises(DataValidationError) as info:
        prepare_judge("pointwise", source, tmp_path / "j.parquet")
    assert (info.value.row, info.value.field) == (9, "output[0].answer.label.helpfulness")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.jsonl"]  # nothing written

    result = prepare_judge("pointwise", source, tmp_path / "j.parquet", skip_invalid=True)
    listed = result.report["dropped"]["listed"]
    assert [(d["row"], d["field"]) for d in listed] == [(9, "output[0].answer.label.helpfulness")]
    written = _rows(result.train_path) or []
    assert [r["extra_info"]["source_row"] for r in written] == [0, 1, 2, 4, 5, 6, 7, 8, 10, 11]
    assert [r["extra_info"]["index"] for r in written] == list(range(10))


def test_duplicates_across_batches_are_counted(
    write_jsonl: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(prepare, "BATCH_SIZE", 4)
    rows = [pointwise_row(f"q{i}", f"r{i}", 0) for i in range(12)]
    rows[1] = pointwise_row("Same  question?", "Same answer.", 1)
    rows[10] = pointwise_row("same question?", "SAME answer.", 3)  # equal once normalised
    result = prepare_judge("pointwise", write_jsonl(rows), tmp_path / "j.parquet")
    within = result.report["duplicates"]["within"]["train"]
    assert (within["units"], within["count"], within["prompts"]) == (12, 2, 1)
    occurrences = within["listed"][0]["occurrences"]
    assert [(o["row"], o["index"]) for o in occurrences] == [(1, 1), (10, 10)]
    assert result.report["splits"]["train"]["queries"] == 12  # raw queries: "Same" ≠ "same"


def test_invalid_rows_come_before_an_output_problem_met_on_the_way(
    write_jsonl: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first batches are written before a later one turns out invalid: the invalid rows,
    which the user must fix anyway, are reported first, as when the whole input was read
    before anything was written."""
    monkeypatch.setattr(prepare, "BATCH_SIZE", 2)
    rows: list[Any] = [pointwise_row(f"q{i}") for i in range(8)]
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where a directory should be\n")
    out = blocker / "j.parquet"
    with pytest.raises(OutputWriteError):
        prepare_judge("pointwise", write_jsonl(rows), out)
    rows[6] = "{broken"
    with pytest.raises(DataValidationError, match="row 6: line is not valid JSON"):
        prepare_judge("pointwise", write_jsonl(rows), out)
    with pytest.raises(DataValidationError, match="row 6"):
        prepare_judge("pointwise", write_jsonl(rows), tmp_path / "j.parquet",
                      tokenizer=tmp_path / "no-such-tokenizer")  # fmt: skip
