"""The judged benchmark's champion flag is read from the run's own registry lines: the policy's
line, never its SFT model's (a first version too) nor one kept as challenger."""

from __future__ import annotations

import demo


def _champion(output: str) -> bool:
    return bool(demo._CHAMPION.search(output))


def test_the_policys_first_version_is_champion() -> None:
    line = (
        f"registered    : {demo.JUDGED_POLICY}-seed-2 v1 first version of "
        f"{demo.JUDGED_POLICY}-seed-2: becomes champion (verifiable_correct_rate 0.7925)"
    )
    assert _champion(line)
    assert _champion(f"registered    : {demo.JUDGED_POLICY} v3 promoted: reward_mean 0.9 beats …")


def test_the_sft_models_line_is_not_the_policys() -> None:
    sft = (
        f"registered    : {demo.JUDGED_POLICY}-seed-1-sft v1 first version of "
        f"{demo.JUDGED_POLICY}-seed-1-sft: becomes champion (verifiable_correct_rate 0.4811)"
    )
    assert not _champion(sft)


def test_a_policy_kept_as_challenger_is_not_champion() -> None:
    refused = (
        f"registered    : {demo.JUDGED_POLICY}-seed-1 v1 kept as challenger: hacking suspected "
        "(reward_mean 1.0000); check its answers, or promote it with register.force=true"
    )
    assert not _champion(refused)
