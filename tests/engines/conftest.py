"""Shared by the engine tests: verl RL rows as `prepare` writes them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest


def _rl_row(i: int, **extra_info: Any) -> dict[str, Any]:
    return {
        "data_source": "tiny/pointwise",
        "prompt": [
            {"role": "user", "content": f"# Query\nWhat is {i} + {i}?\n# Response\n{2 * i}\n"}
        ],
        "ability": "judge",
        "reward_model": {"style": "rule", "ground_truth": {"helpfulness": i % 5}},
        "extra_info": {"split": "train", "index": i, **extra_info},
    }


@pytest.fixture(scope="session")
def rl_row() -> Callable[..., dict[str, Any]]:
    """`rl_row(i, **extra_info)`: one verl RL row (the format `prepare` writes), with a
    pointwise ground truth `helpfulness = i % 5`."""
    return _rl_row
