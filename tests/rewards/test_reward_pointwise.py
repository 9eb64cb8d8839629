"""Pointwise reward: the verdict rule, the `<score>` format, the label-dependent payout."""

from __future__ import annotations

import json
import warnings
from typing import Any

import numpy as np
import pytest

from judgeflow.rewards.pointwise import compute_score

KEYS = {"score", "valid_answer", "pred"}


def reward(solution: Any, truth: Any = 3) -> dict[str, float | int]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # unusable ground truths warn; asserted separately
        return compute_score("openjudge", solution, truth, extra_info={"index": 0})


def answer(score: str) -> str:
    return f"<think>The response is accurate and clear.</think><score>{score}</score>"


# --- verdict rule -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("solution", "pred"),
    [
        ("<think>analysis</think><score>3</score>", 3),
        ("<think>analysis</think>\n\n<score>3</score>\n", 3),
        ("<score>3</score>", 3),  # no think at all: the whole text is the verdict
        ("Plain words first. <score>3</score> and after.", 3),
        ("<think>a</think>x<think>b</think><score>2</score>", 2),  # after the last </think>
        ("<think>I might say <score>1</score></think><score>3</score>", 3),  # think ignored
        ("<think>a</think><score>1</score><think>b</think><score>3</score>", 3),
    ],
)
def test_verdict_is_text_after_last_think_close(solution: str, pred: int) -> None:
    assert reward(solution) == {"score": 1.0 - abs(pred - 3) / 4, "valid_answer": 1, "pred": pred}


@pytest.mark.parametrize(
    "solution",
    [
        "<think>truncated analysis... <score>3</score>",  # think never closed
        "<think>a</think><score>3</score><think>more",  # reopened after the verdict
        "<think>a</think><think>b <score>3</score>",
        "<think>a</think>",  # closed, but no verdict
        "",
        "   \n",
        "I think the answer is 3.",
    ],
)
def test_open_think_or_missing_verdict_fails(solution: str) -> None:
    assert reward(solution) == {"score": 0.0, "valid_answer": 0, "pred": -1}


# --- the <score> tag ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "pred"),
    [("0", 0), ("4", 4), (" 3 ", 3), ("\n2\n", 2), ("\t1 ", 1)],
)
def test_whitespace_around_the_integer_is_allowed(body: str, pred: int) -> None:
    assert reward(answer(body))["pred"] == pred
    assert reward(answer(body))["valid_answer"] == 1


@pytest.mark.parametrize(
    "body",
    ["5", "-1", "3.5", "3.0", "three", "", " ", "03", "+3", "3 4", "3/4", "[3]", "３"],
)
def test_out_of_range_or_non_integer_is_a_format_failure(body: str) -> None:
    assert reward(answer(body)) == {"score": 0.0, "valid_answer": 0, "pred": -1}


@pytest.mark.parametrize(
    "solution",
    [
        "<think>a</think><score>3</score><score>3</score>",  # two tags, even if they agree
        "<think>a</think><score>3</score> <score>1</score>",
        "<think>a</think><score>3",  # unclosed
        "<think>a</think>3</score>",
        "<think>a</think></score>3<score>",  # reversed
        "<think>a</think><score><score>3</score>",
        "<think>a</think><score>3</score></score>",
        "<think>a</think><score>3</score><score>",  # a second, unclosed tag
        "<think>a</think><SCORE>3</SCORE>",  # tags are lowercase, matched as written
        "<think>a</think><Score>3</Score>",
        "<think>a</think>< score>3</score>",
        "<think>a</think><score >3</score>",
        "<think>a</think><score>3</ score>",
        "<think>a</think>Score: 3",
        "<THINK>a</THINK><score>3</score>x<score>3</score>",
    ],
)
def test_malformed_or_repeated_tags_fail(solution: str) -> None:
    assert reward(solution) == {"score": 0.0, "valid_answer": 0, "pred": -1}


def test_uppercase_think_is_ordinary_text() -> None:
    # `<THINK>` is not a tag, so it neither hides nor truncates the verdict.
    assert reward("<THINK>unclosed <score>4</score>", 4)["score"] == 1.0


# --- payout ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("label", "pred", "expected"),
    [
        # labels 0 and 1: exact match only
        (0, 0, 1.0),
        (0, 1, 0.0),
        (0, 4, 0.0),
        (1, 1, 1.0),
        (1, 0, 0.0),
        (1, 2, 0.0),
        # labels 2-4: 1 - |pred - true| / 4
        (2, 2, 1.0),
        (2, 0, 0.5),
        (2, 1, 0.75),
        (2, 4, 0.5),
        (3, 3, 1.0),
        (3, 4, 0.75),
        (3, 0, 0.25),
        (4, 4, 1.0),
        (4, 3, 0.75),
        (4, 1, 0.25),
        (4, 0, 0.0),
    ],
)
def test_payout_by_label(label: int, pred: int, expected: float) -> None:
    assert reward(answer(str(pred)), label) == {"score": expected, "valid_answer": 1, "pred": pred}


@pytest.mark.parametrize("label", [0, 1, 2, 3, 4])
def test_format_failure_is_never_paid(label: int) -> None:
    for solution in ("", "<think>x</think>", "<think>x", answer("5"), answer("zero")):
        assert reward(solution, label)["score"] == 0.0


# --- ground truth ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "truth",
    [
        3,
        "3",
        " 3\n",
        {"helpfulness": 3},
        {"helpfulness": 3, "source": "helpsteer2", "id": 17},
        {"helpfulness": "3"},
        json.dumps({"helpfulness": 3, "source": "x"}),
        np.int64(3),
        np.int32(3),
        3.0,
        np.float64(3.0),
    ],
)
def test_ground_truth_forms(truth: Any) -> None:
    assert reward(answer("2"), truth) == {"score": 0.75, "valid_answer": 1, "pred": 2}


@pytest.mark.parametrize(
    "truth",
    [
        None,
        5,
        -1,
        2.5,
        float("nan"),
        float("inf"),
        True,
        "",
        "three",
        "5",
        "{not json",
        {"helpfulness": None},
        {"quality": 3},
        {"helpfulness": 7},
        [3],
        b"3",
    ],
)
def test_unusable_ground_truth_pays_nothing_warns_and_keeps_pred(truth: Any) -> None:
    with pytest.warns(UserWarning, match="unusable ground truth"):
        result = compute_score("openjudge", answer("2"), truth)
    assert result == {"score": 0.0, "valid_answer": 0, "pred": 2}


def test_valid_ground_truth_does_not_warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compute_score("openjudge", "garbage", {"helpfulness": 0})


# --- robustness --------------------------------------------------------------------------------

GARBAGE: list[Any] = [
    None,
    b"<score>3</score>",
    42,
    3.5,
    ["<score>3</score>"],
    {"text": "<score>3</score>"},
    object(),
    "\x00\udcff<score>\x00</score>",
    "<score>" * 10_000,
    "x" * 2_000_000 + "<score>3</score>",
    "<think>" + "y" * 1_000_000,
    "</think>" * 100_000 + "<score>1</score>",
]


@pytest.mark.parametrize("solution", GARBAGE + [answer(str(s)) for s in range(-1, 6)])
@pytest.mark.parametrize("truth", [0, 3, "4", {"helpfulness": 1}, None, "bad", object()])
def test_never_raises_and_keys_and_types_are_stable(solution: Any, truth: Any) -> None:
    result = reward(solution, truth)
    assert set(result) == KEYS
    assert isinstance(result["score"], float) and 0.0 <= result["score"] <= 1.0
    assert result["valid_answer"] in (0, 1) and isinstance(result["valid_answer"], int)
    assert isinstance(result["pred"], int) and -1 <= result["pred"] <= 4
    assert (result["pred"] == -1) <= (result["valid_answer"] == 0)


def test_huge_input_with_a_valid_verdict_is_still_scored() -> None:
    assert reward("x" * 2_000_000 + "<score>3</score>")["score"] == 1.0
    assert reward("</think>" * 100_000 + "<score>1</score>", 1)["score"] == 1.0
