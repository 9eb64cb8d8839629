"""prepare_judge for decontamination: prompt hashes on every row, pairwise validation data in
both A/B orders, a split by normalised query, and the report's duplicates (within and across).

Rows are checked against what each source row must give, written out by hand.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from data_testrows import pairwise_row, pointwise_row, rb2_row

from judgeflow.data import DataError, prepare_judge, render_pairwise, render_pointwise
from judgeflow.data.examples import Example
from judgeflow.data.prepare import balance_swaps, judge_prompt_units, split_val
from judgeflow.data.prompt_hashes import judge_prompt_hash
from judgeflow.data.readers import read_examples
from judgeflow.samples import sample_path


def _rows(path: str | Path | None) -> list[dict[str, Any]]:
    assert path is not None
    return pq.read_table(str(path)).to_pylist()


PAIRS = [(f"Question {i}?", f"good answer {i}", f"bad answer {i}") for i in range(8)]


def _pairs_file(write_jsonl: Callable[..., Path]) -> Path:
    return write_jsonl([pairwise_row(q, a, b, "A") for q, a, b in PAIRS])


# --------------------------------------------------------------------------- both orders in val


def test_pairwise_val_holds_both_orders_with_pair_ids_and_flipped_labels(
    write_jsonl: Callable[..., Path], tmp_path: Path
) -> None:
    src = _pairs_file(write_jsonl)
    result = prepare_judge(
        "pairwise", src, tmp_path / "p.parquet", val_fraction=0.25, balance_positions=True, seed=1
    )
    val = _rows(result.val_path)
    assert len(val) == 4  # 2 examples, two rows each
    for pair in range(2):
        own, swapped = val[2 * pair], val[2 * pair + 1]
        row = own["extra_info"]["source_row"]
        query, good, bad = PAIRS[row]
        assert swapped["extra_info"]["source_row"] == row
        assert own["prompt"][0]["content"] == render_pairwise(query, good, bad)
        assert swapped["prompt"][0]["content"] == render_pairwise(query, bad, good)
        assert own["reward_model"]["ground_truth"] == {"preference": "A"}
        assert swapped["reward_model"]["ground_truth"] == {"preference": "B"}
        assert (own["extra_info"]["label"], swapped["extra_info"]["label"]) == ("A", "B")
        assert (own["extra_info"]["swapped"], swapped["extra_info"]["swapped"]) == (False, True)
        assert own["extra_info"]["pair"] == swapped["extra_info"]["pair"] == pair
        assert (own["extra_info"]["index"], swapped["extra_info"]["index"]) == (
            2 * pair,
            2 * pair + 1,
        )
        expected = judge_prompt_hash(query, [good, bad])
        assert own["extra_info"]["prompt_hash"] == swapped["extra_info"]["prompt_hash"] == expected
        assert {own["extra_info"]["split"], swapped["extra_info"]["split"]} == {"val"}
    info = result.report["splits"]["val"]
    assert (info["rows"], info["pairs"], info["swapped"], info["both_orders"]) == (4, 2, 2, True)
    assert info["labels"] == {"A": 2, "B": 2}
    counts = result.report["counts"]
    assert counts["examples_written"] == {"train": 6, "val": 2}
    assert counts["rows_written"] == {"train": 6, "val": 4}
    assert counts["examples_built"] == 8  # the accounting counts examples, not rows


def test_the_train_split_is_one_row_per_example_balanced_as_before(
    write_jsonl: Callable[..., Path], tmp_path: Path
) -> None:
    src = _pairs_file(write_jsonl)
    result = prepare_judge(
        "pairwise", src, tmp_path / "p.parquet", val_fraction=0.25, balance_positions=True, seed=1
    )
    train = _rows(result.train_path)
    swaps = balance_swaps(len(train), 1, "train")  # the generator balancing always used
    assert len(train) == 6 and len(swaps) == 3
    for index, row in enumerate(train):
        query, good, bad = PAIRS[row["extra_info"]["source_row"]]
        swapped = index in swaps
        a, b, preference = (bad, good, "B") if swapped else (good, bad, "A")
        assert row["prompt"][0]["content"] == render_pairwise(query, a, b)
        assert row["reward_model"]["ground_truth"] == {"preference": preference}
        extra = row["extra_info"]
        assert (extra["index"], extra["pair"], extra["swapped"]) == (index, index, swapped)
        assert extra["prompt_hash"] == judge_prompt_hash(query, [good, bad])
    info = result.report["splits"]["train"]
    assert (info["rows"], info["pairs"], info["swapped"], info["both_orders"]) == (6, 6, 3, False)


def test_without_balancing_val_still_holds_both_orders(
    write_jsonl: Callable[..., Path], tmp_path: Path
) -> None:
    result = prepare_judge(
        "pairwise", _pairs_file(write_jsonl), tmp_path / "p.parquet", val_fraction=0.5
    )
    val = _rows(result.val_path)
    assert [r["extra_info"]["swapped"] for r in val] == [False, True] * 4
    assert [r["extra_info"]["pair"] for r in val] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert not any(r["extra_info"]["swapped"] for r in _rows(result.train_path))
    assert result.report["splits"]["train"]["swapped"] == 0


def test_both_orders_writes_the_output_file_in_both_orders(
    write_jsonl: Callable[..., Path], tmp_path: Path
) -> None:
    """For a separate validation source: the whole file is evaluation data."""
    result = prepare_judge(
        "pairwise", _pairs_file(write_jsonl), tmp_path / "v.parquet", both_orders=True
    )
    rows = _rows(result.train_path)
    assert len(rows) == 16 and result.val_path is None
    assert [r["extra_info"]["pair"] for r in rows] == [i // 2 for i in range(16)]
    assert [r["extra_info"]["index"] for r in rows] == list(range(16))
    assert [r["reward_model"]["ground_truth"]["preference"] for r in rows] == ["A", "B"] * 8
    assert result.report["parameters"]["both_orders"] is True
    info = result.report["splits"]["train"]
    assert (info["rows"], info["pairs"], info["swapped"], info["both_orders"]) == (16, 8, 8, True)


def test_both_orders_parameter_checks(write_jsonl: Callable[..., Path], tmp_path: Path) -> None:
    src = _pairs_file(write_jsonl)
    out = tmp_path / "x.parquet"
    with pytest.raises(DataError, match="val_fraction"):
        prepare_judge("pairwise", src, out, both_orders=True, val_fraction=0.2)
    with pytest.raises(DataError, match="balance_positions"):
        prepare_judge("pairwise", src, out, both_orders=True, balance_positions=True)
    points = write_jsonl([pointwise_row()], name="points.jsonl")
    with pytest.raises(DataError, match="only applies to pairwise"):
        prepare_judge("pointwise", points, out, both_orders=True)


class _CharsBeforeResponseB:
    """A stand-in tokenizer whose length depends on the A/B order: one token per character
    before `# Response B`, so a long response A makes that order the longer one."""

    name_or_path = "chars-before-b"

    def apply_chat_template(
        self, conversations: Sequence[list[dict[str, str]]], **_: Any
    ) -> list[list[int]]:
        return [[0] * len(c[-1]["content"].split("# Response B")[0]) for c in conversations]


def test_length_filter_measures_both_orders_when_the_split_holds_both(
    write_jsonl: Callable[..., Path], tmp_path: Path
) -> None:
    long, short = "x" * 200, "y"
    tok = _CharsBeforeResponseB()
    ab = len(render_pairwise("Lopsided?", short, long).split("# Response B")[0])
    ba = len(render_pairwise("Lopsided?", long, short).split("# Response B")[0])
    assert ba > ab
    rows = [pairwise_row("Lopsided?", short, long), *(pairwise_row(f"q{i}?") for i in range(3))]
    src = write_jsonl(rows)
    one_order = prepare_judge(
        "pairwise", src, tmp_path / "a.parquet", tokenizer=tok, max_prompt_length=ab
    )
    assert one_order.report["counts"]["examples_dropped"]["prompt_too_long"] == 0
    for name, options in (("b", {"val_fraction": 0.5}), ("c", {"both_orders": True})):
        both = prepare_judge(
            "pairwise", src, tmp_path / f"{name}.parquet", tokenizer=tok, max_prompt_length=ab,
            **options,
        )  # fmt: skip
        dropped = both.report["dropped"]["listed"]
        assert [(d["row"], d["reason"]) for d in dropped] == [(0, "prompt_too_long")], name
        assert f"prompt is {ba} tokens" in dropped[0]["detail"]


# --------------------------------------------------------------------------- prompt hashes


@pytest.mark.parametrize("mode", ["pointwise", "pairwise"])
def test_every_row_carries_its_examples_prompt_hash(tmp_path: Path, mode: Any) -> None:
    sample = sample_path("rewardbench2.jsonl")
    source = [json.loads(line) for line in sample.read_text().splitlines()]
    result = prepare_judge(mode, sample, tmp_path / "rb.parquet", val_fraction=0.3)
    rows = _rows(result.train_path) + _rows(result.val_path)
    for row in rows:
        extra = row["extra_info"]
        record = source[extra["source_row"]]
        picked = [("chosen", extra["chosen_index"]), ("rejected", extra["rejected_index"])]
        responses = [record[key][i] for key, i in picked if i is not None]
        assert extra["prompt_hash"] == judge_prompt_hash(record["prompt"], responses)
        assert (extra["pair"] is None) == (mode == "pointwise")
    assert len({r["extra_info"]["prompt_hash"] for r in rows}) > len(rows) // 3


# --------------------------------------------------------------------------- split by normalised query


def _split_by_raw_query(examples: Sequence[Example], fraction: float, seed: int) -> list[bool]:
    """The split before queries were normalised (kept here to pin that distinct queries still
    split exactly as they did)."""
    queries = list(dict.fromkeys(ex.query for ex in examples))
    n_val = min(max(1, math.floor(fraction * len(queries) + 0.5)), len(queries) - 1)
    random.Random(seed).shuffle(queries)
    chosen = set(queries[:n_val])
    return [ex.query in chosen for ex in examples]


@pytest.mark.parametrize(
    ("mode", "sample"),
    [
        ("pointwise", "tinyjudge_pointwise.jsonl"),
        ("pairwise", "tinyjudge_pairwise.jsonl"),
        ("pointwise", "openjudge_pointwise.jsonl"),
        ("pairwise", "rewardbench2.jsonl"),
    ],
)
def test_distinct_queries_split_exactly_as_before(mode: Any, sample: str) -> None:
    examples = read_examples(mode, sample_path(sample)).examples
    for seed, fraction in ((0, 0.25), (0, 0.1), (3, 0.5)):
        assert split_val(examples, fraction, seed) == _split_by_raw_query(examples, fraction, seed)


TINY_DEMO_VAL_ROWS = [0, 1, 2, 3, 8, 9, 10, 11, 14, 15, 24, 25, 58, 59, 66, 67, 70, 71, 76, 77,
                      80, 81, 84, 85, 86, 87, 102, 103]  # fmt: skip


@pytest.mark.parametrize("mode", ["pointwise", "pairwise"])
def test_a_val_fraction_split_of_a_shipped_file_is_pinned(tmp_path: Path, mode: Any) -> None:
    """A split is a function of the file, the fraction and the seed only: these are the rows a
    quarter of the tiny demo's RL file validates on with seed 0, in both modes (their questions
    are the same), today and after any change that keeps splits stable."""
    result = prepare_judge(
        mode, sample_path(f"tinyjudge_{mode}.jsonl"), tmp_path / "t.parquet", val_fraction=0.25
    )
    val = _rows(result.val_path)
    if mode == "pairwise":
        val = [r for r in val if not r["extra_info"]["swapped"]]
    assert [r["extra_info"]["source_row"] for r in val] == TINY_DEMO_VAL_ROWS
    assert len(_rows(result.train_path)) == 110 - len(TINY_DEMO_VAL_ROWS)


def test_near_duplicate_queries_stay_on_one_side(
    write_jsonl: Callable[..., Path], tmp_path: Path
) -> None:
    rows = [pointwise_row(f"question {i}", f"answer {i}", i % 5) for i in range(20)]
    rows += [
        pointwise_row("What is the capital of France?", "Paris.", 4),
        pointwise_row("  what is the CAPITAL of\tfrance?", "Lyon.", 0),
        pointwise_row("WHAT IS THE CAPITAL OF FRANCE?", "Marseille.", 0),
    ]
    src = write_jsonl(rows)
    sides = set()
    for seed in range(12):
        result = prepare_judge(
            "pointwise", src, tmp_path / f"s{seed}.parquet", val_fraction=0.3, seed=seed
        )
        for split, path in (("train", result.train_path), ("val", result.val_path)):
            found = {r["extra_info"]["source_row"] for r in _rows(path)} & {20, 21, 22}
            if found:
                assert found == {20, 21, 22}, (seed, split)
                sides.add(split)
        assert result.report["duplicates"]["across"]["val"]["count"] == 0
    assert sides == {"train", "val"}  # the group does move with the seed, always whole


# --------------------------------------------------------------------------- duplicates report


def test_report_lists_a_duplicate_that_differs_only_in_case_and_spacing(
    write_jsonl: Callable[..., Path], tmp_path: Path
) -> None:
    rows = [pointwise_row(f"question {i}", f"answer {i}", 4) for i in range(6)]
    rows.insert(2, pointwise_row("What is 2 + 2?", "Four.", 4))
    rows.append(pointwise_row("  what IS 2 +  2?\n", "four.", 3))  # row 7: the plant
    src = write_jsonl(rows)
    result = prepare_judge("pointwise", src, tmp_path / "d.parquet")
    train = _rows(result.train_path)
    digest = judge_prompt_hash("What is 2 + 2?", ["Four."])
    assert train[2]["extra_info"]["prompt_hash"] == train[7]["extra_info"]["prompt_hash"] == digest
    assert result.report["duplicates"] == {
        "listed_limit": 10,
        "within": {
            "train": {
                "unit": "row",
                "units": 8,
                "count": 2,
                "prompts": 1,
                "listed": [
                    {
                        "prompt_hash": digest,
                        "n": 2,
                        "occurrences": [
                            {"file": str(src), "row": 2, "index": 2},
                            {"file": str(src), "row": 7, "index": 7},
                        ],
                    }
                ],
            }
        },
        "across": {},
    }


def test_a_both_orders_split_counts_duplicates_by_pair_not_by_twin(
    write_jsonl: Callable[..., Path], tmp_path: Path
) -> None:
    src = write_jsonl(
        [
            pairwise_row("Capital of France?", "Paris.", "Lyon.", "A"),
            pairwise_row("Capital of Spain?", "Madrid.", "Sevilla.", "A"),
            pairwise_row("capital of  FRANCE?", "lyon.", "PARIS.", "B"),  # the same prompt, B/A
        ]
    )
    result = prepare_judge("pairwise", src, tmp_path / "v.parquet", both_orders=True)
    within = result.report["duplicates"]["within"]["train"]
    assert (within["unit"], within["units"], within["count"], within["prompts"]) == (
        "pair",
        3,
        2,
        1,
    )
    (listed,) = within["listed"]
    assert listed["prompt_hash"] == judge_prompt_hash("Capital of France?", ["Paris.", "Lyon."])
    assert listed["occurrences"] == [
        {"file": str(src), "row": 0, "index": 0},  # the first row of each pair
        {"file": str(src), "row": 2, "index": 4},
    ]
    again = judge_prompt_units(result.train_path)  # read back from the file: the same units
    assert (again.unit, len(again.hashes)) == ("pair", 3)
    assert again.locate(2) == {"file": str(src), "row": 2, "index": 4}


def test_pairwise_val_split_reports_no_twin_as_duplicate(tmp_path: Path) -> None:
    result = prepare_judge(
        "pairwise", sample_path("tinyjudge_pairwise.jsonl"), tmp_path / "t.parquet",
        val_fraction=0.25, balance_positions=True,
    )  # fmt: skip
    dups = result.report["duplicates"]
    assert dups["within"]["val"]["units"] == result.report["splits"]["val"]["pairs"] == 28
    assert dups["within"]["val"]["count"] == dups["within"]["train"]["count"] == 0
    assert dups["across"] == {
        "val": {"reference": "train", "unit": "pair", "units": 28, "count": 0, "prompts": 0,
                "listed": []}
    }  # fmt: skip


def test_rewardbench2_expansions_are_distinct_prompts(
    write_jsonl: Callable[..., Path], tmp_path: Path
) -> None:
    src = write_jsonl([rb2_row(0, chosen=["good"], rejected=["bad", "GOOD "])])
    result = prepare_judge("pointwise", src, tmp_path / "r.parquet")
    within = result.report["duplicates"]["within"]["train"]
    # "good" (chosen, label 4) and "GOOD " (rejected, label 0) are one prompt with two labels.
    assert (within["count"], within["prompts"]) == (2, 1)
    assert [o["index"] for o in within["listed"][0]["occurrences"]] == [0, 2]
    assert render_pointwise("question 0?", "good") != render_pointwise("question 0?", "GOOD ")


def test_prompt_units_of_an_rlvr_file_are_its_rows(tmp_path: Path) -> None:
    """An RLVR preparation has no `pair` column: every row is a unit (the rlvr recipes check a
    data.val_source against their training file through these units)."""
    from judgeflow.data.rlvr import prepare_rlvr

    result = prepare_rlvr(sample_path("rlvr/tinyrlvr.jsonl"), tmp_path / "r.parquet")
    units = judge_prompt_units(result.train_path)
    rows = result.report["counts"]["rows_written"]["train"]
    assert (units.unit, len(units.hashes)) == ("row", rows) and rows > 0
    first = units.locate(0)
    assert first["row"] is not None and str(first["file"]).endswith("tinyrlvr.jsonl")
