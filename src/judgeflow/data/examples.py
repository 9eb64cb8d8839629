"""Typed judge examples: what every reader produces and `prepare` consumes.

Readers turn heterogeneous source rows (OpenJudge, raw RewardBench2) into these records so the
rest of the pipeline never looks at source-specific column names. `Origin` keeps enough to trace
an example back to the exact file, row and (for RewardBench2) chosen/rejected response.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Preference = Literal["A", "B"]


@dataclass(frozen=True)
class Origin:
    """Where an example came from: `row` is the 0-based record index in `file`.

    RewardBench2 rows expand into several examples, so they also record the row `id`, the
    `subset` and which `chosen` / `rejected` list element the response(s) came from.
    """

    file: str
    row: int
    id: str | None = None
    subset: str | None = None
    chosen_index: int | None = None
    rejected_index: int | None = None


@dataclass(frozen=True)
class PointwiseExample:
    """One response to rate with a helpfulness label 0-4."""

    query: str
    response: str
    label: int
    source: str
    origin: Origin


@dataclass(frozen=True)
class PairwiseExample:
    """Two responses to compare; `preference` names the better one."""

    query: str
    response_a: str
    response_b: str
    preference: Preference
    source: str
    origin: Origin

    def swapped(self) -> PairwiseExample:
        """The same comparison with A and B exchanged (so the preference flips)."""
        flipped: Preference = "B" if self.preference == "A" else "A"
        return PairwiseExample(
            query=self.query,
            response_a=self.response_b,
            response_b=self.response_a,
            preference=flipped,
            source=self.source,
            origin=self.origin,
        )


Example = PointwiseExample | PairwiseExample
