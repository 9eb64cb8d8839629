"""One response's RLVR reward in verl's ``compute_score`` signature.

verl loads this file by path (``custom_reward_function.path``) and passes
``custom_reward_function.reward_kwargs`` as keyword arguments: the :class:`RewardRules` fields
(``verification_reward``, ``r1_style_format``, ``r1_style_format_reward``, ``non_stop_penalty``,
``non_stop_penalty_value``, ``remap_verifier``) and the sandbox's bounds (``verifier_timeout_s``,
``verifier_max_chars``, ``verifier_memory_mb``). The row's verifier is its ``data_source``, or
the list ``extra_info["dataset"]`` for a row with several; ``ground_truth`` is the row's label
(a list for several). A truncated response is known only where the engine passes
``finish_reason`` (in ``extra_info`` or as a keyword); verl's naive reward manager does not, so
there the non-stop penalty cannot apply. The length verifiers read the response's length in
tokens from ``extra_info["response_tokens"]`` where the engine gives it, else count the text with
the tokenizer at ``length_tokenizer`` (the policy's model: verl's reward function sees only the
decoded text).

Unlike the judges' reward modules this one imports judgeflow (and sympy): the verl workers run
in judgeflow's environment.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection
from functools import cache
from typing import Any

from judgeflow.rewards.rlvr.compose import JUDGE, RewardRules, Rollout, compose, r1_format_holds
from judgeflow.rewards.rlvr.sandbox import VerifierSandbox

__all__ = [
    "compute_score",
    "response_tokens",
    "sandbox_for",
    "score_rollout",
    "split_settings",
    "token_counter",
]

_RULE_FIELDS = {f.name for f in dataclasses.fields(RewardRules)}
_SANDBOX_KEYS = {
    "verifier_timeout_s": "timeout_s",
    "verifier_max_chars": "max_chars",
    "verifier_memory_mb": "memory_mb",
}
#: How a check can be cut short (the sandbox's bounds, a code test's, a label no verifier reads).
_CUT_SHORT = ("too_long", "timeout", "error", "memory", "output")
_sandboxes: dict[tuple[float, int, int], VerifierSandbox] = {}  # one child per bounds, reused


def sandbox_for(bounds: dict[str, Any]) -> VerifierSandbox:
    """The sandbox for these bounds (``VerifierSandbox``'s fields), one per process."""
    box = VerifierSandbox(**bounds)
    key = (box.timeout_s, box.max_chars, box.memory_mb)
    return _sandboxes.setdefault(key, box)


@cache
def token_counter(tokenizer: str) -> Callable[[str], int]:
    """A text's length in the tokens of the tokenizer at ``tokenizer`` (a model's folder or Hub
    id), loaded once per process, when a length verifier first needs it."""
    from transformers import AutoTokenizer

    loaded = AutoTokenizer.from_pretrained(tokenizer)

    def count(text: str) -> int:
        return len(loaded(text, add_special_tokens=False)["input_ids"])

    return count


def split_settings(
    kwargs: dict[str, Any],
) -> tuple[RewardRules, dict[str, Any], str, Callable[[str], int] | None]:
    """The reward rules, the sandbox's bounds, the finish reason and the token counter (of
    ``length_tokenizer``) ``kwargs`` give; an unknown keyword is an error (a misspelt setting
    must not be ignored)."""
    unknown = (
        set(kwargs) - _RULE_FIELDS - set(_SANDBOX_KEYS) - {"finish_reason", "length_tokenizer"}
    )
    if unknown:
        raise TypeError(f"unknown RLVR reward setting(s): {', '.join(sorted(unknown))}")
    rules = RewardRules(**{k: v for k, v in kwargs.items() if k in _RULE_FIELDS})
    bounds = {field: kwargs[key] for key, field in _SANDBOX_KEYS.items() if key in kwargs}
    tokenizer = kwargs.get("length_tokenizer")
    counter = _lazy_counter(str(tokenizer)) if tokenizer else None
    return rules, bounds, str(kwargs.get("finish_reason") or "stop"), counter


def _lazy_counter(tokenizer: str) -> Callable[[str], int]:
    """`token_counter(tokenizer)`, loaded on the first count: rows without a length verifier
    never load it."""
    return lambda text: token_counter(tokenizer)(text)


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
    rules, bounds, finish, count_tokens = split_settings(kwargs)
    finish = str(kwargs.get("finish_reason") or extra.get("finish_reason") or "stop")
    rollout = Rollout(
        solution_str, ground_truth, extra.get("dataset") or data_source, finish,
        response_tokens(extra),
    )  # fmt: skip
    return score_rollout(rollout, rules, sandbox_for(bounds), count_tokens=count_tokens)


def response_tokens(extra: dict[str, Any]) -> int | None:
    """The response's length in tokens the engine put in its ``extra_info`` (TRL), if any."""
    given = extra.get("response_tokens")
    return None if given is None else int(given)


def score_rollout(
    rollout: Rollout,
    rules: RewardRules,
    box: VerifierSandbox,
    *,
    judged: float | None = None,
    judge_datasets: Collection[str] = (),
    count_tokens: Callable[[str], int] | None = None,
) -> dict[str, float]:
    """One rollout's reward parts (`compute_score`'s); `judged` is a paying judge's score of
    it when its dataset is one of `judge_datasets` (`compose`), paid as `judge_reward` and not
    counted in `verifiable_reward` (`judge_reward`: present when a judge may pay);
    `count_tokens` as `compose` takes it."""
    rewards = compose(
        [rollout], rules, check=box.score, judged=[judged], judge_datasets=judge_datasets,
        count_tokens=count_tokens,
    )  # fmt: skip
    cut = sum(rewards.metrics.get(f"verifier_{s}", 0.0) for s in _CUT_SHORT)
    holds = r1_format_holds(rollout.response) if rules.r1_style_format != "off" else True
    earned = rewards.earned[0]
    return {
        "score": rewards.scores[0],
        "verifiable_reward": sum(v for k, v in earned.items() if k != JUDGE),
        "valid_answer": float(holds),
        "verifier_cut_short": float(cut),
        **({"judge_reward": earned.get(JUDGE, 0.0)} if judge_datasets else {}),
    }
