"""Pointwise judge reward: a `<score>0-4</score>` verdict against a helpfulness label.

verl loads this file by path inside its reward workers, so it imports only the standard library
and never raises: any unexpected input is a format failure. Every call returns the same keys,
because verl turns them into per-sample arrays that must line up.
"""

from __future__ import annotations

import json
import numbers
import re
import warnings
from collections.abc import Callable
from typing import Any

_THINK_OPEN, _THINK_CLOSE = "<think>", "</think>"
_TAG_OPEN, _TAG_CLOSE = "<score>", "</score>"
_ONE_DIGIT = re.compile(r"\s*([0-4])\s*")  # one integer 0-4, whitespace allowed, nothing else
_MAX_LABEL = 4


def _verdict(text: str) -> str | None:
    """The part after the last `</think>`; None when a `<think>` is left open (truncated)."""
    verdict = text.rpartition(_THINK_CLOSE)[2]  # the whole text when there is no `</think>`
    return None if _THINK_OPEN in verdict else verdict


def predicted_score(solution_str: Any) -> int | None:
    """The integer in the single `<score>` tag of the verdict, or None if not well-formed."""
    if not isinstance(solution_str, str):
        return None
    verdict = _verdict(solution_str)
    if verdict is None or verdict.count(_TAG_OPEN) != 1 or verdict.count(_TAG_CLOSE) != 1:
        return None
    body, closed, _ = verdict.partition(_TAG_OPEN)[2].partition(_TAG_CLOSE)
    match = _ONE_DIGIT.fullmatch(body) if closed else None
    return int(match.group(1)) if match else None


def _true_label(ground_truth: Any) -> int | None:
    """The 0-4 label from `{"helpfulness": n, ...}` (or its JSON), an int, or a digit string."""
    if isinstance(ground_truth, str) and ground_truth.lstrip().startswith("{"):
        try:
            ground_truth = json.loads(ground_truth)
        except ValueError:
            return None
    if isinstance(ground_truth, dict):
        ground_truth = ground_truth.get("helpfulness")
    if isinstance(ground_truth, str):
        match = _ONE_DIGIT.fullmatch(ground_truth)
        return int(match.group(1)) if match else None
    if isinstance(ground_truth, bool) or not isinstance(ground_truth, numbers.Real):
        return None
    value = float(ground_truth)  # numpy ints and integral floats from parquet are fine
    return int(value) if value.is_integer() and 0 <= value <= _MAX_LABEL else None


def _safely(parse: Callable[[Any], int | None], value: Any) -> int | None:
    """Run a parser so that a surprising input (a NaN label, an odd subclass) is just None."""
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
    """verl reward: `score` in [0, 1], `valid_answer` 1/0, `pred` 0-4 (-1 when not well-formed).

    Labels 0 and 1 pay only an exact match; 2-4 pay `1 - |pred - true| / 4`. A format failure
    is never paid, even when the label is 0. An unusable ground truth is a data bug: it pays
    nothing, warns, and keeps `pred`, so `valid_answer == 0` with `pred >= 0` points at the data.
    """
    pred, label = _safely(predicted_score, solution_str), _safely(_true_label, ground_truth)
    if label is None:  # one line per worker (warnings dedupes), not one per sample
        kind = type(ground_truth).__name__
        warnings.warn(f"pointwise reward: unusable ground truth ({kind}); scored 0", stacklevel=2)
    if pred is None or label is None:
        return {"score": 0.0, "valid_answer": 0, "pred": -1 if pred is None else pred}
    # Labels 0 and 1 are judged strictly (exact match); higher ones earn partial credit.
    score = float(pred == label) if label <= 1 else 1.0 - abs(pred - label) / _MAX_LABEL
    return {"score": score, "valid_answer": 1, "pred": pred}
