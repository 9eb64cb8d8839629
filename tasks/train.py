"""Training task: GRPO with progress in the Prefect UI and metrics in MLflow."""

from __future__ import annotations

from prefect import task
from prefect.artifacts import create_progress_artifact, update_progress_artifact

from judgeflow import stages
from judgeflow.config import RunConfig
from judgeflow.tracking import Tracker


@task(name="train", task_run_name="train[{cfg.recipe}@{cfg.cluster.backend}]")
def train(cfg: RunConfig, data: stages.PreparedData, run_id: str) -> stages.TrainedModel:
    tracker = Tracker.attach(run_id, cfg.tracking.tracking_uri)
    artifact_id = create_progress_artifact(
        0.0, key="training-progress", description=f"{cfg.recipe} steps"
    )

    def progress(step: int, total: int) -> None:
        if total > 0:
            update_progress_artifact(artifact_id, progress=min(100.0, 100.0 * step / total))

    model = stages.train_stage(
        cfg, data, output_dir=stages.run_dir(cfg, run_id), metrics_sink=tracker, progress=progress
    )
    tracker.set_tags(
        {"judgeflow.checkpoint": model.model_dir, "judgeflow.global_step": model.global_step}
    )
    return model
