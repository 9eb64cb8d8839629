"""Zero-variance groups, as open-instruct's ``grpo_fast`` treats them: not trained on.

A group whose completions all earned the same reward has advantage 0 for every completion: it
adds nothing to the policy gradient, yet costs a forward and a backward pass (and, with a KL
loss, pulls toward the reference model alone). ``grpo_fast`` drops such groups before it packs
the batch (``--filter_zero_std_samples``, on by default) and logs ``real_batch_size_ratio``, the
share of completions left. :func:`micro_batches` does the same to one generation batch of TRL's
``GRPOTrainer``: it keeps the varied groups' completions, shuffles them as TRL does, and fills
the step's micro-batches with them in order, so the micro-batches left empty are skipped whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["Split", "micro_batches", "varied_rows"]


def varied_rows(advantages: torch.Tensor, group_size: int) -> torch.Tensor:
    """Per completion: does its group (``group_size`` consecutive rows) have reward variance.

    Equal rewards give bit-identical advantages whatever the scaling (``r - mean`` is the same
    number for each, divided by the same std), but not zero ones: float32's std of eight rewards
    of 1/3 is ~1e-8, and TRL divides by (std + 1e-4). So a group without variance is one whose
    advantages are all equal, not all near zero.
    """
    if advantages.numel() % group_size:
        raise ValueError(f"{advantages.numel()} completions do not form groups of {group_size}")
    groups = advantages.reshape(-1, group_size)
    varied = groups.amax(dim=1) != groups.amin(dim=1)
    return varied.repeat_interleave(group_size)


@dataclass(frozen=True)
class Split:
    batches: list[dict[str, Any]]
    real_batch_size_ratio: float  # completions in varied groups / all completions
    skipped: int  # micro-batches left empty


def micro_batches(
    batch: dict[str, Any], group_size: int, count: int, *, drop_zero_variance: bool
) -> Split:
    """Split one generation batch into ``count`` micro-batches, as TRL does (a random
    permutation, then consecutive equal chunks), after dropping the zero-variance groups when
    ``drop_zero_variance``. With nothing to drop, the split is TRL's own (same permutation).

    ``num_items_in_batch`` (the DAPO loss's token count) is recounted over what is kept, so the
    loss is a token mean over the completions trained on, as in ``grpo_fast``.
    """
    advantages = batch["advantages"]
    total = advantages.shape[0]
    if total % count:
        raise ValueError(f"{total} completions do not split into {count} micro-batches")
    size = total // count
    varied = varied_rows(advantages, group_size)
    ratio = float(varied.float().mean().item()) if total else 0.0
    keep = varied if drop_zero_variance else torch.ones_like(varied)
    kept = keep.nonzero().flatten()
    kept = kept[torch.randperm(kept.numel()).to(kept.device)]  # as TRL's shuffle_sequence_dict
    dropped = kept.numel() < total
    batches = []
    for i in range(count):
        rows = kept[i * size : (i + 1) * size]
        part: dict[str, Any] = {}
        for key, value in batch.items():
            if isinstance(value, torch.Tensor) and value.ndim > 0 and value.shape[0] == total:
                part[key] = value[rows]
            elif isinstance(value, list) and len(value) == total:
                part[key] = [value[j] for j in rows.tolist()]
            else:
                part[key] = value
        if dropped and "num_items_in_batch" in batch:
            part["num_items_in_batch"] = batch["completion_mask"][kept].sum()
        batches.append(part)
    skipped = sum(1 for part in batches if part["advantages"].shape[0] == 0)
    return Split(batches, ratio, skipped)
