"""Shared by the engine tests: verl RL rows as `prepare` writes them; for the verl tests, the
tiny model's tokenizer as verl loads it and a datasets cache of the test's own."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
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


@pytest.fixture
def datasets_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """verl's dataset caches through `datasets`: into the test's own folder, not ~/.cache."""
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-datasets")


@pytest.fixture(scope="module")
def tokenizer(tiny_model: Path) -> Any:
    """The tiny model's tokenizer as verl loads it."""
    from verl.utils import hf_tokenizer

    return hf_tokenizer(str(tiny_model))
