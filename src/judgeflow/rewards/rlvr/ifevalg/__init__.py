"""open-instruct's ``ifeval`` verifier (IFEvalG): a response scored on the instructions its row
lists, with partial credit, in our own code.

open-instruct's ``IFEvalVerifier`` (``open_instruct/ground_truth_utils.py`` at e6c3044) reads a
row's label as the stringified list ``[{"instruction_id": [...], "kwargs": [...]}]``, builds
each instruction of ``open_instruct/IFEvalG/instructions_registry.py`` from its keyword
arguments and pays the share of them the response follows (thinking and ``<answer>`` tags
removed). Each of its 54 instruction ids is here, in three modules: :mod:`.original` (IFEval's
own), :mod:`.words` and :mod:`.structure` (the ones IFEvalG added); each checks exactly as
open-instruct's class of the same id (tests: cases worked out by running open-instruct's code).

Where open-instruct draws a missing argument at random (its ``build_description`` makes up
keywords, counts, relations), a score would be a coin toss: judgeflow refuses the row when data
is prepared (:func:`check_label`), and a scorer handed one raises :class:`DrawnAtRandom`.
Where open-instruct raises while checking (a keyword that is not a valid regex, a count that is
not a number), :func:`verify_ifeval` raises too; the verifier sandbox pays 0 and counts it.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable, Mapping
from typing import Any

from judgeflow.rewards.rlvr.ifevalg import original, structure, words
from judgeflow.rewards.rlvr.ifevalg.common import Check, DrawnAtRandom

__all__ = ["INSTRUCTIONS", "Check", "DrawnAtRandom", "check_label", "constraints", "verify_ifeval"]

#: Instruction id (``keywords:existence`` …) → builder: its keyword arguments → the check.
INSTRUCTIONS: dict[str, Callable[..., Check]] = {
    **original.INSTRUCTIONS,
    **words.INSTRUCTIONS,
    **structure.INSTRUCTIONS,
}


def _read(label: Any) -> tuple[Any, Any]:
    """A label's ``instruction_id`` and ``kwargs`` lists, read as open-instruct reads them:
    ``ast.literal_eval`` of the text (a label that is not text raises, as there), its first
    item, a dict or the JSON text of one."""
    if not isinstance(label, str):
        raise TypeError(f"an ifeval label is text (a stringified list), not {type(label).__name__}")
    first = ast.literal_eval(label)[0]
    if isinstance(first, str):
        first = json.loads(first)
    return first["instruction_id"], first["kwargs"]


def _pairs(ids: Any, kwargs_list: Any) -> list[tuple[str, dict[str, Any]]]:
    """Each id with its arguments, ``None`` ones dropped; as ``zip``, the shorter list decides."""
    return [
        (
            instruction_id,
            {} if kwargs is None else {k: v for k, v in kwargs.items() if v is not None},
        )
        for instruction_id, kwargs in zip(ids, kwargs_list, strict=False)
    ]


def constraints(label: Any) -> list[tuple[str, dict[str, Any]]]:
    """A label's instructions, each id with the arguments open-instruct builds it from."""
    return _pairs(*_read(label))


def _build(instruction_id: str, kwargs: Mapping[str, Any]) -> Check:
    try:
        builder = INSTRUCTIONS[instruction_id]
    except KeyError:
        raise KeyError(
            f"no ifeval instruction {instruction_id!r} (open-instruct's IFEvalG has "
            f"{len(INSTRUCTIONS)}; see docs/reference/rlvr-rewards.md)"
        ) from None
    return builder(**kwargs)


def check_label(label: Any) -> int:
    """Read a label and build every instruction it lists, as preparation does before training:
    raises on anything open-instruct could not score deterministically (an unreadable label, an
    unknown id, an argument it would refuse or draw at random). Returns how many it lists."""
    ids, kwargs_list = _read(label)
    if len(ids) != len(kwargs_list):
        raise ValueError(
            f"{len(ids)} instruction ids but {len(kwargs_list)} kwargs: open-instruct would score "
            f"the first {min(len(ids), len(kwargs_list))} only"
        )
    pairs = _pairs(ids, kwargs_list)
    for instruction_id, kwargs in pairs:
        _build(instruction_id, kwargs)
    return len(pairs)


def verify_ifeval(prediction: str, label: Any) -> float:
    """The share of the label's instructions the response follows, 0 to 1 (open-instruct's
    ``IFEvalVerifier``): an empty response, or one empty once its thinking is removed, scores 0."""
    from judgeflow.rewards.rlvr.if_functions import remove_thinking_section

    ids, kwargs_list = _read(label)
    answer = remove_thinking_section(prediction)
    if not prediction or not answer:
        return 0.0
    pairs = _pairs(ids, kwargs_list)
    followed = [
        bool(prediction.strip()) and bool(_build(instruction_id, kwargs)(answer))
        for instruction_id, kwargs in pairs
    ]
    return sum(followed) / max(len(followed), 1)
