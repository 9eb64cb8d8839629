"""Typed judge examples: what every reader produces and `prepare` consumes.

Readers turn heterogeneous source rows (OpenJudge, raw RewardBench2) into these records so the
rest of the pipeline never looks at source-specific column names. `Origin` keeps enough to trace
an example back to the exact file, row and (for RewardBench2) chosen/rejected response.
`prepare` reads them a batch at a time as columns (`ExampleBatch`), the same fields.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Preference = Literal["A", "B"]
Turns = tuple[tuple[str, str], ...]


def with_system_prompt(turns: Turns, system_prompt: str | None) -> Turns:
    """`turns` (role, content) with `system_prompt` as their only system turn, first; unchanged
    without one (`data.system_prompt`, applied to a policy's RLVR and SFT rows alike)."""
    if system_prompt is None:
        return turns
    if not system_prompt.strip():  # LLaMA-Factory would use its template's default for it
        raise ValueError("an empty system prompt")
    return (("system", system_prompt), *(t for t in turns if t[0] != "system"))


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


@dataclass
class ExampleBatch:
    """Consecutive examples of one file as columns: one list per field, one entry per example.

    Pointwise examples fill `responses` and leave `responses_b` empty; pairwise examples fill
    both (A, then B). `labels` holds helpfulness labels or preferences.
    """

    file: str
    pairwise: bool
    queries: list[str] = field(default_factory=list)
    responses: list[str] = field(default_factory=list)
    responses_b: list[str] = field(default_factory=list)
    labels: list[Any] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)
    ids: list[str | None] = field(default_factory=list)
    subsets: list[str | None] = field(default_factory=list)
    chosen_index: list[int | None] = field(default_factory=list)
    rejected_index: list[int | None] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.queries)

    def examples(self) -> list[Example]:
        """The batch as `Example` records."""
        origins = [
            Origin(self.file, row, row_id, subset, chosen, rejected)
            for row, row_id, subset, chosen, rejected in zip(
                self.rows, self.ids, self.subsets, self.chosen_index, self.rejected_index,
                strict=True,
            )
        ]  # fmt: skip
        if self.pairwise:
            return [
                PairwiseExample(query, a, b, label, source, origin)
                for query, a, b, label, source, origin in zip(
                    self.queries, self.responses, self.responses_b, self.labels, self.sources,
                    origins, strict=True,
                )
            ]  # fmt: skip
        return [
            PointwiseExample(query, response, label, source, origin)
            for query, response, label, source, origin in zip(
                self.queries, self.responses, self.labels, self.sources, origins, strict=True
            )
        ]
