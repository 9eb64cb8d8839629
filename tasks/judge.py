"""Judging task: a trained judge over a file of unlabeled rows.

Locally it runs in the task; on Slurm it is a job on the evaluation's resources. A retried task
resumes the rows its last try recorded (`judgeflow.inference.batch`), so a lost node costs only
the batch it was judging.
"""

from __future__ import annotations

from typing import Any

from prefect import task
from prefect.artifacts import create_progress_artifact, update_progress_artifact

from judgeflow import stages
from judgeflow.config import RunConfig
from tasks.policies import BACKOFF, retry_transient
from tasks.submission import run_job


@task(
    name="judge",
    task_run_name="judge[{label}]",
    retries=2,
    retry_delay_seconds=BACKOFF,
    retry_condition_fn=retry_transient,
)
def judge(
    cfg: RunConfig,
    model_uri: str,
    data: str,
    output: str,
    run_id: str,
    model_ref: str,
    skip_invalid: bool = False,
    label: str = "judge",
) -> dict[str, Any]:
    """The judging summary (`JudgingSummary.to_dict`); a `judging-progress` artifact meanwhile.
    `label` names the task run (`judge[judge-grpo-pointwise/3]`): no path, whose `[/` Prefect's
    console would read as markup."""
    artifact = create_progress_artifact(0.0, key="judging-progress", description=f"judging {data}")

    def progress(done: int, total: int) -> None:
        if total:
            update_progress_artifact(
                artifact, progress=100.0 * done / total, description=f"{done}/{total} rows"
            )

    if cfg.cluster.backend == "slurm":
        job = stages.evaluation_job_config(cfg)  # one node, evaluation.gpus GPUs
        spec = stages.judge_job_spec(job, model_uri, data, output, run_id, model_ref=model_ref, skip_invalid=skip_invalid)  # fmt: skip
        return run_job(job, spec, on_progress=lambda p: progress(p.step, p.total))[1]
    return stages.judge_stage(
        cfg, model_uri, data, output, model_ref=model_ref, skip_invalid=skip_invalid,
        progress=progress,
    )  # fmt: skip
