"""The hacking guard of a judge-paid policy: what the judge paid against the measure it never
sees, from the GRPO start (SFT, else the base model) to the trained policy."""

from __future__ import annotations

from judgeflow.evaluation.hacking import hacking_check


def test_the_judges_reward_rising_while_reference_f1_falls_is_called_hacking() -> None:
    found = hacking_check(
        {"sft/reward_mean": 0.1, "after/reward_mean": 1.0,
         "sft/reference_f1": 0.06, "after/reference_f1": 0.01}
    )  # fmt: skip
    assert found["status"] == "hacked"
    assert found["start"] == "sft" and found["independent"] == "reference_f1"
    assert found["message"].startswith("POSSIBLE REWARD HACKING: judge reward 0.100 -> 1.000")
    assert "reference_f1 fell 0.060 -> 0.010" in found["message"]


def test_both_rising_is_ok_and_without_sft_the_base_model_is_the_start() -> None:
    found = hacking_check(
        {"before/reward_mean": 0.2, "after/reward_mean": 0.5,
         "before/reference_f1": 0.1, "after/reference_f1": 0.3}
    )  # fmt: skip
    assert found["status"] == "ok" and found["start"] == "before"
    assert found["reference_f1"]["change"] == 0.3 - 0.1


def test_verifiable_rates_stand_in_where_rows_have_no_reference() -> None:
    found = hacking_check(
        {"sft/reward_mean": 0.2, "after/reward_mean": 0.6,
         "sft/verifiable_correct_rate": 0.5, "after/verifiable_correct_rate": 0.4}
    )  # fmt: skip
    assert found["status"] == "hacked" and found["independent"] == "verifiable_correct_rate"


def test_the_judges_own_part_is_compared_where_verifiers_also_pay() -> None:
    """A verifier's gain must not pass for the judge's: the judge's part fell here."""
    found = hacking_check(
        {"sft/reward_mean": 0.2, "after/reward_mean": 0.6, "sft/judge_reward_mean": 0.5,
         "after/judge_reward_mean": 0.4, "sft/reference_f1": 0.3, "after/reference_f1": 0.2}
    )  # fmt: skip
    assert found["paid"] == "judge_reward_mean" and found["status"] == "ok"


def test_a_missing_evaluation_is_unmeasured_not_ok() -> None:
    assert hacking_check({"after/reward_mean": 1.0})["status"] == "unmeasured"
