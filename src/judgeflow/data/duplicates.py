"""Duplicate prompts in prepared data, for the data report: within a split, and across splits.

Evaluation refuses to score rows whose prompt a model trained on; the report shows beforehand
how many there are. Callers pass one prompt hash (`prompt_hashes`) per *unit* of a split: a row,
an A/B pair of a both-orders split, or a GRRM group with all its augmented rows. So a pair's
swapped twin or a group's other orderings never count as duplicates of themselves.

Report layout (`prompt_duplicates`), every split present even when it has none:

    {"listed_limit": 10,
     "within": {split: {"unit": "row", "units": 120, "count": 2, "prompts": 1,
                        "listed": [{"prompt_hash": h, "n": 2, "occurrences": [where, …]}]}},
     "across": {split: {"reference": "train", "unit": "pair", "units": 30, "count": 1,
                        "prompts": 1, "listed": [{"prompt_hash": h, "n": 1, "occurrences": […],
                                                  "reference_n": 1,
                                                  "reference_occurrences": […]}]}}}

`count` is the number of units of the split involved (within: units whose hash occurs more than
once in the split; across: units whose hash also occurs in the reference split), `prompts` the
number of distinct hashes behind them. `listed` holds the first `listed_limit` hashes in order of
first occurrence, each with up to `listed_limit` occurrences (`where`: file and row where known).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["LISTED_DUPLICATES", "PromptUnits", "prompt_duplicates"]

#: How many duplicated prompts, and occurrences of each, the report lists (all are counted).
LISTED_DUPLICATES = 10


@dataclass(frozen=True)
class PromptUnits:
    """One split as prompt hashes, one per unit, in split order.

    `where(i)` says where unit `i` came from (e.g. `{"file": …, "row": …}`); it is called only
    for the few listed occurrences, so a caller can keep compact columns instead of dicts.
    """

    unit: str  # "row", "pair" or "group": what one hash stands for
    hashes: Sequence[str]
    where: Callable[[int], dict[str, Any]] | None = None

    def locate(self, position: int) -> dict[str, Any]:
        return self.where(position) if self.where is not None else {"unit": position}


def _positions(hashes: Sequence[str], wanted: Iterable[str], limit: int) -> dict[str, list[int]]:
    """The first `limit` positions of each wanted hash (one pass; the full counts come from a
    `Counter`, so a large split with few duplicates costs little)."""
    found: dict[str, list[int]] = {h: [] for h in wanted}
    if found:
        for position, value in enumerate(hashes):
            places = found.get(value)
            if places is not None and len(places) < limit:
                places.append(position)
    return found


def _within(units: PromptUnits, limit: int) -> dict[str, Any]:
    counts = Counter(units.hashes)  # in order of first occurrence
    repeated = {h: n for h, n in counts.items() if n > 1}
    listed = list(repeated)[:limit]
    where = _positions(units.hashes, listed, limit)
    return {
        "unit": units.unit,
        "units": len(units.hashes),
        "count": sum(repeated.values()),
        "prompts": len(repeated),
        "listed": [
            {
                "prompt_hash": h,
                "n": repeated[h],
                "occurrences": [units.locate(i) for i in where[h]],
            }
            for h in listed
        ],
    }


def _across(units: PromptUnits, reference: PromptUnits, name: str, limit: int) -> dict[str, Any]:
    theirs = Counter(reference.hashes)
    shared = {h: n for h, n in Counter(units.hashes).items() if h in theirs}
    listed = list(shared)[:limit]
    ours, refs = (
        _positions(units.hashes, listed, limit),
        _positions(reference.hashes, listed, limit),
    )
    return {
        "reference": name,
        "unit": units.unit,
        "units": len(units.hashes),
        "count": sum(shared.values()),
        "prompts": len(shared),
        "listed": [
            {
                "prompt_hash": h,
                "n": shared[h],
                "occurrences": [units.locate(i) for i in ours[h]],
                "reference_n": theirs[h],
                "reference_occurrences": [reference.locate(i) for i in refs[h]],
            }
            for h in listed
        ],
    }


def prompt_duplicates(
    splits: Mapping[str, PromptUnits],
    *,
    reference: str = "train",
    listed: int = LISTED_DUPLICATES,
) -> dict[str, Any]:
    """Duplicates within every split, and of every other split against `reference` (when that
    split is given); see the module docstring for the layout."""
    ref = splits.get(reference)
    return {
        "listed_limit": listed,
        "within": {name: _within(units, listed) for name, units in splits.items()},
        "across": {
            name: _across(units, ref, reference, listed)
            for name, units in splits.items()
            if ref is not None and name != reference
        },
    }
