"""One response's RLVR reward in verl's ``compute_score`` signature.

verl loads this file by path (``custom_reward_function.path``) and passes
``custom_reward_function.reward_kwargs`` as keyword arguments: the :class:`RewardRules` fields
(``verification_reward``, ``r1_style_format``, ``r1_style_format_reward``, ``non_stop_penalty``,
``non_stop_penalty_value``, ``remap_verifier``) and the sandbox's bounds (``verifier_timeout_s``,
``verifier_max_chars``, ``verifier_memory_mb``). The row's verifier is its ``data_source``, or
the list ``extra_info["dataset"]`` for a row with several; ``ground_truth`` is the row's label
(a list for several). A truncated response is known only where the engine passes
``finish_reason`` (in ``extra_info`` or as a keyword); verl's naive reward manager does not, so
there the non-stop penalty cannot apply.

Unlike the judges' reward modules this one imports judgeflow (and sympy): the verl workers run
in judgeflow's environment.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from typing import Any

from judgeflow.rewards.rlvr.compose import JUDGE, RewardRules, Rollout, compose, r1_format_holds
from judgeflow.rewards.rlvr.sandbox import VerifierSandbox

__all__ = ["compute_score", "sandbox_for", "score_rollout", "split_settings"]

_RULE_FIELDS = {f.name for f in dataclasses.fields(RewardRules)}
_SANDBOX_KEYS = {
    "verifier_timeout_s": "timeout_s",
    "verifier_max_chars": "max_chars",
    "verifier_memory_mb": "memory_mb",
}
_CUT_SHORT = ("too_long", "timeout", "error")  # a check the sandbox stopped: paid 0, counted
_sandboxes: dict[tuple[float, int, int], VerifierSandbox] = {}  # one child per bounds, reused


def sandbox_for(bounds: dict[str, Any]) -> VerifierSandbox:
    """The sandbox for these bounds (``VerifierSandbox``'s fields), one per process."""
    box = VerifierSandbox(**bounds)
    key = (box.timeout_s, box.max_chars, box.memory_mb)
    return _sandboxes.setdefault(key, box)


def split_settings(kwargs: dict[str, Any]) -> tuple[RewardRules, dict[str, Any], str]:
    """The reward rules, the sandbox's bounds and the finish reason ``kwargs`` give; an unknown
    keyword is an error (a misspelt setting must not be ignored)."""
    unknown = set(kwargs) - _RULE_FIELDS - set(_SANDBOX_KEYS) - {"finish_reason"}
    if unknown:
        raise TypeError(f"unknown RLVR reward setting(s): {', '.join(sorted(unknown))}")
    rules = RewardRules(**{k: v for k, v in kwargs.items() if k in _RULE_FIELDS})
    bounds = {field: kwargs[key] for key, field in _SANDBOX_KEYS.items() if key in kwargs}
    return rules, bounds, str(kwargs.get("finish_reason") or "stop")


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, float]:
    """``score`` (what is paid), ``verifiable_reward``, ``valid_answer`` (the R1 format holds,
    or 1 when the format is off) and ``verifier_cut_short`` (a check past its bounds)."""
    extra = extra_info or {}
    rules, bounds, finish = split_settings(kwargs)
    finish = str(kwargs.get("finish_reason") or extra.get("finish_reason") or "stop")
    rollout = Rollout(solution_str, ground_truth, extra.get("dataset") or data_source, finish)
    return score_rollout(rollout, rules, sandbox_for(bounds))


def score_rollout(
    rollout: Rollout,
    rules: RewardRules,
    box: VerifierSandbox,
    *,
    judged: float | None = None,
    judge_datasets: Collection[str] = (),
) -> dict[str, float]:
    """One rollout's reward parts (`compute_score`'s); `judged` is a paying judge's score of
    it when its dataset is one of `judge_datasets` (`compose`), paid as `judge_reward` and not
    counted in `verifiable_reward` (`judge_reward`: present when a judge may pay)."""
    cut_before = sum(box.counts[s] for s in _CUT_SHORT)
    rewards = compose(
        [rollout], rules, check=box.score, judged=[judged], judge_datasets=judge_datasets
    )
    cut = sum(box.counts[s] for s in _CUT_SHORT) - cut_before
    holds = r1_format_holds(rollout.response) if rules.r1_style_format != "off" else True
    earned = rewards.earned[0]
    return {
        "score": rewards.scores[0],
        "verifiable_reward": sum(v for k, v in earned.items() if k != JUDGE),
        "valid_answer": float(holds),
        "verifier_cut_short": float(cut),
        **({"judge_reward": earned.get(JUDGE, 0.0)} if judge_datasets else {}),
    }
