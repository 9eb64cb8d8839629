"""GRRM reward: ranking accuracy plus score agreement for a group of translations (0 to 2).

The judge ends its answer with four lines: a ranking header, a ranking such as `B > A = C`,
a score header and `B: 8, A: 5, C: 5`. Semantics follow the GRRM reference
(`ranking_score_reward_fn` in DoubleVII/verl, reward_utils/ranking_score_reward.py), because the
GRRM recipe's RLVR stage trains against that function. verl loads this file by path inside its reward
workers, so it imports only the standard library and never raises: any unexpected input scores
0 on every key.
"""

from __future__ import annotations

import json
import math
import numbers
import warnings
from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import Any

_TAIL_LINES = 4  # ranking header, ranking, score header, scores; headers are not checked
_SEPARATOR_WIDTH = len(" > ")
# |true margin - predicted margin| -> reward for that pair; larger errors pay 0.
_PAIR_ERROR_REWARD: dict[float, float] = {0: 1.0, 1: 0.6, 2: 0.2}
_FAILURE: dict[str, float | int] = {
    "score": 0.0,
    "valid_answer": 0,
    "ranking_reward": 0.0,
    "score_reward": 0.0,
}

Scores = Mapping[str, float]  # label -> score; ints from the judge, ints or floats from data


def _split_tail(text: str) -> tuple[str, str, str] | None:
    """(reasoning, ranking line, score line), or None when there are fewer lines than needed.

    Each split strips both sides, so blank lines between the sections vanish, and the reasoning
    that is left is never empty.
    """
    tail: list[str] = []
    rest = text.strip()
    for _ in range(_TAIL_LINES):
        rest, newline, last = rest.rpartition("\n")
        if not newline:
            return None
        rest = rest.strip()
        tail.append(last.strip())
    score_line, _, ranking_line, _ = tail
    return rest, ranking_line, score_line


def _parse_scores(line: str) -> dict[str, int] | None:
    """`L: int` items joined by commas; `int()` decides what a number is; a repeated label keeps
    its last score (as the reference does)."""
    scores: dict[str, int] = {}
    for item in line.split(","):
        parts = item.split(":")
        if len(parts) != 2:
            return None
        try:
            scores[parts[0].strip()] = int(parts[1].strip())
        except ValueError:
            return None
    return scores


def _relation(a: float, b: float) -> int:
    return (a > b) - (a < b)


def _ranking_agrees(line: str, scores: Scores) -> bool:
    """Whether the ranking line is a well-formed chain that orders labels as `scores` does.

    The reference checks the length of a single-letter chain (`A > B = C`), not the spacing,
    then that each label occurs once and every pair keeps its relation (ties in any order).
    """
    count = len(scores)
    if count < 2 or "<" in line or len(line) != count + (count - 1) * _SEPARATOR_WIDTH:
        return False
    tiers = [{item.strip() for item in tier.split("=")} for tier in line.split(">")]
    if sum(len(tier) for tier in tiers) != count:
        return False
    if any(line.count(label) != 1 for label in scores):
        return False
    position = {label: index for index, tier in enumerate(tiers) for label in tier}
    if not position.keys() <= scores.keys():
        return False
    return all(
        _relation(position[y], position[x]) == _relation(scores[x], scores[y])
        for x, y in combinations(position, 2)
    )


def _ranking_reward(pred: Scores, truth: Scores) -> float:
    """Share of label pairs whose order (>, <, =) is the true one; a one-sided tie is wrong."""
    pairs = list(combinations(sorted(pred), 2))
    hits = sum(_relation(pred[x], pred[y]) == _relation(truth[x], truth[y]) for x, y in pairs)
    return hits / len(pairs)


def _score_reward(pred: Scores, truth: Scores) -> float:
    """Mean over label pairs of how well the predicted margin matches the true one.

    Margins, not raw scores, so shifting every score by a constant loses nothing. Pairs are
    summed in the ground truth's order, as in the reference, so the float result is identical.
    """
    pairs = list(combinations(truth, 2))
    total = sum(
        _PAIR_ERROR_REWARD.get(abs((truth[x] - truth[y]) - (pred[x] - pred[y])), 0.0)
        for x, y in pairs
    )
    return total / len(pairs)


def _parse_ground_truth(ground_truth: Any) -> dict[str, float] | None:
    """`{label: score}` as a dict or its JSON; None-valued labels (parquet struct padding) are
    absent, any other non-finite or non-numeric score makes it unusable."""
    if isinstance(ground_truth, str):
        ground_truth = json.loads(ground_truth)
    if not isinstance(ground_truth, dict):
        return None
    truth: dict[str, float] = {}
    for label, score in ground_truth.items():
        if score is None:
            continue
        if isinstance(score, bool) or not isinstance(score, numbers.Real):
            return None
        if not isinstance(label, str) or not math.isfinite(score):
            return None
        truth[label] = int(score) if isinstance(score, numbers.Integral) else float(score)
    return truth or None


def _rewards(solution_str: Any, truth: Scores) -> tuple[float, float] | None:
    """(ranking_reward, score_reward), or None on any format failure."""
    if not isinstance(solution_str, str):
        return None
    parts = _split_tail(solution_str)
    if parts is None:
        return None
    _, ranking_line, score_line = parts  # the reasoning is non-empty by construction
    pred = _parse_scores(score_line)
    if pred is None or not _ranking_agrees(ranking_line, pred):
        return None
    if len(pred) != len(truth) or not pred.keys() <= truth.keys():
        return None
    return _ranking_reward(pred, truth), _score_reward(pred, truth)


def predicted_verdict(
    solution_str: Any, labels: Sequence[str]
) -> tuple[str, str, dict[str, int]] | None:
    """(reasoning, ranking line, `{label: score}`) of an answer that ranks and scores exactly
    `labels` as training would pay it; None on a format failure."""
    try:
        parts = _split_tail(solution_str) if isinstance(solution_str, str) else None
        if parts is None:
            return None
        reasoning, ranking_line, score_line = parts
        pred = _parse_scores(score_line)
        if pred is None or set(pred) != set(labels) or not _ranking_agrees(ranking_line, pred):
            return None
        return reasoning, ranking_line, pred
    except Exception:
        return None


def compute_score(
    data_source: Any,
    solution_str: Any,
    ground_truth: Any,
    extra_info: Any = None,
    **kwargs: Any,
) -> dict[str, float | int]:
    """verl reward: `score` = `ranking_reward` + `score_reward` (each 0-1), `valid_answer` 1/0.

    Any failure, format or ground truth, sets every key to 0.
    """
    try:
        truth = _parse_ground_truth(ground_truth)
    except Exception:
        truth = None
    if truth is None:  # one line per worker (warnings dedupes), not one per sample
        kind = type(ground_truth).__name__
        warnings.warn(f"grrm reward: unusable ground truth ({kind}); scored 0", stacklevel=2)
        return dict(_FAILURE)
    try:
        rewards = _rewards(solution_str, truth)
    except Exception:
        rewards = None
    if rewards is None:
        return dict(_FAILURE)
    ranking, score = rewards
    return {
        "score": ranking + score,
        "valid_answer": 1,
        "ranking_reward": ranking,
        "score_reward": score,
    }
