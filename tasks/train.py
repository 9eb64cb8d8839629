"""Training task: GRPO as a job on the configured backend, followed from Prefect.

The job's log streams into the task log, its progress into a progress artifact, its metrics into
MLflow (written by the job itself). A job killed from outside fails the task with a retryable
error; the retry resubmits, and training resumes from the last checkpoint. The result is cached
on the prepared data and the training configuration (`tasks.policies.cached`): an unchanged
retraining returns the registered checkpoint without submitting anything.
"""

from __future__ import annotations

from dataclasses import dataclass

from prefect import task

from judgeflow import stages
from judgeflow.cluster import submitted
from judgeflow.config import RunConfig
from tasks.policies import retry_transient
from tasks.submission import run_job, training_progress


@dataclass(frozen=True)
class TrainOutcome:
    """What training produced, and where: the job and the MLflow run that hold its metrics."""

    model: stages.TrainedModel
    job_id: str
    backend: str
    mlflow_run_id: str


@task(
    name="train",
    task_run_name="train[{cfg.recipe}@{cfg.cluster.backend}]",
    retry_condition_fn=retry_transient,
)
def train(cfg: RunConfig, data: stages.PreparedData, run_id: str) -> TrainOutcome:
    progress = training_progress(cfg, "train")
    job_id, result = run_job(cfg, stages.train_job_spec(cfg, data, run_id), on_progress=progress)
    return TrainOutcome(stages.TrainedModel(**result), job_id, cfg.cluster.backend, run_id)


def cancel_submitted_jobs(flow, flow_run, state) -> None:
    """Flow hook (cancelled/crashed): cancel every job this flow run submitted."""
    from judgeflow.config import load_config

    params = flow_run.parameters
    cfg = load_config(
        params.get("recipe") or f"grpo-{params.get('mode', 'pointwise')}",
        profile=params.get("profile"),
        overrides=params.get("overrides") or [],
    )
    cancelled = submitted.cancel_all(cfg.cluster.shared_dir, str(flow_run.id), cfg.cluster)
    if cancelled:
        print(
            f"judgeflow: flow run {flow_run.name} is {state.name}; cancelled jobs {', '.join(cancelled)}"
        )
