"""A trained judge's verdicts on rows without labels.

The prompt is the template the judge trained on (`judgeflow.data.templates`) and the reply is
parsed by the reward's own parser (`judgeflow.rewards`), so a verdict counts as `valid` exactly
when training would have paid it. Pairwise rows are judged in both orders: `better` is the
verdict on the order given, `consistent` says whether the swapped order named the same response.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from judgeflow.data.templates import render_pairwise, render_pointwise
from judgeflow.engines.generate import Generator, Messages
from judgeflow.modes import JudgeMode
from judgeflow.rewards.pairwise import predicted_choice
from judgeflow.rewards.pointwise import predicted_score

__all__ = ["INPUT_COLUMNS", "judge", "judge_prompts", "parse_reply"]

#: The columns a row needs, per mode.
INPUT_COLUMNS: dict[str, tuple[str, ...]] = {
    "pointwise": ("query", "response"),
    "pairwise": ("query", "response_a", "response_b"),
}
_THINK = re.compile(r"<think>(.*?)</think>", re.DOTALL)
_LETTERS = ("A", "B")


def _text(row: Mapping[str, Any], position: int, column: str) -> str:
    value = row.get(column)
    if not isinstance(value, str) or not value.strip():
        got = "missing" if value is None else f"got {type(value).__name__}: {str(value)[:40]!r}"
        raise ValueError(f"row {position}: field {column!r} must be a non-empty string ({got})")
    return value


def judge_prompts(mode: JudgeMode, rows: Sequence[Mapping[str, Any]]) -> list[Messages]:
    """The chat prompt of each row; pairwise rows give two, the order given and the swapped."""
    if mode not in INPUT_COLUMNS:
        raise ValueError(f"mode {mode!r}: a judge's verdicts need pointwise or pairwise")
    prompts: list[Messages] = []
    for position, row in enumerate(rows):
        query = _text(row, position, "query")
        if mode == "pointwise":
            content = [render_pointwise(query, _text(row, position, "response"))]
        else:
            a, b = _text(row, position, "response_a"), _text(row, position, "response_b")
            content = [render_pairwise(query, a, b), render_pairwise(query, b, a)]
        prompts += [[{"role": "user", "content": text}] for text in content]
    return prompts


def parse_reply(mode: JudgeMode, reply: str) -> dict[str, Any]:
    """`score` (0-4) or `better` (A|B), None when the format failed; `reasoning`; `valid`."""
    thought = _THINK.search(reply)
    reasoning = thought.group(1).strip() if thought else ""
    if mode == "pointwise":
        score = predicted_score(reply)
        return {"score": score, "reasoning": reasoning, "valid": score is not None}
    choice = predicted_choice(reply)
    better = None if choice is None else _LETTERS[choice]
    return {"better": better, "reasoning": reasoning, "valid": better is not None}


def judge(
    generator: Generator,
    mode: JudgeMode,
    rows: Sequence[Mapping[str, Any]],
    *,
    max_new_tokens: int,
) -> list[dict[str, Any]]:
    """One verdict per row, greedy. Pairwise verdicts also carry `consistent` (both orders valid
    and naming the same response) and `valid` only when both orders were well-formed."""
    replies = generator.generate(judge_prompts(mode, rows), max_new_tokens=max_new_tokens)
    if mode == "pointwise":
        return [parse_reply(mode, reply) for reply in replies]
    verdicts = []
    for given, swapped in zip(replies[::2], replies[1::2], strict=True):
        first, second = parse_reply(mode, given), parse_reply(mode, swapped)
        flipped = {"A": "B", "B": "A"}.get(second["better"] or "")
        verdicts.append(
            {
                **first,
                "consistent": first["valid"] and second["valid"] and first["better"] == flipped,
                "valid": first["valid"] and second["valid"],
            }
        )
    return verdicts
