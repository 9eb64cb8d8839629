"""What every IFEvalG instruction module shares: the check's type, and the refusal of an
argument open-instruct would draw at random."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["COMPARISON_RELATION", "Check", "DrawnAtRandom", "drawn_at_random"]

#: A built instruction: the response (thinking removed) → followed or not.
Check = Callable[[str], bool]

#: The relations IFEvalG's counting instructions take, in its order.
COMPARISON_RELATION = ("less than", "at least")


class DrawnAtRandom(ValueError):
    """A label leaves out an argument that open-instruct's instruction would draw at random."""


def drawn_at_random(instruction_id: str, argument: str, given: Any = None) -> DrawnAtRandom:
    """The error to raise where open-instruct's ``build_description`` would make the argument
    up (it is missing, or a value it replaces, such as an empty list or a negative count)."""
    what = "missing" if given is None else f"{given!r}"
    return DrawnAtRandom(
        f"{instruction_id}: argument {argument!r} is {what}, and open-instruct would draw it at "
        "random, so the score would be a coin toss; give it in the row's kwargs"
    )
