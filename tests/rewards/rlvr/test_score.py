"""The RLVR reward as verl loads it: by file path, through verl's own loader, with the rules
in ``custom_reward_function.reward_kwargs``."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import judgeflow.rewards.rlvr.score as score_module
from judgeflow.rewards.rlvr.score import compute_score

FORMATTED = "<think>2+2</think> <answer>4</answer>"


@pytest.fixture
def verl_loaded() -> Iterator[Callable[..., Callable[..., dict[str, float]]]]:
    from omegaconf import OmegaConf
    from verl.trainer.ppo.reward import get_custom_reward_fn

    def load(**reward_kwargs: Any) -> Callable[..., dict[str, float]]:
        sys.modules.pop("custom_module", None)  # verl caches the first file it loaded
        config = OmegaConf.create(
            {
                "custom_reward_function": {
                    "path": str(Path(score_module.__file__)),
                    "name": "compute_score",
                    "reward_kwargs": reward_kwargs,
                }
            }
        )
        fn = get_custom_reward_fn(config)
        assert fn is not None
        return fn

    yield load
    sys.modules.pop("custom_module", None)


def test_verl_loads_it_by_path_and_passes_the_rules(verl_loaded: Any) -> None:
    additive = verl_loaded(r1_style_format="additive", verification_reward=1.0)
    out = additive(data_source="gsm8k", solution_str=FORMATTED, ground_truth="4", extra_info={})
    assert out == {
        "score": 2.0,
        "verifiable_reward": 1.0,
        "valid_answer": 1.0,
        "verifier_cut_short": 0.0,
    }
    gated = verl_loaded()  # the defaults: gated, 10 per verifier
    assert gated(data_source="GSM8K", solution_str="4", ground_truth="4")["score"] == 0.0
    assert gated(data_source="gsm8k", solution_str=FORMATTED, ground_truth="4")["score"] == 10.0


def test_a_row_with_several_verifiers_names_them_in_extra_info() -> None:
    out = compute_score(
        "mixed",
        "<think>x</think><answer>four</answer> so 4",
        ["4", "four"],
        {"dataset": ["gsm8k", "string_matcher"]},
    )
    assert out["score"] == 20.0


def test_a_truncated_response_gets_the_non_stop_penalty_where_the_engine_says_so() -> None:
    penalised = {"non_stop_penalty": True}
    assert (
        compute_score("gsm8k", FORMATTED, "4", {"finish_reason": "length"}, **penalised)["score"]
        == -10.0
    )
    assert (
        compute_score("gsm8k", FORMATTED, "4", None, finish_reason="length", **penalised)["score"]
        == -10.0
    )
    assert compute_score("gsm8k", FORMATTED, "4", None, **penalised)["score"] == 10.0


def test_a_response_past_the_bounds_pays_zero_and_says_so() -> None:
    out = compute_score("gsm8k", FORMATTED + " 4" * 20, "4", None, verifier_max_chars=20)
    assert (out["score"], out["verifier_cut_short"]) == (0.0, 1.0)


def test_an_unknown_setting_is_refused() -> None:
    with pytest.raises(TypeError, match="apply_r1_style_format_reward"):
        compute_score("gsm8k", "4", "4", None, apply_r1_style_format_reward=True)
