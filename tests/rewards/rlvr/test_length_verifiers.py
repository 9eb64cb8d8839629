"""open-instruct's length verifiers (`max_length`, `up_to_max_length`): what they pay for a
response's length in the policy's tokens, and where each engine's count comes from: TRL's
generated ids, verl's reward function and the evaluation counting the text with the policy's
tokenizer. Figures are open-instruct's formulas worked by hand
(`open_instruct/ground_truth_utils.py`, `MaxLenVerifier` / `UpToMaxLenVerifier`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from judgeflow.rewards.rlvr import LENGTH_VERIFIERS, VERIFIERS, verify
from judgeflow.rewards.rlvr.compose import RewardRules, Rollout, compose
from judgeflow.rewards.rlvr.score import compute_score, token_counter


@pytest.mark.parametrize(
    ("name", "tokens", "label", "scale", "paid"),
    [
        ("max_length", 100, "100", 32768, 1.0),  # exactly the length wanted
        ("max_length", 612, "100", 32768, 1 - 512 / 32768),  # 512 too long
        ("max_length", 0, 512, 1024, 0.5),  # 512 too short: as far off as too long
        ("max_length", 100, "2148", 1024, -1.0),  # past the scale: below 0, not clipped
        ("max_length", 10, "10.5", 32768, 1 - 0.5 / 32768),  # float() reads the label
        ("up_to_max_length", 50, "100", 32768, 1.0),  # shorter: whole
        ("up_to_max_length", 100, "100", 32768, 1.0),  # at the length: whole (diff 0)
        ("up_to_max_length", 612, "100", 1024, 0.5),  # 512 over a 1024 scale
        ("up_to_max_length", 3172, 100, 1024, -2.0),  # 3072 over: not clipped either
    ],
)
def test_what_each_length_verifier_pays(
    name: str, tokens: int, label: Any, scale: int, paid: float
) -> None:
    got = verify(
        name.upper(), "any text", label, tokens=tokens, max_length_verifier_max_length=scale
    )
    assert got == pytest.approx(paid)


def test_the_default_scale_is_open_instructs_and_the_count_must_be_given() -> None:
    assert verify("max_length", "x", "0", tokens=32768) == 0.0  # 1 - 32768 / 32768
    with pytest.raises(ValueError, match="length in tokens: pass tokens="):
        verify("up_to_max_length", "x", "10")
    assert set(LENGTH_VERIFIERS) == {"max_length", "up_to_max_length"}
    assert not set(LENGTH_VERIFIERS) & set(VERIFIERS)  # the text verifiers take no count


def test_compose_pays_the_engines_count_else_counts_the_text() -> None:
    rules = RewardRules(r1_style_format="off", max_length_verifier_max_length=100)
    counted: list[str] = []

    def count(text: str) -> int:
        counted.append(text)
        return len(text.split())

    rollouts = [
        Rollout("one two three", "3", "max_length", tokens=53),  # the engine's count: 50 off
        Rollout("one two three", "3", "max_length"),  # no count: the text's, 3 words
        Rollout("a b c d e f", "4", "Up_To_Max_Length"),  # 2 over
    ]
    rewards = compose(rollouts, rules, check=verify, count_tokens=count)
    assert rewards.scores == pytest.approx([5.0, 10.0, 9.8])
    assert counted == ["one two three", "a b c d e f"]
    assert rewards.metrics["max_length_reward"] == pytest.approx(7.5)
    assert rewards.metrics["up_to_max_length_correct_rate"] == 1.0


def test_no_count_and_no_tokenizer_is_an_error_and_a_bad_label_pays_zero_counted() -> None:
    rules = RewardRules(r1_style_format="off")
    with pytest.raises(ValueError, match="rollout 0: the max_length verifier needs"):
        compose([Rollout("text", "3", "max_length")], rules, check=verify)
    bad = compose([Rollout("text", "many", "max_length", tokens=3)], rules, check=verify)
    assert bad.scores == [0.0] and bad.metrics["verifier_error"] == 1.0


def test_verls_reward_counts_the_text_with_the_policys_tokenizer(tiny_model: Path) -> None:
    """verl's reward function sees the decoded text only: `length_tokenizer` counts it."""
    text = "The answer is four, as two and two make four."
    tokens = token_counter(str(tiny_model))(text)
    assert tokens > 5
    rules = {"r1_style_format": "off", "max_length_verifier_max_length": 100}
    out = compute_score(
        "up_to_max_length", text, str(tokens - 10), {}, length_tokenizer=str(tiny_model), **rules
    )
    assert out["score"] == pytest.approx(10 * (1 - 10 / 100))
    # the engine's own count, where it gives one, wins over the tokenizer's
    given = compute_score(
        "max_length", text, "40", {"response_tokens": 30}, length_tokenizer="/nowhere", **rules
    )
    assert given["score"] == pytest.approx(10 * (1 - 10 / 100))


def test_trl_pays_the_length_of_the_ids_it_generated() -> None:
    from judgeflow.engines.trl.reward_adapter import reward_functions

    score = reward_functions(
        "rlvr", rlvr_rules={"r1_style_format": "off", "max_length_verifier_max_length": 10}
    )[0]
    paid = score(
        ["short", "a longer answer"],
        data_source=["up_to_max_length", "up_to_max_length"],
        extra_info=[{}, {}],
        reward_model=[{"ground_truth": "4"}, {"ground_truth": "4"}],
        completion_ids=[[1, 2, 3], [1, 2, 3, 4, 5, 6, 7]],  # 3 tokens; 7 = 3 over
    )
    assert paid == pytest.approx([10.0, 10 * (1 - 3 / 10)])
