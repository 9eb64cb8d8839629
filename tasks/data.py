"""Data tasks: download a source (manifest) and prepare verl RL parquet (data report).

Both are cached on content (`tasks.policies.cached`, keys from `judgeflow.caching`); what they
record in MLflow and the Prefect UI happens in `tasks.tracking.record_data`, so a cached run
records it too.
"""

from __future__ import annotations

from prefect import task

from judgeflow import stages
from judgeflow.config import RunConfig
from judgeflow.storage import Manifest
from tasks.policies import BACKOFF, JITTER, retry_transient


@task(
    name="download",
    task_run_name="download[{cfg.data.source}]",
    retries=3,
    retry_delay_seconds=BACKOFF,
    retry_jitter_factor=JITTER,
    retry_condition_fn=retry_transient,
)
def download(cfg: RunConfig) -> Manifest:
    return stages.download_stage(cfg)


@task(
    name="prepare",
    task_run_name="prepare[{cfg.mode}]",
    retries=2,
    retry_delay_seconds=BACKOFF,
    retry_jitter_factor=JITTER,
    retry_condition_fn=retry_transient,
)
def prepare(
    cfg: RunConfig, manifest: Manifest, val_manifest: Manifest | None = None
) -> stages.PreparedData:
    return stages.prepare_stage(cfg, manifest, val_manifest)
