"""Training task: GRPO as a job on the configured backend, followed from Prefect.

The job's log streams into the task log, its progress into a progress artifact, its metrics into
MLflow (written by the job itself). A job killed from outside fails the task with a retryable
error; the retry resubmits, and training resumes from the last checkpoint.
"""

from __future__ import annotations

from prefect import task
from prefect.artifacts import create_progress_artifact, update_progress_artifact

from judgeflow import stages
from judgeflow.cluster import StageFailed, registry
from judgeflow.config import RunConfig
from judgeflow.tracking import Tracker
from tasks.jobs import run_job


def killed_from_outside(task, task_run, state) -> bool:
    """Retry a job that scancel, a node failure or preemption took away; not one that failed."""
    try:
        state.result()
    except StageFailed as exc:
        return exc.retryable
    except Exception:
        return False
    return False


@task(
    name="train",
    task_run_name="train[{cfg.recipe}@{cfg.cluster.backend}]",
    retry_condition_fn=killed_from_outside,
)
def train(cfg: RunConfig, data: stages.PreparedData, run_id: str) -> stages.TrainedModel:
    tracker = Tracker.attach(run_id, cfg.tracking.tracking_uri)
    artifact_id = create_progress_artifact(
        0.0, key="training-progress", description=f"{cfg.recipe}: training steps done"
    )

    def progress(step: int, total: int) -> None:
        if total > 0:
            update_progress_artifact(artifact_id, progress=min(100.0, 100.0 * step / total))

    job_id, result = run_job(cfg, stages.train_stage_spec(cfg, data, run_id), on_progress=progress)
    model = stages.TrainedModel(**result)
    tracker.set_tags(
        {
            "judgeflow.train.job_id": job_id,
            "judgeflow.checkpoint": model.model_dir,
            "judgeflow.global_step": model.global_step,
            "judgeflow.resumed_from": model.resumed_from,
        }
    )
    return model


def cancel_submitted_jobs(flow, flow_run, state) -> None:
    """Flow hook (cancelled/crashed): cancel every job this flow run submitted."""
    from judgeflow.config import load_config

    params = flow_run.parameters
    cfg = load_config(
        params.get("recipe") or f"grpo-{params.get('mode', 'pointwise')}",
        profile=params.get("profile"),
        overrides=params.get("overrides") or [],
    )
    cancelled = registry.cancel_all(cfg.cluster.shared_dir, str(flow_run.id))
    if cancelled:
        print(
            f"judgeflow: flow run {flow_run.name} is {state.name}; cancelled jobs {', '.join(cancelled)}"
        )
