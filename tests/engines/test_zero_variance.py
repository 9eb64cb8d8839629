"""Splitting a generation batch into micro-batches without its zero-variance groups."""

from __future__ import annotations

import pytest
import torch
from trl.trainer.utils import shuffle_sequence_dict, split_tensor_dict

from judgeflow.engines.zero_variance import micro_batches, varied_rows

G = 4  # completions per group


def _batch(group_rewards: list[list[float]]) -> dict[str, object]:
    """A generation batch as TRL builds it: groups in order, advantages = r - group mean."""
    rewards = torch.tensor(group_rewards, dtype=torch.float32)
    advantages = (rewards - rewards.mean(dim=1, keepdim=True)).flatten()
    n = advantages.numel()
    mask = torch.ones(n, 5, dtype=torch.long)
    mask[:, 3:] = torch.arange(n)[:, None] % 2  # completions of 3 or 5 tokens
    return {
        "prompt_ids": torch.arange(n)[:, None].repeat(1, 2),
        "completion_ids": torch.arange(n)[:, None].repeat(1, 5),
        "completion_mask": mask,
        "advantages": advantages,
        "num_items_in_batch": mask.sum(),
    }


def test_with_nothing_to_drop_the_split_is_trls_own() -> None:
    batch = _batch([[0, 1, 0, 1], [1, 0, 0, 0]])
    torch.manual_seed(7)
    ours = micro_batches(batch, G, 2, drop_zero_variance=True)
    torch.manual_seed(7)
    theirs = split_tensor_dict(shuffle_sequence_dict(batch), 2)
    assert ours.real_batch_size_ratio == 1.0 and ours.skipped == 0
    for mine, trl in zip(ours.batches, theirs, strict=True):
        assert mine.keys() == trl.keys()
        for key in mine:
            assert torch.equal(mine[key], trl[key]), key


def test_zero_variance_groups_are_dropped_and_the_rest_packed_first() -> None:
    batch = _batch([[1, 1, 1, 1], [0, 1, 0, 0], [0, 0, 0, 0], [1, 0, 1, 1]])
    split = micro_batches(batch, G, 4, drop_zero_variance=True)
    sizes = [b["advantages"].shape[0] for b in split.batches]
    assert sizes == [4, 4, 0, 0] and split.skipped == 2
    assert split.real_batch_size_ratio == 0.5
    rows = sorted(int(r) for b in split.batches for r in b["completion_ids"][:, 0])
    assert rows == [4, 5, 6, 7, 12, 13, 14, 15]  # groups 2 and 4, each completion once
    kept_tokens = batch["completion_mask"][rows].sum()
    assert all(b["num_items_in_batch"] == kept_tokens for b in split.batches)  # DAPO's count


def test_without_dropping_the_ratio_is_still_measured() -> None:
    batch = _batch([[1, 1, 1, 1], [0, 1, 0, 0]])
    split = micro_batches(batch, G, 2, drop_zero_variance=False)
    assert [b["advantages"].shape[0] for b in split.batches] == [4, 4]
    assert split.real_batch_size_ratio == 0.5 and split.skipped == 0
    assert all(b["num_items_in_batch"] is batch["num_items_in_batch"] for b in split.batches)


def test_all_zero_variance_leaves_every_micro_batch_empty() -> None:
    split = micro_batches(_batch([[2, 2, 2, 2], [0, 0, 0, 0]]), G, 2, drop_zero_variance=True)
    assert split.skipped == 2 and split.real_batch_size_ratio == 0.0


@pytest.mark.parametrize(("value", "size"), [(0.1 + 0.2, 4), (1 / 3, 8), (2 / 3, 8), (0.1, 7)])
def test_std_scaled_advantages_of_equal_rewards_count_as_no_variance(
    value: float, size: int
) -> None:
    """As TRL computes them (float32, divided by std + 1e-4): equal rewards such as GRRM's 1/3
    give advantages far from 0 (float error / 1e-4) but all equal; a group that differs by a
    hundredth is varied."""
    rewards = torch.tensor([[value] * size, [value] * (size - 1) + [value + 0.01]])
    mean = rewards.mean(1, keepdim=True)
    std = rewards.std(1, keepdim=True)
    advantages = ((rewards - mean) / (std + 1e-4)).flatten()
    assert varied_rows(advantages, size).tolist() == [False] * size + [True] * size


def test_batches_that_do_not_form_groups_are_refused() -> None:
    with pytest.raises(ValueError, match="groups of 4"):
        varied_rows(torch.zeros(6), G)
