"""Every cached task has the parameters its stage's cache key reads; a rename fails loudly."""

from __future__ import annotations

import pytest
from prefect import task

from tasks.data import download, prepare
from tasks.evaluate import evaluate
from tasks.grrm import prepare_grrm
from tasks.policies import KEY_INPUTS, cached
from tasks.sft import prepare_sft, sft
from tasks.train import train


def test_every_cached_task_has_its_key_inputs() -> None:
    tasks = [download, prepare, prepare_grrm, prepare_sft, sft, train, evaluate]
    assert {t.name for t in tasks} == set(KEY_INPUTS)
    for t in tasks:
        assert cached(t).cache_policy.stage == t.name


def test_a_renamed_key_parameter_fails_when_the_task_is_cached() -> None:
    @task(name="train")
    def renamed(cfg: object, prepared: object) -> None:  # was `data`
        return None

    with pytest.raises(TypeError, match="no parameter data"):
        cached(renamed)
