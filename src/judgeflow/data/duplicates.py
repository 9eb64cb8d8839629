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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["LISTED_DUPLICATES", "PromptUnits", "hash_array", "prompt_duplicates"]

#: How many duplicated prompts, and occurrences of each, the report lists (all are counted).
LISTED_DUPLICATES = 10


@dataclass(frozen=True)
class PromptUnits:
    """One split as prompt hashes, one per unit, in split order.

    `hashes` is a list of strings, or (compact, for large splits) a numpy array of byte strings
    (`S` dtype, the hashes UTF-8 encoded). `where(i)` says where unit `i` came from (e.g.
    `{"file": …, "row": …}`); it is called only for the few listed occurrences, so a caller can
    keep compact columns instead of dicts.
    """

    unit: str  # "row", "pair" or "group": what one hash stands for
    hashes: Sequence[str] | np.ndarray
    where: Callable[[int], dict[str, Any]] | None = None

    def locate(self, position: int) -> dict[str, Any]:
        return self.where(position) if self.where is not None else {"unit": position}


def hash_array(hashes: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Arrow strings (prompt hashes) as the compact form `PromptUnits` takes: copied straight
    from Arrow's buffer when they all have one length, as hashes do."""
    if len(hashes) == 0:
        return np.array([], dtype=bytes)
    binary = hashes.cast(pa.binary())
    if isinstance(binary, pa.ChunkedArray):
        binary = binary.combine_chunks()
    width = pc.max(pc.binary_length(binary)).as_py()
    try:
        fixed = binary.cast(pa.binary(width)) if width else None
    except pa.ArrowInvalid:  # lengths differ
        fixed = None
    if fixed is None:
        return np.array(binary.to_pylist(), dtype=bytes)
    data = fixed.buffers()[1]
    return np.frombuffer(data, f"S{width}", len(fixed), fixed.offset * width).copy()


def _keys(hashes: Sequence[str] | np.ndarray) -> np.ndarray:
    """The hashes as a numpy array of byte strings, which the counting below sorts (a million
    hashes cost a few MB and a sort, not a dict of Python strings)."""
    if isinstance(hashes, np.ndarray):
        return hashes
    return np.array([h.encode("utf-8") for h in hashes], dtype=bytes)


#: Keys looked up at a time when scanning a split in order (bounds the temporary arrays).
_CHUNK = 1 << 16


def _repeated(keys: np.ndarray) -> np.ndarray:
    """The keys that occur more than once, distinct and sorted (a sorted copy and two flags per
    key: no index or count per key, which would cost several times the keys themselves)."""
    ordered = np.sort(keys)
    same = ordered[1:] == ordered[:-1]  # a run of n equal keys gives n - 1 in a row
    starts = same.copy()
    starts[1:] &= ~same[:-1]
    return ordered[1:][starts]


def _scan(keys: np.ndarray, wanted: np.ndarray, limit: int) -> tuple[int, list[bytes]]:
    """How many `keys` are among `wanted` (distinct, sorted), and the first `limit` distinct
    ones of them in order of first occurrence."""
    hits = 0
    first: dict[bytes, None] = {}
    if not len(wanted):
        return 0, []
    for start in range(0, len(keys), _CHUNK):
        chunk = keys[start : start + _CHUNK]
        at = np.minimum(np.searchsorted(wanted, chunk), len(wanted) - 1)
        found = chunk[wanted[at] == chunk]
        hits += len(found)
        for key in dict.fromkeys(found.tolist()):
            if len(first) == limit:
                break
            first.setdefault(key, None)
    return hits, list(first)


def _occurrences(keys: np.ndarray, key: bytes, limit: int) -> tuple[int, list[int]]:
    """How often `key` occurs, and its first `limit` positions."""
    places = np.flatnonzero(keys == key)
    return len(places), places[:limit].tolist()


def _text(key: bytes) -> str:
    return key.decode("utf-8")


def _within(units: PromptUnits, limit: int) -> dict[str, Any]:
    keys = _keys(units.hashes)
    repeated = _repeated(keys)
    count, listed = _scan(keys, repeated, limit)
    items = []
    for key in listed:
        n, places = _occurrences(keys, key, limit)
        items.append(
            {
                "prompt_hash": _text(key),
                "n": n,
                "occurrences": [units.locate(i) for i in places],
            }
        )
    return {
        "unit": units.unit,
        "units": len(keys),
        "count": count,
        "prompts": len(repeated),
        "listed": items,
    }


def _across(units: PromptUnits, reference: PromptUnits, name: str, limit: int) -> dict[str, Any]:
    keys, reference_keys = _keys(units.hashes), _keys(reference.hashes)
    ours, theirs = np.unique(keys), np.unique(reference_keys)
    if len(theirs):
        at = np.minimum(np.searchsorted(theirs, ours), len(theirs) - 1)
        shared = ours[theirs[at] == ours]
    else:
        shared = ours[:0]
    count, listed = _scan(keys, shared, limit)
    items = []
    for key in listed:
        n, places = _occurrences(keys, key, limit)
        reference_n, reference_places = _occurrences(reference_keys, key, limit)
        items.append(
            {
                "prompt_hash": _text(key),
                "n": n,
                "occurrences": [units.locate(i) for i in places],
                "reference_n": reference_n,
                "reference_occurrences": [reference.locate(i) for i in reference_places],
            }
        )
    return {
        "reference": name,
        "unit": units.unit,
        "units": len(keys),
        "count": count,
        "prompts": len(shared),
        "listed": items,
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
