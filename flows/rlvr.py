"""rlvr: a policy trained with reinforcement learning from verifiable rewards (open-instruct's RLVR).

download → prepare → evaluate (before) → [SFT → evaluate (sft)] → train (GRPO, paid by the
verifiers) → evaluate (after) → register → log

The data is open-instruct's rows (`messages`, `ground_truth`, `dataset`); each row's `dataset`
names the verifier(s) that pay a response (`judgeflow.rewards.rlvr`), composed with the R1 format
reward and the non-stop penalty as `rlvr.*` says. The evaluations generate on the held-out
prompts and report `verifiable_correct_rate` (the champion gate's metric), per-verifier rates and
`format_failure_rate`. With `sft.enabled`, LLaMA-Factory fine-tunes model.path on the `messages`
rows of `sft.source` first, and GRPO starts from that model.

`register` makes the trained policy a version of `rlvr-policy` (the recipe's `register.model_name`),
its SFT model one of `rlvr-policy-sft`; `champion` moves only to a better version on the same
held-out set. Every stage is cached as in judge-grpo: an unchanged retraining submits no job.
"""

from typing import Any

from prefect import flow, get_run_logger

from flows.pipeline_run import grpo_pipeline
from judgeflow.config import load_config
from tasks.train import cancel_submitted_jobs


@flow(
    name="rlvr",
    log_prints=True,
    on_cancellation=[cancel_submitted_jobs],
    on_crashed=[cancel_submitted_jobs],
)
def rlvr(
    recipe: str = "rlvr",
    profile: str | None = None,
    overrides: list[str] | None = None,
) -> dict[str, Any]:
    """`overrides` are `dotted.key=value` strings, as `judgeflow run --set` takes them."""
    report = get_run_logger().warning
    cfg = load_config(recipe, profile=profile, overrides=overrides or [], report=report)
    if cfg.mode != "rlvr":
        raise ValueError(f"recipe {recipe!r} trains mode={cfg.mode}; the rlvr flow trains policies")
    if cfg.reward.paid_by_judge:  # its judge must be pinned and checked: rlvr-judged does that
        raise ValueError(
            f"recipe {recipe!r} is paid by a judge (reward.judge or reward.judge_url is set): run "
            "it with the rlvr-judged flow (`judgeflow run` picks it by itself)"
        )
    return grpo_pipeline(cfg)
