"""RL augmentation: subgroups and shuffled candidate orders of a group, seeded per group."""

from __future__ import annotations

import itertools
import math
import random
from functools import cache


@cache
def _proper_subsets(n: int) -> tuple[tuple[int, ...], ...]:
    """All subsets of `range(n)` of size 2 … n-1, by size then lexicographically."""
    return tuple(s for r in range(2, n) for s in itertools.combinations(range(n), r))


def _shuffles(size: int, count: int, rng: random.Random) -> list[tuple[int, ...]]:
    """Up to `count` distinct permutations of `range(size)`, never the identity.

    When `count` is at least half of the `size! - 1` candidates they are enumerated and sampled
    (so exhaustion needs no retry loop); otherwise random shuffles are drawn until enough
    distinct ones are found (the expected number of draws is below 2 per permutation).
    """
    if count <= 0 or size < 2:
        return []
    total = math.factorial(size) - 1
    if 2 * count >= total:
        others = list(itertools.permutations(range(size)))[1:]  # [0] is the identity
        return rng.sample(others, min(count, total))
    seen = {tuple(range(size))}
    found: list[tuple[int, ...]] = []
    order = list(range(size))
    while len(found) < count:
        rng.shuffle(order)
        candidate = tuple(order)
        if candidate not in seen:
            seen.add(candidate)
            found.append(candidate)
    return found


def augmentation_plan(
    n: int, subgroup_augment: int, shuffle_augment: int, rng: random.Random
) -> list[tuple[str, tuple[int, ...]]]:
    """The RL rows of one group of `n` candidates as `(kind, candidate_indices)`.

    `candidate_indices[j]` is the input candidate that gets label `LABELS[j]`. Order: the
    original, its shuffles, then each sampled subgroup (original relative order) followed by its
    shuffles. Subgroups (only for n > 2) are `min(subgroup_augment, 2**n - n - 2)` distinct
    proper subsets of size 2 … n-1, drawn uniformly from the list of all of them.
    """
    identity = tuple(range(n))
    plan = [("original", identity)]
    plan += [("shuffle", p) for p in _shuffles(n, shuffle_augment, rng)]
    if subgroup_augment > 0 and n > 2:
        subsets = _proper_subsets(n)
        for pick in rng.sample(range(len(subsets)), min(subgroup_augment, len(subsets))):
            subset = subsets[pick]
            plan.append(("subgroup", subset))
            plan += [
                ("subgroup-shuffle", tuple(subset[i] for i in p))
                for p in _shuffles(len(subset), shuffle_augment, rng)
            ]
    return plan


def _group_rng(seed: int, group_id: int) -> random.Random:
    """One generator per group: output does not depend on batch size or on skipped rows."""
    return random.Random(f"judgeflow-grrm:{seed}:{group_id}")
