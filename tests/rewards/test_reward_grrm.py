"""GRRM reward: the four-line tail, ranking/score consistency, and both reward terms.

Expected values are computed by hand in the comments; they pin the GRRM reference semantics.
"""

from __future__ import annotations

import json
import warnings
from typing import Any

import numpy as np
import pytest

from judgeflow.rewards.grrm import compute_score

KEYS = {"score", "valid_answer", "ranking_reward", "score_reward"}
FAIL = {"score": 0.0, "valid_answer": 0, "ranking_reward": 0.0, "score_reward": 0.0}
TWO = {"A": 7, "B": 3}
THREE = {"A": 8, "B": 5, "C": 5}
FOUR = {"A": 9, "B": 6, "C": 6, "D": 2}


def judge(
    ranking: str, scores: str, reasoning: str = "A keeps the meaning; B drops a clause."
) -> str:
    """A response laid out like the GRRM SFT target."""
    return f"{reasoning}\n\n### Final Ranking:\n\n{ranking}\n\n### Scores:\n\n{scores}\n"


def reward(solution: Any, truth: Any = TWO) -> dict[str, float | int]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # unusable ground truths warn; asserted separately
        return compute_score("towerblocks", solution, truth, extra_info={"index": 0})


def paid(ranking: float, score: float) -> dict[str, Any]:
    return {
        "score": pytest.approx(ranking + score),
        "valid_answer": 1,
        "ranking_reward": pytest.approx(ranking),
        "score_reward": pytest.approx(score),
    }


# --- payout ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ranking", "scores", "ranking_reward", "score_reward"),
    [
        ("A > B", "A: 7, B: 3", 1.0, 1.0),  # exact
        ("A > B", "A: 6, B: 3", 1.0, 0.6),  # margin 3 vs 4: error 1
        ("A > B", "A: 5, B: 3", 1.0, 0.2),  # error 2
        ("A > B", "A: 4, B: 3", 1.0, 0.0),  # error 3 pays nothing
        ("A > B", "A: 10, B: 0", 1.0, 0.0),  # error 6
        ("B > A", "A: 3, B: 7", 0.0, 0.0),  # reversed: margin -4 vs 4, error 8
        ("A = B", "A: 5, B: 5", 0.0, 0.0),  # a tie on one side only is wrong; error 4
        ("B > A", "A: 6, B: 7", 0.0, 0.0),  # error 5
    ],
)
def test_two_candidates(
    ranking: str, scores: str, ranking_reward: float, score_reward: float
) -> None:
    assert reward(judge(ranking, scores)) == paid(ranking_reward, score_reward)


@pytest.mark.parametrize(
    ("ranking", "scores"),
    [
        ("A > B", "A: 9, B: 5"),  # +2
        ("A > B", "A: 4, B: 0"),  # -3
        ("A > B", "A: 11, B: 7"),  # 11 is above the scale, but an int: accepted
        ("A > B", "A: 3, B: -1"),  # -1 likewise
        ("A > B", "A: 107, B: 103"),
    ],
)
def test_shifting_every_score_by_a_constant_loses_nothing(ranking: str, scores: str) -> None:
    assert reward(judge(ranking, scores)) == paid(1.0, 1.0)


def test_ties_in_the_ground_truth() -> None:
    # THREE = A 8, B 5, C 5.
    assert reward(judge("A > B = C", "A: 8, B: 5, C: 5"), THREE) == paid(1.0, 1.0)
    # Order inside a tie does not matter, nor does the order of the score items.
    assert reward(judge("A > C = B", "C: 5, A: 8, B: 5"), THREE) == paid(1.0, 1.0)
    # Breaking the B = C tie: pairs AB ok, AC ok, BC wrong -> 2/3.
    # Margins (gt order AB, AC, BC): 3 vs 3 -> 1, 3 vs 2 -> 0.6, 0 vs -1 -> 0.6: 2.2 / 3.
    assert reward(judge("A > C > B", "A: 8, C: 6, B: 5"), THREE) == paid(2 / 3, 2.2 / 3)


def test_four_candidates_mixed_errors() -> None:
    # FOUR = A 9, B 6, C 6, D 2; predicted A 8, B 6, C 5, D 0.
    # Pairs AB, AC, AD, BD, CD keep their order; BC (tie in truth) does not -> 5/6.
    # Margin errors: AB |3-2|=1 0.6, AC |3-3|=0 1.0, AD |7-8|=1 0.6,
    #                BC |0-1|=1 0.6, BD |4-6|=2 0.2, CD |4-5|=1 0.6 -> 3.6 / 6 = 0.6.
    result = reward(judge("A > B > C > D", "A: 8, B: 6, C: 5, D: 0"), FOUR)
    assert result == paid(5 / 6, 0.6)
    assert result["score"] == pytest.approx(1.4333333333)


def test_four_candidates_with_a_tie_in_the_prediction() -> None:
    # Predicted B 8, A 7, C 4, D 4. Order: AB wrong, AC ok, AD ok, BC wrong (truth tie),
    # BD ok, CD wrong (prediction tie) -> 3/6.
    # Margin errors: AB |3-(-1)|=4, AC |3-3|=0, AD |7-3|=4, BC |0-4|=4, BD |4-4|=0, CD |4-0|=4
    # -> (1 + 1) / 6.
    result = reward(judge("B > A > C = D", "B: 8, A: 7, C: 4, D: 4"), FOUR)
    assert result == paid(0.5, 2 / 6)


def test_eight_candidates_exact() -> None:
    truth = dict(zip("ABCDEFGH", [3, 9, 5, 5, 0, 10, 7, 1], strict=True))
    ranking = "F > B > G > C = D > A > H > E"
    scores = "F: 10, B: 9, G: 7, C: 5, D: 5, A: 3, H: 1, E: 0"
    assert reward(judge(ranking, scores), truth) == paid(1.0, 1.0)


# --- layout ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "solution",
    [
        "Reasoning.\n### Final Ranking:\nA > B\n### Scores:\nA: 7, B: 3",  # no blank lines
        "\n\n  Reasoning.\n\n\n\n### Final Ranking:\n\n\n\nA > B\n\n \n\n### Scores:\n\n\nA: 7, B: 3\n\n",
        "Reasoning.\r\n\r\n### Final Ranking:\r\n\r\nA > B\r\n\r\n### Scores:\r\n\r\nA: 7, B: 3\r\n",
        "Line one.\nLine two.\n\nLine three.\n### Final Ranking:\nA > B\n### Scores:\nA: 7, B: 3",
        "x\nanything\nA > B\nheaders are not checked\nA: 7, B: 3",
        "r\nh\nA > B\nh\n  A: 7 ,  B :3  ",  # spaces around items, labels and numbers
    ],
)
def test_accepted_layouts(solution: str) -> None:
    assert reward(solution) == paid(1.0, 1.0)


@pytest.mark.parametrize(
    "solution",
    [
        "### Final Ranking:\nA > B\n### Scores:\nA: 7, B: 3",  # no reasoning: only 4 lines
        "\n\n   \n### Final Ranking:\n\nA > B\n\n### Scores:\n\nA: 7, B: 3\n",  # blank reasoning
        "A > B\n### Scores:\nA: 7, B: 3",
        "A > B\nA: 7, B: 3",
        "A: 7, B: 3",
        "",
        "   \n\n  ",
        judge("A > B", "A: 7, B: 3") + "Hope this helps.",  # the last line must be the scores
        judge("A > B", "A: 7, B: 3").replace("### Scores:\n\n", ""),  # a line missing
        "Reasoning.\n### Final Ranking: A > B\n### Scores: A: 7, B: 3",  # on the header lines
    ],
)
def test_missing_lines_fail(solution: str) -> None:
    assert reward(solution) == FAIL


# --- the score line ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "scores",
    [
        "A: 7.5, B: 3",
        "A: seven, B: 3",
        "A: 7, B: 3.0",
        "A: 7, , B: 3",  # empty item
        "A: 7, B: 3,",  # trailing comma is an empty item
        "A: , B: 3",
        "A 7, B: 3",  # no colon
        "A: 7: 1, B: 3",
        "A: 7; B: 3",
        "A=7, B=3",
        "A: 7 B: 3",
    ],
)
def test_malformed_score_line_fails(scores: str) -> None:
    assert reward(judge("A > B", scores)) == FAIL


def test_int_semantics_for_scores() -> None:
    # int() accepts a sign and surrounding spaces; spaces around labels are ignored too.
    assert reward(judge("A > B", "A:+7,B:3")) == paid(1.0, 1.0)
    assert reward(judge("A > B", "  A :  7 ,B : 3")) == paid(1.0, 1.0)


@pytest.mark.parametrize(
    ("ranking", "scores", "truth"),
    [
        ("A > B", "A: 7, B: 3", THREE),  # too few labels
        ("A > B > C", "A: 7, B: 3, C: 1", TWO),  # too many labels
        ("A > C", "A: 7, C: 3", TWO),  # unknown label
        ("a > b", "a: 7, b: 3", TWO),  # labels are case-sensitive
        ("A > B", "A: 7, B: 3", {"A": 7}),  # a single candidate cannot be ranked
    ],
)
def test_labels_must_match_the_ground_truth(ranking: str, scores: str, truth: Any) -> None:
    assert reward(judge(ranking, scores), truth) == FAIL


def test_repeated_score_label_keeps_the_last_value_like_the_reference() -> None:
    # {A: 5, B: 3} after the repeat: order right, margin 2 vs 4 -> 0.2.
    assert reward(judge("A > B", "A: 7, B: 3, A: 5")) == paid(1.0, 0.2)
    # Collapsing to one label leaves too few.
    assert reward(judge("A > B", "A: 7, A: 3")) == FAIL


# --- the ranking line ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ranking", "scores"),
    [
        ("B > A", "A: 7, B: 3"),  # disagrees with the model's own scores
        ("A = B", "A: 7, B: 3"),
        ("A > B", "A: 5, B: 5"),  # a score tie must be ranked as a tie
        ("B < A", "A: 7, B: 3"),  # `<` is never accepted
        ("A < B", "A: 3, B: 7"),
        ("A>B", "A: 7, B: 3"),  # too short
        ("A  >  B", "A: 7, B: 3"),  # too long
        ("A > B.", "A: 7, B: 3"),
        ("A > A", "A: 7, B: 3"),  # duplicate label, B missing
        ("A, B", "A: 7, B: 3"),
        ("A >> B", "A: 7, B: 3"),
        ("AB", "A: 7, B: 3"),
    ],
)
def test_bad_ranking_line_fails(ranking: str, scores: str) -> None:
    assert reward(judge(ranking, scores)) == FAIL


@pytest.mark.parametrize(
    ("ranking", "scores"),
    [
        ("A > B > A", "A: 8, B: 5, C: 5"),  # duplicate label
        ("A > B = B", "A: 8, B: 5, C: 5"),
        ("A > B > C", "A: 8, B: 5, C: 5"),  # B = C in the scores
        ("A > B = C = D", "A: 8, B: 5, C: 5"),  # a label that has no score
        ("A = B > C", "A: 8, B: 5, C: 5"),
    ],
)
def test_bad_ranking_line_fails_three_candidates(ranking: str, scores: str) -> None:
    assert reward(judge(ranking, scores), THREE) == FAIL


def test_less_than_is_refused_even_inside_a_label() -> None:
    # With single-letter labels a `<` already breaks the chain; inside a label it is caught
    # only by the explicit no-`<` rule.
    assert reward(judge("< > A", "<: 5, A: 3"), {"<": 5, "A": 3}) == FAIL
    assert reward(judge("Z > A", "Z: 5, A: 3"), {"Z": 5, "A": 3}) == paid(1.0, 1.0)


def test_ranking_spacing_is_checked_by_length_like_the_reference() -> None:
    # The reference compares the length with a ` > `-joined chain, not the exact spacing.
    assert reward(judge("A>  B", "A: 7, B: 3")) == paid(1.0, 1.0)


# --- ground truth ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "truth",
    [
        TWO,
        json.dumps(TWO),
        '{"B": 3, "A": 7}',
        {"A": 7.0, "B": 3.0},
        {"A": np.int64(7), "B": np.int64(3)},
        {"A": 7, "B": 3, "C": None, "D": None},  # parquet struct padding for smaller groups
    ],
)
def test_ground_truth_forms(truth: Any) -> None:
    assert reward(judge("A > B", "A: 6, B: 3"), truth) == paid(1.0, 0.6)


@pytest.mark.parametrize(
    "truth",
    [
        None,
        "",
        "not json",
        "[7, 3]",
        '{"A": "7", "B": 3}',
        {"A": True, "B": 3},
        {"A": float("nan"), "B": 3},
        {"A": float("inf"), "B": 3},
        {},
        {"A": None},
        7,
        [("A", 7), ("B", 3)],
        b'{"A": 7, "B": 3}',
    ],
)
def test_unusable_ground_truth_fails_and_warns(truth: Any) -> None:
    with pytest.warns(UserWarning, match="unusable ground truth"):
        result = compute_score("towerblocks", judge("A > B", "A: 7, B: 3"), truth)
    assert result == FAIL


def test_valid_ground_truth_does_not_warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert compute_score("towerblocks", "garbage", json.dumps(TWO)) == FAIL


# --- robustness --------------------------------------------------------------------------------

GARBAGE: list[Any] = [
    None,
    b"r\nh\nA > B\nh\nA: 7, B: 3",
    42,
    ["A > B"],
    object(),
    "\x00\n\udcff\n>\n=\n:",
    "\n" * 100_000,
    ",:" * 500_000,
    "x" * 2_000_000 + "\n### Final Ranking:\nA > B\n### Scores:\nA: 7, B: 3",
    judge("A > B", "A: " + "9" * 5000 + ", B: 3"),
]


@pytest.mark.parametrize(
    "solution",
    [*GARBAGE, judge("A > B", "A: 7, B: 3"), judge("B > A", "A: 3, B: 5"), judge("A", "A: 1")],
)
@pytest.mark.parametrize("truth", [TWO, json.dumps(TWO), THREE, "{bad", None, object()])
def test_never_raises_and_keys_and_types_are_stable(solution: Any, truth: Any) -> None:
    result = reward(solution, truth)
    assert set(result) == KEYS
    assert result["valid_answer"] in (0, 1) and isinstance(result["valid_answer"], int)
    for key in ("score", "ranking_reward", "score_reward"):
        assert isinstance(result[key], float)
    assert 0.0 <= result["ranking_reward"] <= 1.0 and 0.0 <= result["score_reward"] <= 1.0
    assert result["score"] == result["ranking_reward"] + result["score_reward"]
    if result["valid_answer"] == 0:
        assert result == FAIL


def test_huge_reasoning_with_a_valid_tail_is_still_scored() -> None:
    solution = "x" * 2_000_000 + "\n### Final Ranking:\nA > B\n### Scores:\nA: 7, B: 3"
    assert reward(solution) == paid(1.0, 1.0)


def test_predicted_verdict_is_what_training_would_pay() -> None:
    from judgeflow.rewards.grrm import compute_score, predicted_verdict

    answer = "B reads well.\n### Final Ranking:\nB > A = C\n### Scores:\nA: 4, B: 9, C: 4"
    assert predicted_verdict(answer, "ABC") == (
        "B reads well.", "B > A = C", {"A": 4, "B": 9, "C": 4})  # fmt: skip
    truth = {"A": 5, "B": 8, "C": 5}
    assert compute_score("grrm", answer, truth)["valid_answer"] == 1
    for wrong, labels in [(answer, "AB"), (answer, "ABCD"), (answer.replace("B > A", "A > B"), "ABC"),
                          ("no verdict", "ABC"), (None, "ABC")]:  # fmt: skip
        assert predicted_verdict(wrong, labels) is None, (wrong, labels)
    assert compute_score("grrm", answer.replace("B > A", "A > B"), truth)["valid_answer"] == 0
