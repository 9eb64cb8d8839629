"""Pairwise reward: the verdict rule, the `<better>` format, exact-match payout."""

from __future__ import annotations

import json
import warnings
from typing import Any

import pytest

from judgeflow.rewards.pairwise import compute_score

KEYS = {"score", "valid_answer", "pred"}
FAIL = {"score": 0.0, "valid_answer": 0, "pred": -1}


def reward(solution: Any, truth: Any = "A") -> dict[str, float | int]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # unusable ground truths warn; asserted separately
        return compute_score("rewardbench2", solution, truth, extra_info={"index": 0})


def answer(choice: str) -> str:
    return f"<think>A is more accurate than B.</think><better>{choice}</better>"


@pytest.mark.parametrize(
    ("choice", "truth", "expected"),
    [
        ("A", "A", {"score": 1.0, "valid_answer": 1, "pred": 0}),
        ("B", "B", {"score": 1.0, "valid_answer": 1, "pred": 1}),
        ("A", "B", {"score": 0.0, "valid_answer": 1, "pred": 0}),
        ("B", "A", {"score": 0.0, "valid_answer": 1, "pred": 1}),
    ],
)
def test_exact_match_pays_one(choice: str, truth: str, expected: dict[str, float]) -> None:
    assert reward(answer(choice), truth) == expected


def test_swapping_a_and_b_flips_the_reward() -> None:
    assert reward(answer("A"), "A")["score"] == reward(answer("B"), "B")["score"] == 1.0
    assert reward(answer("B"), "A")["score"] == reward(answer("A"), "B")["score"] == 0.0


@pytest.mark.parametrize(
    ("body", "pred"),
    [("a", 0), ("b", 1), (" A ", 0), ("\nB\n", 1), ("\tb ", 1)],
)
def test_letter_is_case_insensitive_and_may_be_padded(body: str, pred: int) -> None:
    assert reward(answer(body))["pred"] == pred


@pytest.mark.parametrize(
    "solution",
    [
        "<better>A</better>",  # no think at all: the whole text is the verdict
        "Response A wins.\n<better>A</better>",
        "<think>x</think>y<think>z</think><better>A</better>",
        "<think>maybe <better>B</better></think><better>A</better>",
    ],
)
def test_verdict_is_text_after_last_think_close(solution: str) -> None:
    assert reward(solution, "A") == {"score": 1.0, "valid_answer": 1, "pred": 0}


@pytest.mark.parametrize(
    "solution",
    [
        "<think>long analysis <better>A</better>",  # think never closed: truncated
        "<think>a</think><better>A</better><think>again",
        "<think>a</think>",
        "",
        "A",
        answer("C"),
        answer("AB"),
        answer("A or B"),
        answer(""),
        answer("Response A"),
        answer("1"),
        "<think>a</think><better>A</better><better>A</better>",
        "<think>a</think><better>A</better><better>B</better>",
        "<think>a</think><better>A",
        "<think>a</think>A</better>",
        "<think>a</think><BETTER>A</BETTER>",  # tags are lowercase, matched as written
        "<think>a</think><Better>A</Better>",
        "<think>a</think><better>A</better></better>",
        "<think>a</think><better>A</better><better>",  # a second, unclosed tag
    ],
)
def test_format_failures(solution: str) -> None:
    assert reward(solution, "A") == FAIL
    assert reward(solution, "B") == FAIL


@pytest.mark.parametrize(
    "truth",
    [
        "A",
        "a",
        " A ",
        {"preference": "A"},
        {"preference": "A", "source": "rewardbench2", "chosen_index": 0},
        json.dumps({"preference": "A", "id": 3}),
    ],
)
def test_ground_truth_forms(truth: Any) -> None:
    assert reward(answer("A"), truth) == {"score": 1.0, "valid_answer": 1, "pred": 0}
    assert reward(answer("B"), truth) == {"score": 0.0, "valid_answer": 1, "pred": 1}


@pytest.mark.parametrize(
    "truth",
    [None, "C", "", "AB", 0, 1, {"preference": None}, {"label": "A"}, "{bad json", ["A"], b"A"],
)
def test_unusable_ground_truth_pays_nothing_warns_and_keeps_pred(truth: Any) -> None:
    with pytest.warns(UserWarning, match="unusable ground truth"):
        result = compute_score("rewardbench2", answer("B"), truth)
    assert result == {"score": 0.0, "valid_answer": 0, "pred": 1}


GARBAGE: list[Any] = [
    None,
    b"<better>A</better>",
    0,
    ["<better>A</better>"],
    object(),
    "\x00<better>\udcff</better>",
    "<better>" * 10_000,
    "x" * 2_000_000 + "<better>A</better>",
    "<think>" + "y" * 1_000_000,
]


@pytest.mark.parametrize("solution", [*GARBAGE, answer("A"), answer("b"), answer("C")])
@pytest.mark.parametrize("truth", ["A", "B", {"preference": "b"}, None, 7, object()])
def test_never_raises_and_keys_and_types_are_stable(solution: Any, truth: Any) -> None:
    result = reward(solution, truth)
    assert set(result) == KEYS
    assert result["score"] in (0.0, 1.0) and isinstance(result["score"], float)
    assert result["valid_answer"] in (0, 1) and isinstance(result["valid_answer"], int)
    assert result["pred"] in (-1, 0, 1)
