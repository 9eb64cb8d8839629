"""A response's reward, composed as open-instruct's ``RewardConfig`` composes it.

Verifiable reward: for each of a row's verifiers (its ``dataset``; a list means several, paired
with a list of ``ground_truth``), ``verification_reward × weight × score``, summed (every
verifier's weight is 1, as in open-instruct). The R1-style format reward (``</think>`` then
``<answer>…</answer>``, :func:`r1_format_holds`) is chosen by one switch, ``r1_style_format``:

- ``gated`` (the default): the verifiable reward is paid only when the format holds;
- ``additive``: the format reward (``r1_style_format_reward``) is added to it;
- ``off``: the format is not looked at.

The length verifiers (``max_length``, ``up_to_max_length``) score the response's length in the
policy's tokens, divided by ``max_length_verifier_max_length``: the engine's own count when it
gives one (:attr:`Rollout.tokens`; TRL's completion ids, the end-of-sequence token included as
in open-instruct's vLLM token ids), else the response text tokenized again by the policy's
tokenizer (``count_tokens``; verl's reward function and the evaluation, which see only the text:
no end-of-sequence token there, so about one token fewer on a response that stopped: decoding
and encoding again may also merge or split a token).

The code verifiers (``code``, ``code_stdio``) run the response's program against the row's tests
in a confined child of this process (:mod:`judgeflow.rewards.rlvr.code_tests`), with
open-instruct's ``code_max_execution_time``, ``code_pass_rate_reward_threshold`` and
``code_apply_perf_penalty``, and ``code_memory_mb``; a rollout with a test cut short (its time,
memory or output) counts once under ``verifier_<timeout|memory|output>``, a label with no
readable tests pays 0 and counts under ``verifier_error``.

Then, with ``non_stop_penalty``, a truncated response (finish reason other than ``stop``) gets
``non_stop_penalty_value`` in place of whatever it earned.

One difference from open-instruct, on purpose: it opens the gate when the *scaled* format score
equals 1, so with ``r1_style_format_reward`` other than 1.0 its gate never opens; here the gate
opens when the format holds, whatever the scale.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from judgeflow.rewards.rlvr import code_tests
from judgeflow.rewards.rlvr.sandbox import Outcome
from judgeflow.rewards.rlvr.verifiers import (
    CODE_VERIFIERS,
    LENGTH_VERIFIERS,
    MAX_LENGTH_VERIFIER_MAX_LENGTH,
    resolve,
    verify,
)

FormatMode = Literal["gated", "additive", "off"]
FORMAT_MODES: tuple[FormatMode, ...] = get_args(FormatMode)
#: (verifier name, response, label) → a score, or an :class:`Outcome` (a sandbox's ``score``).
Check = Callable[[str, str, Any], "float | Outcome"]

__all__ = [
    "JUDGE",
    "Check",
    "FormatMode",
    "RewardRules",
    "Rewards",
    "Rollout",
    "compose",
    "r1_format_holds",
]

#: The name a trained judge's part of a reward goes by (``judge_reward``, ``judge_correct_rate``).
JUDGE = "judge"

_THINK_THEN_ANSWER = re.compile(r"</think>\s*<answer>")


def r1_format_holds(response: str) -> bool:
    """``re.match(r".*?</think>\\s*<answer>.*?</answer>", response, re.DOTALL)``, in linear time:
    some ``</think>`` is followed by blanks and ``<answer>``, and a ``</answer>`` comes later."""
    found = _THINK_THEN_ANSWER.search(response)
    return found is not None and response.find("</answer>", found.end()) >= 0


@dataclass(frozen=True)
class RewardRules:
    """open-instruct's reward settings, under their names (``r1_style_format`` replaces the pair
    ``apply_r1_style_format_reward`` / ``additive_format_reward``)."""

    verification_reward: float = 10.0
    r1_style_format: FormatMode = "gated"
    r1_style_format_reward: float = 1.0
    non_stop_penalty: bool = False
    non_stop_penalty_value: float = -10.0
    remap_verifier: Mapping[str, str] = field(default_factory=dict)
    max_length_verifier_max_length: int = MAX_LENGTH_VERIFIER_MAX_LENGTH
    code_max_execution_time: float = code_tests.MAX_EXECUTION_TIME
    code_pass_rate_reward_threshold: float = code_tests.PASS_RATE_REWARD_THRESHOLD
    code_apply_perf_penalty: bool = False
    code_memory_mb: int = code_tests.CODE_MEMORY_MB

    def __post_init__(self) -> None:
        if self.r1_style_format not in FORMAT_MODES:
            raise ValueError(
                f"r1_style_format must be one of {', '.join(FORMAT_MODES)}, "
                f"got {self.r1_style_format!r}"
            )
        if self.max_length_verifier_max_length <= 0:
            raise ValueError("max_length_verifier_max_length must be positive")
        if self.code_max_execution_time <= 0 or self.code_memory_mb <= 0:
            raise ValueError("code_max_execution_time and code_memory_mb must be positive")


@dataclass(frozen=True)
class Rollout:
    """One response to one row: what the policy wrote and how its generation ended."""

    response: str
    ground_truth: Any  # one label, or a list of them paired with the list of datasets
    dataset: str | Sequence[str]
    finish_reason: str = "stop"
    #: the response's length in the policy's tokens, as the engine generated it (None: unknown)
    tokens: int | None = None


@dataclass
class Rewards:
    scores: list[float]
    #: Per rollout, what each of its verifiers paid (``verification_reward × score``), by name;
    #: a judge's part under :data:`JUDGE`.
    earned: list[dict[str, float]]
    #: open-instruct's objective metrics (without the ``objective/`` prefix), the mean format
    #: score when the format is looked at, and ``verifier_<status>`` counts of cut-short checks.
    metrics: dict[str, float]


def _pairs(rollout: Rollout, index: int) -> list[tuple[str, Any]]:
    datasets = [rollout.dataset] if isinstance(rollout.dataset, str) else list(rollout.dataset)
    truth = rollout.ground_truth
    labels = list(truth) if isinstance(truth, list | tuple) else [truth]
    if len(labels) != len(datasets):
        raise ValueError(
            f"rollout {index}: {len(datasets)} dataset(s) need as many ground_truth entries, "
            f"got {labels!r:.200}"
        )
    return list(zip(datasets, labels, strict=True))


def _length(
    name: str,
    rollout: Rollout,
    label: Any,
    rules: RewardRules,
    count_tokens: Callable[[str], int] | None,
    index: int,
) -> Outcome:
    """A length verifier's score, in this process (arithmetic on a count: nothing to bound); a
    label it cannot read (open-instruct raises on it) pays 0, counted as the verifier's error."""
    tokens = rollout.tokens
    if tokens is None:
        if count_tokens is None:
            raise ValueError(
                f"rollout {index}: the {name} verifier needs the response's length in tokens, "
                "and neither the engine nor the policy's tokenizer (length_tokenizer) gave it"
            )
        tokens = count_tokens(rollout.response)
    try:
        score = verify(
            name, rollout.response, label, tokens=tokens,
            max_length_verifier_max_length=rules.max_length_verifier_max_length,
        )  # fmt: skip
    except (TypeError, ValueError, OverflowError) as exc:
        return Outcome(0.0, "error", f"{name}: {type(exc).__name__}: {exc}"[:300])
    return Outcome(score, "ok")


def _code(name: str, rollout: Rollout, label: Any, rules: RewardRules) -> Outcome:
    """A code verifier's score, its program run in a confined child (no sandbox around it:
    the child bounds each test); the first way a test was cut short is the status."""
    try:
        score, run = code_tests.code_score(
            name, rollout.response, label, max_execution_time=rules.code_max_execution_time,
            pass_rate_reward_threshold=rules.code_pass_rate_reward_threshold,
            apply_perf_penalty=rules.code_apply_perf_penalty, memory_mb=rules.code_memory_mb,
        )  # fmt: skip
    except Exception as exc:  # unreadable tests, or the runner itself failed: 0, as there
        return Outcome(0.0, "error", f"{name}: {type(exc).__name__}: {exc}"[:300])
    if run.cut_short:
        status, count = run.cut_short.most_common(1)[0]
        return Outcome(score, status, f"{name}: {count} test(s) past their {status} bound")  # type: ignore[arg-type]
    return Outcome(score, "ok")


def compose(
    rollouts: Sequence[Rollout],
    rules: RewardRules,
    *,
    check: Check,
    judged: Sequence[float | None] | None = None,
    judge_datasets: Collection[str] = (),
    count_tokens: Callable[[str], int] | None = None,
) -> Rewards:
    """Scores for ``rollouts`` and the metrics open-instruct logs for them.

    ``check`` runs one verifier: a :class:`VerifierSandbox`'s ``score`` for a policy's text, or
    :func:`verify` (in this process, unbounded) for text that is trusted. A row's dataset in
    ``judge_datasets`` is paid by a trained judge instead, as open-instruct pays its LM-judge
    verifier: ``judged[i]`` is that judge's score of rollout ``i`` (0 to 1; None, the judge's
    reply was malformed, pays 0), composed like any verifier's. ``count_tokens`` gives a
    response's length in the policy's tokens to the length verifiers when its rollout does not
    carry it.
    """
    routed = {d.lower() for d in judge_datasets}
    n = len(rollouts)
    holds = [r1_format_holds(r.response) for r in rollouts]
    format_scores = [rules.r1_style_format_reward if h else 0.0 for h in holds]
    verifiable = [0.0] * n
    earned_all: list[dict[str, float]] = []
    per_verifier: dict[str, list[float]] = defaultdict(list)
    statuses: Counter[str] = Counter()
    for i, rollout in enumerate(rollouts):
        earned: dict[str, float] = {}
        for dataset, label in _pairs(rollout, i):
            result: float | Outcome | None
            if dataset.lower() in routed:
                name, result = JUDGE, (judged[i] if judged is not None else None) or 0.0
            else:
                name = resolve(dataset, rules.remap_verifier)
                if name in LENGTH_VERIFIERS:
                    result = _length(name, rollout, label, rules, count_tokens, i)
                elif name in CODE_VERIFIERS:
                    result = _code(name, rollout, label, rules)
                else:
                    result = check(name, rollout.response, label)
            if isinstance(result, Outcome):
                statuses[result.status] += 1
                result = result.score
            reward = rules.verification_reward * float(result)
            verifiable[i] += reward
            earned[name] = earned.get(name, 0.0) + reward
        for name, reward in earned.items():
            per_verifier[name].append(reward)
        earned_all.append(earned)

    scores = []
    for i, rollout in enumerate(rollouts):
        if rules.r1_style_format == "additive":
            score = verifiable[i] + format_scores[i]
        elif rules.r1_style_format == "gated":
            score = verifiable[i] if holds[i] else 0.0
        else:
            score = verifiable[i]
        if rules.non_stop_penalty and rollout.finish_reason != "stop":
            score = rules.non_stop_penalty_value
        scores.append(score)

    metrics: dict[str, float] = {}
    if n:
        metrics["verifiable_reward"] = sum(verifiable) / n
        metrics["verifiable_correct_rate"] = sum(v > 0 for v in verifiable) / n
    for name, rewards in sorted(per_verifier.items()):
        metrics[f"{name}_reward"] = sum(rewards) / len(rewards)
        metrics[f"{name}_correct_rate"] = sum(r > 0 for r in rewards) / len(rewards)
    if rules.r1_style_format != "off" and n:
        metrics["format_score"] = sum(format_scores) / n
    for status in ("too_long", "timeout", "error", "memory", "output"):
        if statuses[status]:
            metrics[f"verifier_{status}"] = float(statuses[status])
    return Rewards(scores, earned_all, metrics)
