"""Tasks around the pipeline's MLflow run, and what the Prefect UI shows about a run.

`StageRecorder` runs a stage task, notes whether it ran or came from the cache and how long it
took; `publish_summary` turns that into the `run-summary` table artifact and MLflow tags.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

from prefect import task
from prefect.artifacts import create_table_artifact
from prefect.runtime import flow_run

from judgeflow import stages
from judgeflow.cluster import registry
from judgeflow.config import RunConfig
from judgeflow.storage import Manifest
from judgeflow.tracking import Tracker
from tasks.policies import BACKOFF, retry_transient

_retrying = {
    "retries": 3,
    "retry_delay_seconds": BACKOFF,
    "retry_condition_fn": retry_transient,
}


@task(name="start-tracking", **_retrying)
def start_tracking(cfg: RunConfig) -> str:
    """Open the MLflow run (params, lineage tags) and return its id."""
    tags = {
        "prefect.flow_run_id": str(flow_run.get_id() or ""),
        "prefect.flow_run_name": str(flow_run.get_name() or ""),
    }
    return stages.start_tracking(
        cfg, run_name=f"{cfg.recipe}:{flow_run.get_name()}", tags=tags
    ).run_id


@task(name="record-data", **_retrying)
def record_data(cfg: RunConfig, run_id: str, manifest: Manifest, data: stages.PreparedData) -> None:
    """Manifest, data report and counts into MLflow; the data report as a table artifact."""
    tracker = Tracker.attach(run_id, cfg.tracking.tracking_uri)
    tracker.log_dict(manifest.to_dict(), "data/manifest.json")
    tracker.set_tags(
        {
            "judgeflow.data.source": cfg.data.source,
            "judgeflow.data.manifest_hash": manifest.content_hash,
        }
    )
    tracker.log_artifact(data.report_file, "data")
    counts = data.report["counts"]
    written = counts["examples_written"]
    dropped = data.report["dropped"]["by_reason"]
    tracker.log_metrics(
        {f"data/rows_{split}": n for split, n in written.items()}
        | {f"data/dropped_{why}": n for why, n in dropped.items()}
        | {"data/rows_read": counts["rows_read"]}
    )
    create_table_artifact(
        key="data-report",
        table=[{"what": "rows read", "count": counts["rows_read"]}]
        + [{"what": f"examples written ({split})", "count": n} for split, n in written.items()]
        + [{"what": f"dropped: {why}", "count": n} for why, n in dropped.items()],
        description=f"Data report for {cfg.recipe}: {data.report_file}",
    )


@task(name="record-training", **_retrying)
def record_training(cfg: RunConfig, run_id: str, outcome: Any) -> None:
    """Where the model is and which job/run trained it (a cached model: an earlier run)."""
    model = outcome.model
    Tracker.attach(run_id, cfg.tracking.tracking_uri).set_tags(
        {
            "judgeflow.train.job_id": outcome.job_id,
            "judgeflow.train.mlflow_run_id": outcome.mlflow_run_id,
            "judgeflow.checkpoint": model.model_dir,
            "judgeflow.global_step": model.global_step,
            "judgeflow.resumed_from": model.resumed_from,
        }
    )


@task(name="record-evaluation", **_retrying)
def record_evaluation(
    cfg: RunConfig, run_id: str, label: str, result: dict[str, Any]
) -> dict[str, float]:
    """Log `eval/<metric>` as `<label>/<metric>` (e.g. before/accuracy) with a predictions table."""
    metrics = {f"{label}/{k.removeprefix('eval/')}": v for k, v in result["metrics"].items()}
    tracker = Tracker.attach(run_id, cfg.tracking.tracking_uri)
    tracker.log_metrics(metrics)
    tracker.log_table(result["rows"], f"eval/{label}_predictions.json")
    return metrics


@task(name="log-summary", **_retrying)
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


# ---------------------------------------------------------------------------- run summary


@dataclass
class StageRecorder:
    """Runs stage tasks and remembers, per stage: ran / cached / failed, duration, metrics."""

    rows: list[dict[str, Any]] = field(default_factory=list)

    def __call__(self, stage: str, task_: Any, *args: Any, **kwargs: Any) -> Any:
        start = time.monotonic()
        state = task_(*args, return_state=True, **kwargs)
        status = "cached" if state.name == "Cached" else "ran" if state.is_completed() else "failed"
        row = {"stage": stage, "status": status, "duration_s": round(time.monotonic() - start, 1)}
        if status == "failed":
            row["error"] = (state.message or "")[:300]
        self.rows.append(row)
        return state.result()  # raises the stage's error when it failed

    def status(self, stage: str) -> str | None:
        return next((r["status"] for r in self.rows if r["stage"] == stage), None)

    def add_metrics(self, stage: str, metrics: dict[str, Any]) -> None:
        for row in self.rows:
            if row["stage"] == stage:
                row.setdefault("metrics", {}).update(metrics)


@task(name="publish-summary", **_retrying)
def publish_summary(
    cfg: RunConfig, run_id: str | None, rows: list[dict[str, Any]], flow_run_id: str
) -> list[dict[str, Any]]:
    """The `run-summary` table artifact (stage, status, duration, metrics, MLflow link, jobs)
    and `judgeflow.cached.<stage>` tags on the MLflow run."""
    tracker = Tracker.attach(run_id, cfg.tracking.tracking_uri) if run_id else None
    link = (tracker.url() or f"mlflow run {run_id}") if tracker else ""
    jobs = submitted_jobs(cfg.cluster.shared_dir, flow_run_id)
    table = [
        {
            "stage": row["stage"],
            "status": row["status"],
            "duration_s": row["duration_s"],
            "metrics": json.dumps(row.get("metrics", {}), sort_keys=True, default=str),
            "mlflow": link,
            "slurm_job_ids": ", ".join(jobs.get(_job_stage(row["stage"]), []))
            if cfg.cluster.backend == "slurm"
            else "",
            "error": row.get("error", ""),
        }
        for row in rows
    ]
    create_table_artifact(
        key="run-summary",
        table=table,
        description=f"{cfg.recipe}: what each stage did in this run (cached = reused, no job)",
    )
    if tracker:
        tracker.set_tags(
            {_tag(row["stage"]): str(row["status"] == "cached").lower() for row in rows}
        )
    return table


def submitted_jobs(shared_dir: str, flow_run_id: str) -> dict[str, list[str]]:
    """Job ids per stage name (`train`, `evaluate-before`, …) that this flow run submitted."""
    path = registry.registry_file(shared_dir, flow_run_id)
    out: dict[str, list[str]] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            out.setdefault(entry["stage"], []).append(str(entry["job_id"]))
    return out


def _tag(stage: str) -> str:
    """MLflow tag for a stage row: `evaluate[before]` -> `judgeflow.cached.evaluate-before`."""
    return "judgeflow.cached." + re.sub(r"[^\w./ -]+", "-", stage).strip("-")


def _job_stage(stage: str) -> str:
    """Summary row `evaluate[before]` -> registry stage `evaluate-before`."""
    return stage.replace("[", "-").rstrip("]")
