"""What the paying judge gets wrong, counted (`judgeflow.inference.judge_failures`): pairwise
inconsistency per rollout, rates over the rollouts the judge pays only, each call's counts line,
and `reward.judge_max_failure_rate` stopping a run whose judge keeps failing, and only then.

The judge is a fake `JudgeClient` (`compute_score`'s `client=`, or `client_for` replaced where
the reward finds its judge itself) whose verdicts are scripted.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from judgeflow.config import load_config
from judgeflow.engines.verl import verl_overrides
from judgeflow.engines.verl_log import judge_rates
from judgeflow.inference import judge_failures
from judgeflow.inference.judge_failures import FailureWindow, JudgeCounts, JudgeFailing
from judgeflow.inference.judge_reward import compute_score

RULES = {"verification_reward": 10.0, "r1_style_format": "off", "non_stop_penalty": False}
JUDGE = {"judge_datasets": ["judge"], "judge_max_new_tokens": 16, "judge_weights": "/unused"}
QUERY = "What is the capital of France?"
REFERENCE = "The capital of France is Paris."
GOOD = {"valid": True, "consistent": True, "better": "A", "reasoning": "fine"}
FLIPPED = {"valid": True, "consistent": False, "better": "A", "reasoning": "either"}
MALFORMED = {"valid": False, "consistent": False, "better": None, "reasoning": "I cannot tell"}


class ScriptedJudge:
    """A pairwise judge whose k-th verdict of each call is `script[k % len(script)]`."""

    mode = "pairwise"

    def __init__(self, script: Sequence[Mapping[str, Any]]) -> None:
        self.script = list(script)
        self.rows: list[int] = []  # rows asked, per call

    def verdicts(self, rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        self.rows.append(len(rows))
        return [dict(self.script[k % len(self.script)]) for k in range(len(rows))]


def _judged(answers: list[str], client: Any, **settings: Any) -> list[dict[str, float]]:
    """Judge rows for `answers`, then one gsm8k row the judge does not pay."""
    n = len(answers)
    extras = [{"dataset": ["judge"], "query": QUERY, "index": 0}] * n + [{"dataset": ["gsm8k"]}]
    return compute_score(
        ["judge"] * n + ["gsm8k"],
        [*answers, "7"],
        [[REFERENCE]] * n + [["7"]],
        extras,
        client=client,
        **RULES,
        **{**JUDGE, **settings},
    )


def test_a_pairwise_verdict_that_flips_with_the_order_is_counted_on_its_rollout() -> None:
    judge = ScriptedJudge([GOOD, FLIPPED, MALFORMED, FLIPPED])
    out = _judged(["Paris.", "Lyon.", "Nice.", "Paris!"], judge)
    assert [r["judge_inconsistent"] for r in out] == [0.0, 1.0, 0.0, 1.0, 0.0]
    assert [r["judge_format_failure"] for r in out] == [0.0, 0.0, 1.0, 0.0, 0.0]
    assert [r["judged"] for r in out] == [1.0, 1.0, 1.0, 1.0, 0.0]
    assert [r["score"] for r in out] == [10.0, 0.0, 0.0, 0.0, 10.0]  # a flip pays 0


def test_an_empty_answer_is_not_asked_and_its_rollout_not_flagged() -> None:
    judge = ScriptedJudge([FLIPPED])
    out = _judged(["Lyon.", "", "Nice."], judge)
    assert judge.rows == [2]
    assert [r["judge_inconsistent"] for r in out] == [1.0, 0.0, 1.0, 0.0]


def test_each_calls_counts_are_a_line_over_judged_rollouts_only(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """verl's reward prints one line per call; its rates leave out the row the judge does not
    pay (4 judged of 5 rollouts: 1/4, where a mean over all rollouts would say 1/5)."""
    judge = ScriptedJudge([GOOD, FLIPPED, MALFORMED, GOOD])
    _judged(["Paris.", "Lyon.", "Nice.", ""], judge, judge_log_counts=True)
    line = capsys.readouterr().out.strip()
    assert line == "judgeflow judge counts: judged=4 asked=3 format_failures=1 inconsistent=1"
    counts = JudgeCounts.parse(f"(TaskRunner pid=7) {line}")
    assert counts == JudgeCounts(judged=4, asked=3, format_failures=1, inconsistent=1)
    assert judge_rates(counts) == {
        "train/judge_format_failure_rate": 0.25,
        "train/judge_inconsistent_rate": 0.25,
    }
    _judged(["Paris."], ScriptedJudge([GOOD]))  # without judge_log_counts (TRL): no line
    assert capsys.readouterr().out == ""


def test_the_limit_stops_a_judge_failing_more_than_it_allows_and_says_what_to_do() -> None:
    window = FailureWindow()
    judge = ScriptedJudge([MALFORMED, MALFORMED, GOOD])  # 2 of 3 fail
    with pytest.raises(JudgeFailing) as raised:
        _judged(["Lyon."] * 66, judge, judge_max_failure_rate=0.5, failures=window)
    message = str(raised.value)
    assert "44 of the last 66 rollouts it was shown got a reply that did not parse (67%" in message
    assert "reward.judge_max_failure_rate=0.5" in message
    assert "pairwise judge" in message and "max_new_tokens=16" in message
    assert "'I cannot tell'" in message  # a reply that did not parse
    for advice in ("reward.judge_max_new_tokens", "reward.judge_mode", "raise reward.judge_max"):
        assert advice in message


def test_the_limit_does_not_stop_a_judge_at_or_below_it() -> None:
    window = FailureWindow()
    judge = ScriptedJudge([MALFORMED, GOOD])  # half fail: not more than 0.5
    for _ in range(20):
        _judged(["Lyon."] * 64, judge, judge_max_failure_rate=0.5, failures=window)
    assert len(window.rollouts) == judge_failures.JUDGE_FAILURE_WINDOW
    never = ScriptedJudge([MALFORMED])
    _judged(["Lyon."] * 100, never, judge_max_failure_rate=1.0, failures=FailureWindow())


def test_the_limit_waits_for_its_minimum_then_counts_across_calls() -> None:
    """Each call (a step) adds to this process's window of the judge (verl's reward keeps no
    state of its own): 40 rollouts whose replies failed do not stop a run, 80 do."""
    judge = ScriptedJudge([MALFORMED])
    _judged(["Lyon."] * 40, judge, judge_max_failure_rate=0.5)
    with pytest.raises(JudgeFailing, match="80 of the last 80 rollouts"):
        _judged(["Lyon."] * 40, judge, judge_max_failure_rate=0.5)
    other = ScriptedJudge([MALFORMED])  # another judge: a window of its own
    _judged(["Lyon."] * 40, other, judge_max_failure_rate=0.5)


def test_the_window_forgets_old_replies() -> None:
    """A judge that breaks mid-run stops within the window, whatever went well before it."""
    window = FailureWindow(size=8, minimum=4)
    window.add([False] * 100, 0.5)
    window.add([True] * 4, 0.5)  # 4 of the last 8: not more than half
    with pytest.raises(JudgeFailing, match="5 of the last 8 rollouts"):
        window.add([True], 0.5)


def test_trls_reward_functions_keep_one_window_per_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """The limit reaches TRL's reward: a step whose judged rollouts all fail stops training once
    the run's window holds its minimum; a new run starts counting again."""
    from judgeflow.engines.trl import reward_functions
    from judgeflow.inference import judge_reward

    monkeypatch.setattr(judge_reward, "client_for", lambda settings: ScriptedJudge([MALFORMED]))
    monkeypatch.setattr(
        judge_failures, "FailureWindow", functools.partial(FailureWindow, minimum=6)
    )
    kwargs = {
        "reward_model": [{"ground_truth": [REFERENCE]}] * 4,
        "extra_info": [{"dataset": ["judge"], "query": QUERY, "index": 0}] * 4,
        "data_source": ["judge"] * 4,
    }
    rules = {**RULES, **JUDGE, "judge_mode": "pairwise", "judge_max_failure_rate": 0.5}
    score = reward_functions("rlvr", rlvr_rules=rules)[0]
    assert score(["Lyon."] * 4, **kwargs) == [0.0] * 4  # 4 replies: under the minimum
    with pytest.raises(JudgeFailing, match="8 of the last 8 rollouts"):
        score(["Nice."] * 4, **kwargs)
    fresh = reward_functions("rlvr", rlvr_rules=rules)[0]
    assert fresh(["Lyon."] * 4, **kwargs) == [0.0] * 4


PAID = ["reward.judge=/models/judge", "reward.judge_mode=pairwise", "reward.judge_max_new_tokens=8"]


def test_the_setting_reaches_the_reward_on_both_engines() -> None:
    from judgeflow.engines.trl import params_from

    trl = load_config("rlvr-judged", overrides=["engine=trl", *PAID,
                                                "reward.judge_max_failure_rate=0.2"])  # fmt: skip
    assert params_from(trl, "/out").rlvr_rules["judge_max_failure_rate"] == 0.2
    verl = load_config("rlvr-judged", overrides=["cluster.backend=slurm", *PAID,
                                                 "reward.judge_max_failure_rate=0.2"])  # fmt: skip
    overrides = verl_overrides(verl, train_files=["/t"], val_files=["/v"], checkpoint_dir="/c")
    kwargs = "+custom_reward_function.reward_kwargs."
    assert f"{kwargs}judge_max_failure_rate=0.2" in overrides
    assert f"{kwargs}judge_log_counts=true" in overrides  # verl's steps get the counts line
    with pytest.raises(ValueError, match="less than or equal to 1"):
        load_config("rlvr-judged", overrides=[*PAID, "reward.judge_max_failure_rate=1.5"])
