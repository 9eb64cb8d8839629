"""Evaluation task: judge accuracy of a model on the validation split.

Locally it runs in the task; on Slurm it is a GPU job like training.
"""

from __future__ import annotations

from prefect import task

from judgeflow import stages
from judgeflow.config import RunConfig
from judgeflow.tracking import Tracker
from tasks.jobs import run_job


@task(name="evaluate", task_run_name="evaluate[{label}]")
def evaluate(
    cfg: RunConfig, model_dir: str, data: stages.PreparedData, run_id: str, label: str
) -> dict[str, float]:
    """Log `eval/<metric>` as `<label>/<metric>` (e.g. before/accuracy) with a predictions table."""
    if cfg.cluster.backend == "slurm":
        _, result = run_job(cfg, stages.evaluate_stage_spec(cfg, model_dir, data, run_id, label))
    else:
        result = stages.evaluate_stage(cfg, model_dir, data)
    metrics = {f"{label}/{k.removeprefix('eval/')}": v for k, v in result["metrics"].items()}
    tracker = Tracker.attach(run_id, cfg.tracking.tracking_uri)
    tracker.log_metrics(metrics)
    tracker.log_table(result["rows"], f"eval/{label}_predictions.json")
    return metrics
