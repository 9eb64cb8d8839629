"""The reward composed as open-instruct's ``RewardConfig.build`` composes it: verifiers summed,
the R1 format reward gating, added or off, the non-stop penalty last, and its metrics."""

from __future__ import annotations

import random
import re
from typing import Any

import pytest

from judgeflow.rewards.rlvr import UnknownVerifier, verify
from judgeflow.rewards.rlvr.compose import RewardRules, Rewards, Rollout, compose, r1_format_holds
from judgeflow.rewards.rlvr.sandbox import Outcome


def _compose(rollouts: list[Rollout], rules: RewardRules, check: Any = verify) -> Rewards:
    return compose(rollouts, rules, check=check)


RIGHT_FORMATTED = "<think>2+2 is 4</think> <answer>4</answer>"
RIGHT_UNFORMATTED = "It is 4"
WRONG_FORMATTED = "<think>hmm</think><answer>5</answer>"


def _scores(rules: RewardRules, *responses: str, finish: str = "stop") -> list[float]:
    rollouts = [Rollout(r, "4", "gsm8k", finish) for r in responses]
    return _compose(rollouts, rules).scores


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        # gated (the default): the verifiable reward only when the format holds; the format
        # reward itself is not paid
        ("gated", [10.0, 0.0, 0.0]),
        # additive: the format reward (1.0) on top
        ("additive", [11.0, 10.0, 1.0]),
        # off: the verifiable reward alone
        ("off", [10.0, 10.0, 0.0]),
    ],
)
def test_format_reward_modes(mode: str, expected: list[float]) -> None:
    rules = RewardRules(r1_style_format=mode)  # type: ignore[arg-type]
    assert _scores(rules, RIGHT_FORMATTED, RIGHT_UNFORMATTED, WRONG_FORMATTED) == expected


def test_gated_is_the_default_and_the_verification_reward_scales() -> None:
    assert RewardRules().r1_style_format == "gated"
    assert _scores(RewardRules(verification_reward=1.0), RIGHT_FORMATTED) == [1.0]


def test_the_gate_opens_whatever_the_format_reward_scale() -> None:
    """open-instruct compares the *scaled* format score with 1, so its gate never opens at a
    scale other than 1.0; judgeflow's opens when the format holds (documented difference)."""
    rules = RewardRules(r1_style_format_reward=0.5)
    assert _scores(rules, RIGHT_FORMATTED, RIGHT_UNFORMATTED) == [10.0, 0.0]
    assert _scores(RewardRules(r1_style_format="additive", r1_style_format_reward=0.5),
                   RIGHT_FORMATTED) == [10.5]  # fmt: skip


@pytest.mark.parametrize("mode", ["gated", "additive", "off"])
def test_non_stop_penalty_replaces_the_reward_of_a_truncated_response(mode: str) -> None:
    rules = RewardRules(r1_style_format=mode, non_stop_penalty=True)  # type: ignore[arg-type]
    assert _scores(rules, RIGHT_FORMATTED, finish="length") == [-10.0]
    assert _scores(rules, RIGHT_FORMATTED, finish="stop")[0] >= 10.0
    custom = RewardRules(r1_style_format=mode, non_stop_penalty=True, non_stop_penalty_value=-1)  # type: ignore[arg-type]
    assert _scores(custom, WRONG_FORMATTED, finish="length") == [-1.0]
    assert _scores(RewardRules(r1_style_format=mode), RIGHT_FORMATTED, finish="length")[0] >= 10.0  # type: ignore[arg-type]


def test_several_verifiers_of_one_row_are_summed_and_reported_each() -> None:
    response = "<think>2+2</think><answer>four</answer> so 4"
    both = Rollout(response, ["4", "four"], ["GSM8K", "string_matcher"])
    one = Rollout("<think>x</think><answer>five</answer> so 4", ["4", "four"],
                  ["gsm8k", "string_matcher"])  # fmt: skip
    none = Rollout("<think>x</think><answer>3</answer>", "4", "gsm8k")
    out = _compose([both, one, none], RewardRules())
    assert out.scores == [20.0, 10.0, 0.0]
    assert out.metrics["verifiable_reward"] == pytest.approx(10.0)
    assert out.metrics["verifiable_correct_rate"] == pytest.approx(2 / 3)
    assert out.metrics["gsm8k_correct_rate"] == pytest.approx(2 / 3)  # over its 3 rollouts
    assert out.metrics["string_matcher_correct_rate"] == pytest.approx(1 / 2)  # over its 2
    assert out.metrics["gsm8k_reward"] == pytest.approx(20 / 3)
    assert out.metrics["format_score"] == pytest.approx(1.0)


def test_correct_rate_counts_the_verifiable_reward_before_the_gate() -> None:
    """As open-instruct: a right answer without the format counts as correct, earns nothing."""
    out = _compose([Rollout(RIGHT_UNFORMATTED, "4", "gsm8k")], RewardRules())
    assert out.scores == [0.0]
    assert out.metrics["verifiable_correct_rate"] == 1.0
    assert out.metrics["format_score"] == 0.0
    assert "format_score" not in _compose([Rollout("4", "4", "gsm8k")],
                                         RewardRules(r1_style_format="off")).metrics  # fmt: skip


def test_remapped_and_unknown_verifiers() -> None:
    rules = RewardRules(remap_verifier={"numbers": "gsm8k"})
    out = _compose([Rollout(RIGHT_FORMATTED, "4", "Numbers")], rules)
    assert out.scores == [10.0] and "gsm8k_correct_rate" in out.metrics
    with pytest.raises(UnknownVerifier, match="'numbers'"):
        _compose([Rollout(RIGHT_FORMATTED, "4", "numbers")], RewardRules())


def test_a_row_with_more_datasets_than_labels_is_refused() -> None:
    with pytest.raises(ValueError, match=r"rollout 1: 2 dataset\(s\) need as many ground_truth"):
        _compose([Rollout("4", "4", "gsm8k"), Rollout("4", ["4"], ["gsm8k", "math"])],
                RewardRules())  # fmt: skip


def test_a_single_label_in_a_list_pairs_with_a_single_dataset() -> None:
    assert _compose([Rollout(RIGHT_FORMATTED, ["4"], "gsm8k")], RewardRules()).scores == [10.0]


def test_cut_short_checks_pay_zero_and_are_counted() -> None:
    outcomes = iter([Outcome(0.0, "timeout"), Outcome(0.0, "too_long"), Outcome(1.0, "ok")])
    out = _compose([Rollout(RIGHT_FORMATTED, "4", "gsm8k")] * 3, RewardRules(),
                  check=lambda *_: next(outcomes))  # fmt: skip
    assert out.scores == [0.0, 0.0, 10.0]
    assert out.metrics["verifier_timeout"] == 1.0 and out.metrics["verifier_too_long"] == 1.0
    assert "verifier_error" not in out.metrics


OPEN_INSTRUCT_FORMAT = re.compile(r".*?</think>\s*<answer>.*?</answer>", re.DOTALL)


@pytest.mark.parametrize("seed", range(3))
def test_format_check_agrees_with_open_instructs_regex(seed: int) -> None:
    rng = random.Random(seed)
    parts = ["</think>", "<answer>", "</answer>", " ", "\n", "x", "<think>", "</answer", "\t"]
    for _ in range(5000):
        text = "".join(rng.choice(parts) for _ in range(rng.randint(0, 8)))
        assert r1_format_holds(text) == bool(OPEN_INSTRUCT_FORMAT.match(text)), repr(text)


def test_an_unknown_format_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="r1_style_format must be one of gated, additive, off"):
        RewardRules(r1_style_format="Gated")  # type: ignore[arg-type]
