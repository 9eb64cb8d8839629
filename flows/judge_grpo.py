"""judge-grpo: train a pointwise or pairwise judge with GRPO.

download → prepare → evaluate (before) → [SFT → evaluate (sft)] → train (GRPO) → evaluate (after)
  → register → log

With `sft.enabled`, LLaMA-Factory fine-tunes model.path on the `messages` rows of `sft.source`
first, and GRPO starts from that model (lineage tags on the MLflow run).

`register` makes each trained model an MLflow model version (`judge-grpo-<mode>`, the SFT model
`judge-grpo-<mode>-sft`) with its lineage; `champion` moves to it only when it beats the current
champion on the same evaluation (tasks/register.py).

Every stage is cached on what it depends on (tasks/policies.py, judgeflow/caching.py): a
scheduled retraining on unchanged data reuses every stage and submits no job. The run's
`run-summary` artifact says, per stage, whether it ran or came from the cache.
"""

from typing import Any

from prefect import flow, get_run_logger

from flows.pipeline_run import grpo_pipeline
from judgeflow.config import load_config
from judgeflow.modes import JudgeMode
from tasks.train import cancel_submitted_jobs


@flow(
    name="judge-grpo",
    log_prints=True,
    on_cancellation=[cancel_submitted_jobs],
    on_crashed=[cancel_submitted_jobs],
)
def judge_grpo(
    mode: JudgeMode = "pointwise",
    recipe: str | None = None,
    profile: str | None = None,
    overrides: list[str] | None = None,
) -> dict[str, Any]:
    """`recipe` defaults to grpo-<mode>; `overrides` are `dotted.key=value` strings."""
    report = get_run_logger().warning
    cfg = load_config(
        recipe or f"grpo-{mode}", profile=profile, overrides=overrides or [], report=report
    )
    return grpo_pipeline(cfg)
