"""Data tasks: download a source (manifest) and prepare verl RL parquet (data report)."""

from __future__ import annotations

from prefect import task
from prefect.artifacts import create_table_artifact

from judgeflow import stages
from judgeflow.config import RunConfig
from judgeflow.data import DataError
from judgeflow.storage import Manifest, SourceError
from judgeflow.tracking import Tracker


def _transient(task, task_run, state) -> bool:
    """Retry I/O hiccups, not bad data or a source that does not exist."""
    try:
        state.result()
    except (DataError, SourceError, ValueError):
        return False
    except Exception:
        return True
    return False


@task(name="download", retries=3, retry_delay_seconds=[5, 20, 60], retry_condition_fn=_transient)
def download(cfg: RunConfig, run_id: str) -> Manifest:
    manifest = stages.download_stage(cfg)
    tracker = Tracker.attach(run_id, cfg.tracking.tracking_uri)
    tracker.log_dict(manifest.to_dict(), "data/manifest.json")
    tracker.set_tags(
        {
            "judgeflow.data.source": cfg.data.source,
            "judgeflow.data.manifest_hash": manifest.content_hash,
        }
    )
    return manifest


@task(name="prepare", retries=1, retry_delay_seconds=5, retry_condition_fn=_transient)
def prepare(cfg: RunConfig, manifest: Manifest, run_id: str) -> stages.PreparedData:
    data = stages.prepare_stage(cfg, manifest)
    tracker = Tracker.attach(run_id, cfg.tracking.tracking_uri)
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
    return data
