"""The reward adapter: TRL's batch reward callables over judgeflow's `compute_score` functions.

TRL calls each reward function on every generation batch; here they score the batch once through
`judgeflow.rewards` (or the paying judge), so training pays exactly what evaluation measures.
The unpaid probes only report (format failures, verifiable rewards, per-verifier and judge parts).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

__all__ = [
    "CORRECT_SUFFIX",
    "FORMAT_FAILURE",
    "REWARD_COLUMNS",
    "VERIFIABLE_CORRECT",
    "reward_functions",
    "rlvr_verifiers",
]

#: Columns the reward adapter reads; TRL hands every non-prompt column to reward functions.
REWARD_COLUMNS = ("data_source", "reward_model", "extra_info")
#: Reward functions' `__name__`s: TRL logs each as `rewards/<name>/mean`.
FORMAT_FAILURE = "format_failure"
VERIFIABLE_CORRECT = "verifiable_correct"
CORRECT_SUFFIX = "_correct"  # a per-verifier probe: `<verifier>_correct`


def reward_functions(
    reward: str,
    *,
    observe: Callable[[Mapping[str, Any]], None] | None = None,
    rlvr_rules: Mapping[str, Any] | None = None,
    stop_token_ids: Collection[int] = (),
    stop_strings: Sequence[str] = (),
    verifiers: Sequence[str] = (),
) -> list[Callable[..., Sequence[float | None]]]:
    """TRL reward functions over `judgeflow.rewards.<reward>.compute_score`.

    The first pays the verl `score`; the second reports `1 - valid_answer` and is given weight
    0, so TRL logs the format-failure rate (`rewards/format_failure/mean`) without paying it.
    `reward="rlvr"` adds a third, also unpaid: the share of completions with a verifiable
    reward (`verifiable_correct_rate`); its settings are `rlvr_rules`, and a completion that does
    not end in one of `stop_token_ids` (TRL's own test for truncation), nor hold one of
    `stop_strings` (generation ends at the first, the string kept), has finish reason
    `length`, for the non-stop penalty. Then one unpaid probe per name in `verifiers`: whether
    a completion of a row checked by that verifier alone was paid, None for other rows (TRL
    averages without them: `verifiable_correct_rate/<verifier>`). `observe` sees the reward
    inputs of every scored batch (the rows being trained on), once.
    """
    from judgeflow.inference.judge_failures import FailureWindow
    from judgeflow.inference.judge_reward import is_judge_paid
    from judgeflow.rewards import reward_function

    compute_score = reward_function(reward)
    rules, stops = (
        (dict(rlvr_rules or {}), set(stop_token_ids)) if reward == "rlvr" else ({}, set())
    )
    judge_paid = reward == "rlvr" and is_judge_paid(rules)
    # the window reward.judge_max_failure_rate is checked over: this run's own (TRL may train
    # several runs in one process)
    failures = FailureWindow() if judge_paid else None
    last: list[Any] = [None, None]  # the batch the functions were last called on, its results

    def results(completions: Sequence[Any], kwargs: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        if last[0] is completions:  # TRL calls every function on one batch: score it once
            return cast("list[Mapping[str, Any]]", last[1])
        n = len(completions)
        sources = kwargs.get("data_source") or [""] * n
        extras = kwargs.get("extra_info") or [None] * n
        ids = kwargs.get("completion_ids") or [None] * n
        texts = [_completion_text(c) for c in completions]
        finishes = []
        for token_ids, text in zip(ids, texts, strict=True):
            stopped = not stops or (bool(token_ids) and token_ids[-1] in stops)
            stopped = stopped or any(stop in text for stop in stop_strings)
            finishes.append("stop" if stopped else "length")
        if reward == "rlvr":  # the length verifiers' count: the tokens TRL generated
            extras = [
                {**(e or {}), "response_tokens": len(t)} if t is not None else e
                for e, t in zip(extras, ids, strict=True)
            ]
        truths = [(rm or {}).get("ground_truth") for rm in kwargs["reward_model"]]
        scored: list[Mapping[str, Any]]
        if judge_paid:  # the whole step's rollouts to the judge at once
            from judgeflow.inference.judge_reward import compute_score as judged_score

            extras = [
                {**(e or {}), "finish_reason": f} for e, f in zip(extras, finishes, strict=True)
            ]
            scored = list(judged_score(sources, texts, truths, extras, failures=failures, **rules))
        else:
            scored = []
            for text, truth, source, extra, finish in zip(
                texts, truths, sources, extras, finishes, strict=True
            ):
                settings = dict(rules)
                if reward == "rlvr" and stops:
                    settings["finish_reason"] = finish
                scored.append(compute_score(source, text, truth, extra, **settings))
        last[:] = [completions, scored]
        return scored

    def score(completions: Sequence[Any], **kwargs: Any) -> list[float]:
        if observe is not None:
            observe(kwargs)
        return [float(r["score"]) for r in results(completions, kwargs)]

    def format_failure(completions: Sequence[Any], **kwargs: Any) -> list[float]:
        return [1.0 - float(r["valid_answer"]) for r in results(completions, kwargs)]

    def verifiable_correct(completions: Sequence[Any], **kwargs: Any) -> list[float]:
        return [float(r["verifiable_reward"] > 0) for r in results(completions, kwargs)]

    def judge_part(key: str, name: str) -> Callable[..., list[float | None]]:
        def probe(completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
            return [
                float(r[key]) if r.get("judged") else None for r in results(completions, kwargs)
            ]

        probe.__name__ = name
        return probe

    def correct_for(verifier: str) -> Callable[..., list[float | None]]:
        def probe(completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
            extras = kwargs.get("extra_info") or [None] * len(completions)
            return [
                float(r["verifiable_reward"] > 0) if _row_verifiers(extra) == [verifier] else None
                for r, extra in zip(results(completions, kwargs), extras, strict=True)
            ]

        probe.__name__ = f"{verifier}{CORRECT_SUFFIX}"
        return probe

    score.__name__ = reward  # TRL names the per-function metrics after __name__
    format_failure.__name__ = FORMAT_FAILURE
    verifiable_correct.__name__ = VERIFIABLE_CORRECT
    if reward != "rlvr":
        return [score, format_failure]
    judge_probes = (
        [judge_part(key, name) for key, name in _JUDGE_PROBES.items()] if judge_paid else []
    )
    probes = [correct_for(v) for v in verifiers if not judge_paid or v not in _judge_names(rules)]
    return [score, format_failure, verifiable_correct, *probes, *judge_probes]


#: Judge-paid runs: unpaid probes over the rows the judge scored (None elsewhere, so TRL's mean
#: is over judged rollouts only), logged as `train/judge_reward`, `train/reference_f1`,
#: `train/judge_format_failure_rate` and `train/judge_inconsistent_rate` (`val/…` on eval).
_JUDGE_PROBES = {
    "judge_reward": "judge_reward",
    "reference_f1": "reference_f1",
    "judge_format_failure": "judge_format_failure",
    "judge_inconsistent": "judge_inconsistent",
}


def _judge_names(rules: Mapping[str, Any]) -> set[str]:
    return {str(d).lower() for d in rules.get("judge_datasets") or ()}


def _row_verifiers(extra: Any) -> list[str]:
    return (
        [str(d) for d in (extra or {}).get("dataset") or []] if isinstance(extra, Mapping) else []
    )


def rlvr_verifiers(train_file: str | Path) -> list[str]:
    """The verifiers that check a row of an RLVR parquet on their own (its per-verifier rates)."""
    import pyarrow.parquet as pq

    extras = pq.read_table(str(train_file), columns=["extra_info"]).column("extra_info")
    return sorted({v[0] for e in extras.to_pylist() if len(v := _row_verifiers(e)) == 1})


def _completion_text(completion: Any) -> str:
    """Conversational completions are `[{"role": "assistant", "content": …}]`; take the text."""
    if isinstance(completion, str):
        return completion
    return "".join(str(m.get("content", "")) for m in completion if m.get("role") == "assistant")
