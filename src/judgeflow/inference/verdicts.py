"""A trained judge's verdicts on rows without labels.

The prompt is the template the judge trained on (`judgeflow.data.templates`) and the reply is
parsed by the reward's own parser (`judgeflow.rewards`), so a verdict counts as `valid` exactly
when training would have paid it. Pairwise rows are judged in both orders: `better` is the
verdict on the order given, `consistent` says whether the swapped order named the same response.
A GRRM row is a source text and its translations (labelled A, B, … in the order given): the
verdict is the ranking line and a score per translation, in that order.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from judgeflow.data.grrm_template import (
    LABELS,
    MAX_CANDIDATES,
    MIN_CANDIDATES,
    language_name,
    render_grrm_prompt,
)
from judgeflow.data.templates import render_pairwise, render_pointwise
from judgeflow.engines.generate import Generator, Messages
from judgeflow.modes import Mode
from judgeflow.rewards.grrm import predicted_verdict
from judgeflow.rewards.pairwise import predicted_choice
from judgeflow.rewards.pointwise import predicted_score

__all__ = ["INPUT_COLUMNS", "judge", "judge_prompts", "parse_reply", "translations"]

#: The columns a row needs, per mode.
INPUT_COLUMNS: dict[str, tuple[str, ...]] = {
    "pointwise": ("query", "response"),
    "pairwise": ("query", "response_a", "response_b"),
    "grrm": ("source", "translations", "source_lang", "target_lang"),
}
_THINK = re.compile(r"<think>(.*?)</think>", re.DOTALL)
_LETTERS = ("A", "B")


def _text(row: Mapping[str, Any], position: int, column: str) -> str:
    value = row.get(column)
    if not isinstance(value, str) or not value.strip():
        got = "missing" if value is None else f"got {type(value).__name__}: {str(value)[:40]!r}"
        raise ValueError(f"row {position}: field {column!r} must be a non-empty string ({got})")
    return value


def translations(row: Mapping[str, Any], position: int) -> list[str]:
    """A GRRM row's translations: a list of 2 to 8 non-empty strings."""
    value: Any = row.get("translations")
    if hasattr(value, "tolist"):  # a numpy array, as pandas holds a list cell
        value = value.tolist()
    if not isinstance(value, list | tuple) or not MIN_CANDIDATES <= len(value) <= MAX_CANDIDATES:
        got = type(value).__name__ if not isinstance(value, list | tuple) else len(value)
        raise ValueError(
            f"row {position}: field 'translations' must be a list of "
            f"{MIN_CANDIDATES} to {MAX_CANDIDATES} strings (got {got})"
        )
    return [_text({"translations": t}, position, "translations") for t in value]


def _language(row: Mapping[str, Any], position: int, column: str) -> str:
    try:
        return language_name(_text(row, position, column))
    except ValueError as exc:
        raise ValueError(f"row {position}: field {column!r}: {exc}") from None


def judge_prompts(mode: Mode, rows: Sequence[Mapping[str, Any]]) -> list[Messages]:
    """The chat prompt of each row; pairwise rows give two, the order given and the swapped."""
    if mode not in INPUT_COLUMNS:
        raise ValueError(f"mode {mode!r}: verdicts come from pointwise, pairwise or grrm judges")
    prompts: list[Messages] = []
    for position, row in enumerate(rows):
        if mode == "grrm":
            content = [
                render_grrm_prompt(
                    _language(row, position, "source_lang"),
                    _language(row, position, "target_lang"),
                    _text(row, position, "source"),
                    translations(row, position),
                )
            ]
            prompts += [[{"role": "user", "content": text}] for text in content]
            continue
        query = _text(row, position, "query")
        if mode == "pointwise":
            content = [render_pointwise(query, _text(row, position, "response"))]
        else:
            a, b = _text(row, position, "response_a"), _text(row, position, "response_b")
            content = [render_pairwise(query, a, b), render_pairwise(query, b, a)]
        prompts += [[{"role": "user", "content": text}] for text in content]
    return prompts


def parse_reply(mode: Mode, reply: str, *, candidates: int = 0) -> dict[str, Any]:
    """`score` (0-4), `better` (A|B) or GRRM's `ranking` and `scores` (one per translation, in
    order; `candidates` of them), None when the format failed; `reasoning`; `valid`."""
    if mode == "grrm":
        verdict = predicted_verdict(reply, LABELS[:candidates])
        if verdict is None:
            return {"ranking": None, "scores": None, "reasoning": reply.strip(), "valid": False}
        analysis, ranking, scores = verdict
        return {
            "ranking": ranking,
            "scores": [scores[label] for label in LABELS[:candidates]],
            "reasoning": analysis,
            "valid": True,
        }
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
    mode: Mode,
    rows: Sequence[Mapping[str, Any]],
    *,
    max_new_tokens: int,
) -> list[dict[str, Any]]:
    """One verdict per row, greedy. Pairwise verdicts also carry `consistent` (both orders valid
    and naming the same response) and `valid` only when both orders were well-formed."""
    replies = generator.generate(judge_prompts(mode, rows), max_new_tokens=max_new_tokens)
    if mode == "grrm":
        return [
            parse_reply(mode, reply, candidates=len(translations(row, position)))
            for position, (row, reply) in enumerate(zip(rows, replies, strict=True))
        ]
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
