"""`prompt_duplicates`: the duplicates section every data report shares, from hash lists."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from judgeflow.data.duplicates import PromptUnits, hash_array, prompt_duplicates


def _where(split: str) -> Callable[[int], dict[str, Any]]:
    return lambda i: {"file": f"{split}.jsonl", "row": 10 * i}


def test_within_counts_units_and_lists_in_order_of_first_occurrence() -> None:
    hashes = ["b", "a", "c", "a", "b", "a", "d"]
    report = prompt_duplicates({"train": PromptUnits("row", hashes, _where("train"))})
    within = report["within"]["train"]
    assert (within["unit"], within["units"], within["count"], within["prompts"]) == ("row", 7, 5, 2)
    assert [(item["prompt_hash"], item["n"]) for item in within["listed"]] == [("b", 2), ("a", 3)]
    assert within["listed"][1]["occurrences"] == [
        {"file": "train.jsonl", "row": 10},
        {"file": "train.jsonl", "row": 30},
        {"file": "train.jsonl", "row": 50},
    ]
    assert report["across"] == {}


def test_across_compares_every_other_split_with_the_reference() -> None:
    report = prompt_duplicates(
        {
            "train": PromptUnits("row", ["x", "y", "x"], _where("train")),
            "val": PromptUnits("pair", ["y", "z", "y", "x"], _where("val")),
        }
    )
    across = report["across"]["val"]
    assert (across["reference"], across["unit"], across["units"]) == ("train", "pair", 4)
    assert (across["count"], across["prompts"]) == (3, 2)  # y twice, x once
    first = across["listed"][0]
    assert (first["prompt_hash"], first["n"], first["reference_n"]) == ("y", 2, 1)
    assert first["occurrences"] == [
        {"file": "val.jsonl", "row": 0},
        {"file": "val.jsonl", "row": 20},
    ]
    assert first["reference_occurrences"] == [{"file": "train.jsonl", "row": 10}]
    assert report["within"]["val"]["count"] == 2 and report["within"]["train"]["count"] == 2


def test_listing_is_capped_but_counts_are_complete() -> None:
    hashes = [f"h{i // 3}" for i in range(60)]  # 20 prompts, each 3 times
    within = prompt_duplicates({"train": PromptUnits("group", hashes)}, listed=4)["within"]["train"]
    assert (within["count"], within["prompts"], len(within["listed"])) == (60, 20, 4)
    assert within["listed"][0]["occurrences"] == [{"unit": 0}, {"unit": 1}, {"unit": 2}]
    big = prompt_duplicates({"train": PromptUnits("row", ["same"] * 30)}, listed=5)
    assert len(big["within"]["train"]["listed"][0]["occurrences"]) == 5
    assert big["within"]["train"]["listed"][0]["n"] == 30


def test_no_reference_split_means_no_across() -> None:
    report = prompt_duplicates({"test": PromptUnits("group", ["a", "a"])})
    assert report["across"] == {} and report["within"]["test"]["count"] == 2


def test_compact_hashes_report_as_lists_do() -> None:
    """A large split passes its hashes as a numpy array of byte strings (`hash_array` makes one
    from Arrow): the same report as from a list, whatever the pattern of repeats."""
    rng = random.Random(0)
    for _ in range(200):
        names = [f"{rng.getrandbits(64):016x}" for _ in range(rng.randint(1, 30))]
        train = [rng.choice(names) for _ in range(rng.randint(0, 120))]
        val = [rng.choice(names) for _ in range(rng.randint(0, 60))]
        listed = rng.randint(1, 6)
        as_lists = {"train": PromptUnits("row", train, _where("train")),
                    "val": PromptUnits("pair", val, _where("val"))}  # fmt: skip
        compact = {"train": PromptUnits("row", hash_array(pa.array(train, pa.string())), _where("train")),
                   "val": PromptUnits("pair", hash_array(pa.array(val, pa.string())), _where("val"))}  # fmt: skip
        expected = prompt_duplicates(as_lists, listed=listed)
        assert prompt_duplicates(compact, listed=listed) == expected
    assert hash_array(pa.array(["ab", "abc"])).tolist() == [b"ab", b"abc"]  # lengths differ
    assert hash_array(pa.array([], pa.string())).shape == (0,)
    assert isinstance(hash_array(pa.chunked_array([["ab"], ["cd"]])), np.ndarray)
