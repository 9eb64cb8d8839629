"""Evaluation task: judge accuracy of a model on the validation split.

Locally it runs in the task; on Slurm it is a GPU job like training. Cached on the model, the
prepared data and the evaluation settings; `judgeflow.stages.records.record_evaluation` logs the result.
"""

from __future__ import annotations

from typing import Any

from prefect import task

from judgeflow import stages
from judgeflow.config import RunConfig
from tasks.policies import BACKOFF, retry_transient
from tasks.submission import run_job


@task(
    name="evaluate",
    task_run_name="evaluate[{label}]",
    retries=2,
    retry_delay_seconds=BACKOFF,
    retry_condition_fn=retry_transient,
)
def evaluate(
    cfg: RunConfig, model_dir: str, data: stages.PreparedData, run_id: str, label: str
) -> dict[str, Any]:
    """`{"metrics": {"eval/…": v}, "rows": [predictions]}` of `model_dir` on the val split."""
    if cfg.cluster.backend != "local":  # a Slurm job, or a Ray Job on the user's cluster
        job = stages.evaluation_job_config(cfg)  # one node, evaluation.gpus GPUs
        return run_job(job, stages.evaluate_job_spec(job, model_dir, data, run_id, label))[1]
    return stages.evaluate_stage(cfg, model_dir, data)
