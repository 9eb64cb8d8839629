"""Pairwise judge reward: a `<better>A or B</better>` verdict against the true preference.

verl loads this file by path inside its reward workers, so it imports only the standard library
and never raises: any unexpected input is a format failure. Every call returns the same keys,
because verl turns them into per-sample arrays that must line up.
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Callable
from typing import Any

_THINK_OPEN, _THINK_CLOSE = "<think>", "</think>"
_TAG_OPEN, _TAG_CLOSE = "<better>", "</better>"
_ONE_LETTER = re.compile(r"\s*([AB])\s*", re.IGNORECASE)  # A or B, whitespace, nothing else
_INDEX = {"A": 0, "B": 1}


def _verdict(text: str) -> str | None:
    """The part after the last `</think>`; None when a `<think>` is left open (truncated)."""
    verdict = text.rpartition(_THINK_CLOSE)[2]  # the whole text when there is no `</think>`
    return None if _THINK_OPEN in verdict else verdict


def _letter_index(text: str) -> int | None:
    """0 for A, 1 for B, None for anything else."""
    match = _ONE_LETTER.fullmatch(text)
    return _INDEX[match.group(1).upper()] if match else None


def predicted_choice(solution_str: Any) -> int | None:
    """The choice in the single `<better>` tag of the verdict, or None if not well-formed."""
    if not isinstance(solution_str, str):
        return None
    verdict = _verdict(solution_str)
    if verdict is None or verdict.count(_TAG_OPEN) != 1 or verdict.count(_TAG_CLOSE) != 1:
        return None
    body, closed, _ = verdict.partition(_TAG_OPEN)[2].partition(_TAG_CLOSE)
    return _letter_index(body) if closed else None


def _true_choice(ground_truth: Any) -> int | None:
    """The preferred response from `{"preference": "A"|"B", ...}` (or its JSON) or the letter."""
    if isinstance(ground_truth, str) and ground_truth.lstrip().startswith("{"):
        try:
            ground_truth = json.loads(ground_truth)
        except ValueError:
            return None
    if isinstance(ground_truth, dict):
        ground_truth = ground_truth.get("preference")
    return _letter_index(ground_truth) if isinstance(ground_truth, str) else None


def _safely(parse: Callable[[Any], int | None], value: Any) -> int | None:
    """Run a parser so that a surprising input (an odd subclass, say) is just None."""
    try:
        return parse(value)
    except Exception:
        return None


def compute_score(
    data_source: Any,
    solution_str: Any,
    ground_truth: Any,
    extra_info: Any = None,
    **kwargs: Any,
) -> dict[str, float | int]:
    """verl reward: `score` 1.0/0.0, `valid_answer` 1/0, `pred` 0 for A, 1 for B, -1 for none.

    A format failure is never paid. An unusable ground truth is a data bug: it pays nothing,
    warns, and keeps `pred`, so `valid_answer == 0` with `pred >= 0` points at the data.
    """
    pred, truth = _safely(predicted_choice, solution_str), _safely(_true_choice, ground_truth)
    if truth is None:  # one line per worker (warnings dedupes), not one per sample
        kind = type(ground_truth).__name__
        warnings.warn(f"pairwise reward: unusable ground truth ({kind}); scored 0", stacklevel=2)
    if pred is None or truth is None:
        return {"score": 0.0, "valid_answer": 0, "pred": -1 if pred is None else pred}
    return {"score": 1.0 if pred == truth else 0.0, "valid_answer": 1, "pred": pred}
