"""What every IFEvalG instruction module shares: the check's type, the relation comparison, and
the refusal of an argument open-instruct would draw at random."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["COMPARISON_RELATION", "Check", "DrawnAtRandom", "Draws", "compares", "drawn_at_random"]

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


class Draws:
    """The arguments open-instruct would make up for one build, the first one remembered.

    Its ``build_description`` goes on after a draw, so a later argument can still make it raise
    (a relation it does not know, a count it cannot compare with 0); :meth:`settle` refuses the
    draw only once every argument has been looked at, so those raise here too."""

    def __init__(self, instruction_id: str) -> None:
        self.instruction_id = instruction_id
        self.first: DrawnAtRandom | None = None

    def note(self, argument: str, given: Any = None) -> None:
        if self.first is None:
            self.first = drawn_at_random(self.instruction_id, argument, given)

    def count(self, argument: str, given: Any) -> Any:
        """A count open-instruct replaces when missing or negative (``TypeError`` where it
        cannot be compared with 0, a string say; ``0`` and floats pass)."""
        if given is None or given < 0:
            self.note(argument, given)
        return given

    def relation(self, argument: str, given: Any) -> Any:
        """``"less than"`` or ``"at least"``; another value raises ``ValueError``."""
        if given is None:
            self.note(argument, given)
        elif given not in COMPARISON_RELATION:
            raise ValueError(
                f"{self.instruction_id}: {argument} must be one of {COMPARISON_RELATION}, "
                f"not {given!r}"
            )
        return given

    def settle(self) -> None:
        if self.first is not None:
            raise self.first


def compares(actual: Any, relation: str, threshold: Any) -> bool:
    """``actual < threshold`` for "less than", else ``actual >= threshold`` (the relation is
    checked when the instruction is built: :meth:`Draws.relation`)."""
    if relation == COMPARISON_RELATION[0]:
        return bool(actual < threshold)
    return bool(actual >= threshold)
