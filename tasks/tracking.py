"""Tasks around the pipeline's MLflow run."""

from __future__ import annotations

from typing import Any

from prefect import task
from prefect.runtime import flow_run

from judgeflow import stages
from judgeflow.config import RunConfig
from judgeflow.tracking import Tracker


@task(name="start-tracking", retries=2, retry_delay_seconds=5)
def start_tracking(cfg: RunConfig) -> str:
    """Open the MLflow run (params, lineage tags) and return its id."""
    tags = {
        "prefect.flow_run_id": str(flow_run.get_id() or ""),
        "prefect.flow_run_name": str(flow_run.get_name() or ""),
    }
    return stages.start_tracking(
        cfg, run_name=f"{cfg.recipe}:{flow_run.get_name()}", tags=tags
    ).run_id


@task(name="log-summary", retries=2, retry_delay_seconds=5)
def log_summary(
    cfg: RunConfig, run_id: str, summary: dict[str, Any], status: str = "FINISHED"
) -> None:
    """Record what the run produced and close it."""
    tracker = Tracker.attach(run_id, cfg.tracking.tracking_uri)
    tracker.set_tags(
        {"judgeflow.checkpoint": summary.get("checkpoint"), "judgeflow.status": status}
    )
    tracker.log_dict(summary, "summary.json")
    tracker.finish(status)
